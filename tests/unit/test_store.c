/* Cache store: layout, URL binding, the daemon lock, state persistence. */
#include "error.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *make_tempdir(void)
{
	return g_dir_make_tmp("httphsm-store-XXXXXX", NULL);
}

static void remove_tree(const char *path)
{
	g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", path);

	g_assert_cmpint(system(cmd), ==, 0);
}

static void test_layout_and_url_binding(void)
{
	g_autofree char *dir = make_tempdir();
	g_autofree char *cache = g_build_filename(dir, "c", NULL);
	g_autoptr(GError) err = NULL;
	HsmStore *store = hsm_store_open(cache, "http://h/pub/", FALSE, &err);

	g_assert_no_error(err);
	g_assert_true(g_file_test(hsm_store_tree_path(store), G_FILE_TEST_IS_DIR));
	g_assert_cmpstr(hsm_store_url(store), ==, "http://h/pub/");
	hsm_store_close(store);

	/* The same directory cannot silently serve another tree. */
	g_assert_null(hsm_store_open(cache, "http://other/", FALSE, &err));
	g_assert_error(err, HSM_ERROR, EEXIST);
	g_clear_error(&err);
	store = hsm_store_open_existing(cache, &err);
	g_assert_no_error(err);
	g_assert_cmpstr(hsm_store_url(store), ==, "http://h/pub/");
	hsm_store_close(store);
	remove_tree(dir);
}

static void test_one_daemon_per_cache(void)
{
	g_autofree char *dir = make_tempdir();
	g_autoptr(GError) err = NULL;
	HsmStore *first = hsm_store_open(dir, "http://h/", TRUE, &err);
	HsmStore *second;

	g_assert_no_error(err);
	/* flock() locks belong to the open file: a second open conflicts. */
	second = hsm_store_open(dir, "http://h/", TRUE, &err);
	g_assert_null(second);
	g_assert_error(err, HSM_ERROR, EBUSY);
	hsm_store_close(first);
	g_clear_error(&err);
	second = hsm_store_open(dir, "http://h/", TRUE, &err);
	g_assert_no_error(err);
	hsm_store_close(second);
	remove_tree(dir);
}

static void test_file_state_roundtrip(void)
{
	g_autofree char *dir = make_tempdir();
	HsmStore *store = hsm_store_open(dir, "http://h/", FALSE, NULL);
	const char *odd = "a dir/ünï\ncode%41 name";
	HsmFileState state, loaded;

	hsm_file_state_init(&state);
	hsm_file_state_init(&loaded);
	state.size = 10000;
	state.etag = g_strdup("\"abc-123\"");
	state.changed = 1796206833;
	hsm_range_map_add(&state.present, 0, 4096);
	hsm_range_map_add(&state.present, 8192, 10000);
	g_assert_false(hsm_store_load_file(store, odd, &loaded));
	g_assert_true(hsm_store_save_file(store, odd, &state, NULL));
	g_assert_true(hsm_store_load_file(store, odd, &loaded));
	g_assert_cmpuint(loaded.size, ==, 10000);
	g_assert_cmpstr(loaded.etag, ==, "\"abc-123\"");
	g_assert_cmpint(loaded.changed, ==, 1796206833);
	g_assert_cmpint(loaded.last_modified, ==, -1);
	g_assert_cmpuint(hsm_range_map_total(&loaded.present), ==, 4096 + 1808);
	/* Another path never sees it. */
	g_assert_false(hsm_store_load_file(store, "a dir/other", &loaded));
	hsm_store_forget(store, odd);
	g_assert_false(hsm_store_load_file(store, odd, &loaded));
	hsm_file_state_clear(&state);
	hsm_file_state_clear(&loaded);
	hsm_store_close(store);
	remove_tree(dir);
}

/* A state that claims bytes beyond the file's end is corrupt: ignored. */
static void test_inconsistent_state_is_ignored(void)
{
	g_autofree char *dir = make_tempdir();
	HsmStore *store = hsm_store_open(dir, "http://h/", FALSE, NULL);
	HsmFileState state, loaded;

	hsm_file_state_init(&state);
	hsm_file_state_init(&loaded);
	state.size = 100;
	hsm_range_map_add(&state.present, 0, 4096);
	g_assert_true(hsm_store_save_file(store, "f", &state, NULL));
	g_assert_false(hsm_store_load_file(store, "f", &loaded));
	g_assert_cmpuint(hsm_range_map_total(&loaded.present), ==, 0);
	hsm_file_state_clear(&state);
	hsm_file_state_clear(&loaded);
	hsm_store_close(store);
	remove_tree(dir);
}

