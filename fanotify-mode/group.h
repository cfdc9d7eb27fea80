/* A fanotify group's queue: reading its events and answering them, for the
 * daemon and for the guardian that stands in for it. */
#ifndef HSM_FAN_GROUP_H
#define HSM_FAN_GROUP_H

#include "fanotify-abi.h"

#include <glib.h>

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

#endif
