/* One file of the cache tree: an HsmFile makes byte ranges of its cache
 * file present on demand.  Front ends get one from hsm_tree_get_file()
 * (tree.h); the first part of this header is theirs, the last part the
 * tree's.  Every function is safe from any thread. */
#ifndef HSM_FILE_H
#define HSM_FILE_H

#include "budget.h"
#include "fetch.h"
#include "store.h"

#include <glib.h>

typedef struct HsmFile HsmFile;

/* What a front end wants to know about cached files (any thread).
 * changed: the remote content changed and the cached bytes were dropped,
 *          or a revalidated listing shows that relpath (a name, or the
 *          directory itself) changed: drop kernel caches of relpath;
 * evicting: fd's bytes are about to be dropped on request (make reads of
 *          the file go through the daemon again);
 * flush:   return once what changed() reported so far shows (the kernel's
 *          caches are dropped). */
typedef struct {
	void (*changed)(gpointer user_data, const char *relpath);
	void (*evicting)(gpointer user_data, int fd);
	void (*flush)(gpointer user_data);
	gpointer user_data;
} HsmFileHooks;

/* A holder of a reference may take another; the last unref leaves the
 * file to its owner (tree.c), which frees it once idle. */
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

/* hsm_file_ensure() for a range that is all present already: the read
 * counts as one (sequential runs, read-ahead, last use), *complete says
 * whether all of the file is present, and TRUE is returned.  Otherwise
 * FALSE, and nothing happens: never waits. */
gboolean hsm_file_ensure_if_present(HsmFile *file, guint64 offset, guint64 length,
				    gboolean *complete);

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
	gboolean pinned;
} HsmFileStatus;

/* A consistent snapshot (taken under the file's lock). */
void hsm_file_get_status(HsmFile *file, HsmFileStatus *status);

/* Whether [offset, offset + length), clipped to the file size, is all in
 * the cache file now; fetches nothing. */
gboolean hsm_file_has(HsmFile *file, guint64 offset, guint64 length);

/* Frees the local copy of the file: under a write lease (so nobody has it
 * open: EBUSY otherwise) the state first forgets every range, then the
 * bytes are punched out.  Later reads fetch again.  A pinned file is
 * refused (EPERM). */
gboolean hsm_file_evict(HsmFile *file, guint64 *freed, GError **err);

/* Pins (never evicted, by the size limit or by hand) or unpins the file;
 * saved at once. */
gboolean hsm_file_set_pinned(HsmFile *file, gboolean pinned, GError **err);

/* ---- For the owner of the files (tree.c) ---- */

/* What the files of one cache share.  The owner sets the first four
 * fields before opening a file and keeps them (and the store and fetcher)
 * until the last file is freed; hooks change only through
 * hsm_file_set_hooks(). */
typedef struct {
	HsmStore *store;
	HsmFetcher *fetcher;
	guint64 min_window;     /* bytes fetched for a non-sequential miss */
	guint64 max_window;     /* largest fetch of a sequential reader */
	HsmBudget *budget;      /* the cache's size limit and LRU order, or NULL */
	HsmFileHooks hooks;     /* protected by hooks_lock, held while one runs */
	GRWLock hooks_lock;
} HsmFileShared;

void hsm_file_shared_init(HsmFileShared *shared);
void hsm_file_shared_clear(HsmFileShared *shared);
/* Sets (or with NULL, clears) the hooks; once it returns, no old hook
 * runs any more. */
void hsm_file_set_hooks(HsmFileShared *shared, const HsmFileHooks *hooks);
/* Runs the changed hook for relpath (a file or a directory whose remote
 * listing changed), if one is set. */
void hsm_file_shared_changed(HsmFileShared *shared, const char *relpath);
/* Runs the flush hook, if one is set. */
void hsm_file_shared_flush(HsmFileShared *shared);

/* Opens the cache file at relpath (a regular file) with one reference. */
HsmFile *hsm_file_open(HsmFileShared *shared, const char *relpath, GError **err);
/* Frees a file nobody references (see hsm_file_unused_since). */
void hsm_file_free(HsmFile *file);
/* The path below the cache tree (immutable). */
const char *hsm_file_relpath(HsmFile *file);
/* The monotonic time (usec) of the last unref if nobody holds a reference,
 * else -1.  Only a holder of a reference can take another, so an owner that
 * alone hands out first references may free a file once this is >= 0. */
gint64 hsm_file_unused_since(HsmFile *file);
/* The path now names another file (or nothing): its state is no longer
 * saved, and it lives only until its holders let go. */
void hsm_file_detach(HsmFile *file);

#endif
