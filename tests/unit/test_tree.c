/* tree.c, the core's facade, over the scripted server: one listing per
 * directory however many callers, populated state that survives a
 * restart, one HsmFile per path, and states saved at close. */
#include "error.h"
#include "testcache.h"
#include "tree.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
	TestServer *server;
	char *cache;
	HsmTree *tree;
	gint64 dir_cache_time;   /* usec; 0: the default */
} Fixture;

static HsmTree *open_tree(Fixture *fx)
{
	g_autoptr(GError) err = NULL;
	HsmTreeOptions options;
	HsmTree *tree;

	hsm_tree_options_init(&options);
	options.url = test_server_url(fx->server, "/");
	options.cache_dir = g_strdup(fx->cache);
	options.fetch.retry_delay_ms = 10;
	options.min_window = 4096;
	if (fx->dir_cache_time)
		options.dir_cache_time = fx->dir_cache_time;
	tree = hsm_tree_open(&options, &err);
	g_assert_no_error(err);
	hsm_tree_options_clear(&options);
	return tree;
}

/* data: non-NULL for a listing with rounded sizes. */
static void fixture_setup(Fixture *fx, gconstpointer data)
{
	fx->server = test_server_start(SERVE_RANGES);
	g_atomic_int_set(&fx->server->rounded, data != NULL);
	fx->cache = g_dir_make_tmp("httphsm-tree-XXXXXX", NULL);
	fx->tree = open_tree(fx);
}

static void fixture_teardown(Fixture *fx, gconstpointer data)
{
	g_autofree char *command = g_strdup_printf("rm -rf '%s'", fx->cache);

	(void)data;
	hsm_tree_close(fx->tree);
	test_server_stop(fx->server);
	g_assert_cmpint(system(command), ==, 0);
	g_free(fx->cache);
}

static void test_listing_makes_sparse_files(Fixture *fx, gconstpointer data)
{
	g_autofree char *path = g_build_filename(fx->cache, "tree", "f", NULL);
	g_autoptr(GError) err = NULL;
	struct stat st;

	(void)data;
	g_assert_false(hsm_tree_is_populated(fx->tree, ""));
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_assert_no_error(err);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpint(st.st_size, ==, TEST_FILE_SIZE);
	g_assert_cmpint(st.st_blocks, ==, 0);
	g_assert_cmpint(st.st_mtime, ==, 1796206800); /* 02-Dec-2026 10:20 GMT */
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 0);
	g_assert_cmpint(g_atomic_int_get(&fx->server->heads), ==, 0);
}

static void test_rounded_listing_gets_exact_sizes(Fixture *fx, gconstpointer data)
{
	g_autofree char *path = g_build_filename(fx->cache, "tree", "f", NULL);
	struct stat st;

	(void)data;
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_assert_cmpint(g_atomic_int_get(&fx->server->heads), ==, 1);
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_assert_cmpint(st.st_size, ==, TEST_FILE_SIZE); /* not 97K */
	g_assert_cmpint(st.st_mtime, ==, 1796206833); /* Last-Modified, to the second */
	/* A populated directory is not listed again. */
	g_assert_true(hsm_tree_is_populated(fx->tree, ""));
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_assert_cmpint(g_atomic_int_get(&fx->server->heads), ==, 1);
}

static gpointer populate_root(gpointer data)
{
	return GINT_TO_POINTER(hsm_tree_populate(data, "", NULL));
}

/* Concurrent callers share one listing request. */
static void test_populate_is_single_flight(Fixture *fx, gconstpointer data)
{
	GThread *threads[8];

	(void)data;
	test_server_set_page(fx->server, "/", "text/html",
			     "<html><body><pre><a href=\"f\">f</a>  02-Dec-2026 10:20  100000\n"
			     "</pre></body></html>");
	g_atomic_int_set(&fx->server->delay_ms, 300);
	for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
		threads[i] = g_thread_new("populate", populate_root, fx->tree);
	for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
		g_assert_true(g_thread_join(threads[i]));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 1);
}

