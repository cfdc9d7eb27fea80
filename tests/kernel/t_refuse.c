// SPDX-License-Identifier: GPL-2.0
/*
 * t_refuse - misuse of the pre-content API is refused as in mainline.
 *
 * - without CAP_SYS_ADMIN, FAN_CLASS_PRE_CONTENT groups: EPERM;
 * - FAN_PRE_ACCESS from a FAN_CLASS_NOTIF or FAN_CLASS_CONTENT group: EINVAL;
 * - FAN_CLASS_PRE_CONTENT with a FAN_REPORT_*FID flag: EINVAL;
 * - FAN_PRE_ACCESS on tmpfs (no opt-in): EOPNOTSUPP, for inode, mount and
 *   filesystem marks; on a fifo: EINVAL;
 * - FAN_MARK_EVICTABLE on a mount mark: EINVAL;
 * - FAN_PRE_ACCESS | FAN_ONDIR: EINVAL on mainline, allowed on httphsm;
 * - FAN_HSM_LOOKUP (httphsm): EINVAL on mainline (unknown bit); on httphsm
 *   EINVAL for the wrong class, ENOTDIR on a file, EOPNOTSUPP on tmpfs.
 * Runs on mainline (6.14+) too.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file, *dir, *fifo, *tmpfs_dir;

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "success";
	case EPERM: return "EPERM";
	case EINVAL: return "EINVAL";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOTDIR: return "ENOTDIR";
	case EEXIST: return "EEXIST";
	default: return strerror(e);
	}
}

static int init_err(unsigned flags)
{
	int fd = fanotify_init(flags | FAN_CLOEXEC, O_RDONLY);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static void expect_mark(int fan, unsigned flags, uint64_t mask,
			const char *path, int want, const char *what)
{
	int got = -mark(fan, FAN_MARK_ADD | flags, mask, path);

	t_ok(got == want, "%s: %s (want %s)", what, err_name(got),
	     err_name(want));
	if (!got)
		fanotify_mark(fan, FAN_MARK_REMOVE | flags, mask, AT_FDCWD,
			      path);
}

static int *unpriv_result;

static int unprivileged(void *a)
{
	(void)a;
	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		return 2;
	unpriv_result[0] = init_err(FAN_CLASS_PRE_CONTENT);
	unpriv_result[1] = init_err(FAN_CLASS_CONTENT);
	/* An unprivileged notification group is allowed, not pre-content */
	unpriv_result[2] = init_err(FAN_CLASS_NOTIF | FAN_REPORT_FID);
	if (!unpriv_result[2]) {
		int fan = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, 0);

		unpriv_result[3] = -mark(fan, FAN_MARK_ADD, FAN_PRE_ACCESS,
					 "/tmp");
	}
	return 0;
}

