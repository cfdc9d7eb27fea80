// SPDX-License-Identifier: GPL-2.0
/*
 * t_orphan - a mount whose pre-content listener died serves no holes
 * (httphsm kernel, patch 0012).
 *
 * A listener process marks a bind mount for FAN_PRE_ACCESS, receives the
 * event of a reader and is killed before it answers.  On the httphsm kernel
 * the waiting reader gets EIO, and so does every later read or listing
 * through that mount, while the same file read through its other mount is
 * unaffected; a new pre-content listener marking the mount takes over; a
 * listener that removes its marks before closing leaves nothing behind; a
 * group closed with its mark in place fails the mount until it is unmounted.
 * Mainline lets the pending read through (it reads the hole as zeros) and
 * every read after: reported, not checked.
 */
#include "hsmtest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *src_dir, *mnt_dir, *src_file, *mnt_file;
static pid_t listener_pid;

struct access_result {
	int err;		/* errno of the access, 0 on success */
	bool zeros;		/* a read returned only zero bytes */
};
static struct access_result *result;	/* shared with the children */

static int read_mnt_file(void *path)
{
	unsigned char buf[10];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0) {
		result->err = errno;
		return 0;
	}
	n = pread(fd, buf, sizeof(buf), 0);
	result->err = n < 0 ? errno : 0;
	result->zeros = n == sizeof(buf);
	for (ssize_t i = 0; i < n; i++)
		result->zeros &= buf[i] == 0;
	close(fd);
	return 0;
}

static int list_dir(void *path)
{
	DIR *d = opendir(path);

	if (!d) {
		result->err = errno;
		return 0;
	}
	errno = 0;
	while (readdir(d))
		;
	result->err = errno;
	closedir(d);
	return 0;
}

/* A new pre-content group with a FAN_PRE_ACCESS mark on the bind mount,
 * or -1. */
static int group_marking_the_mount(void)
{
	int fan = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC,
				O_RDONLY | O_LARGEFILE);

	if (fan >= 0 && mark(fan, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_PRE_ACCESS,
			     mnt_dir)) {
		close(fan);
		return -1;
	}
	return fan;
}

/* Child: marks the mount, reports each event on the pipe, never answers. */
static int silent_listener(void *arg)
{
	int report = *(int *)arg;
	static _Alignas(8) char buf[4096];
	int fan = group_marking_the_mount();

	if (fan < 0)
		return 1;
	if (write(report, "r", 1) != 1)
		return 1;
	while (read(fan, buf, sizeof(buf)) > 0)
		if (write(report, "e", 1) != 1)
			return 1;
	return 1;
}

static bool wait_byte(int fd, char want)
{
	char c;

	return read(fd, &c, 1) == 1 && c == want;
}

static const char *err_name(int err)
{
	return err ? strerror(err) : "success";
}

/* Run fn(path) in a child; the result is in *result. */
static bool access_ok(int (*fn)(void *), const char *path)
{
	result->err = -1;
	result->zeros = false;
	return run_child(fn, (void *)path, 10000) == 0 && result->err >= 0;
}

static void killed_listener(void)
{
	int pipe_fd[2];
	pid_t reader;

	if (pipe(pipe_fd))
		t_fatal("pipe");
	listener_pid = start_child(silent_listener, &pipe_fd[1]);
	if (!wait_byte(pipe_fd[0], 'r'))
		t_fatal("the listener did not start");
	result->err = -1;
	reader = start_child(read_mnt_file, (void *)mnt_file);
	t_ok(wait_byte(pipe_fd[0], 'e'), "the listener got the reader's event");
	kill(listener_pid, SIGKILL);
	waitpid(listener_pid, NULL, 0);
	listener_pid = 0;
	close(pipe_fd[0]);
	close(pipe_fd[1]);
	if (!t_ok(wait_child(reader, 10000) == 0, "the waiting reader returned"))
		return;
	if (!hsm_kernel) {
		t_note("mainline: the waiting reader got %s%s",
		       err_name(result->err), result->zeros ? ", zeros" : "");
		return;
	}
	t_ok(result->err == EIO, "the waiting reader gets EIO (%s)",
	     err_name(result->err));
}

static void orphaned_mount_fails(void)
{
	bool ran = access_ok(read_mnt_file, mnt_file);

	if (!hsm_kernel) {
		t_note("mainline: a read after the death: %s%s",
		       err_name(result->err), result->zeros ? ", zeros" : "");
		return;
	}
	t_ok(ran && result->err == EIO, "a read after the death gets EIO (%s)",
	     err_name(result->err));
	ran = access_ok(list_dir, mnt_dir);
	t_ok(ran && result->err == EIO,
	     "listing the mount after the death gets EIO (%s)",
	     err_name(result->err));
	ran = access_ok(read_mnt_file, src_file);
	t_ok(ran && result->err == 0,
	     "the same file through its other mount reads (%s)",
	     err_name(result->err));
}

static uint32_t allow(struct listener *l, struct hsm_event *ev, void *ctx)
{
	(void)l;
	(void)ev;
	(void)ctx;
	return FAN_ALLOW;
}

static void new_listener_takes_over(void)
{
	struct listener *l = listener_start(allow, NULL);
	bool ran;

	if (mark(listener_fd(l), FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_PRE_ACCESS,
		 mnt_dir))
		t_fatal("mark the mount");
	ran = access_ok(read_mnt_file, mnt_file);
	t_ok(ran && result->err == 0 && listener_count(l, FAN_PRE_ACCESS) >= 1,
	     "a new listener takes over: read %s, %d event(s)",
	     err_name(result->err), listener_count(l, FAN_PRE_ACCESS));
	/* listener_stop() removes the marks before closing the group */
	listener_stop(l);
	ran = access_ok(read_mnt_file, mnt_file);
	t_ok(ran && result->err == 0,
	     "after an orderly exit (marks removed) reads go on (%s)",
	     err_name(result->err));
}

static void closed_with_marks_until_umount(void)
{
	int fan = group_marking_the_mount();
	bool ran;

	if (fan < 0)
		t_fatal("mark the mount");
	close(fan);
	ran = access_ok(read_mnt_file, mnt_file);
	if (hsm_kernel)
		t_ok(ran && result->err == EIO,
		     "a group closed with its mark in place: EIO (%s)",
		     err_name(result->err));
	if (umount(mnt_dir) || mount(src_dir, mnt_dir, NULL, MS_BIND, NULL))
		t_fatal("bind mount again");
	ran = access_ok(read_mnt_file, mnt_file);
	t_ok(ran && result->err == 0, "a new bind mount reads (%s)",
	     err_name(result->err));
}

static void on_timeout(void)
{
	if (listener_pid > 0)
		kill(listener_pid, SIGKILL);
	umount2(mnt_dir, MNT_DETACH);
}

int main(int argc, char **argv)
{
	t_init("t_orphan", argc, argv, 180);
	t_on_timeout(on_timeout);
	src_dir = t_path("src");
	mnt_dir = t_path("mnt");
	src_file = t_path("src/hole.dat");
	mnt_file = t_path("mnt/hole.dat");
	mkdir(src_dir, 0755);
	mkdir(mnt_dir, 0755);
	make_sparse(src_file, 65536);
	if (mount(src_dir, mnt_dir, NULL, MS_BIND, NULL))
		t_fatal("bind mount %s", src_dir);
	result = shared_alloc(sizeof(*result));

	killed_listener();
	orphaned_mount_fails();
	new_listener_takes_over();
	closed_with_marks_until_umount();

	if (umount(mnt_dir))
		t_fatal("umount %s", mnt_dir);
	return t_done();
}
