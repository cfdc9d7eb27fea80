/* fanotify mode: the cache tree bind-mounted read-only and filled on demand
 * from fanotify pre-content permission events. */
#ifndef HSM_FANOTIFY_MODE_H
#define HSM_FANOTIFY_MODE_H

#include "tree.h"

#include <glib.h>
#include <signal.h>

typedef struct HsmFanotify HsmFanotify;

/* The signals that stop hsm_fanotify_serve(): SIGINT, SIGTERM, SIGHUP. */
void hsm_fanotify_stop_signals(sigset_t *set);

/* Whether this process was started by a guardian to take over the mount of
 * a daemon that died (then hsm_fanotify_mount() adopts that mount).  Call
 * once, before any thread exists. */
gboolean hsm_fanotify_restarted(void);

typedef struct {
	/* How many deaths of the daemon in a row the guardian answers with a
	 * restart (see guardian.h). */
	guint restarts;
	/* Fill a mapping's whole range at mmap() (mainline's rule) even where
	 * the kernel can fill it fault by fault (FAN_PRE_FAULT). */
	gboolean whole_mappings;
} HsmFanotifyOptions;

/* Sets up the groups, marks, guardian and mount, or takes them over from a
 * dead daemon.  The caller must have blocked the stop signals in every
 * thread (hsm_fanotify_serve() takes them with sigwait()).  log_path is
 * where the guardian writes. */
HsmFanotify *hsm_fanotify_mount(HsmTree *tree, const char *mountpoint, const char *log_path,
				const HsmFanotifyOptions *options, GError **err);
/* Serves until SIGINT/SIGTERM/SIGHUP finds the mount unused (then unmounts)
 * or until someone else unmounted it. */
int hsm_fanotify_serve(HsmFanotify *fan);
/* Whether the kernel raises lookup events (the patched 6.1): then any path
 * opens directly; without them (mainline) only paths whose directories
 * were listed. */
gboolean hsm_fanotify_has_lookup_events(HsmFanotify *fan);
/* Answers what is pending, stops everything, frees. */
void hsm_fanotify_free(HsmFanotify *fan);

/* Drops the "complete, no more events" mark of a file so that reads of it
 * raise events again (before its bytes are evicted).  fd: any descriptor
 * of the file. */
void hsm_fanotify_forget_complete(HsmFanotify *fan, int fd);

#endif
