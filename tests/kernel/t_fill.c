// SPDX-License-Identifier: GPL-2.0
/*
 * t_fill - content written by the listener in the handler is what the reader
 * sees.
 *
 * Files start as holes.  The handler of FAN_PRE_ACCESS writes the expected
 * content of the reported range through the event fd, then allows the
 * access.  Readers using read, pread, mmap (of a range never read before),
 * sendfile, splice and copy_file_range must see that content.  Runs on
 * mainline (6.14+) too.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

/* Not a multiple of the page size: the last page is partial */
#define FILE_SIZE (1024 * 1024 + 123)

static const char *file;
static const char *copy;
static int64_t *bad;	/* shared: first bad offset found by a child */

/* Fill the reported range, clipped to the file size, via the event fd */
static uint32_t fill(struct listener *l, struct hsm_event *ev, void *ctx)
{
	(void)l;
	(void)ctx;
	if (!(ev->mask & FAN_PRE_ACCESS) || !ev->has_range)
		return FAN_ALLOW;
	return pattern_write(ev->fd, ev->offset, ev->count) < 0 ?
		FAN_DENY_ERRNO(EIO) : FAN_ALLOW;
}

static int check(const unsigned char *buf, uint64_t off, size_t len)
{
	int64_t b = pattern_check(buf, off, len);

	if (b >= 0) {
		*bad = b;
		return 1;
	}
	return 0;
}

static int read_all(void *a)
{
	static unsigned char buf[65536];
	int fd = open(file, O_RDONLY);
	uint64_t off = 0;
	ssize_t n;

	(void)a;
	if (fd < 0)
		return 2;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (check(buf, off, n))
			return 1;
		off += n;
	}
	return n == 0 && off == FILE_SIZE ? 0 : 3;
}

static int pread_some(void *a)
{
	static unsigned char buf[10000];
	static const uint64_t offs[] = { 777777, 5, 4096 * 100 - 1,
					 FILE_SIZE - 50 };
	int fd = open(file, O_RDONLY);

	(void)a;
	if (fd < 0)
		return 2;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		size_t want = FILE_SIZE - offs[i] < sizeof(buf) ?
			FILE_SIZE - offs[i] : sizeof(buf);

		if (pread(fd, buf, sizeof(buf), offs[i]) != (ssize_t)want)
			return 3;
		if (check(buf, offs[i], want))
			return 1;
	}
	return 0;
}

static int mmap_read(void *a)
{
	int fd = open(file, O_RDONLY);
	const uint64_t off = 128 * 1024, len = 256 * 1024;
	unsigned char *p;

	(void)a;
	if (fd < 0)
		return 2;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
	if (p == MAP_FAILED)
		return 3;
	return check(p, off, len);
}

static int mmap_tail(void *a)
{
	int fd = open(file, O_RDONLY);
	const uint64_t off = FILE_SIZE / PAGE * PAGE;
	unsigned char *p;

	(void)a;
	if (fd < 0)
		return 2;
	p = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, off);
	if (p == MAP_FAILED)
		return 3;
	return check(p, off, FILE_SIZE - off);
}

static int check_copy(uint64_t off, uint64_t len)
{
	static unsigned char buf[65536];
	int fd = open(copy, O_RDONLY);
	uint64_t done = 0;

	if (fd < 0)
		return 2;
	while (done < len) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		if (pread(fd, buf, n, done) != (ssize_t)n)
			return 3;
		if (check(buf, off + done, n))
			return 1;
		done += n;
	}
	return 0;
}

static int do_sendfile(void *a)
{
	int in = open(file, O_RDONLY);
	int out = open(copy, O_WRONLY | O_TRUNC);
	off_t off = 300000;

	(void)a;
	if (in < 0 || out < 0)
		return 2;
	if (sendfile(out, in, &off, 200000) != 200000)
		return 3;
	return check_copy(300000, 200000);
}

static int do_splice(void *a)
{
	static unsigned char buf[65536];
	int in = open(file, O_RDONLY);
	loff_t off = 600001;
	int p[2];
	ssize_t n;

	(void)a;
	if (in < 0 || pipe(p))
		return 2;
	n = splice(in, &off, p[1], NULL, 50000, 0);
	if (n <= 0 || read(p[0], buf, n) != n)
		return 3;
	return check(buf, 600001, n);
}

static int do_copy_range(void *a)
{
	int in = open(file, O_RDONLY);
	int out = open(copy, O_WRONLY | O_TRUNC);
	loff_t off_in = 900000, off_out = 0;
	uint64_t len = FILE_SIZE - 900000, done = 0;

	(void)a;
	if (in < 0 || out < 0)
		return 2;
	while (done < len) {
		ssize_t n = copy_file_range(in, &off_in, out, &off_out,
					    len - done, 0);
		if (n <= 0)
			return 3;
		done += n;
	}
	return check_copy(900000, len);
}

struct step {
	const char *name;
	int (*fn)(void *);
};

static const struct step steps[] = {
	{ "read() of the whole file", read_all },
	{ "pread() at scattered offsets", pread_some },
	{ "mmap() read of a never read range", mmap_read },
	{ "mmap() read of the partial last page", mmap_tail },
	{ "sendfile() to a file", do_sendfile },
	{ "splice() to a pipe", do_splice },
	{ "copy_file_range() to a file", do_copy_range },
};

int main(int argc, char **argv)
{
	struct listener *l;

	t_init("t_fill", argc, argv, 180);
	file = t_path("fill.dat");
	copy = t_path("fill.copy");
	bad = shared_alloc(sizeof(*bad));

	l = listener_start(fill, NULL);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int st;

		/* A fresh file of holes for each reader */
		make_sparse(file, FILE_SIZE);
		make_sparse(copy, 0);
		if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, file))
			t_fatal("mark %s", file);
		listener_clear(l);
		*bad = -1;

		st = run_child(steps[i].fn, NULL, 30000);
		t_ok(st == 0, "%s sees the filled content (status %d%s, "
		     "first bad offset %lld, %d events)", steps[i].name, st,
		     st == CHILD_TIMEOUT ? " = timeout" : "", (long long)*bad,
		     listener_count(l, FAN_PRE_ACCESS));
		t_ok(listener_count(l, FAN_PRE_ACCESS) > 0,
		     "%s raised FAN_PRE_ACCESS", steps[i].name);
		fanotify_mark(listener_fd(l), FAN_MARK_FLUSH, 0, AT_FDCWD,
			      NULL);
	}

	listener_stop(l);
	return t_done();
}
