/* budget.c alone, with a scripted evict callback: it starts from a scan of
 * the cache tree, evicts least recently used first down to the low-water
 * mark, skips files whose eviction is refused, and forgets removed paths. */
#include "budget.h"
#include "error.h"
#include "testcache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIB 1024u

typedef struct {
	char *dir;
	HsmStore *store;
	HsmBudget *budget;
	GMutex lock;
	GPtrArray *evicted;      /* relpaths evict() freed, in order; protected by lock */
	const char *refuse;      /* evict() says EBUSY for this one */
} Fixture;

static gboolean evict(gpointer data, const char *relpath, GError **err)
{
	Fixture *fx = data;

	if (fx->refuse && !strcmp(relpath, fx->refuse)) {
		g_set_error(err, HSM_ERROR, EBUSY, "%s is open", relpath);
		return FALSE;
	}
	g_mutex_lock(&fx->lock);
	g_ptr_array_add(fx->evicted, g_strdup(relpath));
	g_mutex_unlock(&fx->lock);
	hsm_budget_note(fx->budget, relpath, 0);
	return TRUE;
}

static void fixture_setup(Fixture *fx, gconstpointer data)
{
	(void)data;
	fx->dir = g_dir_make_tmp("httphsm-budget-XXXXXX", NULL);
	fx->store = hsm_store_open(fx->dir, "http://h/", FALSE, NULL);
	g_mutex_init(&fx->lock);
	fx->evicted = g_ptr_array_new_with_free_func(g_free);
}

static void fixture_teardown(Fixture *fx, gconstpointer data)
{
	g_autofree char *command = g_strdup_printf("rm -rf '%s'", fx->dir);

	(void)data;
	hsm_budget_free(fx->budget);
	hsm_store_close(fx->store);
	g_assert_cmpint(system(command), ==, 0);
	g_ptr_array_unref(fx->evicted);
	g_mutex_clear(&fx->lock);
	g_free(fx->dir);
}

static void start_budget(Fixture *fx, HsmBudget *budget)
{
	fx->budget = budget;
	hsm_budget_start(budget);
}

static guint evicted_count(Fixture *fx)
{
	guint count;

	g_mutex_lock(&fx->lock);
	count = fx->evicted->len;
	g_mutex_unlock(&fx->lock);
	return count;
}

/* Waits (up to 5 s) until evict() was called count times. */
static void wait_evictions(Fixture *fx, guint count)
{
	for (int i = 0; i < 500 && evicted_count(fx) < count; i++)
		g_usleep(10 * 1000);
	g_assert_cmpuint(evicted_count(fx), ==, count);
}

/* A cache file of size bytes, all written, last read at atime. */
static void make_cache_file(Fixture *fx, const char *relpath, gsize size, gint64 atime)
{
	g_autofree char *path = g_build_filename(hsm_store_tree_path(fx->store), relpath, NULL);
	g_autofree char *parent = g_path_get_dirname(path);
	g_autofree guint8 *bytes = g_malloc0(size);
	struct timespec times[2] = { { atime, 0 }, { atime, 0 } };

	g_assert_cmpint(g_mkdir_with_parents(parent, 0755), ==, 0);
	g_assert_true(g_file_set_contents(path, (const char *)bytes, size, NULL));
	g_assert_cmpint(utimensat(AT_FDCWD, path, times, 0), ==, 0);
}

/* The scan counts what earlier daemons fetched; going over the limit
 * evicts the oldest first, and only down to 90% of it. */
