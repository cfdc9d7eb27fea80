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
	/* Called, when a listing was revalidated, for each name that now
	 * stands for something else (added, removed or replaced) once the
	 * cache shows it, and then for the directory itself. */
	void (*changed)(gpointer data, const char *relpath);
	gpointer data;          /* of both */
} HsmPopulator;

/* Lists relpath (one GET, HEADs only where sizes or mtimes are inexact) and
 * makes the cache directory match; then records the listing in the store,
 * and in *listed.  With known (what the store recorded of an earlier
 * listing), revalidates: a conditional GET, and the cache stays as it is
 * when the server answers 304 or sends the same bytes again.  No locking:
 * the caller runs one populate per directory at a time. */
gboolean hsm_populate_dir(const HsmPopulator *pop, const char *relpath, const HsmDirState *known,
			  HsmDirState *listed, GError **err);

#endif
