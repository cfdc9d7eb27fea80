// SPDX-License-Identifier: GPL-2.0
/*
 * t_deny - FAN_DENY_ERRNO(err) reaches the accessor as err.
 *
 * FAN_DENY_ERRNO(EIO) makes read(), mmap() and write() fail with EIO, plain
 * FAN_DENY with EPERM; errnos outside the allowed set, an errno with
 * FAN_ALLOW, and an errno from a group that is not FAN_CLASS_PRE_CONTENT are
 * refused by write() on the fanotify fd with EINVAL (as mainline).  Runs on
 * mainline (6.14+) too.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file;
static uint32_t answer;	/* response of the handler, set by main */
static int *child_errno;	/* shared */

static uint32_t respond(struct listener *l, struct hsm_event *ev, void *ctx)
{
	(void)l;
	(void)ev;
	(void)ctx;
	return answer;
}

static int do_read(void *a)
{
	char buf[16];
	int fd = open(file, O_RDONLY);

	(void)a;
	if (fd < 0)
		return 2;
	*child_errno = 0;
	if (pread(fd, buf, sizeof(buf), 0) < 0)
		*child_errno = errno;
	return 0;
}

static int do_mmap(void *a)
{
	int fd = open(file, O_RDONLY);

	(void)a;
	if (fd < 0)
		return 2;
	*child_errno = 0;
	if (mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED)
		*child_errno = errno;
	return 0;
}

static int do_write(void *a)
{
	int fd = open(file, O_WRONLY);

	(void)a;
	if (fd < 0)
		return 2;
	*child_errno = 0;
	if (pwrite(fd, "x", 1, 0) < 0)
		*child_errno = errno;
	return 0;
}

struct deny_case {
	const char *what;
	int (*fn)(void *);
	uint32_t response;
	int want_errno;		/* of the access; 0 = succeeds */
	int want_resp_errno;	/* of writing the response */
};

static const struct deny_case cases[] = {
	{ "read, FAN_DENY_ERRNO(EIO)", do_read, FAN_DENY_ERRNO(EIO), EIO, 0 },
	{ "read, FAN_DENY", do_read, FAN_DENY, EPERM, 0 },
	{ "read, FAN_DENY_ERRNO(EAGAIN)", do_read, FAN_DENY_ERRNO(EAGAIN),
	  EAGAIN, 0 },
	{ "mmap, FAN_DENY_ERRNO(EIO)", do_mmap, FAN_DENY_ERRNO(EIO), EIO, 0 },
	{ "write, FAN_DENY_ERRNO(ENOSPC)", do_write, FAN_DENY_ERRNO(ENOSPC),
	  ENOSPC, 0 },
	{ "write, FAN_DENY_ERRNO(EDQUOT)", do_write, FAN_DENY_ERRNO(EDQUOT),
	  EDQUOT, 0 },
	/* Refused responses: the helper then answers FAN_ALLOW */
	{ "read, FAN_DENY_ERRNO(ENOENT) refused", do_read,
	  FAN_DENY_ERRNO(ENOENT), 0, EINVAL },
	{ "read, FAN_DENY_ERRNO(EINVAL) refused", do_read,
	  FAN_DENY_ERRNO(EINVAL), 0, EINVAL },
	{ "read, FAN_ALLOW with an errno refused", do_read,
	  FAN_ALLOW | (EIO << FAN_ERRNO_SHIFT), 0, EINVAL },
	{ "read, unknown response bits refused", do_read,
	  FAN_ALLOW | 0x100, 0, EINVAL },
};

/* FAN_CLASS_CONTENT groups may not use an errno (mainline) */
static void content_class(void)
{
	int fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY);
	struct fanotify_event_metadata m;
	struct fanotify_response r;
	pid_t pid;
	int st, werr = 0;

	if (fan < 0)
		t_fatal("fanotify_init(FAN_CLASS_CONTENT)");
	if (mark(fan, FAN_MARK_ADD, FAN_ACCESS_PERM, file))
		t_fatal("mark FAN_ACCESS_PERM");
	pid = start_child(do_read, NULL);
	if (read(fan, &m, sizeof(m)) < (ssize_t)sizeof(m))
		t_fatal("read event");
	r.fd = m.fd;
	r.response = FAN_DENY_ERRNO(EIO);
	if (write(fan, &r, sizeof(r)) < 0)
		werr = errno;
	t_ok(werr == EINVAL, "FAN_CLASS_CONTENT: FAN_DENY_ERRNO(EIO) refused "
	     "with EINVAL (got %s)", werr ? strerror(werr) : "success");
	r.response = FAN_DENY;
	if (write(fan, &r, sizeof(r)) != sizeof(r))
		t_fatal("FAN_DENY");
	st = wait_child(pid, 10000);
	t_ok(st == 0 && *child_errno == EPERM, "FAN_CLASS_CONTENT: FAN_DENY "
	     "gives EPERM (%s)", strerror(*child_errno));
	close(m.fd);
	close(fan);
}

int main(int argc, char **argv)
{
	struct listener *l;

	t_init("t_deny", argc, argv, 120);
	file = t_path("deny.dat");
	make_sparse(file, 65536);
	child_errno = shared_alloc(sizeof(*child_errno));

	l = listener_start(respond, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, file))
		t_fatal("mark");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct deny_case *c = &cases[i];
		struct hsm_event ev;
		int st;

		listener_clear(l);
		answer = c->response;
		*child_errno = -1;
		st = run_child(c->fn, NULL, 10000);
		if (!t_ok(st == 0 && listener_event(l, 0, &ev),
			  "%s: accessor done (status %d)", c->what, st))
			continue;
		t_ok(ev.resp_errno == c->want_resp_errno,
		     "%s: writing the response: %s", c->what,
		     ev.resp_errno ? strerror(ev.resp_errno) : "success");
		t_ok(*child_errno == c->want_errno, "%s: accessor gets %s "
		     "(want %s)", c->what,
		     *child_errno ? strerror(*child_errno) : "success",
		     c->want_errno ? strerror(c->want_errno) : "success");
	}
	listener_stop(l);

	content_class();
	return t_done();
}
