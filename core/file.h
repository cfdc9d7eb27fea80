/* One file of the cache tree, as front ends use it: an HsmFile comes from
 * hsm_tree_get_file() (tree.h) and makes byte ranges present on demand.
 * Every function is safe from any thread. */
#ifndef HSM_FILE_H
#define HSM_FILE_H

#include <glib.h>

typedef struct HsmFile HsmFile;

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
