/* The cache directory on disk, shared by both front ends.
 *
 *   DIR/httphsm.conf      the URL this cache mirrors
 *   DIR/lock              flock()ed by the one daemon serving this cache
 *   DIR/tree/             the mirror: remote directories, and regular files
 *                         with the remote size and mtime, sparse until
 *                         fetched.  FUSE serves it; fanotify mode
 *                         bind-mounts it.
 *   DIR/state/xx/HASH     per-entry state (GKeyFile), HASH = sha256 of the
 *                         entry's relpath, so any remote name maps to a
 *                         fixed-size file name.
 *   DIR/staging/          new versions of files, made complete here and
 *                         renamed over the old ones (emptied at start).
 *
 * A file's state lists the byte ranges of tree/PATH that hold fetched data.
 * It is replaced atomically (write, fsync, rename) and only after the data
 * it lists was fdatasync()ed, so no crash can make an unfetched range count
 * as present.  A state is forgotten before its file is replaced, and one
 * whose size disagrees with tree/PATH is ignored.
 *
 * Writing fetched bytes bumps a file's mtime, so the remote mtime of every
 * entry is also kept in its "user.httphsm.mtime" xattr and put back.
 */
#ifndef HSM_STORE_H
#define HSM_STORE_H

#include "rangemap.h"

#include <glib.h>

typedef struct HsmStore HsmStore;

/* Opens (creating it if needed) the cache at dir for url.  With lock set,
 * takes the daemon lock and fails with EBUSY if another daemon holds it. */
HsmStore *hsm_store_open(const char *dir, const char *url, gboolean lock, GError **err);
void hsm_store_close(HsmStore *store);

/* Opens an existing cache without knowing its URL (for status, evict...). */
HsmStore *hsm_store_open_existing(const char *dir, GError **err);

const char *hsm_store_dir(HsmStore *store);
const char *hsm_store_url(HsmStore *store);
const char *hsm_store_tree_path(HsmStore *store);
/* An O_PATH descriptor of tree/, for *at() calls. */
int hsm_store_tree_fd(HsmStore *store);
/* An O_PATH descriptor of staging/ (same file system as tree/), or -1 for
 * a cache opened without the daemon lock. */
int hsm_store_staging_fd(HsmStore *store);

/* The default cache directory for url: $XDG_CACHE_HOME/httphsm/HOST-HASH. */
char *hsm_store_default_dir(const char *url);

typedef struct {
	guint64 size;
	char *etag;             /* validator from the server, or NULL */
	gint64 last_modified;   /* the other validator (Unix time), or -1 */
	gboolean pinned;        /* never evicted (prefetch --pin) */
	gint64 changed;         /* Unix time the server's copy was last seen to change, or -1 */
	HsmRangeMap present;
} HsmFileState;

void hsm_file_state_init(HsmFileState *state);
void hsm_file_state_clear(HsmFileState *state);
/* Whether [offset, offset + length), clipped to the size, is all present. */
gboolean hsm_file_state_has(const HsmFileState *state, guint64 offset, guint64 length);

/* Parses the text of a state file (len bytes, as hsm_store_save_file()
 * writes it) that should be relpath's: FALSE (state unchanged) unless it
 * records relpath and its present ranges are well formed and end within its
 * size.  The text is untrusted (a damaged or foreign cache). */
gboolean hsm_file_state_parse(const char *text, gsize len, const char *relpath,
			      HsmFileState *state);
/* Loads the state of relpath; FALSE (state left empty) when there is none. */
gboolean hsm_store_load_file(HsmStore *store, const char *relpath, HsmFileState *state);
/* Replaces it atomically. */
gboolean hsm_store_save_file(HsmStore *store, const char *relpath, const HsmFileState *state,
			     GError **err);
/* Forgets what is known of relpath (file or directory). */
void hsm_store_forget(HsmStore *store, const char *relpath);

/* Sets the remote mtime of an open cache entry (the xattr and the mtime). */
gboolean hsm_store_set_mtime(int fd, gint64 mtime);
/* Puts mtime back as the file's mtime (writes made it "now"); the xattr
 * already holds it. */
void hsm_store_put_mtime(int fd, gint64 mtime);
/* The remote mtime recorded for an open cache entry, or -1. */
gint64 hsm_store_get_mtime(int fd);
/* Puts the recorded remote mtime back if writes changed it; returns it, or
 * -1 if none is recorded. */
gint64 hsm_store_restore_mtime(int fd);

/* A directory's listing, once it was turned into tree entries. */
typedef struct {
	guint entries;
	gint64 listed;          /* Unix time it was last fetched or found unchanged */
	gint64 max_age;         /* the server's Cache-Control max-age (s), or -1 */
	char *etag;             /* the listing page's validators, or NULL */
	char *last_modified;
	char *digest;           /* of the page's bytes, for servers without validators */
} HsmDirState;

void hsm_dir_state_clear(HsmDirState *state);
/* FALSE (state left empty) unless relpath was populated. */
gboolean hsm_store_load_dir(HsmStore *store, const char *relpath, HsmDirState *state);
/* Records that relpath's entries are those of the listing state describes. */
gboolean hsm_store_save_dir(HsmStore *store, const char *relpath, const HsmDirState *state,
			    GError **err);
gboolean hsm_store_dir_is_populated(HsmStore *store, const char *relpath);

#endif
