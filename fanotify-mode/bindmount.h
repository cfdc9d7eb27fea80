/* The read-only bind mount of the cache tree that fanotify mode serves. */
#ifndef HSM_BINDMOUNT_H
#define HSM_BINDMOUNT_H

#include <glib.h>

/* A detached, read-only clone of the mount of tree_path (an O_PATH fd).
 * Marks can be put on it before anyone can reach it. */
int hsm_bindmount_clone(const char *tree_path, GError **err);
/* The mount ID of the mount fd is on (STATX_MNT_ID), or 0. */
guint64 hsm_bindmount_id(int fd);
/* Where the kernel's paths of files on mount mnt_id start from: mountpoint
 * while it is attached there, its new mount point if it was moved, "/" once
 * it is detached (a lazy unmount with files still open).  Never NULL. */
char *hsm_bindmount_root(guint64 mnt_id, const char *mountpoint);
/* Attaches the clone on mountpoint. */
gboolean hsm_bindmount_attach(int mount_fd, const char *mountpoint, GError **err);
/* Unmounts mountpoint unless busy; FALSE with errno set otherwise (EBUSY). */
gboolean hsm_bindmount_detach(const char *mountpoint);
/* TRUE while group's mark on the mount exists: the mount is attached
 * somewhere, or detached lazily and still in use.  The kernel drops the
 * mark when the mount is gone for good. */
gboolean hsm_bindmount_alive(int group);
/* The mount ID of group's mount mark and, in *mask (may be NULL), the
 * events it reports; 0 if there is none. */
guint64 hsm_bindmount_marked(int group, guint64 *mask);

#endif