int main(int argc, char **argv)
{
	int notif, content, pre, st;

	t_init("t_refuse", argc, argv, 60);
	file = t_path("refuse.dat");
	dir = t_path("refuse.d");
	fifo = t_path("refuse.fifo");
	tmpfs_dir = t_path("refuse.tmpfs");
	make_sparse(file, 4096);
	mkdir(dir, 0755);
	unlink(fifo);
	if (mkfifo(fifo, 0644))
		t_fatal("mkfifo");
	mkdir(tmpfs_dir, 0755);
	if (mount("tmpfs", tmpfs_dir, "tmpfs", 0, "size=1m"))
		t_fatal("mount tmpfs on %s", tmpfs_dir);

	/* Privileges */
	unpriv_result = shared_alloc(4 * sizeof(int));
	st = run_child(unprivileged, NULL, 10000);
	t_ok(st == 0 && unpriv_result[0] == EPERM,
	     "unprivileged fanotify_init(FAN_CLASS_PRE_CONTENT): %s",
	     err_name(unpriv_result[0]));
	t_ok(st == 0 && unpriv_result[1] == EPERM,
	     "unprivileged fanotify_init(FAN_CLASS_CONTENT): %s",
	     err_name(unpriv_result[1]));
	if (st == 0 && unpriv_result[2] == 0)
		t_ok(unpriv_result[3] == EINVAL,
		     "unprivileged FAN_CLASS_NOTIF group, FAN_PRE_ACCESS "
		     "mark: %s", err_name(unpriv_result[3]));

	/* fanotify_init flags */
	t_ok(init_err(FAN_CLASS_PRE_CONTENT | FAN_REPORT_FID) == EINVAL,
	     "FAN_CLASS_PRE_CONTENT | FAN_REPORT_FID refused with EINVAL");
	t_ok(init_err(FAN_CLASS_PRE_CONTENT | FAN_REPORT_DFID_NAME) == EINVAL,
	     "FAN_CLASS_PRE_CONTENT | FAN_REPORT_DFID_NAME refused with "
	     "EINVAL");

	notif = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC, O_RDONLY);
	content = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY);
	pre = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC, O_RDWR);
	if (notif < 0 || content < 0 || pre < 0)
		t_fatal("fanotify_init");

	/* Classes */
	expect_mark(notif, 0, FAN_PRE_ACCESS, file, EINVAL,
		    "FAN_CLASS_NOTIF, FAN_PRE_ACCESS");
	expect_mark(content, 0, FAN_PRE_ACCESS, file, EINVAL,
		    "FAN_CLASS_CONTENT, FAN_PRE_ACCESS");
	expect_mark(pre, 0, FAN_PRE_ACCESS, file, 0,
		    "FAN_CLASS_PRE_CONTENT, FAN_PRE_ACCESS on a file");
	expect_mark(pre, FAN_MARK_MOUNT, FAN_PRE_ACCESS, base_dir, 0,
		    "FAN_CLASS_PRE_CONTENT, FAN_PRE_ACCESS mount mark");
	expect_mark(pre, FAN_MARK_FILESYSTEM, FAN_PRE_ACCESS, base_dir, 0,
		    "FAN_CLASS_PRE_CONTENT, FAN_PRE_ACCESS filesystem mark");
	expect_mark(pre, 0, FAN_PRE_ACCESS | FAN_ACCESS_PERM | FAN_OPEN_PERM,
		    file, 0, "FAN_PRE_ACCESS with content permission events");

	/* Objects and file systems */
	expect_mark(pre, 0, FAN_PRE_ACCESS, tmpfs_dir, EOPNOTSUPP,
		    "tmpfs, FAN_PRE_ACCESS inode mark");
	expect_mark(pre, FAN_MARK_MOUNT, FAN_PRE_ACCESS, tmpfs_dir,
		    EOPNOTSUPP, "tmpfs, FAN_PRE_ACCESS mount mark");
	expect_mark(pre, FAN_MARK_FILESYSTEM, FAN_PRE_ACCESS, tmpfs_dir,
		    EOPNOTSUPP, "tmpfs, FAN_PRE_ACCESS filesystem mark");
	expect_mark(pre, 0, FAN_PRE_ACCESS, fifo, EINVAL,
		    "fifo, FAN_PRE_ACCESS");
	expect_mark(pre, FAN_MARK_MOUNT | FAN_MARK_EVICTABLE, FAN_PRE_ACCESS,
		    base_dir, EINVAL, "FAN_MARK_EVICTABLE on a mount mark");

	/* Directories */
	expect_mark(pre, 0, FAN_PRE_ACCESS | FAN_EVENT_ON_CHILD, dir, 0,
		    "FAN_PRE_ACCESS | FAN_EVENT_ON_CHILD on a directory");
	expect_mark(pre, 0, FAN_PRE_ACCESS | FAN_ONDIR, dir,
		    hsm_kernel ? 0 : EINVAL, "FAN_PRE_ACCESS | FAN_ONDIR");
	if (mark(pre, FAN_MARK_ADD, FAN_OPEN | FAN_ONDIR, dir) == 0) {
		expect_mark(pre, 0, FAN_PRE_ACCESS, dir,
			    hsm_kernel ? 0 : EEXIST,
			    "FAN_PRE_ACCESS on a mark that has FAN_ONDIR");
		fanotify_mark(pre, FAN_MARK_REMOVE, FAN_OPEN | FAN_ONDIR,
			      AT_FDCWD, dir);
	}

	/* The lookup event */
	if (hsm_kernel) {
		expect_mark(pre, 0, FAN_HSM_LOOKUP, dir, 0,
			    "FAN_HSM_LOOKUP on a directory");
		expect_mark(pre, FAN_MARK_FILESYSTEM, FAN_HSM_LOOKUP,
			    base_dir, 0, "FAN_HSM_LOOKUP filesystem mark");
		expect_mark(pre, 0, FAN_HSM_LOOKUP, file, ENOTDIR,
			    "FAN_HSM_LOOKUP on a regular file");
		expect_mark(content, 0, FAN_HSM_LOOKUP, dir, EINVAL,
			    "FAN_CLASS_CONTENT, FAN_HSM_LOOKUP");
		expect_mark(notif, 0, FAN_HSM_LOOKUP, dir, EINVAL,
			    "FAN_CLASS_NOTIF, FAN_HSM_LOOKUP");
		expect_mark(pre, 0, FAN_HSM_LOOKUP, tmpfs_dir, EOPNOTSUPP,
			    "tmpfs, FAN_HSM_LOOKUP");
	} else {
		expect_mark(pre, 0, FAN_HSM_LOOKUP, dir, EINVAL,
			    "FAN_HSM_LOOKUP is unknown to mainline");
	}

	close(notif);
	close(content);
	fan_close(pre);
	umount(tmpfs_dir);
	return t_done();
}
