// SPDX-License-Identifier: GPL-2.0
/*
 * t_freeze - pre-content events are raised before sb write access is taken,
 * so a listener that fills a file cannot deadlock against a freeze.
 *
 * A copier copies a file whose content is not present yet (holes) into a
 * file of the same file system: copy_file_range, sendfile, splice through a
 * pipe, FICLONE (when the file system can clone) and read+write.  Both files
 * are marked.  For every event the handler stops, and the test freezes the
 * file system (FIFREEZE, like fsfreeze -f) while the copier waits for the
 * answer.  The freeze must complete: if the copier held sb write access
 * (file_start_write) while waiting, the freeze would wait for it, and the
 * handler's write of the content would then wait for the freeze: deadlock.
 * Then the handler writes the content while the fs is frozen (the write
 * blocks), the test thaws, and the copy must complete with that content.
 * Every wait has a timeout; on the global timeout the fs is thawed.
 * Runs on mainline (6.14+) too.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILE_SIZE (256 * 1024)

static const char *src, *dst;
static int *copy_errno;		/* shared */

/* Handler state, protected by lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int go;			/* events up to this number may proceed */
static int seen;		/* events that reached the handler */

static uint32_t hold_then_fill(struct listener *l, struct hsm_event *ev,
			       void *ctx)
{
	static unsigned char buf[FILE_SIZE];
	struct timespec ts;
	struct stat st;
	int me;

	(void)l;
	(void)ctx;
	pthread_mutex_lock(&lock);
	me = ++seen;
	pthread_cond_broadcast(&cond);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	while (go < me)
		if (pthread_cond_timedwait(&cond, &lock, &ts))
			break;
	pthread_mutex_unlock(&lock);

	/* Fill the source; the destination is overwritten by the copy */
	if (strcmp(ev->path, src) || !ev->has_range || fstat(ev->fd, &st))
		return FAN_ALLOW;
	if (ev->offset + ev->count > (uint64_t)st.st_size)
		ev->count = st.st_size > (off_t)ev->offset ?
			st.st_size - ev->offset : 0;
	pattern_fill(buf, ev->offset, ev->count);
	/* Blocks while the fs is frozen, until the test thaws it */
	if (pwrite(ev->fd, buf, ev->count, ev->offset) != (ssize_t)ev->count)
		return FAN_DENY_ERRNO(EIO);
	return FAN_ALLOW;
}

static int result(ssize_t done)
{
	*copy_errno = done < 0 ? errno : 0;
	return done == FILE_SIZE ? 0 : 1;
}

static int do_copy_file_range(void *a)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY);
	loff_t off_in = 0, off_out = 0;

	(void)a;
	if (in < 0 || out < 0)
		return 2;
	return result(copy_file_range(in, &off_in, out, &off_out, FILE_SIZE,
				      0));
}

static int do_sendfile(void *a)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY);
	off_t off = 0;

	(void)a;
	if (in < 0 || out < 0)
		return 2;
	return result(sendfile(out, in, &off, FILE_SIZE));
}

static int do_splice(void *a)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY), p[2];
	loff_t off_in = 0, off_out = 0;
	ssize_t total = 0;

	(void)a;
	if (in < 0 || out < 0 || pipe(p))
		return 2;
	while (total < FILE_SIZE) {
		ssize_t n = splice(in, &off_in, p[1], NULL, FILE_SIZE - total,
				   0);

		if (n <= 0)
			return result(-1);
		while (n > 0) {
			ssize_t m = splice(p[0], NULL, out, &off_out, n, 0);

			if (m <= 0)
				return result(-1);
			n -= m;
			total += m;
		}
	}
	return result(total);
}

static int do_ficlone(void *a)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY);
	struct file_clone_range r = { .src_length = FILE_SIZE };

	(void)a;
	if (in < 0 || out < 0)
		return 2;
	/* An explicit length: mainline reports FICLONE's "to EOF" as 0 */
	r.src_fd = in;
	if (ioctl(out, FICLONERANGE, &r))
		return result(-1);
	return result(FILE_SIZE);
}

static int do_read_write(void *a)
{
	static unsigned char buf[65536];
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY);
	ssize_t n, total = 0;

	(void)a;
	if (in < 0 || out < 0)
		return 2;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(out, buf, n) != n)
			return result(-1);
		total += n;
	}
	return result(n < 0 ? -1 : total);
}

