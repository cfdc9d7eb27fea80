/* /proc/self/mountinfo, parsed once for the two places that look up mounts
 * (the fanotify bind mount after a move, umount's file system type). */
#ifndef HSM_MOUNTINFO_H
#define HSM_MOUNTINFO_H

#include <glib.h>

typedef struct {
	guint64 id;
	char *mount_point;      /* unescaped (\040 is a space) */
	char *fs_type;
} HsmMount;

/* The mounts of text (mountinfo's format), in its order; lines that do not
 * parse are skipped.  Free with g_ptr_array_unref(). */
GPtrArray *hsm_mountinfo_parse(const char *text);
/* The same for /proc/self/mountinfo; NULL if it cannot be read. */
GPtrArray *hsm_mountinfo_read(void);

#endif