static void test_scan_then_least_recently_used_first(Fixture *fx, gconstpointer data)
{
	(void)data;
	make_cache_file(fx, "old", 40 * KIB, 1000);
	make_cache_file(fx, "d/older", 40 * KIB, 500);
	make_cache_file(fx, "d/recent", 40 * KIB, 3000);
	start_budget(fx, hsm_budget_new(fx->store, 200 * KIB, 0, evict, fx));
	for (int i = 0; i < 500 && hsm_budget_used(fx->budget) < 120 * KIB; i++)
		g_usleep(10 * 1000);
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 120 * KIB);
	g_assert_cmpuint(evicted_count(fx), ==, 0);

	/* 120 + 100 KiB > 200 KiB: the oldest goes, which is enough (180 KiB
	 * is the low-water mark); then 40 KiB more evicts the next one. */
	hsm_budget_note(fx->budget, "new", 100 * KIB);
	wait_evictions(fx, 1);
	g_assert_cmpstr(fx->evicted->pdata[0], ==, "d/older");
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 180 * KIB);
	hsm_budget_note(fx->budget, "newer", 40 * KIB);
	wait_evictions(fx, 2);
	g_assert_cmpstr(fx->evicted->pdata[1], ==, "old");
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 180 * KIB);
	g_assert_cmpuint(hsm_budget_limit(fx->budget), ==, 200 * KIB);
}

/* A refused file is passed over for the next one; use makes a file young. */
static void test_refused_and_recently_used_files_stay(Fixture *fx, gconstpointer data)
{
	(void)data;
	start_budget(fx, hsm_budget_new(fx->store, 100 * KIB, 0, evict, fx));
	fx->refuse = "open";
	hsm_budget_note(fx->budget, "open", 30 * KIB);
	g_usleep(2000);
	hsm_budget_note(fx->budget, "a", 30 * KIB);
	g_usleep(2000);
	hsm_budget_note(fx->budget, "b", 30 * KIB);
	g_usleep(2000);
	hsm_budget_note(fx->budget, "a", 30 * KIB); /* read again: now newer than b */
	g_assert_cmpuint(evicted_count(fx), ==, 0);
	hsm_budget_note(fx->budget, "c", 30 * KIB); /* 120 KiB */
	wait_evictions(fx, 1);
	g_assert_cmpstr(fx->evicted->pdata[0], ==, "b");
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 90 * KIB);
}

static void test_forget_removes_a_subtree(Fixture *fx, gconstpointer data)
{
	(void)data;
	start_budget(fx, hsm_budget_new(fx->store, 1024 * KIB, 0, evict, fx));
	hsm_budget_note(fx->budget, "d/a", 10 * KIB);
	hsm_budget_note(fx->budget, "d/e/b", 20 * KIB);
	hsm_budget_note(fx->budget, "dd", 40 * KIB);
	hsm_budget_forget(fx->budget, "d");
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 40 * KIB);
	hsm_budget_note(fx->budget, "dd", 0);
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 0);
}

/* With an age limit, a file unused for longer goes, the others stay. */
static void test_old_files_go(Fixture *fx, gconstpointer data)
{
	(void)data;
	make_cache_file(fx, "ancient", 4 * KIB, g_get_real_time() / G_USEC_PER_SEC - 7200);
	make_cache_file(fx, "fresh", 4 * KIB, g_get_real_time() / G_USEC_PER_SEC);
	start_budget(fx, hsm_budget_new(fx->store, G_MAXUINT64, (gint64)3600 * G_USEC_PER_SEC,
					evict, fx));
	wait_evictions(fx, 1);
	g_assert_cmpstr(fx->evicted->pdata[0], ==, "ancient");
	g_usleep(100 * 1000);
	g_assert_cmpuint(evicted_count(fx), ==, 1);
	g_assert_cmpuint(hsm_budget_used(fx->budget), ==, 4 * KIB);
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/budget/scan-then-least-recently-used-first",
	    test_scan_then_least_recently_used_first);
	ADD("/budget/refused-and-recently-used-files-stay",
	    test_refused_and_recently_used_files_stay);
	ADD("/budget/forget-removes-a-subtree", test_forget_removes_a_subtree);
	ADD("/budget/old-files-go", test_old_files_go);
	return g_test_run();
}
