/* The unit tests' cache and set-up: see testcache.h. */
#include "testcache.h"

#include <stdlib.h>

void test_init(int *argc, char ***argv)
{
	g_test_init(argc, argv, NULL);
	g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL);
	g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  g_log_default_handler, NULL);
}

void test_cache_open(TestCache *cache, TestServer *server)
{
	g_autofree char *url = test_server_url(server, "/");
	g_autoptr(GError) err = NULL;
	HsmFetchOptions options;

	cache->dir = g_dir_make_tmp("httphsm-test-XXXXXX", NULL);
	cache->store = hsm_store_open(cache->dir, url, TRUE, &err);
	g_assert_no_error(err);
	hsm_fetch_options_init(&options);
	options.retry_delay_ms = 10;
	cache->fetcher = hsm_fetcher_new(&options);
	hsm_fetch_options_clear(&options);
}

void test_cache_close(TestCache *cache)
{
	g_autofree char *command = g_strdup_printf("rm -rf '%s'", cache->dir);

	hsm_fetcher_free(cache->fetcher);
	hsm_store_close(cache->store);
	g_assert_cmpint(system(command), ==, 0);
	g_free(cache->dir);
}