/* A restarted daemon does not list a populated directory again. */
static void test_populated_survives_reopen(Fixture *fx, gconstpointer data)
{
	(void)data;
	test_server_set_page(fx->server, "/", "text/html",
			     "<html><body><pre><a href=\"f\">f</a>  02-Dec-2026 10:20  100000\n"
			     "</pre></body></html>");
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	hsm_tree_close(fx->tree);
	fx->tree = open_tree(fx);
	g_assert_true(hsm_tree_is_populated(fx->tree, ""));
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 1);
}

static void test_one_file_per_path(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFile *first, *second;

	(void)data;
	test_server_set_page(fx->server, "/", "text/html",
			     "<html><body><pre><a href=\"f\">f</a>  02-Dec-2026 10:20  100000\n"
			     "<a href=\"d/\">d/</a>  02-Dec-2026 10:20  -\n</pre></body></html>");
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	first = hsm_tree_get_file(fx->tree, "f", &err);
	second = hsm_tree_get_file(fx->tree, "f", &err);
	g_assert_no_error(err);
	g_assert_true(first == second);
	hsm_file_unref(first);
	hsm_file_unref(second);
	g_assert_null(hsm_tree_get_file(fx->tree, "missing", &err));
	g_assert_error(err, HSM_ERROR, ENOENT);
	g_clear_error(&err);
	g_assert_null(hsm_tree_get_file(fx->tree, "d", &err));
	g_assert_error(err, HSM_ERROR, EISDIR);
}

/* Closing saves what was fetched, so a new daemon needs no request. */
static void test_close_saves_states(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFileStatus status;
	HsmFile *file;

	(void)data;
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	file = hsm_tree_get_file(fx->tree, "f", &err);
	g_assert_true(hsm_file_ensure(file, 0, TEST_FILE_SIZE, NULL, &err));
	g_assert_no_error(err);
	hsm_file_unref(file);
	hsm_tree_close(fx->tree);

	fx->tree = open_tree(fx);
	file = hsm_tree_get_file(fx->tree, "f", &err);
	hsm_file_get_status(file, &status);
	g_assert_cmpuint(status.present, ==, TEST_FILE_SIZE);
	g_assert_true(hsm_file_ensure(file, 0, TEST_FILE_SIZE, NULL, &err));
	hsm_file_unref(file);
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
}

/* hsm_tree_has_range() answers from the open file, or else from the saved
 * state, and opens nothing: the tree's file table stays as it was. */
static void test_has_range_from_state(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	HsmFile *file;

	(void)data;
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_assert_false(hsm_tree_has_range(fx->tree, "f", 0, 4096));
	file = hsm_tree_get_file(fx->tree, "f", &err);
	g_assert_true(hsm_file_ensure(file, 0, 8192, NULL, &err));
	g_assert_true(hsm_tree_has_range(fx->tree, "f", 0, 8192));
	g_assert_false(hsm_tree_has_range(fx->tree, "f", 0, TEST_FILE_SIZE));
	hsm_file_unref(file);
	hsm_tree_close(fx->tree);

	fx->tree = open_tree(fx);
	g_assert_true(hsm_tree_has_range(fx->tree, "f", 0, 8192));
	g_assert_false(hsm_tree_has_range(fx->tree, "f", 0, TEST_FILE_SIZE));
	g_assert_false(hsm_tree_has_range(fx->tree, "no-such-file", 0, 1));
	g_assert_cmpint(g_atomic_int_get(&fx->server->requests), ==, 1);
}

static void count_changed(gpointer data, const char *relpath)
{
	g_assert_cmpstr(relpath, ==, "f");
	g_atomic_int_inc((gint *)data);
}

/* The front end's hooks reach the files, and stop when cleared. */
static void test_hooks(Fixture *fx, gconstpointer data)
{
	g_autoptr(GError) err = NULL;
	gint changed = 0;
	HsmFile *file;

	(void)data;
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	hsm_tree_set_hooks(fx->tree, &(HsmFileHooks){ .changed = count_changed,
						      .user_data = &changed });
	file = hsm_tree_get_file(fx->tree, "f", &err);
	g_assert_true(hsm_file_ensure(file, 0, 4096, NULL, &err));
	test_server_change(fx->server);
	g_assert_false(hsm_file_ensure(file, 90000, 4096, NULL, &err));
	/* The hook runs on the transfer's thread, maybe after the reader woke. */
	for (int i = 0; i < 500 && !g_atomic_int_get(&changed); i++)
		g_usleep(10 * 1000);
	g_assert_cmpint(g_atomic_int_get(&changed), ==, 1);
	hsm_tree_set_hooks(fx->tree, NULL);
	hsm_file_unref(file);
}

