/* Creating and removing the bind mount; see bindmount.h.  The new mount API
 * (open_tree, mount_setattr, move_mount; Linux 5.12+) lets the fanotify
 * marks be in place before the mount becomes reachable, so no file can be
 * opened on it without pre-content events. */
#include "bindmount.h"
#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

int hsm_bindmount_clone(const char *tree_path, GError **err)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					       MOUNT_ATTR_NODEV };
	int fd = open_tree(AT_FDCWD, tree_path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

	if (fd < 0 || mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		int code = errno;

		g_set_error(err, HSM_ERROR, code, "cannot make a bind mount of %s: %s", tree_path,
			    g_strerror(code));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

gboolean hsm_bindmount_attach(int mount_fd, const char *mountpoint, GError **err)
{
	if (move_mount(mount_fd, "", AT_FDCWD, mountpoint, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		g_set_error(err, HSM_ERROR, errno, "cannot mount on %s: %s", mountpoint,
			    g_strerror(errno));
		return FALSE;
	}
	return TRUE;
}

gboolean hsm_bindmount_detach(const char *mountpoint)
{
	return umount2(mountpoint, UMOUNT_NOFOLLOW) == 0;
}
