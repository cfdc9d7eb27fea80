/* What the daemon, its guardian and a restarted daemon share: the table of
 * fanotify events in flight, in a memfd, and how a restarted daemon is
 * told what it inherits.
 *
 * A fanotify response names its event by the number of the event's fd in
 * the process that read it, and the kernel answers the first pending event
 * with that number.  So the guardian can answer events read by a dead
 * daemon, and a restarted daemon can finish them, as long as it keeps those
 * numbers out of use until it has answered them: the guardian starts it with
 * a placeholder open at each.
 */
#ifndef HSM_GUARDIAN_TABLE_H
#define HSM_GUARDIAN_TABLE_H

#include <glib.h>
#include <limits.h>

#define HSM_GUARDIAN_SLOTS 2048
#define HSM_GUARDIAN_MAX_GROUPS 2

/* Zero is a free slot: a new memfd needs no initialising, and only the
 * pages of slots ever used take memory. */
typedef struct {
	guint32 used;           /* 1 once the rest is written (release/acquire) */
	gint32 fd;              /* the event fd's number in the daemon that read it */
	guint32 group;          /* index into the groups */
	gint32 pid;             /* the process whose access waits */
	guint64 mask;
	guint64 offset;
	guint64 count;
	guint32 has_range;
	guint32 placed;         /* relpath is known */
	char relpath[PATH_MAX]; /* the object, relative to the mount */
} HsmEventSlot;

#define HSM_GUARDIAN_TABLE_SIZE (HSM_GUARDIAN_SLOTS * sizeof(HsmEventSlot))

/* Set by the guardian for the daemon it starts: "GROUPS;TABLE;PIPE", the
 * group fds (comma separated), the table's fd and the write end of the
 * guardian's pipe. */
#define HSM_GUARDIAN_ADOPT_ENV "HTTPHSM_ADOPT"

#endif
