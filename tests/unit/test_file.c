/* file.c alone, over the scripted server: a sparse cache file made by
 * hand (as populate would), ranges made present, one fetch for concurrent
 * readers, a file that changes on the server, saving and evicting, and the
 * hooks.  No tree, no FUSE, no fanotify. */
#include "error.h"
#include "file.h"
#include "testcache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	TestServer *server;
	TestCache cache;
	HsmFileShared shared;
	HsmFile *file;
	GPtrArray *changed;      /* relpaths passed to the changed hook... */
	gint changes;            /* ...and their count (atomic, set after) */
	int evicting_fd;         /* the fd passed to the evicting hook */
} Fixture;

static void on_changed(gpointer data, const char *relpath)
{
	Fixture *fx = data;

	g_ptr_array_add(fx->changed, g_strdup(relpath));
	g_atomic_int_inc(&fx->changes);
}

static void on_evicting(gpointer data, int fd)
{
	Fixture *fx = data;

	fx->evicting_fd = fd;
}

/* The cache entry populate would make for /f: sparse, full size. */
static void create_cache_file(Fixture *fx)
{
	int fd = openat(hsm_store_tree_fd(fx->cache.store), "f", O_CREAT | O_WRONLY | O_EXCL, 0644);

	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpint(ftruncate(fd, TEST_FILE_SIZE), ==, 0);
	close(fd);
}

static void fixture_setup(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	fx->server = test_server_start(SERVE_RANGES);
	test_cache_open(&fx->cache, fx->server);
	hsm_file_shared_init(&fx->shared);
	fx->shared.store = fx->cache.store;
	fx->shared.fetcher = fx->cache.fetcher;
	fx->shared.min_window = 4096;
	fx->shared.max_window = 1 << 20;
	fx->changed = g_ptr_array_new_with_free_func(g_free);
	fx->evicting_fd = -1;
	hsm_file_set_hooks(&fx->shared, &(HsmFileHooks){ .changed = on_changed,
							 .evicting = on_evicting,
							 .user_data = fx });
	create_cache_file(fx);
	fx->file = hsm_file_open(&fx->shared, "f", &err);
	g_assert_no_error(err);
}

static void fixture_teardown(Fixture *fx, gconstpointer data)
{
	(void)data;
	/* Transfers end first: their completions touch the file. */
	hsm_fetcher_free(g_steal_pointer(&fx->cache.fetcher));
	hsm_file_unref(fx->file);
	g_assert_cmpint(hsm_file_unused_since(fx->file), >=, 0);
	hsm_file_free(fx->file);
	hsm_file_shared_clear(&fx->shared);
	test_cache_close(&fx->cache);
	test_server_stop(fx->server);
	g_ptr_array_unref(fx->changed);
}

/* The cache file's bytes [start, end) are the server's. */
static void assert_cached(Fixture *fx, guint64 start, guint64 end)
{
	g_autofree char *path = g_build_filename(fx->cache.dir, "tree", "f", NULL);
	g_autofree char *data = NULL;
	gsize len;

	g_assert_true(g_file_get_contents(path, &data, &len, NULL));
	g_assert_cmpuint(len, ==, TEST_FILE_SIZE);
	g_assert_cmpmem(data + start, end - start, fx->server->file + start, end - start);
}

static guint64 present(Fixture *fx)
{
	HsmFileStatus status;

	hsm_file_get_status(fx->file, &status);
	return status.present;
}

static void test_range_becomes_present(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 10000, 1000, NULL, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(present(fx), >=, 1000);
	g_assert_cmpuint(present(fx), <, TEST_FILE_SIZE);
	assert_cached(fx, 10000, 11000);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
	g_assert_true(hsm_file_ensure(fx->file, 0, TEST_FILE_SIZE, NULL, &err));
	g_assert_cmpuint(present(fx), ==, TEST_FILE_SIZE);
	assert_cached(fx, 0, TEST_FILE_SIZE);
}

/* Waits (up to 10 s) for a fetch to make [offset, offset + length) present. */
static void wait_until_present(Fixture *fx, guint64 offset, guint64 length)
{
	for (int i = 0; i < 1000 && !hsm_file_has(fx->file, offset, length); i++)
		g_usleep(10 * 1000);
	g_assert_true(hsm_file_has(fx->file, offset, length));
}