/* Wait until event number n waits in the handler, or the copier exits */
static bool wait_event_n(int n, int timeout_ms, pid_t copier,
			 int *copier_status)
{
	int64_t deadline = now_ms() + timeout_ms;
	bool got;

	for (;;) {
		int status;

		pthread_mutex_lock(&lock);
		got = seen >= n;
		pthread_mutex_unlock(&lock);
		if (got)
			return true;
		if (waitpid(copier, &status, WNOHANG) == copier) {
			*copier_status = WIFEXITED(status) ?
				WEXITSTATUS(status) : CHILD_SIGNALED;
			return false;
		}
		if (now_ms() > deadline)
			return false;
		sleep_ms(5);
	}
}

/* Let event number n (and the ones before) proceed */
static void release(int n)
{
	pthread_mutex_lock(&lock);
	go = n;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static bool check_dst(void)
{
	static unsigned char buf[FILE_SIZE];
	int fd = open(dst, O_RDONLY);
	bool ok = fd >= 0 && read(fd, buf, FILE_SIZE) == FILE_SIZE &&
		pattern_check(buf, 0, FILE_SIZE) < 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

struct copy_case {
	const char *name;
	int (*fn)(void *);
};

static const struct copy_case cases[] = {
	{ "copy_file_range", do_copy_file_range },
	{ "sendfile", do_sendfile },
	{ "splice through a pipe", do_splice },
	{ "FICLONERANGE", do_ficlone },
	{ "read and write", do_read_write },
};

static void run_case(struct listener *l, const struct copy_case *c)
{
	int copier_status = CHILD_TIMEOUT, events = 0, froze = 0;
	bool deadlock = false;
	pid_t copier;

	make_sparse(src, FILE_SIZE);
	make_sparse(dst, 0);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, src) ||
	    mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, dst))
		t_fatal("mark");
	pthread_mutex_lock(&lock);
	go = seen = 0;
	pthread_mutex_unlock(&lock);
	*copy_errno = 0;

	copier = start_child(c->fn, NULL);
	while (wait_event_n(events + 1, 15000, copier, &copier_status)) {
		pid_t fpid = start_child(freezer, NULL);
		int fst = wait_child(fpid, 15000);

		events++;
		if (fst != 0) {
			/*
			 * The freeze waits for a writer: the copier holds sb
			 * write access while it waits for the listener, and
			 * the listener's write would wait for the freeze.
			 * Let everything go: the freeze completes once the
			 * copier is done, then thaw.
			 */
			deadlock = true;
			release(1 << 30);
			break;
		}
		froze++;
		/* The handler's write now blocks on the frozen fs */
		release(events);
		sleep_ms(200);
		if (thaw())
			t_fatal("FITHAW");
	}
	if (copier_status == CHILD_TIMEOUT)
		copier_status = wait_child(copier, 30000);
	thaw();

	if (c->fn == do_ficlone && events == 0 &&
	    (*copy_errno == EOPNOTSUPP || *copy_errno == EXDEV ||
	     *copy_errno == EINVAL)) {
		t_skip("%s: not supported by this file system (%s)", c->name,
		       strerror(*copy_errno));
		goto out;
	}
	t_ok(!deadlock, "%s: the fs freezes while the copier waits for the "
	     "listener (%d of %d events)", c->name, froze, events);
	t_ok(events > 0, "%s: raised pre-content events (%d)", c->name,
	     events);
	t_ok(copier_status == 0, "%s: completes (status %d%s, %s)", c->name,
	     copier_status, copier_status == CHILD_TIMEOUT ? " = timeout" : "",
	     *copy_errno ? strerror(*copy_errno) : "no error");
	if (!deadlock && copier_status == 0)
		t_ok(check_dst(), "%s: the copy has the content the listener "
		     "wrote while the fs was frozen", c->name);
out:
	fanotify_mark(listener_fd(l), FAN_MARK_FLUSH, 0, AT_FDCWD, NULL);
}

int main(int argc, char **argv)
{
	struct listener *l;

	t_init("t_freeze", argc, argv, 400);
	src = t_path("freeze.src");
	dst = t_path("freeze.dst");
	copy_errno = shared_alloc(sizeof(*copy_errno));
	freeze_setup();

	l = listener_start(hold_then_fill, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(l, &cases[i]);

	/* Let a handler still waiting go before the listener stops */
	release(1 << 30);
	listener_stop(l);
	thaw();
	return t_done();
}
