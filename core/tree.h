/* The remote tree as the front ends see it: the one API of the core.
 *
 * An HsmTree ties a cache directory (store.h) to its URL and fetcher.  Front
 * ends ask for two things, both idempotent and safe from any thread:
 *   - hsm_tree_populate(): make a directory's entries exist in the cache
 *     tree (one listing request, HEADs only for inexact sizes);
 *   - hsm_file_ensure() (file.h): make a byte range of a file present in its
 *     cache file (single flight per range, growing window for sequential
 *     reads).
 * Then they serve the cache tree: FUSE by reading it, fanotify mode by
 * letting the kernel read it.
 */
#ifndef HSM_TREE_H
#define HSM_TREE_H

#include "fetch.h"
#include "file.h"
#include "store.h"

#include <glib.h>

typedef struct {
	char *url;              /* normalised, ends with '/' */
	char *cache_dir;        /* NULL: hsm_store_default_dir(url) */
	HsmFetchOptions fetch;
	guint64 min_window;     /* bytes fetched for a non-sequential miss */
	guint64 max_window;     /* largest fetch of a sequential reader */
	gsize max_listing;      /* largest listing page accepted */
} HsmTreeOptions;

void hsm_tree_options_init(HsmTreeOptions *options);
void hsm_tree_options_clear(HsmTreeOptions *options);

typedef struct HsmTree HsmTree;

/* What a front end wants to know about cached files (any thread).
 * changed: the remote content changed and the cached bytes were dropped
 *          (drop kernel caches of relpath);
 * evicting: fd's bytes are about to be dropped on request (make reads of
 *          the file go through the daemon again). */
typedef struct {
	void (*changed)(gpointer user_data, const char *relpath);
	void (*evicting)(gpointer user_data, int fd);
	gpointer user_data;
} HsmTreeHooks;

/* Opens the cache (taking its daemon lock) and the fetcher.  No request is
 * sent yet. */
HsmTree *hsm_tree_open(const HsmTreeOptions *options, GError **err);
/* Saves every file state and closes. */
void hsm_tree_close(HsmTree *tree);

/* Sets (or with NULL, clears) the hooks; once it returns, no old hook
 * runs any more, so a front end may free its data after clearing them. */
void hsm_tree_set_hooks(HsmTree *tree, const HsmTreeHooks *hooks);

HsmStore *hsm_tree_store(HsmTree *tree);

/* Makes the entries of directory relpath exist in the cache tree.  The
 * listing is fetched once per cache; concurrent callers share one fetch. */
gboolean hsm_tree_populate(HsmTree *tree, const char *relpath, GError **err);
gboolean hsm_tree_is_populated(HsmTree *tree, const char *relpath);

/* A reference to the file at relpath (which must exist in the cache tree). */
HsmFile *hsm_tree_get_file(HsmTree *tree, const char *relpath, GError **err);

#endif
