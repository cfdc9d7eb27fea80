/* populate.c alone: listings from the scripted server made into cache
 * directories (store.h and fetch.h only, no tree): what is created, what a
 * relisting removes or replaces, and which entries cost a HEAD. */
#include "error.h"
#include "populate.h"
#include "testcache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	TestServer *server;
	TestCache cache;
	HsmStore *store;
	HsmPopulator pop;
	GPtrArray *forgotten;    /* relpaths passed to forget() */
	GPtrArray *changed;      /* relpaths passed to changed() */
} Fixture;

static void record_forget(gpointer data, const char *relpath)
{
	Fixture *fx = data;

	g_ptr_array_add(fx->forgotten, g_strdup(relpath));
}

static void record_change(gpointer data, const char *relpath)
{
	Fixture *fx = data;

	g_ptr_array_add(fx->changed, g_strdup(relpath));
}

static void fixture_setup(Fixture *fx, gconstpointer data)
{
	(void)data;
	fx->server = test_server_start(SERVE_RANGES);
	test_cache_open(&fx->cache, fx->server);
	fx->store = fx->cache.store;
	fx->forgotten = g_ptr_array_new_with_free_func(g_free);
	fx->changed = g_ptr_array_new_with_free_func(g_free);
	fx->pop = (HsmPopulator){ .store = fx->store,
				  .fetcher = fx->cache.fetcher,
				  .max_listing = 1 << 20,
				  .forget = record_forget,
				  .changed = record_change,
				  .data = fx };
}

static void fixture_teardown(Fixture *fx, gconstpointer data)
{
	(void)data;
	test_cache_close(&fx->cache);
	test_server_stop(fx->server);
	g_ptr_array_unref(fx->forgotten);
	g_ptr_array_unref(fx->changed);
}

/* An nginx-style index page: rows of "name|size" ("dir/|-" for a dir). */
static void set_listing(Fixture *fx, const char *path, const char *const *rows)
{
	g_autoptr(GString) page = g_string_new("<html><body><pre><a href=\"../\">../</a>\n");

	for (; *rows; rows++) {
		g_auto(GStrv) parts = g_strsplit(*rows, "|", 2);

		g_string_append_printf(page, "<a href=\"%s\">%s</a>  02-Dec-2026 10:20  %s\n",
				       parts[0], parts[0], parts[1]);
	}
	g_string_append(page, "</pre></body></html>\n");
	test_server_set_page(fx->server, path, "text/html", page->str);
}

/* Lists relpath, or revalidates it as the tree does when the store has it. */
static gboolean populate(Fixture *fx, const char *relpath, GError **err)
{
	HsmDirState known, listed;
	gboolean populated = hsm_store_load_dir(fx->store, relpath, &known);
	gboolean ok = hsm_populate_dir(&fx->pop, relpath, populated ? &known : NULL, &listed, err);

	hsm_dir_state_clear(&known);
	hsm_dir_state_clear(&listed);
	return ok;
}