/* The state text alone, as a damaged or foreign cache may hold it. */
static void test_file_state_parse(void)
{
	static const char valid[] = "[file]\npath=a%20dir/f\nsize=10000\netag=\"x-1\"\n"
				    "last-modified=1700000040\npresent=0-4096,8192-10000\n";
	static const char past_end[] = "[file]\npath=f\nsize=100\npresent=0-50,90-101\n";
	static const char beyond[] = "[file]\npath=f\nsize=100\npresent=0-50,200-250\n";
	static const char bad_range[] = "[file]\npath=f\nsize=100\npresent=50-40\n";
	static const char garbage[] = "\x89PNG\r\n\x1a\n\0\xff[file]\npath=f";
	HsmFileState state;

	hsm_file_state_init(&state);
	g_assert_true(hsm_file_state_parse(valid, strlen(valid), "a dir/f", &state));
	g_assert_cmpuint(state.size, ==, 10000);
	g_assert_cmpstr(state.etag, ==, "\"x-1\"");
	g_assert_cmpint(state.last_modified, ==, 1700000040);
	g_assert_cmpuint(hsm_range_map_total(&state.present), ==, 4096 + 1808);
	/* Failures leave the state as it was. */
	g_assert_false(hsm_file_state_parse(valid, strlen(valid), "a dir/g", &state));
	g_assert_false(hsm_file_state_parse(valid, strlen(valid), "a%20dir/f", &state));
	g_assert_false(hsm_file_state_parse(past_end, strlen(past_end), "f", &state));
	/* Not even a range wholly past the end (its total would make it look complete). */
	g_assert_false(hsm_file_state_parse(beyond, strlen(beyond), "f", &state));
	g_assert_false(hsm_file_state_parse(bad_range, strlen(bad_range), "f", &state));
	g_assert_false(hsm_file_state_parse(garbage, sizeof(garbage) - 1, "f", &state));
	g_assert_false(hsm_file_state_parse("", 0, "f", &state));
	g_assert_cmpuint(state.size, ==, 10000);
	g_assert_cmpuint(hsm_range_map_total(&state.present), ==, 4096 + 1808);
	/* Only len bytes count: the same text cut before "present" is incomplete. */
	g_assert_false(hsm_file_state_parse(valid, strstr(valid, "present") - valid, "a dir/f",
					    &state));
	hsm_file_state_clear(&state);
}

static void test_directories(void)
{
	g_autofree char *dir = make_tempdir();
	HsmStore *store = hsm_store_open(dir, "http://h/", FALSE, NULL);

	HsmDirState state = { .entries = 3, .listed = 1764670833, .max_age = 60,
			      .etag = (char *)"\"a\nb\"", .digest = (char *)"d1" };
	HsmDirState loaded;

	g_assert_false(hsm_store_dir_is_populated(store, "x/y"));
	g_assert_false(hsm_store_load_dir(store, "x/y", &loaded));
	g_assert_cmpint(loaded.max_age, ==, -1);
	g_assert_true(hsm_store_save_dir(store, "x/y", &state, NULL));
	g_assert_true(hsm_store_dir_is_populated(store, "x/y"));
	g_assert_false(hsm_store_dir_is_populated(store, "x"));
	g_assert_true(hsm_store_load_dir(store, "x/y", &loaded));
	g_assert_cmpuint(loaded.entries, ==, 3);
	g_assert_cmpint(loaded.listed, ==, 1764670833);
	g_assert_cmpint(loaded.max_age, ==, 60);
	g_assert_cmpstr(loaded.etag, ==, "\"a\nb\"");
	g_assert_null(loaded.last_modified);
	g_assert_cmpstr(loaded.digest, ==, "d1");
	hsm_dir_state_clear(&loaded);
	hsm_store_forget(store, "x/y");
	g_assert_false(hsm_store_dir_is_populated(store, "x/y"));
	hsm_store_close(store);
	remove_tree(dir);
}

/* Writing bumps a file's mtime; the recorded remote mtime puts it back. */
static void test_remote_mtime(void)
{
	g_autofree char *dir = make_tempdir();
	g_autofree char *path = g_build_filename(dir, "f", NULL);
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	struct stat st;

	g_assert_cmpint(hsm_store_get_mtime(fd), ==, -1);
	g_assert_true(hsm_store_set_mtime(fd, 1700000040));
	g_assert_cmpint(write(fd, "x", 1), ==, 1);
	fstat(fd, &st);
	if (hsm_store_get_mtime(fd) < 0) {
		g_test_skip("no user xattrs on this file system");
	} else {
		g_assert_cmpint(st.st_mtime, !=, 1700000040);
		g_assert_cmpint(hsm_store_restore_mtime(fd), ==, 1700000040);
		fstat(fd, &st);
		g_assert_cmpint(st.st_mtime, ==, 1700000040);
	}
	close(fd);
	remove_tree(dir);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/store/layout", test_layout_and_url_binding);
	g_test_add_func("/store/lock", test_one_daemon_per_cache);
	g_test_add_func("/store/file-state", test_file_state_roundtrip);
	g_test_add_func("/store/inconsistent", test_inconsistent_state_is_ignored);
	g_test_add_func("/store/file-state-parse", test_file_state_parse);
	g_test_add_func("/store/directories", test_directories);
	g_test_add_func("/store/remote-mtime", test_remote_mtime);
	return g_test_run();
}
