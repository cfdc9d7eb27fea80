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
	guint64 max_cache_size; /* bytes of file data kept; 0: no limit */
	gint64 max_cache_age;   /* usec a file's bytes are kept unused; 0: no limit */
	gint64 dir_cache_time;  /* usec a listing is used before it is revalidated
				 * (or less, if the server's max-age says so);
				 * -1: forever */
} HsmTreeOptions;

void hsm_tree_options_init(HsmTreeOptions *options);
void hsm_tree_options_clear(HsmTreeOptions *options);

typedef struct HsmTree HsmTree;

/* Opens the cache (taking its daemon lock) and the fetcher.  No request is
 * sent yet. */
HsmTree *hsm_tree_open(const HsmTreeOptions *options, GError **err);
/* Saves every file state and closes. */
void hsm_tree_close(HsmTree *tree);

/* Sets (or with NULL, clears) the hooks (file.h); once it returns, no old
 * hook runs any more, so a front end may free its data after clearing
 * them. */
void hsm_tree_set_hooks(HsmTree *tree, const HsmFileHooks *hooks);

/* Where the cache of url goes when no cache directory is given. */
char *hsm_tree_default_cache_dir(const char *url);
const char *hsm_tree_url(HsmTree *tree);        /* normalised, ends with '/' */
/* The options' dir_cache_time: usec a listing is used, or -1 (forever). */
gint64 hsm_tree_dir_cache_time(HsmTree *tree);
const char *hsm_tree_cache_dir(HsmTree *tree);
/* The cache tree, the directory the front ends serve: its path, and a
 * directory fd on it that lives as long as the tree. */
const char *hsm_tree_root_path(HsmTree *tree);
int hsm_tree_root_fd(HsmTree *tree);

/* Makes the entries of directory relpath exist in the cache tree, as the
 * server lists them now: a listing older than dir_cache_time (or the
 * server's max-age) is revalidated with a conditional GET, and names that
 * changed reach the changed hook (file.h).  Concurrent callers share one
 * request. */
gboolean hsm_tree_populate(HsmTree *tree, const char *relpath, GError **err);
/* Revalidates the listing of relpath now, whatever its age (lists it, if
 * it never was; a revalidation running already counts), and returns once
 * the front end shows what changed (the flush hook). */
gboolean hsm_tree_refresh(HsmTree *tree, const char *relpath, GError **err);

/* The relpaths of the subdirectories directory relpath has in the cache
 * tree now (no request); free with g_ptr_array_unref(). */
GPtrArray *hsm_tree_subdirs(HsmTree *tree, const char *relpath);
/* Without a request: TRUE once relpath was populated (by any daemon). */
gboolean hsm_tree_is_populated(HsmTree *tree, const char *relpath);
/* Bytes of file data the cache holds (as far as counted yet: the count of
 * an existing cache is rebuilt in the background at start), and the
 * --cache-max-size limit (G_MAXUINT64: none). */
void hsm_tree_cache_usage(HsmTree *tree, guint64 *used, guint64 *limit);

/* Seconds since relpath's listing was fetched or found unchanged; -1 when
 * it never was. */
gint64 hsm_tree_listing_age(HsmTree *tree, const char *relpath);

/* A reference to the file at relpath (which must exist in the cache tree). */
HsmFile *hsm_tree_get_file(HsmTree *tree, const char *relpath, GError **err);
/* Whether [offset, offset + length) of relpath is in the cache now, from
 * its open file or its saved state; reads only, writes nothing (for a
 * caller that must not wait for the cache's file system). */
gboolean hsm_tree_has_range(HsmTree *tree, const char *relpath, guint64 offset, guint64 length);
/* hsm_file_ensure_if_present() on relpath if it is an open file (in memory;
 * no file system access, never waits); *complete then says whether all of
 * the file is present.  FALSE if it is not open or the range not present. */
gboolean hsm_tree_ensure_if_present(HsmTree *tree, const char *relpath, guint64 offset,
				    guint64 length, gboolean *complete);

#endif