/* st of the cache entry relpath; FALSE if there is none. */
static gboolean cache_stat(Fixture *fx, const char *relpath, struct stat *st)
{
	return fstatat(hsm_store_tree_fd(fx->store), relpath, st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void assert_file(Fixture *fx, const char *relpath, gint64 size)
{
	struct stat st;

	g_assert_true(cache_stat(fx, relpath, &st));
	g_assert_true(S_ISREG(st.st_mode));
	g_assert_cmpint(st.st_size, ==, size);
	g_assert_cmpint(st.st_blocks, ==, 0); /* nothing fetched: sparse */
}

static void assert_absent(Fixture *fx, const char *relpath)
{
	struct stat st;

	g_assert_false(cache_stat(fx, relpath, &st));
	g_assert_cmpint(errno, ==, ENOENT);
}

static void assert_paths(GPtrArray *paths, const char *const *expected)
{
	guint count = g_strv_length((char **)expected);

	g_assert_cmpuint(paths->len, ==, count);
	for (guint i = 0; i < count; i++)
		g_assert_cmpstr(paths->pdata[i], ==, expected[i]);
}

static void assert_forgotten(Fixture *fx, const char *const *expected)
{
	assert_paths(fx->forgotten, expected);
}

static void test_creates_entries_without_heads(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	struct stat st;
	GDateTime *listed = g_date_time_new_utc(2026, 12, 2, 10, 20, 0);

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "a|1234", "empty|0", "d/|-", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	assert_file(fx, "a", 1234);
	assert_file(fx, "empty", 0);
	g_assert_true(cache_stat(fx, "d", &st));
	g_assert_true(S_ISDIR(st.st_mode));
	g_assert_true(cache_stat(fx, "a", &st));
	g_assert_cmpint(st.st_mtime, ==, g_date_time_to_unix(listed));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 1);
	g_assert_true(hsm_store_dir_is_populated(fx->store, ""));
	g_assert_false(hsm_store_dir_is_populated(fx->store, "d"));
	g_assert_cmpuint(fx->forgotten->len, ==, 0);
	g_date_time_unref(listed);
}

static void test_subdirectory(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "d/|-", NULL });
	set_listing(fx, "/d/", (const char *const[]){ "inner|77", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_true(populate(fx, "d", &err));
	g_assert_no_error(err);
	assert_file(fx, "d/inner", 77);
	g_assert_true(hsm_store_dir_is_populated(fx->store, "d"));
}

static void test_rounded_sizes_cost_one_head_each(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "exact|500", "r1|2K", "r2|1.5M", NULL });
	test_server_set_head(fx->server, "/r1", 2100);
	test_server_set_head(fx->server, "/r2", 1572000);
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	assert_file(fx, "exact", 500);
	assert_file(fx, "r1", 2100);
	assert_file(fx, "r2", 1572000);
}

/* A file listed but gone by the time of its HEAD is left out. */
static void test_head_404_leaves_the_entry_out(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "kept|2K", "gone|3K", NULL });
	test_server_set_head(fx->server, "/kept", 2000);
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	assert_file(fx, "kept", 2000);
	assert_absent(fx, "gone");
}

static void test_relisting_removes_and_forgets(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "a|10", "b|20", "d/|-", NULL });
	set_listing(fx, "/d/", (const char *const[]){ "inner|30", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_true(populate(fx, "d", &err));
	g_assert_no_error(err);

	set_listing(fx, "/", (const char *const[]){ "b|20", "c|40", NULL });
	g_test_expect_message("httphsm", G_LOG_LEVEL_MESSAGE, "a: no longer on the server*");
	g_test_expect_message("httphsm", G_LOG_LEVEL_MESSAGE, "d: no longer on the server*");
	g_assert_true(populate(fx, "", &err));
	g_test_assert_expected_messages();
	g_assert_no_error(err);
	assert_absent(fx, "a");
	assert_absent(fx, "d");
	assert_file(fx, "b", 20);
	assert_file(fx, "c", 40);
	/* d's own entries are forgotten before d. */
	assert_forgotten(fx, (const char *const[]){ "a", "d", "d/inner", NULL });
}

/* A new size replaces the cache file, so its fetched bytes and state go. */
static void test_changed_file_loses_its_data(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *staging = NULL;
	HsmFileState state;
	char old[4];
	int fd, held;
	GDir *dir;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "a|8192", NULL });
	g_assert_true(populate(fx, "", &err));
	fd = openat(hsm_store_tree_fd(fx->store), "a", O_WRONLY);
	g_assert_cmpint(pwrite(fd, "old!", 4, 0), ==, 4);
	close(fd);
	hsm_file_state_init(&state);
	state.size = 8192;
	hsm_range_map_add(&state.present, 0, 4096);
	g_assert_true(hsm_store_save_file(fx->store, "a", &state, &err));
	hsm_file_state_clear(&state);

	held = openat(hsm_store_tree_fd(fx->store), "a", O_RDONLY);
	set_listing(fx, "/", (const char *const[]){ "a|9000", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	assert_file(fx, "a", 9000);
	/* Replaced by a rename: the old version lives on for its holder, and
	 * nothing is left in the staging directory. */
	g_assert_cmpint(pread(held, old, 4, 0), ==, 4);
	g_assert_cmpmem(old, 4, "old!", 4);
	close(held);
	staging = g_build_filename(fx->cache.dir, "staging", NULL);
	dir = g_dir_open(staging, 0, NULL);
	g_assert_null(g_dir_read_name(dir));
	g_dir_close(dir);
	/* Its old ranges are forgotten; the change is remembered, for HTTP
	 * caches that may still hold the old version. */
	hsm_file_state_init(&state);
	g_assert_true(hsm_store_load_file(fx->store, "a", &state));
	g_assert_cmpuint(state.size, ==, 9000);
	g_assert_cmpuint(hsm_range_map_total(&state.present), ==, 0);
	g_assert_cmpint(state.changed, >, 0);
	hsm_file_state_clear(&state);
	assert_forgotten(fx, (const char *const[]){ "a", NULL });
}

static void test_unchanged_file_keeps_its_data(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	struct stat st;
	int fd;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "a|8192", NULL });
	g_assert_true(populate(fx, "", &err));
	fd = openat(hsm_store_tree_fd(fx->store), "a", O_WRONLY);
	g_assert_cmpint(pwrite(fd, "kept", 4, 0), ==, 4);
	close(fd);
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	g_assert_true(cache_stat(fx, "a", &st));
	g_assert_cmpint(st.st_blocks, >, 0);
	g_assert_cmpuint(fx->forgotten->len, ==, 0);
}