/* A random read fetches from the quarter block it falls in to the end of
 * its block (or of the file): it waits for few bytes it did not ask for,
 * and its request ends on the grid an HTTP cache slices by. */
static void test_fetch_starts_on_quarter_block(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	fx->shared.min_window = 65536;
	g_assert_true(hsm_file_ensure(fx->file, 40000, 4096, NULL, &err));
	g_assert_no_error(err);
	/* The read returns once its bytes are in; the rest of the fetch follows. */
	wait_until_present(fx, 32768, 65536 - 32768);
	g_assert_cmpuint(present(fx), ==, 65536 - 32768);
	g_assert_false(hsm_file_has(fx->file, 32767, 1));
	g_assert_true(hsm_file_ensure(fx->file, 90000, 100, NULL, &err));
	wait_until_present(fx, 81920, TEST_FILE_SIZE - 81920);
	g_assert_cmpuint(present(fx), ==, 65536 - 32768 + TEST_FILE_SIZE - 81920);
	g_assert_false(hsm_file_has(fx->file, 81919, 1));
	assert_cached(fx, 81920, TEST_FILE_SIZE);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 2);
}

/* hsm_file_has() answers from the state alone: no request, no fetch. */
static void test_has_tells_what_is_present(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	g_assert_false(hsm_file_has(fx->file, 10000, 1000));
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 0);
	g_assert_cmpuint(present(fx), ==, 0);
	g_assert_true(hsm_file_ensure(fx->file, 10000, 1000, NULL, &err));
	g_assert_true(hsm_file_has(fx->file, 10000, 1000));
	g_assert_false(hsm_file_has(fx->file, 0, TEST_FILE_SIZE));
	/* Clipped to the size; nothing lies beyond it. */
	g_assert_true(hsm_file_has(fx->file, TEST_FILE_SIZE, 4096));
	g_assert_true(hsm_file_has(fx->file, TEST_FILE_SIZE - 1, G_MAXUINT64) ==
		      hsm_file_has(fx->file, TEST_FILE_SIZE - 1, 1));
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
}

/* hsm_file_ensure_if_present() sends nothing for bytes not all present;
 * for present bytes it counts as a read: a sequential reader's read-ahead
 * goes on without it. */
static void test_ensure_if_present_reads_ahead_but_never_fetches(Fixture *fx,
								  gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	gboolean complete = TRUE;

	(void)data;
	g_assert_false(hsm_file_ensure_if_present(fx->file, 0, 4096, &complete));
	g_assert_false(complete);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 0);
	g_assert_true(hsm_file_ensure(fx->file, 0, 8192, NULL, &err));
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
	g_assert_cmpuint(present(fx), ==, 8192);
	g_assert_false(hsm_file_ensure_if_present(fx->file, 4096, 8192, &complete));
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
	g_assert_true(hsm_file_ensure_if_present(fx->file, 4096, 4096, &complete));
	g_assert_false(complete);
	wait_until_present(fx, 0, TEST_FILE_SIZE);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 2);
	assert_cached(fx, 0, TEST_FILE_SIZE);
	g_assert_true(hsm_file_ensure_if_present(fx->file, 0, 4096, &complete));
	g_assert_true(complete);
}

typedef struct {
	HsmFile *file;
	gboolean ok;
} Reader;

static gpointer read_whole(gpointer data)
{
	Reader *reader = data;

	reader->ok = hsm_file_ensure(reader->file, 0, TEST_FILE_SIZE, NULL, NULL);
	return NULL;
}

static void test_concurrent_readers_share_fetches(Fixture *fx, gconstpointer data)
{
	Reader readers[4];
	GThread *threads[4];

	(void)data;
	g_atomic_int_set(&fx->server->delay_ms, 200);
	for (int i = 0; i < 4; i++) {
		readers[i] = (Reader){ fx->file, FALSE };
		threads[i] = g_thread_new("reader", read_whole, &readers[i]);
	}
	for (int i = 0; i < 4; i++) {
		g_thread_join(threads[i]);
		g_assert_true(readers[i].ok);
	}
	assert_cached(fx, 0, TEST_FILE_SIZE);
	/* Every byte came once: the requests add up to the file, whatever
	 * windows the four readers made. */
	g_assert_cmpuint(present(fx), ==, TEST_FILE_SIZE);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), <=, 4);
}

