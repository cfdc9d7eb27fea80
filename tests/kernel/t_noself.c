// SPDX-License-Identifier: GPL-2.0
/*
 * t_noself - the listener's own I/O through event fds raises no events.
 *
 * The handler of the one event an accessor raises reads, writes, maps,
 * truncates, sendfile()s, splice()s and copy_file_range()s through the event
 * fd of a marked file, and reads the directory of a marked directory event
 * (httphsm kernel).  The listener is single threaded: any event raised by
 * this I/O would wait for the handler itself and the test would time out.
 * Afterwards exactly the accessor's events must be in the log.  Runs on
 * mainline (6.14+) too.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FILE_SIZE (256 * 1024)

static const char *file, *dir, *sink;
static int self_failures;

static void self_check(bool cond)
{
	if (!cond)
		self_failures++;
}

static uint32_t own_io(struct listener *l, struct hsm_event *ev, void *ctx)
{
	static unsigned char buf[8192];
	int fd = ev->fd, out, p[2];
	loff_t off, off_out;
	struct stat st;
	off_t soff;
	void *m;

	(void)l;
	(void)ctx;
	if (ev->mask & FAN_ONDIR || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		self_check(ev->mask & FAN_ONDIR);
		/* getdents on the event fd of a directory */
		self_check(syscall(SYS_getdents64, fd, buf, sizeof(buf)) > 0);
		return FAN_ALLOW;
	}

	pattern_fill(buf, 0, sizeof(buf));
	self_check(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf));
	self_check(pread(fd, buf, sizeof(buf), 4096) == sizeof(buf));
	self_check(lseek(fd, 0, SEEK_SET) == 0);
	self_check(read(fd, buf, 100) == 100);
	/*
	 * Mainline (checked on 6.18) raises FAN_PRE_ACCESS for ftruncate()
	 * on an event fd, which deadlocks a single threaded listener; the
	 * httphsm kernel raises no event for any I/O on an event fd.
	 */
	if (hsm_kernel)
		self_check(ftruncate(fd, FILE_SIZE) == 0);
	self_check(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096) == 0);

	m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	self_check(m != MAP_FAILED);
	if (m != MAP_FAILED) {
		((volatile char *)m)[10] = 1;
		munmap(m, 2 * PAGE);
	}

	out = open(sink, O_WRONLY | O_TRUNC);
	self_check(out >= 0);
	soff = 0;
	self_check(sendfile(out, fd, &soff, 10000) == 10000);
	off = 0;
	off_out = 0;
	self_check(copy_file_range(fd, &off, out, &off_out, 10000, 0) > 0);
	close(out);

	self_check(pipe(p) == 0);
	off = 0;
	self_check(splice(fd, &off, p[1], NULL, 1000, 0) == 1000);
	self_check(read(p[0], buf, 1000) == 1000);
	self_check(write(p[1], buf, 1000) == 1000);
	off = 20000;
	self_check(splice(p[0], NULL, fd, &off, 1000, 0) == 1000);
	close(p[0]);
	close(p[1]);
	return FAN_ALLOW;
}

int main(int argc, char **argv)
{
	struct listener *l;
	int st, fan;

	t_init("t_noself", argc, argv, 120);
	file = t_path("noself.dat");
	dir = t_path("noself.d");
	sink = t_path("noself.sink");
	make_sparse(file, FILE_SIZE);
	make_sparse(sink, 0);
	mkdir(dir, 0755);

	l = listener_start(own_io, NULL);
	fan = listener_fd(l);
	if (mark(fan, FAN_MARK_ADD, FAN_PRE_ACCESS, file))
		t_fatal("mark");

	st = run_child(child_pread10, (void *)file, 20000);
	t_ok(st == 0, "accessor completes while the handler does I/O through "
	     "the event fd (status %d%s)", st,
	     st == CHILD_TIMEOUT ? ": the listener's own I/O raised an event"
				 : "");
	t_ok(self_failures == 0, "the handler's I/O through the event fd "
	     "succeeded (%d failures)", self_failures);
	t_ok(listener_nevents(l) == 1, "exactly the accessor's event was "
	     "reported (%d events)", listener_nevents(l));

	/* The fanotify fd itself is not a file with events */
	st = run_child(child_pread10, (void *)file, 20000);
	t_ok(st == 0 && listener_nevents(l) == 2,
	     "the marks are still active: a second access raises one event "
	     "(%d events)", listener_nevents(l));

	if (hsm_kernel) {
		if (mark(fan, FAN_MARK_ADD, FAN_PRE_ACCESS | FAN_ONDIR, dir))
			t_fatal("mark dir");
		listener_clear(l);
		self_failures = 0;
		st = run_child(child_list_dir, (void *)dir, 20000);
		t_ok(st == 0, "directory listing completes while the handler "
		     "lists the event fd (status %d)", st);
		t_ok(self_failures == 0, "getdents on the directory event fd "
		     "succeeded");
		t_ok(listener_nevents(l) >= 1 &&
		     listener_count(l, FAN_ONDIR) == listener_nevents(l),
		     "only the lister's directory events were reported (%d)",
		     listener_nevents(l));
	} else {
		t_skip("directory events need the httphsm kernel");
	}

	listener_stop(l);
	return t_done();
}
