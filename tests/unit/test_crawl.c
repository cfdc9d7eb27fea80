/* crawl.c over the scripted server: breadth first, down to its depth and
 * within its number of directories; a second crawl of fresh listings costs
 * no request. */
#include "crawl.h"
#include "testcache.h"

#include <stdlib.h>
#include <sys/stat.h>

typedef struct {
	TestServer *server;
	char *cache;
	HsmTree *tree;
} Fixture;

/* An nginx-style index page of the subdirectories names. */
static void set_dirs(Fixture *fx, const char *path, const char *const *names)
{
	g_autoptr(GString) page = g_string_new("<html><body><pre><a href=\"../\">../</a>\n");

	for (; *names; names++)
		g_string_append_printf(page, "<a href=\"%s/\">%s/</a>  02-Dec-2026 10:20  -\n",
				       *names, *names);
	g_string_append(page, "</pre></body></html>\n");
	test_server_set_page(fx->server, path, "text/html", page->str);
}

static HsmTree *open_tree_with_ttl(Fixture *fx, gint64 dir_cache_time)
{
	g_autoptr(GError) err = NULL;
	HsmTreeOptions options;
	HsmTree *tree;

	hsm_tree_options_init(&options);
	if (dir_cache_time)
		options.dir_cache_time = dir_cache_time;
	options.url = test_server_url(fx->server, "/");
	options.cache_dir = g_strdup(fx->cache);
	options.fetch.retry_delay_ms = 10;
	tree = hsm_tree_open(&options, &err);
	g_assert_no_error(err);
	hsm_tree_options_clear(&options);
	return tree;
}

static HsmTree *open_tree(Fixture *fx)
{
	return open_tree_with_ttl(fx, 0);
}

/* /: a b c; /a/: d e; /b/: f; /c/: (none); /a/d/: g; /a/e/ /b/f/ /a/d/g/: none. */
static void fixture_setup(Fixture *fx, gconstpointer data)
{
	(void)data;
	fx->server = test_server_start(SERVE_RANGES);
	set_dirs(fx, "/", (const char *const[]){ "a", "b", "c", NULL });
	set_dirs(fx, "/a/", (const char *const[]){ "d", "e", NULL });
	set_dirs(fx, "/b/", (const char *const[]){ "f", NULL });
	set_dirs(fx, "/c/", (const char *const[]){ NULL });
	set_dirs(fx, "/a/d/", (const char *const[]){ "g", NULL });
	set_dirs(fx, "/a/e/", (const char *const[]){ NULL });
	set_dirs(fx, "/b/f/", (const char *const[]){ NULL });
	set_dirs(fx, "/a/d/g/", (const char *const[]){ NULL });
	fx->cache = g_dir_make_tmp("httphsm-crawl-XXXXXX", NULL);
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

static HsmCrawlStatus crawl_to_the_end(HsmTree *tree, guint depth, guint max_dirs)
{
	HsmCrawl *crawl = hsm_crawl_start(tree, depth, max_dirs, 3, -1);
	HsmCrawlStatus status;

	do {
		g_usleep(10 * 1000);
		hsm_crawl_get_status(crawl, &status);
	} while (!status.done);
	hsm_crawl_stop(crawl);
	return status;
}

static void test_depth_bounds_the_crawl(Fixture *fx, gconstpointer data)
{
	HsmCrawlStatus status = crawl_to_the_end(fx->tree, 1, 100);

	(void)data;
	/* The root and its 3 children, not a/d, a/e, b/f. */
	g_assert_cmpuint(status.listed, ==, 4);
	g_assert_cmpuint(status.failed, ==, 0);
	g_assert_false(status.truncated);
	g_assert_true(hsm_tree_is_populated(fx->tree, "a"));
	g_assert_true(hsm_tree_is_populated(fx->tree, "c"));
	g_assert_false(hsm_tree_is_populated(fx->tree, "a/d"));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 4);
}

