/* Internals shared by tree.c, file.c and populate.c; not for front ends. */
#ifndef HSM_TREE_PRIVATE_H
#define HSM_TREE_PRIVATE_H

#include "tree.h"

struct HsmTree {
	HsmTreeOptions options;
	HsmStore *store;
	HsmFetcher *fetcher;
	HsmTreeHooks hooks;      /* protected by hooks_lock, held while one runs */
	GRWLock hooks_lock;

	GMutex lock;
	GHashTable *files;       /* relpath -> HsmFile *; protected by lock */
	GHashTable *populated;   /* set of relpaths; protected by lock */
	GHashTable *populating;  /* relpath -> NULL while listed; protected by lock */
	GPtrArray *detached;     /* files whose path went away; protected by lock */
	GCond populate_done;     /* a populate finished */
	GCond flusher_wake;
	gboolean stopping;       /* protected by lock */
	GThread *flusher;
};

struct HsmFile {
	HsmTree *tree;
	char *relpath;
	char *url;
	int fd;                  /* O_RDWR on tree/relpath */
	guint refs;              /* protected by tree->lock */
	gint detached;           /* atomic: the path now names another file */
	gint64 last_used;        /* monotonic usec; protected by tree->lock */

	GMutex lock;
	GPtrArray *waiters;      /* readers waiting for bytes; protected by lock */
	HsmFileState state;      /* protected by lock */
	GPtrArray *fetches;      /* running fetches; protected by lock */
	gint64 remote_mtime;     /* protected by lock */
	guint generation;        /* protected by lock */
	guint64 seq_start;       /* where the sequential run began; protected by lock */
	guint64 seq_next;        /* end of the last read; protected by lock */
	guint64 window;          /* next fetch size; protected by lock */
	gboolean dirty;          /* state differs from disk; protected by lock */
	GError *failure;         /* the last failed fetch, protected by lock... */
	HsmRange failed;         /* ...of these bytes... */
	gint64 failed_until;     /* ...is the answer until then (monotonic usec) */
	GMutex save_lock;        /* keeps saves in order */
};

/* file.c */
HsmFile *hsm_file_open(HsmTree *tree, const char *relpath, GError **err);
void hsm_file_free(HsmFile *file);

/* Forgets everything in memory about relpath and what is below it: the
 * entry was removed from the cache tree. */
void hsm_tree_forget(HsmTree *tree, const char *relpath);

/* Run the front end's hook, if it set one (any thread). */
void hsm_tree_hook_changed(HsmTree *tree, const char *relpath);
void hsm_tree_hook_evicting(HsmTree *tree, int fd);

/* populate.c: lists relpath and creates its entries; no locking. */
gboolean hsm_populate_dir(HsmTree *tree, const char *relpath, GError **err);

#endif
