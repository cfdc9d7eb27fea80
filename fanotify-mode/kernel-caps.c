/* Probing fanotify's pre-content support; see kernel-caps.h.
 *
 * Mainline (6.14+) has FAN_PRE_ACCESS for files and refuses it together
 * with FAN_ONDIR (EINVAL); the kernel-patches/ series accepts that and adds
 * FAN_HSM_LOOKUP and FAN_PRE_FAULT.  Each capability is tried for real on the mount. */
#include "kernel-caps.h"
#include "error.h"
#include "fanotify-abi.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int try_mark(int mount_fd, guint64 mask)
{
	int group = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC, O_RDONLY | O_LARGEFILE);
	int rc;

	if (group < 0)
		return errno;
	/* O_PATH descriptors are not accepted as the marked object itself. */
	rc = fanotify_mark(group, FAN_MARK_ADD | FAN_MARK_MOUNT, mask, mount_fd, ".") ? errno : 0;
	/* Removed first: the patched kernel fails a mount closed when a
	 * pre-content group is released with its marks still on it. */
	fanotify_mark(group, FAN_MARK_FLUSH | FAN_MARK_MOUNT, 0, AT_FDCWD, NULL);
	close(group);
	return rc;
}

gboolean hsm_kernel_probe(int mount_fd, HsmKernelCaps *caps, GError **err)
{
	int rc = try_mark(mount_fd, FAN_PRE_ACCESS);

	caps->dir_readdir = caps->dir_lookup = caps->page_faults = FALSE;
	if (rc == EPERM) {
		g_set_error(err, HSM_ERROR, EPERM, "fanotify mode needs root (CAP_SYS_ADMIN)");
		return FALSE;
	}
	if (rc == EOPNOTSUPP) {
		g_set_error(err, HSM_ERROR, EOPNOTSUPP,
			    "the cache's file system does not support fanotify pre-content "
			    "events; put --cache-dir on ext4, xfs or btrfs");
		return FALSE;
	}
	if (rc) {
		g_set_error(err, HSM_ERROR, rc,
			    "this kernel has no fanotify pre-content events (FAN_PRE_ACCESS: %s); "
			    "fanotify mode needs Linux 6.14+ or the kernel-patches/ series",
			    g_strerror(rc));
		return FALSE;
	}
	caps->dir_readdir = try_mark(mount_fd, FAN_PRE_ACCESS | FAN_ONDIR) == 0;
	caps->dir_lookup = caps->dir_readdir && try_mark(mount_fd, FAN_HSM_LOOKUP | FAN_ONDIR) == 0;
	caps->page_faults = try_mark(mount_fd, FAN_PRE_ACCESS | FAN_PRE_FAULT) == 0;
	return TRUE;
}

const char *hsm_kernel_caps_describe(const HsmKernelCaps *caps)
{
	if (caps->dir_lookup)
		return "directories are populated before readdir and before lookups "
		       "(patched kernel): any path can be opened directly";
	if (caps->dir_readdir)
		return "directories are populated before readdir; a path inside a directory "
		       "that was never listed is not found";
	return "directories are populated when opened (mainline kernel: no readdir or lookup "
	       "events); a path inside a directory that was never listed is not found, so "
	       "list (ls) each directory on the way first";
}
