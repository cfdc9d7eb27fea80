// SPDX-License-Identifier: GPL-2.0
/*
 * t_range - FAN_PRE_ACCESS reports the range that is accessed.
 *
 * For each kind of access to a marked file, exactly one FAN_PRE_ACCESS event
 * must arrive, from the accessing process, with a FAN_EVENT_INFO_TYPE_RANGE
 * record equal to the accessed range rounded out to pages (as mainline):
 * read, pread, preadv, sendfile, splice, copy_file_range (source), mmap, and
 * the write side (pwrite, ftruncate, truncate, fallocate).  Page faults on a
 * mapping raise no event.  The same read is then checked with a mount mark
 * and a filesystem mark instead of the inode mark.  Runs on mainline (6.14+)
 * too.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#define FILE_SIZE (64 * 1024)

static const char *file;
static const char *other;

struct op {
	const char *name;
	int (*fn)(void *);
	uint64_t offset, count;	/* expected range */
	bool hsm_only;		/* range differs on mainline */
};

static int do_read(void *a)
{
	char buf[16];
	int fd = open(file, O_RDONLY);

	(void)a;
	return fd >= 0 && read(fd, buf, 10) == 10 ? 0 : 1;
}

static int do_pread(void *a)
{
	char buf[16];
	int fd = open(file, O_RDONLY);

	(void)a;
	return fd >= 0 && pread(fd, buf, 10, 5000) == 10 ? 0 : 1;
}

static int do_pread_span(void *a)
{
	static char buf[8192];
	int fd = open(file, O_RDONLY);

	(void)a;
	return fd >= 0 && pread(fd, buf, 8192, 4095) == 8192 ? 0 : 1;
}

static int do_pread_empty(void *a)
{
	char buf[1];
	int fd = open(file, O_RDONLY);

	(void)a;
	return fd >= 0 && pread(fd, buf, 0, 100) == 0 ? 0 : 1;
}

static int do_preadv(void *a)
{
	static char b1[2000], b2[4000];
	struct iovec iov[2] = { { b1, sizeof(b1) }, { b2, sizeof(b2) } };
	int fd = open(file, O_RDONLY);

	(void)a;
	return fd >= 0 && preadv(fd, iov, 2, 10000) == 6000 ? 0 : 1;
}

static int do_sendfile(void *a)
{
	int fd = open(file, O_RDONLY);
	int out = open("/dev/null", O_WRONLY);
	off_t off = 100;

	(void)a;
	return fd >= 0 && out >= 0 && sendfile(out, fd, &off, 5000) == 5000 ?
		0 : 1;
}

static int do_splice(void *a)
{
	int fd = open(file, O_RDONLY);
	int p[2];
	loff_t off = 8192;

	(void)a;
	if (fd < 0 || pipe(p))
		return 1;
	return splice(fd, &off, p[1], NULL, 100, 0) == 100 ? 0 : 1;
}

static int do_copy_range(void *a)
{
	int in = open(file, O_RDONLY);
	int out = open(other, O_WRONLY);
	loff_t off_in = 4096, off_out = 0;

	(void)a;
	if (in < 0 || out < 0)
		return 1;
	/* A file system that clones may copy less: whole blocks */
	return copy_file_range(in, &off_in, out, &off_out, 5000, 0) > 0 ?
		0 : 1;
}

#define SKIPPED 77

static int do_ficlone(void *a)
{
	int in = open(file, O_RDONLY), out = open(other, O_WRONLY);

	(void)a;
	if (in < 0 || out < 0)
		return 1;
	if (ioctl(out, FICLONE, in))
		return errno == EOPNOTSUPP || errno == EXDEV ||
			errno == EINVAL ? SKIPPED : 1;
	return 0;
}

static int do_mmap(void *a)
{
	int fd = open(file, O_RDONLY);
	volatile unsigned char *p;
	unsigned sum = 0;

	(void)a;
	if (fd < 0)
		return 1;
	p = mmap(NULL, 3 * PAGE, PROT_READ, MAP_SHARED, fd, PAGE);
	if (p == MAP_FAILED)
		return 1;
	/* Faults must not raise more events */
	for (unsigned i = 0; i < 3 * PAGE; i += PAGE)
		sum += p[i];
	return sum == 0 ? 0 : 1;
}

static int do_mmap_small(void *a)
{
	int fd = open(file, O_RDONLY);

	(void)a;
	return fd >= 0 && mmap(NULL, 100, PROT_READ, MAP_PRIVATE, fd, 0) !=
		MAP_FAILED ? 0 : 1;
}

static int do_pwrite(void *a)
{
	int fd = open(file, O_RDWR);

	(void)a;
	return fd >= 0 && pwrite(fd, "\0\0\0", 3, 10000) == 3 ? 0 : 1;
}

static int do_ftruncate(void *a)
{
	int fd = open(file, O_RDWR);

	(void)a;
	return fd >= 0 && ftruncate(fd, 30000) == 0 ? 0 : 1;
}

static int do_truncate(void *a)
{
	(void)a;
	return truncate(file, 20000) == 0 ? 0 : 1;
}

static int do_fallocate(void *a)
{
	int fd = open(file, O_RDWR);

	(void)a;
	return fd >= 0 && fallocate(fd, FALLOC_FL_KEEP_SIZE, 40000, 100) == 0 ?
		0 : 1;
}