static void test_change_on_the_server_drops_the_old_bytes(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFileStatus before, after;

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 0, 4096, NULL, &err));
	hsm_file_get_status(fx->file, &before);
	test_server_change(fx->server);
	g_assert_false(hsm_file_ensure(fx->file, 90000, 4096, NULL, &err));
	g_assert_error(err, HSM_ERROR, EIO);
	g_assert_nonnull(strstr(err->message, "changed on the server"));
	hsm_file_get_status(fx->file, &after);
	g_assert_cmpuint(after.generation, ==, before.generation + 1);
	g_assert_cmpuint(after.present, ==, 0);
	/* The hook runs on the transfer's thread, maybe after the reader woke. */
	for (int i = 0; i < 500 && !g_atomic_int_get(&fx->changes); i++)
		g_usleep(10 * 1000);
	g_assert_cmpuint(fx->changed->len, ==, 1);
	g_assert_cmpstr(fx->changed->pdata[0], ==, "f");
	/* Once the failure is forgotten (2 s), a read gets the new version only. */
	g_usleep(2100 * 1000);
	g_clear_error(&err);
	g_assert_true(hsm_file_ensure(fx->file, 0, TEST_FILE_SIZE, NULL, &err));
	g_assert_no_error(err);
	assert_cached(fx, 0, TEST_FILE_SIZE);
}

static gboolean always_gone(gpointer data)
{
	(void)data;
	return TRUE;
}

static void test_a_reader_that_is_gone_returns(Fixture *fx, gconstpointer data)
{
	HsmReader gone = { always_gone, NULL };
	g_autoptr(GError) err = NULL;

	(void)data;
	g_atomic_int_set(&fx->server->delay_ms, 2000);
	g_assert_false(hsm_file_ensure(fx->file, 0, 4096, &gone, &err));
	g_assert_error(err, HSM_ERROR, EINTR);
	g_atomic_int_set(&fx->server->delay_ms, 0);
}

/* Saved state lists what is present, and only bytes that are on disk. */
static void test_save_records_present_ranges(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFileState state;

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 0, 8192, NULL, &err));
	g_assert_true(hsm_file_save(fx->file, &err));
	g_assert_no_error(err);
	hsm_file_state_init(&state);
	g_assert_true(hsm_store_load_file(fx->cache.store, "f", &state));
	g_assert_cmpuint(state.size, ==, TEST_FILE_SIZE);
	g_assert_true(hsm_range_map_contains(&state.present, 0, 8192));
	g_assert_cmpuint(hsm_range_map_total(&state.present), ==, present(fx));
	g_assert_cmpstr(state.etag, ==, "\"v0\"");
	hsm_file_state_clear(&state);
}

/* A reopened file (a restarted daemon) serves what was saved without a
 * request. */
static void test_reopen_keeps_saved_bytes(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFile *again;
	HsmFileStatus status;

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 0, TEST_FILE_SIZE, NULL, &err));
	g_assert_true(hsm_file_save(fx->file, &err));
	again = hsm_file_open(&fx->shared, "f", &err);
	g_assert_no_error(err);
	hsm_file_get_status(again, &status);
	g_assert_cmpuint(status.present, ==, TEST_FILE_SIZE);
	g_assert_true(hsm_file_ensure(again, 0, TEST_FILE_SIZE, NULL, &err));
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
	hsm_file_unref(again);
	hsm_file_free(again);
}

static void test_evict_frees_the_bytes(Fixture *fx, gconstpointer data)
{
	g_autofree char *path = g_build_filename(fx->cache.dir, "tree", "f", NULL);
	g_autoptr(GError) err = NULL;
	guint64 freed = 0;
	struct stat st;

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 0, TEST_FILE_SIZE, NULL, &err));
	/* EBUSY while the transfer that wrote the last bytes winds down. */
	for (int i = 0; i < 500 && !hsm_file_evict(fx->file, &freed, &err); i++) {
		g_assert_error(err, HSM_ERROR, EBUSY);
		g_clear_error(&err);
		g_usleep(10 * 1000);
	}
	g_assert_no_error(err);
	g_assert_cmpuint(freed, ==, TEST_FILE_SIZE);
	g_assert_cmpuint(present(fx), ==, 0);
	g_assert_cmpint(fx->evicting_fd, >=, 0);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpint(st.st_size, ==, TEST_FILE_SIZE);
	/* A file system may keep the partial last page (zeroed). */
	g_assert_cmpint(st.st_blocks * 512, <=, 4096);
	/* Read again, it comes again. */
	g_assert_true(hsm_file_ensure(fx->file, 0, 4096, NULL, &err));
	assert_cached(fx, 0, 4096);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 2);
}

