/* The guardian: what keeps a crash of the fanotify daemon from failing
 * readers, and unfetched bytes from ever being read as zeros.
 *
 * When the last descriptor of a fanotify group closes, the kernel lets every
 * pending and future access through ("fail open"), and the sparse cache
 * files would read as zeros.  So a small second process, started by the
 * daemon, holds copies of the group descriptors and the table of events the
 * daemon is handling (guardian-table.h).  If the daemon exits without
 * saying goodbye (SIGKILL, crash), the guardian starts it again, with the
 * same arguments, and hands it the groups and the table: the new daemon
 * finishes the events the dead one left, so their readers get their bytes,
 * late.  After --restarts deaths in a row (a daemon that dies within a
 * minute of serving, or never serves), the guardian instead detaches the
 * mount (no new opens), answers the events in the table and every later one
 * with EIO until the last file of the mount is closed, then exits.  Files
 * already complete keep reading correctly (they raise no events).  The
 * daemon restarts the guardian if it dies.
 */
#ifndef HSM_GUARDIAN_H
#define HSM_GUARDIAN_H

#include <glib.h>
#include <sys/types.h>

typedef struct HsmGuardian HsmGuardian;

/* An event being handled, as the guardian keeps it. */
typedef struct {
	guint group;            /* index into the groups */
	int fd;                 /* its fd number: the response names it */
	guint64 mask;
	gboolean has_range;
	guint64 offset;
	guint64 count;
	pid_t pid;              /* of the process whose access waits */
	const char *relpath;    /* relative to the mount; NULL: unknown */
} HsmEventRecord;

HsmGuardian *hsm_guardian_start(const int *groups, guint n_groups, const char *mountpoint,
				const char *log_path, guint restarts, GError **err);

/* Whether this process was started by a guardian to take over a mount from a
 * daemon that died; takes what the guardian handed over.  Call once, before
 * any thread exists. */
gboolean hsm_guardian_take_handover(void);
/* Whether what a guardian handed over is still to be adopted. */
gboolean hsm_guardian_handed_over(void);
/* For such a daemon: the guardian that started it, and the groups
 * (groups[HSM_GUARDIAN_MAX_GROUPS]) it handed over. */
HsmGuardian *hsm_guardian_adopt(int *groups, guint *n_groups, const char *mountpoint,
				const char *log_path, guint restarts, GError **err);
/* Calls fn for each event the dead daemon left unanswered.  The event's fd
 * number is held by a placeholder until the slot is untracked; fn may dup
 * another file onto it. */
void hsm_guardian_foreach_inherited(HsmGuardian *guardian,
				    void (*fn)(guint slot, const HsmEventRecord *event,
					       gpointer data),
				    gpointer data);
/* Tells the guardian that this restarted daemon serves the mount.  Until
 * then, hsm_guardian_release() leaves the guardian to count a failed
 * restart. */
void hsm_guardian_serving(HsmGuardian *guardian);

/* Records an event being handled (so the guardian can answer it, or a new
 * daemon finish it); returns a slot for hsm_guardian_untrack().  Blocks
 * while all slots are taken. */
guint hsm_guardian_track(HsmGuardian *guardian, const HsmEventRecord *event);
void hsm_guardian_untrack(HsmGuardian *guardian, guint slot);
/* A clean stop: the guardian exits without acting; frees. */
void hsm_guardian_release(HsmGuardian *guardian);

/* `httphsm __guardian ...`, started by hsm_guardian_start() (guardian-process.c). */
int hsm_guardian_main(int argc, char **argv);

#endif