static void test_file_that_became_a_directory(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	struct stat st;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "x|100", NULL });
	g_assert_true(populate(fx, "", &err));
	set_listing(fx, "/", (const char *const[]){ "x/|-", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	g_assert_true(cache_stat(fx, "x", &st));
	g_assert_true(S_ISDIR(st.st_mode));
	assert_forgotten(fx, (const char *const[]){ "x", NULL });
}

/* An entry the cache file system cannot hold costs that entry only. */
static void test_entry_too_big_is_left_out(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "huge|9000000000000000000", "ok|5", NULL });
	g_test_expect_message("httphsm", G_LOG_LEVEL_WARNING, "huge: listed size * leaving it out");
	g_assert_true(populate(fx, "", &err));
	g_test_assert_expected_messages();
	g_assert_no_error(err);
	assert_absent(fx, "huge");
	assert_file(fx, "ok", 5);
}

static void test_not_a_listing(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	test_server_set_page(fx->server, "/", "application/octet-stream", "binary");
	g_assert_false(populate(fx, "", &err));
	g_assert_error(err, HSM_ERROR, ENOTDIR);
	g_assert_false(hsm_store_dir_is_populated(fx->store, ""));
}

static void test_missing_directory(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "d/|-", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_false(populate(fx, "d", &err));
	g_assert_error(err, HSM_ERROR, ENOENT);
	g_assert_false(hsm_store_dir_is_populated(fx->store, "d"));
}

/* Many new entries are created by several threads; all must appear. */
static void test_many_entries(Fixture *fx, gconstpointer data)
{
	g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GError) err = NULL;
	guint count = 0;
	GDir *dir;

	(void)data;
	for (guint i = 0; i < 5000; i++)
		g_ptr_array_add(rows, g_strdup_printf("file%05u|%u", i, i));
	g_ptr_array_add(rows, NULL);
	set_listing(fx, "/", (const char *const *)rows->pdata);
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	dir = g_dir_open(hsm_store_tree_path(fx->store), 0, NULL);
	while (g_dir_read_name(dir))
		count++;
	g_dir_close(dir);
	g_assert_cmpuint(count, ==, 5000);
	assert_file(fx, "file04321", 4321);
}

/* A listing seen before is asked for with its ETag: a 304 changes nothing. */
static void test_unchanged_listing_costs_a_304(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmDirState state;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "a|10", "b|20", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 2);
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_304s), ==, 1);
	assert_file(fx, "a", 10);
	assert_file(fx, "b", 20);
	g_assert_cmpuint(fx->forgotten->len + fx->changed->len, ==, 0);
	g_assert_true(hsm_store_load_dir(fx->store, "", &state));
	g_assert_cmpuint(state.entries, ==, 2);
	g_assert_nonnull(state.etag);
	hsm_dir_state_clear(&state);
}