static void test_whole_tree_then_nothing_again(Fixture *fx, gconstpointer data)
{
	HsmCrawlStatus status = crawl_to_the_end(fx->tree, 10, 100);

	(void)data;
	g_assert_cmpuint(status.listed, ==, 8);
	g_assert_true(hsm_tree_is_populated(fx->tree, "a/d/g"));
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 8);
	/* After a restart the listings are still fresh: no request. */
	hsm_tree_close(fx->tree);
	fx->tree = open_tree(fx);
	status = crawl_to_the_end(fx->tree, 10, 100);
	g_assert_cmpuint(status.listed, ==, 8);
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 8);
}

static void test_number_of_directories_bounds_the_crawl(Fixture *fx, gconstpointer data)
{
	HsmCrawlStatus status = crawl_to_the_end(fx->tree, 10, 5);

	(void)data;
	/* Level by level: 1 + 3, then only 1 of the next level's 3. */
	g_assert_cmpuint(status.listed, ==, 5);
	g_assert_true(status.truncated);
}

static void test_failed_listing_is_counted(Fixture *fx, gconstpointer data)
{
	HsmCrawlStatus status;

	(void)data;
	test_server_set_page(fx->server, "/b/", NULL, NULL); /* 404 from now on */
	status = crawl_to_the_end(fx->tree, 10, 100);
	g_assert_cmpuint(status.failed, ==, 1);
	g_assert_cmpuint(status.listed, ==, 6); /* not b, nor b/f below it */
}

static HsmCrawlStatus wait_for_passes(HsmCrawl *crawl, guint passes)
{
	HsmCrawlStatus status;

	do {
		g_usleep(10 * 1000);
		hsm_crawl_get_status(crawl, &status);
	} while (status.passes < passes);
	return status;
}

/* Where listings expire, passes repeat and find what the server added. */
static void test_repeats_once_listings_expire(Fixture *fx, gconstpointer data)
{
	HsmCrawl *crawl;
	HsmCrawlStatus status;

	(void)data;
	hsm_tree_close(fx->tree);
	fx->tree = open_tree_with_ttl(fx, G_USEC_PER_SEC);
	crawl = hsm_crawl_start(fx->tree, 10, 100, 3, G_USEC_PER_SEC + G_USEC_PER_SEC / 5);
	status = wait_for_passes(crawl, 1);
	g_assert_cmpuint(status.listed, ==, 8);
	g_assert_cmpint(status.next_pass, >, g_get_monotonic_time());
	g_assert_false(hsm_tree_is_populated(fx->tree, "h"));
	set_dirs(fx, "/", (const char *const[]){ "a", "b", "c", "h", NULL });
	set_dirs(fx, "/h/", (const char *const[]){ NULL });
	status = wait_for_passes(crawl, 2);
	hsm_crawl_stop(crawl);
	g_assert_cmpuint(status.listed, ==, 9);
	g_assert_true(hsm_tree_is_populated(fx->tree, "h"));
	/* The second pass revalidated all 8 listings and listed h. */
	g_assert_cmpint(g_atomic_int_get(&fx->server->page_gets), ==, 8 + 9);
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv);
	g_test_add("/crawl/depth", Fixture, NULL, fixture_setup, test_depth_bounds_the_crawl,
		   fixture_teardown);
	g_test_add("/crawl/whole-tree-then-nothing-again", Fixture, NULL, fixture_setup,
		   test_whole_tree_then_nothing_again, fixture_teardown);
	g_test_add("/crawl/max-dirs", Fixture, NULL, fixture_setup,
		   test_number_of_directories_bounds_the_crawl, fixture_teardown);
	g_test_add("/crawl/repeats", Fixture, NULL, fixture_setup,
		   test_repeats_once_listings_expire, fixture_teardown);
	g_test_add("/crawl/failed-listing", Fixture, NULL, fixture_setup,
		   test_failed_listing_is_counted, fixture_teardown);
	return g_test_run();
}