static void test_evict_of_an_open_file_is_busy(Fixture *fx, gconstpointer data)
{
	g_autofree char *path = g_build_filename(fx->cache.dir, "tree", "f", NULL);
	g_autoptr(GError) err = NULL;
	int fd = open(path, O_RDONLY);

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 0, 4096, NULL, &err));
	g_assert_false(hsm_file_evict(fx->file, NULL, &err));
	g_assert_error(err, HSM_ERROR, EBUSY);
	g_assert_cmpuint(present(fx), >=, 4096);
	close(fd);
}

/* A pinned file is never evicted, and the pin survives a reopen. */
static void test_pinned_file_is_not_evicted(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFileStatus status;
	HsmFile *again;

	(void)data;
	g_assert_true(hsm_file_ensure(fx->file, 0, 4096, NULL, &err));
	g_assert_true(hsm_file_set_pinned(fx->file, TRUE, &err));
	g_assert_false(hsm_file_evict(fx->file, NULL, &err));
	g_assert_error(err, HSM_ERROR, EPERM);
	g_clear_error(&err);
	g_assert_cmpuint(present(fx), >=, 4096);
	again = hsm_file_open(&fx->shared, "f", &err);
	hsm_file_get_status(again, &status);
	g_assert_true(status.pinned);
	hsm_file_unref(again);
	hsm_file_free(again);
	g_assert_true(hsm_file_set_pinned(fx->file, FALSE, &err));
	hsm_file_get_status(fx->file, &status);
	g_assert_false(status.pinned);
}

/* Once hooks are cleared, none runs. */
static void test_cleared_hooks_do_not_run(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;

	(void)data;
	hsm_file_set_hooks(&fx->shared, NULL);
	g_assert_true(hsm_file_ensure(fx->file, 0, 4096, NULL, &err));
	test_server_change(fx->server);
	g_assert_false(hsm_file_ensure(fx->file, 90000, 4096, NULL, &err));
	g_assert_cmpuint(fx->changed->len, ==, 0);
}

static void test_references(Fixture *fx, gconstpointer data)
{
	(void)data;
	g_assert_cmpint(hsm_file_unused_since(fx->file), ==, -1);
	g_assert_true(hsm_file_ref(fx->file) == fx->file);
	hsm_file_unref(fx->file);
	g_assert_cmpint(hsm_file_unused_since(fx->file), ==, -1);
	g_assert_cmpstr(hsm_file_relpath(fx->file), ==, "f");
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/file/range-becomes-present", test_range_becomes_present);
	ADD("/file/fetch-starts-on-quarter-block", test_fetch_starts_on_quarter_block);
	ADD("/file/has-tells-what-is-present", test_has_tells_what_is_present);
	ADD("/file/ensure-if-present", test_ensure_if_present_reads_ahead_but_never_fetches);
	ADD("/file/concurrent-readers-share-fetches", test_concurrent_readers_share_fetches);
	ADD("/file/change-drops-old-bytes", test_change_on_the_server_drops_the_old_bytes);
	ADD("/file/reader-gone", test_a_reader_that_is_gone_returns);
	ADD("/file/save-records-present-ranges", test_save_records_present_ranges);
	ADD("/file/reopen-keeps-saved-bytes", test_reopen_keeps_saved_bytes);
	ADD("/file/evict-frees-the-bytes", test_evict_frees_the_bytes);
	ADD("/file/evict-of-an-open-file-is-busy", test_evict_of_an_open_file_is_busy);
	ADD("/file/pinned-file-is-not-evicted", test_pinned_file_is_not_evicted);
	ADD("/file/cleared-hooks-do-not-run", test_cleared_hooks_do_not_run);
	ADD("/file/references", test_references);
	return g_test_run();
}
