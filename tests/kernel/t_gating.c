// SPDX-License-Identifier: GPL-2.0
/*
 * t_gating - lookups on a file system watched by inotify only, and the
 * count of pre-content watched objects as marks come and go (httphsm
 * kernel).
 *
 * The lookup hook and the other pre-content hooks do nothing unless an
 * object of the file system has a mark of a pre-content group: each super
 * block counts such objects as marks are added, changed and removed.  An
 * inotify watch does not count.  Checks:
 *  - with only an inotify watch on a directory: a missing name is ENOENT,
 *    a new file is found, and inotify reports the creation;
 *  - then for an inode mark, a mount mark and a filesystem mark of a
 *    pre-content group: a dcache miss raises FAN_HSM_LOOKUP while the mark
 *    is there, and nothing once it is removed (FAN_MARK_REMOVE, or
 *    FAN_MARK_FLUSH for the filesystem mark);
 *  - an object that keeps a mark of a notification group after its
 *    pre-content mark is removed raises no more lookup events, and gets
 *    them again once a pre-content mark is added back;
 *  - closing the pre-content group stops the events, and inotify still
 *    works.
 * Whether the hook calls into fsnotify at all is not visible from user
 * space; the checks show that the count follows the marks.
 * On mainline the lookup event does not exist: skipped.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;
static int *result_errno;	/* shared */
static int serial;

static int child_stat(void *arg)
{
	struct stat st;

	*result_errno = stat(arg, &st) ? errno : 0;
	return 0;
}

/* stat() of a name that is not in the dcache; returns its errno. */
static int stat_new_name(struct listener *l, int *nevents)
{
	char path[4096];
	int st;

	snprintf(path, sizeof(path), "%s/missing-%d", dir, ++serial);
	listener_clear(l);
	st = run_child(child_stat, path, 30000);
	*nevents = listener_count(l, FAN_HSM_LOOKUP);
	return st ? -1 : *result_errno;
}

static const char *errname(int err)
{
	return err >= 0 ? strerror(err) : "child failed";
}

static bool inotify_saw(int in, const char *name)
{
	char buf[4096] __attribute__((aligned(8)));
	struct pollfd pfd = { .fd = in, .events = POLLIN };
	ssize_t len;

	while (poll(&pfd, 1, 2000) > 0) {
		len = read(in, buf, sizeof(buf));
		if (len <= 0)
			return false;
		for (char *p = buf; p < buf + len;) {
			struct inotify_event *e = (struct inotify_event *)p;

			if (e->len && !strcmp(e->name, name) &&
			    (e->mask & IN_CREATE))
				return true;
			p += sizeof(*e) + e->len;
		}
	}
	return false;
}

static void check_mark(struct listener *l, unsigned int type,
		       const char *what)
{
	int fan = listener_fd(l), err, n;

	if (mark(fan, FAN_MARK_ADD | type, FAN_HSM_LOOKUP, dir))
		t_fatal("%s", what);
	err = stat_new_name(l, &n);
	t_ok(err == ENOENT && n == 1, "%s: a dcache miss raises an event "
	     "(%s, %d events)", what, errname(err), n);

	if (type == FAN_MARK_FILESYSTEM)
		err = fanotify_mark(fan, FAN_MARK_FLUSH | type, 0, AT_FDCWD,
				    dir);
	else
		err = mark(fan, FAN_MARK_REMOVE | type, FAN_HSM_LOOKUP, dir);
	if (err)
		t_fatal("remove %s", what);
	err = stat_new_name(l, &n);
	t_ok(err == ENOENT && n == 0, "%s removed: no event (%s, %d events)",
	     what, errname(err), n);
}

int main(int argc, char **argv)
{
	struct listener *l;
	char path[4096];
	int in, notif, err, n;

	t_init("t_gating", argc, argv, 180);
	if (!hsm_kernel) {
		t_skip("FAN_HSM_LOOKUP needs the httphsm kernel");
		return t_done();
	}
	dir = t_path("gating.d");
	if (mkdir(dir, 0755) && errno != EEXIST)
		t_fatal("mkdir %s", dir);
	result_errno = shared_alloc(sizeof(*result_errno));

	/* inotify only */
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, dir, IN_CREATE | IN_OPEN) < 0)
		t_fatal("inotify watch on %s", dir);
	snprintf(path, sizeof(path), "%s/missing-0", dir);
	*result_errno = 0;
	t_ok(run_child(child_stat, path, 30000) == 0 &&
	     *result_errno == ENOENT,
	     "inotify only: a missing name is ENOENT (%s)",
	     strerror(*result_errno));
	snprintf(path, sizeof(path), "%s/created", dir);
	make_sparse(path, 100);
	t_ok(inotify_saw(in, "created"), "inotify only: IN_CREATE reported");
	t_ok(run_child(child_stat, path, 30000) == 0 && *result_errno == 0,
	     "inotify only: the new file is found (%s)",
	     strerror(*result_errno));

	/* Pre-content marks come and go */
	l = listener_start(NULL, NULL);
	check_mark(l, FAN_MARK_INODE, "inode mark");
	check_mark(l, FAN_MARK_MOUNT, "mount mark");
	check_mark(l, FAN_MARK_FILESYSTEM, "filesystem mark");

	/* A notification group keeps the connector of the directory */
	notif = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC, O_RDONLY);
	if (notif < 0 || mark(notif, FAN_MARK_ADD, FAN_OPEN | FAN_ONDIR, dir))
		t_fatal("notification group mark on %s", dir);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_HSM_LOOKUP, dir))
		t_fatal("inode mark");
	err = stat_new_name(l, &n);
	t_ok(err == ENOENT && n == 1, "inode mark next to a notification "
	     "mark: event (%d)", n);
	if (mark(listener_fd(l), FAN_MARK_REMOVE, FAN_HSM_LOOKUP, dir))
		t_fatal("remove inode mark");
	err = stat_new_name(l, &n);
	t_ok(err == ENOENT && n == 0, "pre-content mark removed, "
	     "notification mark kept: no event (%d)", n);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_HSM_LOOKUP, dir))
		t_fatal("inode mark again");
	err = stat_new_name(l, &n);
	t_ok(err == ENOENT && n == 1, "pre-content mark added back: "
	     "event (%d)", n);

	/* Closing the group removes its marks */
	listener_stop(l);
	close(notif);
	snprintf(path, sizeof(path), "%s/created-2", dir);
	make_sparse(path, 100);
	t_ok(inotify_saw(in, "created-2"), "group closed: inotify still "
	     "reports IN_CREATE");
	snprintf(path, sizeof(path), "%s/missing-last", dir);
	t_ok(run_child(child_stat, path, 30000) == 0 &&
	     *result_errno == ENOENT, "group closed: a missing name is "
	     "ENOENT (%s)", strerror(*result_errno));
	close(in);
	return t_done();
}
