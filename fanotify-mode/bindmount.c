/* Creating and removing the bind mount; see bindmount.h.  The new mount API
 * (open_tree, mount_setattr, move_mount; Linux 5.12+) lets the fanotify
 * marks be in place before the mount becomes reachable, so no file can be
 * opened on it without pre-content events. */
#include "bindmount.h"
#include "error.h"
#include "mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
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

static guint64 mount_id_at(int dirfd, const char *path, int flags)
{
	struct statx stx;

	if (statx(dirfd, path, flags | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return 0;
	return stx.stx_mnt_id;
}

guint64 hsm_bindmount_id(int fd)
{
	return mount_id_at(fd, "", AT_EMPTY_PATH);
}

/* The mount point of mnt_id, or NULL. */
static char *mount_point_of(guint64 mnt_id)
{
	g_autoptr(GPtrArray) mounts = hsm_mountinfo_read();

	for (guint i = 0; mounts && i < mounts->len; i++) {
		const HsmMount *mount = mounts->pdata[i];

		if (mount->id == mnt_id)
			return g_strdup(mount->mount_point);
	}
	return NULL;
}

char *hsm_bindmount_root(guint64 mnt_id, const char *mountpoint)
{
	char *moved;

	/* A statx, not an open: a descriptor would make umount2() see it busy. */
	if (mount_id_at(AT_FDCWD, mountpoint, 0) == mnt_id)
		return g_strdup(mountpoint);
	moved = mount_point_of(mnt_id);
	return moved ? moved : g_strdup("/");
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

guint64 hsm_bindmount_marked(int group, guint64 *mask)
{
	char path[64];
	g_autofree char *info = NULL;
	const char *line;
	unsigned int mnt_id, mflags, mark_mask;

	g_snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", group);
	if (!g_file_get_contents(path, &info, NULL, NULL) ||
	    !(line = strstr(info, "fanotify mnt_id:")) ||
	    sscanf(line, "fanotify mnt_id:%x mflags:%x mask:%x", &mnt_id, &mflags,
		   &mark_mask) != 3)
		return 0;
	if (mask)
		*mask = mark_mask;
	return mnt_id;
}

gboolean hsm_bindmount_alive(int group)
{
	return hsm_bindmount_marked(group, NULL) != 0;
}
