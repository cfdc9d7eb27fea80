// SPDX-License-Identifier: GPL-2.0
/*
 * t_truncate - truncate(2) and ftruncate(2) that are refused raise no
 * FAN_PRE_ACCESS; permitted ones raise it with the page of the new size.
 *
 * The pre-content event of truncate makes the listener fill the file, which
 * may mean fetching all of it.  A caller that may not truncate the file must
 * get its error without that.  With a filesystem mark for FAN_PRE_ACCESS on
 * a sparse file, checks:
 *  - truncate() by a user without write permission: EACCES, no event;
 *  - truncate() through a read-only bind mount: EROFS, no event;
 *  - truncate() of an append-only file: EPERM, no event;
 *  - ftruncate() of a file opened read-only: EINVAL, no event;
 *  - truncate() by a user with write permission, and by root, and
 *    ftruncate(): done, one event with the page of the new size.
 * Runs on mainline (6.14+) too, which raises the event of a truncate() that
 * fails with EROFS on a read-only bind mount or with EPERM on an append-only
 * file: those two checks are skipped there.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_SIZE (64 * 1024)

static const char *dir;		/* the directory of the files */
static const char *ro_dir;	/* a read-only bind mount of dir */
static int *result_errno;	/* shared */

struct trunc {
	const char *path;	/* relative to the directory of cwd */
	const char *cwd;
	loff_t length;
	bool as_nobody;
	bool by_fd;
};

static int child_truncate(void *arg)
{
	const struct trunc *t = arg;
	int fd;

	*result_errno = 0;
	/* Change directory first: nobody may not search the parents */
	if (chdir(t->cwd))
		return 1;
	if (t->as_nobody &&
	    (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
		return 1;
	if (t->by_fd) {
		fd = open(t->path, O_RDONLY);
		if (fd < 0)
			return 1;
		if (ftruncate(fd, t->length))
			*result_errno = errno;
		close(fd);
		return 0;
	}
	if (truncate(t->path, t->length))
		*result_errno = errno;
	return 0;
}

static int child_ftruncate_rw(void *arg)
{
	const struct trunc *t = arg;
	int fd;

	*result_errno = 0;
	if (chdir(t->cwd))
		return 1;
	fd = open(t->path, O_RDWR);
	if (fd < 0)
		return 1;
	if (ftruncate(fd, t->length))
		*result_errno = errno;
	close(fd);
	return 0;
}

static void make_file(const char *name, mode_t mode)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	make_sparse(path, FILE_SIZE);
	if (chmod(path, mode))
		t_fatal("chmod %s", path);
}

static off_t size_of(const char *name)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) ? -1 : st.st_size;
}

/* A refused truncate: the errno, no event, the size unchanged. */
static void check_refused(struct listener *l, struct trunc *t, int want,
			  const char *what)
{
	int st;

	listener_clear(l);
	st = run_child(child_truncate, t, 30000);
	t_ok(st == 0 && *result_errno == want && listener_nevents(l) == 0 &&
	     size_of(t->path) == FILE_SIZE,
	     "%s: %s (want %s), %d events, size %lld", what,
	     st ? "child failed" : strerror(*result_errno), strerror(want),
	     listener_nevents(l), (long long)size_of(t->path));
}

/* A permitted truncate: done, one event with the page of the new size. */
static void check_done(struct listener *l, struct trunc *t,
		       int (*fn)(void *), const char *what)
{
	uint64_t want_off = (uint64_t)t->length / PAGE * PAGE;
	struct hsm_event ev;
	int st;

	listener_clear(l);
	st = run_child(fn, t, 30000);
	t_ok(st == 0 && *result_errno == 0 && size_of(t->path) == t->length,
	     "%s: %s, size %lld", what,
	     st ? "child failed" : strerror(*result_errno),
	     (long long)size_of(t->path));
	if (listener_nevents(l) != 1 || !listener_event(l, 0, &ev)) {
		t_ok(false, "%s: one event (%d)", what, listener_nevents(l));
		return;
	}
	t_ok(ev.mask == FAN_PRE_ACCESS && ev.has_range &&
	     ev.offset == want_off && ev.count == PAGE,
	     "%s: FAN_PRE_ACCESS [%llu, +%llu) (want [%llu, +%llu))", what,
	     (unsigned long long)ev.offset, (unsigned long long)ev.count,
	     (unsigned long long)want_off, (unsigned long long)PAGE);
}

static void cleanup(void)
{
	umount2(ro_dir, MNT_DETACH);
}

int main(int argc, char **argv)
{
	struct trunc t = { 0 };
	struct listener *l;
	char path[4096];
	int fd, flags;

	t_init("t_truncate", argc, argv, 180);
	dir = t_path("trunc.d");
	ro_dir = t_path("trunc.ro");
	if ((mkdir(dir, 0755) && errno != EEXIST) ||
	    (mkdir(ro_dir, 0755) && errno != EEXIST))
		t_fatal("mkdir");
	result_errno = shared_alloc(sizeof(*result_errno));
	make_file("private", 0644);
	make_file("public", 0666);
	make_file("append", 0666);
	make_file("rw", 0644);
	make_file("rofile", 0666);

	/* The read-only bind mount shows the same files */
	if (mount(dir, ro_dir, NULL, MS_BIND, NULL) ||
	    mount(NULL, ro_dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL))
		t_fatal("read-only bind mount of %s on %s", dir, ro_dir);
	t_on_timeout(cleanup);

	/* Append-only (as root, before the mark: no event) */
	snprintf(path, sizeof(path), "%s/append", dir);
	fd = open(path, O_RDONLY);
	flags = 0;
	if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) ||
	    (flags |= FS_APPEND_FL, ioctl(fd, FS_IOC_SETFLAGS, &flags)))
		t_fatal("chattr +a %s", path);
	close(fd);

	l = listener_start(NULL, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
		 FAN_PRE_ACCESS, dir))
		t_fatal("filesystem mark");

	t.cwd = dir;
	t.length = 5000;

	t.path = "private";
	t.as_nobody = true;
	check_refused(l, &t, EACCES, "truncate() without write permission");

	t.path = "rofile";
	t.as_nobody = false;
	t.cwd = ro_dir;
	if (hsm_kernel)
		check_refused(l, &t, EROFS,
			      "truncate() through a read-only bind mount");
	else
		t_skip("mainline raises the event before EROFS");
	t.cwd = dir;

	t.path = "append";
	if (hsm_kernel)
		check_refused(l, &t, EPERM,
			      "truncate() of an append-only file");
	else
		t_skip("mainline raises the event before EPERM");

	t.path = "private";
	t.as_nobody = true;
	t.by_fd = true;
	check_refused(l, &t, EINVAL, "ftruncate() of a read-only fd");
	t.by_fd = false;

	t.path = "public";
	t.as_nobody = true;
	check_done(l, &t, child_truncate,
		   "truncate() by a user with write permission");

	t.path = "private";
	t.as_nobody = false;
	t.length = 9000;
	check_done(l, &t, child_truncate, "truncate() by root");

	t.path = "rw";
	t.length = 20000;
	check_done(l, &t, child_ftruncate_rw, "ftruncate()");

	listener_stop(l);

	/* Let the fixture remove the files */
	flags &= ~FS_APPEND_FL;
	fd = open(t_path("trunc.d/append"), O_RDONLY);
	if (fd < 0 || ioctl(fd, FS_IOC_SETFLAGS, &flags))
		t_note("cannot clear the append-only flag");
	if (fd >= 0)
		close(fd);
	if (umount2(ro_dir, 0))
		t_note("umount %s failed", ro_dir);
	return t_done();
}
