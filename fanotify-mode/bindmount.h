/* The read-only bind mount of the cache tree that fanotify mode serves. */
#ifndef HSM_BINDMOUNT_H
#define HSM_BINDMOUNT_H

#include <glib.h>

/* A detached, read-only clone of the mount of tree_path (an O_PATH fd).
 * Marks can be put on it before anyone can reach it. */
int hsm_bindmount_clone(const char *tree_path, GError **err);
/* Attaches the clone on mountpoint. */
gboolean hsm_bindmount_attach(int mount_fd, const char *mountpoint, GError **err);
/* Unmounts mountpoint unless busy; FALSE with errno set otherwise (EBUSY). */
gboolean hsm_bindmount_detach(const char *mountpoint);

#endif
