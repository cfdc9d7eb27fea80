/* Making a cache directory match its remote listing (populate.c). */
#ifndef HSM_POPULATE_H
#define HSM_POPULATE_H

#include "fetch.h"
#include "store.h"

#include <glib.h>

typedef struct {
	HsmStore *store;
	HsmFetcher *fetcher;
	gsize max_listing;      /* largest listing page accepted */
	/* Called for each cache entry about to be removed (a vanished or
	 * replaced remote entry), so that its owner forgets what it holds in
	 * memory about relpath and what is below it. */
	void (*forget)(gpointer data, const char *relpath);
	gpointer forget_data;
} HsmPopulator;

/* Lists relpath (one GET, HEADs only where sizes or mtimes are inexact) and
 * makes the cache directory match; then marks it populated in the store.
 * No locking: the caller runs one populate per directory at a time. */
gboolean hsm_populate_dir(const HsmPopulator *pop, const char *relpath, GError **err);

#endif
