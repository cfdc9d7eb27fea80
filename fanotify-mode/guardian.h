/* The guardian: what keeps unfetched bytes from being read as zeros when the
 * fanotify daemon dies.
 *
 * When the last descriptor of a fanotify group closes, the kernel lets every
 * pending and future access through ("fail open"), and the sparse cache
 * files would read as zeros.  So a small second process, started by the
 * daemon, holds copies of the group descriptors.  If the daemon exits
 * without saying goodbye (SIGKILL, crash), the guardian detaches the mount
 * (no new opens), answers the events the daemon had read but not answered,
 * and denies every later event with EIO until the last file of the mount is
 * closed, then exits.  Files already complete keep reading correctly (they
 * raise no events).  The daemon restarts the guardian if it dies.
 */
#ifndef HSM_GUARDIAN_H
#define HSM_GUARDIAN_H

#include <glib.h>

typedef struct HsmGuardian HsmGuardian;

HsmGuardian *hsm_guardian_start(const int *groups, guint n_groups, const char *mountpoint,
				const char *log_path, GError **err);
/* Records an event being handled (so the guardian can answer it); returns a
 * slot for hsm_guardian_untrack().  Blocks while all slots are taken. */
guint hsm_guardian_track(HsmGuardian *guardian, guint group, int event_fd);
void hsm_guardian_untrack(HsmGuardian *guardian, guint slot);
/* A clean stop: the guardian exits without acting; frees. */
void hsm_guardian_release(HsmGuardian *guardian);

/* `httphsm __guardian ...`, started by hsm_guardian_start(). */
int hsm_guardian_main(int argc, char **argv);

#endif