static const struct op ops[] = {
	{ "read 10 bytes at 0", do_read, 0, PAGE, false },
	{ "pread 10 bytes at 5000", do_pread, PAGE, PAGE, false },
	{ "pread 8192 bytes at 4095", do_pread_span, 0, 3 * PAGE, false },
	{ "pread 0 bytes at 100", do_pread_empty, 0, PAGE, false },
	{ "preadv 6000 bytes at 10000", do_preadv, 2 * PAGE, 2 * PAGE,
	  false },
	{ "sendfile 5000 bytes at 100", do_sendfile, 0, 2 * PAGE, false },
	{ "splice 100 bytes at 8192", do_splice, 2 * PAGE, PAGE, false },
	{ "copy_file_range source 5000 at 4096", do_copy_range, PAGE,
	  2 * PAGE, false },
	{ "mmap 3 pages at 4096 and fault them", do_mmap, PAGE, 3 * PAGE,
	  false },
	{ "mmap 100 bytes at 0", do_mmap_small, 0, PAGE, false },
	{ "pwrite 3 bytes at 10000", do_pwrite, 2 * PAGE, PAGE, false },
	{ "ftruncate to 30000", do_ftruncate, 7 * PAGE, PAGE, false },
	{ "truncate to 20000", do_truncate, 4 * PAGE, PAGE, false },
	{ "fallocate 100 bytes at 40000", do_fallocate, 9 * PAGE, PAGE,
	  false },
	/*
	 * FICLONE clones to the end of the source.  Mainline (checked on
	 * 6.18) reports the range [0, +0): a listener fills nothing and the
	 * clone copies holes; the httphsm kernel reports the whole file.
	 */
	{ "FICLONE of the whole file", do_ficlone, 0, FILE_SIZE, true },
};

int main(int argc, char **argv)
{
	struct listener *l;

	t_init("t_range", argc, argv, 120);
	file = t_path("range.dat");
	other = t_path("range.out");
	make_sparse(file, FILE_SIZE);
	make_sparse(other, 0);

	l = listener_start(NULL, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, file))
		t_fatal("mark FAN_PRE_ACCESS on %s", file);

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const struct op *op = &ops[i];
		struct hsm_event ev;
		pid_t pid;
		int st;

		/* Restore the size changed by the truncate ops */
		if (truncate(file, FILE_SIZE))
			t_fatal("truncate");
		listener_clear(l);

		if (op->hsm_only && !hsm_kernel) {
			t_skip("%s: the range needs the httphsm kernel",
			       op->name);
			continue;
		}
		pid = start_child(op->fn, NULL);
		st = wait_child(pid, 10000);
		if (st == SKIPPED) {
			t_skip("%s: not supported by this file system",
			       op->name);
			continue;
		}
		t_ok(st == 0, "%s: completes (status %d)", op->name, st);
		/* Give a stray second event the time to show up */
		listener_wait(l, 2, 300);
		if (!t_ok(listener_nevents(l) == 1,
			  "%s: exactly one event (got %d)", op->name,
			  listener_nevents(l)))
			continue;
		listener_event(l, 0, &ev);
		t_ok(ev.mask == FAN_PRE_ACCESS, "%s: mask is FAN_PRE_ACCESS "
		     "(0x%llx)", op->name, (unsigned long long)ev.mask);
		t_ok(ev.pid == pid, "%s: pid is the accessor's", op->name);
		t_ok(ev.has_range && ev.offset == op->offset &&
		     ev.count == op->count,
		     "%s: range [%llu, +%llu), want [%llu, +%llu)", op->name,
		     (unsigned long long)ev.offset,
		     (unsigned long long)ev.count,
		     (unsigned long long)op->offset,
		     (unsigned long long)op->count);
		t_ok(strcmp(ev.path, file) == 0, "%s: event fd is the file (%s)",
		     op->name, ev.path);
	}

	/* Mount and filesystem marks report the same event */
	for (int i = 0; i < 2; i++) {
		unsigned type = i ? FAN_MARK_FILESYSTEM : FAN_MARK_MOUNT;
		const char *what = i ? "filesystem mark" : "mount mark";
		struct hsm_event ev;
		int st;

		fanotify_mark(listener_fd(l), FAN_MARK_FLUSH, 0, AT_FDCWD,
			      NULL);
		fanotify_mark(listener_fd(l), FAN_MARK_FLUSH | FAN_MARK_MOUNT,
			      0, AT_FDCWD, NULL);
		fanotify_mark(listener_fd(l), FAN_MARK_FLUSH |
			      FAN_MARK_FILESYSTEM, 0, AT_FDCWD, NULL);
		if (mark(listener_fd(l), FAN_MARK_ADD | type, FAN_PRE_ACCESS,
			 base_dir))
			t_fatal("%s", what);
		listener_clear(l);
		st = run_child(do_pread, NULL, 10000);
		t_ok(st == 0 && listener_nevents(l) == 1 &&
		     listener_event(l, 0, &ev) && ev.has_range &&
		     ev.offset == PAGE && ev.count == PAGE &&
		     !strcmp(ev.path, file),
		     "%s: pread 10 bytes at 5000 raises one event for "
		     "[4096, +4096) (%d events)", what, listener_nevents(l));
	}

	listener_stop(l);
	return t_done();
}
