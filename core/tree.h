/* The remote tree as the front ends see it: the one API of the core.
 *
 * An HsmTree ties a cache directory (store.h) to its URL and fetcher.  Front
 * ends ask for two things, both idempotent and safe from any thread:
 *   - hsm_tree_populate(): make a directory's entries exist in the cache
 *     tree (one listing request, HEADs only for inexact sizes);
 *   - hsm_file_ensure(): make a byte range of a file present in its cache
 *     file (single flight per range, growing window for sequential reads).
 * Then they serve the cache tree: FUSE by reading it, fanotify mode by
 * letting the kernel read it.
 */
#ifndef HSM_TREE_H
#define HSM_TREE_H

#include "fetch.h"
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
typedef struct HsmFile HsmFile;

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

HsmFile *hsm_file_ref(HsmFile *file);
void hsm_file_unref(HsmFile *file);

/* Who a read is for, when the front end can tell that it went away (a
 * killed reader): gone() is polled a few times a second while the read
 * waits, and TRUE makes it return with EINTR. */
typedef struct {
	gboolean (*gone)(gpointer data);
	gpointer data;
} HsmReader;

/* Blocks until [offset, offset + length) (clipped to the file size) is
 * present in the cache file, fetching what is missing.  reader may be
 * NULL.  A fetch nobody waits for any more is cancelled after a while. */
gboolean hsm_file_ensure(HsmFile *file, guint64 offset, guint64 length, const HsmReader *reader,
			 GError **err);

/* TRUE once process pid (GINT_TO_POINTER) no longer exists: a reader
 * that was killed, as an HsmReader's gone(). */
gboolean hsm_process_gone(gpointer pid);

/* Makes the file's fetched bytes, then the state that lists them, durable
 * now (the daemon otherwise saves changed states once a second).  Safe
 * from any thread. */
gboolean hsm_file_save(HsmFile *file, GError **err);

typedef struct {
	guint64 size;
	guint64 present;        /* bytes */
	guint generation;       /* bumped when the remote file changed */
} HsmFileStatus;

void hsm_file_get_status(HsmFile *file, HsmFileStatus *status);

/* Frees the local copy of the file: under a write lease (so nobody has it
 * open: EBUSY otherwise) the state first forgets every range, then the
 * bytes are punched out.  Later reads fetch again. */
gboolean hsm_file_evict(HsmFile *file, guint64 *freed, GError **err);

#endif
