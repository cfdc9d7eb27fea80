/* What the unit tests of the upper core modules share: the test program's
 * set-up, and a cache (store and fetcher) for a scripted server's tree. */
#ifndef HSM_TEST_CACHE_H
#define HSM_TEST_CACHE_H

#include "fetch.h"
#include "store.h"
#include "testserver.h"

/* g_test_init(), with warnings and messages of the code under test printed
 * rather than fatal (bad servers are the point of many tests). */
void test_init(int *argc, char ***argv);

typedef struct {
	char *dir;               /* a fresh temporary directory */
	HsmStore *store;         /* over the server's root URL */
	HsmFetcher *fetcher;     /* retries after 10 ms, not seconds */
} TestCache;

void test_cache_open(TestCache *cache, TestServer *server);
/* Stops the fetcher (first: transfers may still touch files), closes the
 * store and removes the directory. */
void test_cache_close(TestCache *cache);

#endif
