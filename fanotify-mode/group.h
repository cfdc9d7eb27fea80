/* A fanotify group's queue: reading its events and answering them, for the
 * daemon and for the guardian that stands in for it. */
#ifndef HSM_FAN_GROUP_H
#define HSM_FAN_GROUP_H

#include "fanotify-abi.h"

#include <glib.h>

/* Bytes of one read: at most this many / sizeof(fanotify_event_metadata)
 * events. */
#define HSM_FAN_READ_BUFFER 16384

/* Reads what group has queued (one read) and calls fn for each event.
 * Returns FALSE when nothing was there (or the read failed: errno). */
gboolean hsm_fan_read_events(int group,
			     void (*fn)(const struct fanotify_event_metadata *event, gpointer data),
			     gpointer data);

/* Answers the permission event fd of group.  A kernel without errno
 * responses refuses FAN_DENY_ERRNO() with EINVAL: then plain FAN_DENY is sent
 * and *downgraded set.  Returns FALSE with errno set if no answer was taken
 * (ENOENT: the access was cancelled, its process killed). */
gboolean hsm_fan_respond(int group, int fd, guint32 response, gboolean *downgraded);

/* Answers with response every event pending in group under an fd number
 * that claimed() (if given) does not claim, below the soft RLIMIT_NOFILE
 * (the highest number a reader of the group can have been given).  A daemon
 * killed between reading events and recording them in the guardian's table
 * leaves such events: nobody knows their files, their readers would wait
 * forever, and a later event given the same number could get their answer.
 * Call it before reading the group.  Returns how many were answered. */
guint hsm_fan_answer_unclaimed(int group, guint32 response,
			       gboolean (*claimed)(int fd, gpointer data), gpointer data);

#endif