static void record_change(gpointer data, const char *relpath)
{
	g_ptr_array_add(data, g_strdup(relpath));
}

static void set_root_listing(Fixture *fx, const char *rows)
{
	g_autofree char *page = g_strdup_printf("<html><body><pre>%s</pre></body></html>", rows);

	test_server_set_page(fx->server, "/", "text/html", page);
}

#define ROW(name, size) "<a href=\"" name "\">" name "</a>  02-Dec-2026 10:20  " size "\n"

/* With a TTL of 0 a listing is revalidated once it is a second old (not at
 * every lookup): a 304, then a changed page whose new name appears and
 * reaches the changed hook; an error page keeps the listing. */
static void test_listing_revalidated_after_ttl(Fixture *fx, gconstpointer data)
{
	g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func(g_free);
	g_autofree char *b = g_build_filename(fx->cache, "tree", "b", NULL);
	g_autoptr(GError) err = NULL;
	struct stat st;

	(void)data;
	hsm_tree_close(fx->tree);
	fx->dir_cache_time = 1; /* nearly 0: the floor of a second rules */
	fx->tree = open_tree(fx);
	hsm_tree_set_hooks(fx->tree, &(HsmFileHooks){ .changed = record_change,
						      .user_data = changed });
	set_root_listing(fx, ROW("a", "10"));
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 1);
	g_usleep(1100 * 1000);
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 2);
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_304s), ==, 1);
	g_assert_cmpint(hsm_tree_listing_age(fx->tree, ""), ==, 0);

	set_root_listing(fx, ROW("a", "10") ROW("b", "5"));
	g_usleep(1100 * 1000);
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_assert_no_error(err);
	g_assert_cmpint(stat(b, &st), ==, 0);
	g_assert_cmpint(st.st_size, ==, 5);
	g_assert_cmpuint(changed->len, ==, 2);
	g_assert_cmpstr(changed->pdata[0], ==, "b");
	g_assert_cmpstr(changed->pdata[1], ==, "");

	set_root_listing(fx, "");
	g_usleep(1100 * 1000);
	g_test_expect_message("httphsm", G_LOG_LEVEL_WARNING,
			      "cannot revalidate the listing of /*lists no entries*");
	g_assert_true(hsm_tree_populate(fx->tree, "", &err));
	g_test_assert_expected_messages();
	g_assert_no_error(err);
	g_assert_cmpint(stat(b, &st), ==, 0);
	hsm_tree_set_hooks(fx->tree, NULL);
}

/* With a TTL of forever (-1) a listing is never asked for again. */
static void test_listing_kept_forever(Fixture *fx, gconstpointer data)
{
	(void)data;
	hsm_tree_close(fx->tree);
	fx->dir_cache_time = -1;
	fx->tree = open_tree(fx);
	set_root_listing(fx, ROW("a", "10"));
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_usleep(1100 * 1000);
	g_assert_true(hsm_tree_populate(fx->tree, "", NULL));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 1);
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
	ADD("/tree/listing-makes-sparse-files", test_listing_makes_sparse_files);
	g_test_add("/tree/rounded-listing-gets-exact-sizes", Fixture, "rounded", fixture_setup,
		   test_rounded_listing_gets_exact_sizes, fixture_teardown);
	ADD("/tree/populate-is-single-flight", test_populate_is_single_flight);
	ADD("/tree/populated-survives-reopen", test_populated_survives_reopen);
	ADD("/tree/one-file-per-path", test_one_file_per_path);
	ADD("/tree/close-saves-states", test_close_saves_states);
	ADD("/tree/has-range-from-state", test_has_range_from_state);
	ADD("/tree/hooks", test_hooks);
	ADD("/tree/listing-revalidated-after-ttl", test_listing_revalidated_after_ttl);
	ADD("/tree/listing-kept-forever", test_listing_kept_forever);
	return g_test_run();
}
