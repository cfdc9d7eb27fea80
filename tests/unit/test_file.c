/* A cache tree over the scripted server: a directory listed into sparse
 * files, ranges made present, one fetch for concurrent readers, and a file
 * that changes on the server.  No FUSE, no fanotify, no root. */
#include "error.h"
#include "testserver.h"
#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	TestServer *server;
	char *cache;
	HsmTree *tree;
	HsmFile *file;
} Fixture;

/* data: non-NULL for a listing with rounded sizes. */
static void fixture_setup(Fixture *fx, gconstpointer data)
{
	HsmTreeOptions options;
	g_autoptr(GError) err = NULL;

	fx->server = test_server_start(SERVE_RANGES);
	g_atomic_int_set(&fx->server->rounded, data != NULL);
	fx->cache = g_dir_make_tmp("httphsm-test-XXXXXX", NULL);
	hsm_tree_options_init(&options);
	options.url = test_server_url(fx->server, "/");
	options.cache_dir = g_strdup(fx->cache);
	options.fetch.retry_delay_ms = 10;
	options.min_window = 4096;
	fx->tree = hsm_tree_open(&options, &err);
	g_assert_no_error(err);
	hsm_tree_options_clear(&options);
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_assert_no_error(err);
	fx->file = hsm_tree_get_file(fx->tree, "f", &err);
	g_assert_no_error(err);
}

static void fixture_teardown(Fixture *fx, gconstpointer data)
{
	g_autofree char *command = g_strdup_printf("rm -rf '%s'", fx->cache);

	(void)data;
	hsm_file_unref(fx->file);
	hsm_tree_close(fx->tree);
	test_server_stop(fx->server);
	g_assert_cmpint(system(command), ==, 0);
	g_free(fx->cache);
}

/* The cache file's bytes [start, end) are the server's. */
static void assert_cached(Fixture *fx, guint64 start, guint64 end)
{
	g_autofree char *path = g_build_filename(fx->cache, "tree", "f", NULL);
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

static void test_listing_makes_sparse_files(Fixture *fx, gconstpointer data)
{
	g_autofree char *path = g_build_filename(fx->cache, "tree", "f", NULL);
	struct stat st;

	(void)data;
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpint(st.st_size, ==, TEST_FILE_SIZE);
	g_assert_cmpint(st.st_blocks, ==, 0);
	g_assert_cmpint(st.st_mtime, ==, 1796206800); /* 02-Dec-2026 10:20 GMT */
	g_assert_cmpuint(present(fx), ==, 0);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 0);
}

static void test_rounded_listing_gets_exact_sizes(Fixture *fx, gconstpointer data)
{
	g_autofree char *path = g_build_filename(fx->cache, "tree", "f", NULL);
	struct stat st;

	(void)data;
	g_assert_cmpint(g_atomic_int_get(&fx->server->heads), ==, 1);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpint(st.st_size, ==, TEST_FILE_SIZE); /* not 97K */
	g_assert_cmpint(st.st_mtime, ==, 1796206833); /* Last-Modified, to the second */
	/* A populated directory is not listed again. */
	g_assert_true(hsm_tree_is_populated(fx->tree, ""));
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_assert_cmpint(g_atomic_int_get(&fx->server->heads), ==, 1);
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

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL);
	g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  g_log_default_handler, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/file/listing-makes-sparse-files", test_listing_makes_sparse_files);
	g_test_add("/file/rounded-listing-gets-exact-sizes", Fixture, "rounded", fixture_setup,
		   test_rounded_listing_gets_exact_sizes, fixture_teardown);
	ADD("/file/range-becomes-present", test_range_becomes_present);
	ADD("/file/concurrent-readers-share-fetches", test_concurrent_readers_share_fetches);
	ADD("/file/change-drops-old-bytes", test_change_on_the_server_drops_the_old_bytes);
	ADD("/file/reader-gone", test_a_reader_that_is_gone_returns);
	return g_test_run();
}