/* Added, removed and resized names reach changed(), then the directory. */
static void test_revalidation_reports_changes(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "a|10", "b|20", "d|7", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_cmpuint(fx->changed->len, ==, 0); /* a first listing changes nothing */
	set_listing(fx, "/", (const char *const[]){ "a|10", "c|5", "d|8", NULL });
	g_test_expect_message("httphsm", G_LOG_LEVEL_MESSAGE, "b: no longer on the server*");
	g_assert_true(populate(fx, "", &err));
	g_test_assert_expected_messages();
	g_assert_no_error(err);
	assert_file(fx, "a", 10);
	assert_absent(fx, "b");
	assert_file(fx, "c", 5);
	assert_file(fx, "d", 8);
	assert_paths(fx->changed, (const char *const[]){ "b", "c", "d", "", NULL });
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_304s), ==, 0);
}

/* Without validators the page is fetched again; the same bytes change
 * nothing (no spurious invalidation). */
static void test_same_bytes_without_validators(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	struct stat st;
	int fd;

	(void)data;
	g_atomic_int_set(&fx->server->no_validators, 1);
	set_listing(fx, "/", (const char *const[]){ "a|8192", NULL });
	g_assert_true(populate(fx, "", &err));
	fd = openat(hsm_store_tree_fd(fx->store), "a", O_WRONLY);
	g_assert_cmpint(pwrite(fd, "kept", 4, 0), ==, 4);
	close(fd);
	g_assert_true(populate(fx, "", &err));
	g_assert_no_error(err);
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 2);
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_304s), ==, 0);
	g_assert_true(cache_stat(fx, "a", &st));
	g_assert_cmpint(st.st_blocks, >, 0);
	g_assert_cmpuint(fx->forgotten->len + fx->changed->len, ==, 0);
}

/* An error where a listing was, or an error page served with 200, fails
 * the revalidation and leaves the cache as it was. */
static void test_error_pages_never_empty_a_directory(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	set_listing(fx, "/", (const char *const[]){ "d/|-", NULL });
	set_listing(fx, "/d/", (const char *const[]){ "a|10", NULL });
	g_assert_true(populate(fx, "", &err));
	g_assert_true(populate(fx, "d", &err));
	test_server_set_page(fx->server, "/d/", "text/html", "<html><body>Oops</body></html>");
	g_assert_false(populate(fx, "d", &err));
	g_assert_error(err, HSM_ERROR, EPROTO);
	g_clear_error(&err);
	test_server_set_page(fx->server, "/d/", NULL, NULL);
	g_assert_false(populate(fx, "d", &err));
	g_assert_error(err, HSM_ERROR, ENOENT);
	assert_file(fx, "d/a", 10);
	g_assert_cmpuint(fx->forgotten->len + fx->changed->len, ==, 0);
	g_assert_true(hsm_store_dir_is_populated(fx->store, "d"));
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/populate/creates-entries-without-heads", test_creates_entries_without_heads);
	ADD("/populate/subdirectory", test_subdirectory);
	ADD("/populate/rounded-sizes-cost-one-head-each", test_rounded_sizes_cost_one_head_each);
	ADD("/populate/head-404-leaves-the-entry-out", test_head_404_leaves_the_entry_out);
	ADD("/populate/relisting-removes-and-forgets", test_relisting_removes_and_forgets);
	ADD("/populate/changed-file-loses-its-data", test_changed_file_loses_its_data);
	ADD("/populate/unchanged-file-keeps-its-data", test_unchanged_file_keeps_its_data);
	ADD("/populate/file-that-became-a-directory", test_file_that_became_a_directory);
	ADD("/populate/entry-too-big-is-left-out", test_entry_too_big_is_left_out);
	ADD("/populate/not-a-listing", test_not_a_listing);
	ADD("/populate/missing-directory", test_missing_directory);
	ADD("/populate/many-entries", test_many_entries);
	ADD("/populate/unchanged-listing-costs-a-304", test_unchanged_listing_costs_a_304);
	ADD("/populate/revalidation-reports-changes", test_revalidation_reports_changes);
	ADD("/populate/same-bytes-without-validators", test_same_bytes_without_validators);
	ADD("/populate/error-pages-never-empty-a-directory",
	    test_error_pages_never_empty_a_directory);
	return g_test_run();
}
