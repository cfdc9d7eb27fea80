// SPDX-License-Identifier: GPL-2.0
/*
 * t_fault - page faults of lazy mappings (FAN_PRE_FAULT, FAN_HSM_NOFILL).
 *
 * A listener that marks FAN_PRE_ACCESS | FAN_PRE_FAULT gets no event at
 * mmap() time (unless the mapping is populated); each page fault that
 * reaches the file system reports FAN_PRE_FAULT with the range the kernel
 * maps (a few pages around the fault), which the listener fills through the
 * event fd.  A denied fault gives SIGBUS.  A fault inside a system call (a
 * buffer in a lazy mapping) carries FAN_HSM_NOFILL: the listener must not
 * write then, and a denial makes the call fail with EFAULT.  That is what
 * avoids the deadlock that got mainline's fault hook reverted: write(2)
 * from such a mapping faults under sb_start_write, so a listener writing to
 * the same fs while a freeze is pending would wait for the freeze forever.
 * Also: O_DIRECT and vmsplice() from a mapping (NOFILL too), a fault while
 * the fs is frozen, mremap() growth, MAP_POPULATE (mainline's whole-range
 * event), and the listener's own fault through its event fd (no event).
 *
 * Mainline refuses FAN_PRE_FAULT marks (EINVAL): only the check of
 * mainline's behaviour without the opt-in runs there, the rest is skipped.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024 * 1024ull)
#define BIG (64 * MiB)
#define SKIPPED 77

static const char *file;	/* the marked file */
static const char *other;	/* unmarked destination of writes */

/* Shared with the children */
struct shared {
	volatile int stage;	/* child: 1 = mapped */
	volatile int go;	/* parent: 1 = touch now */
	int64_t bad;		/* first offset that differs, or -1 */
	ssize_t ret;		/* of the write() under test */
	int err;		/* its errno */
};
static struct shared *sh;

/* What the children do, set before they are forked */
static uint64_t map_off, map_len, touch_off, touch_len;
static int map_flags;
static size_t write_len;

/* ---- listener ----------------------------------------------------------- */

enum policy {
	FILL,		/* fill; deny NOFILL events on ranges not filled */
	DENY,		/* deny every fault with EIO */
	FREEZE,		/* FILL, but a NOFILL event starts a freeze */
};

static volatile enum policy policy;
static unsigned char filled[BIG / PAGE];	/* pages the listener wrote */
static atomic_int entered;	/* events that reached the handler */
static pid_t freezer_pid;
static bool freeze_pending;	/* the freeze waited for the NOFILL caller */

/* Has the child exited?  Does not reap it; *sig = the killing signal */
static bool child_exited(pid_t pid, int *sig)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT))
		return true;
	if (sig)
		*sig = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED ?
			si.si_status : 0;
	return si.si_pid == pid;
}

static bool range_filled(const struct hsm_event *ev)
{
	for (uint64_t p = ev->offset / PAGE;
	     p < (ev->offset + ev->count + PAGE - 1) / PAGE; p++)
		if (p >= BIG / PAGE || !filled[p])
			return false;
	return true;
}

/* Write the content of the range, clipped to the file size (t_fill) */
static uint32_t fill(struct hsm_event *ev)
{
	/* Blocks while the fs is frozen */
	int64_t end = pattern_write(ev->fd, ev->offset, ev->count);

	if (end < 0)
		return FAN_DENY_ERRNO(EIO);
	for (uint64_t p = ev->offset / PAGE; p * PAGE < (uint64_t)end && p < BIG / PAGE; p++)
		filled[p] = 1;
	return FAN_ALLOW;
}

/*
 * The listener's own mapping of its event fd (FMODE_NONOTIFY) raises no
 * event, so it never waits for itself: it reads the hole as it is.
 */
static volatile bool touch_self;
static int self_read = -1;	/* the byte the listener read, or -1 */

static void read_through_event_fd(const struct hsm_event *ev)
{
	unsigned char *p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, ev->fd,
				ev->offset / PAGE * PAGE);

	if (p == MAP_FAILED)
		return;
	self_read = p[0];
	munmap(p, PAGE);
}

static uint32_t handler(struct listener *l, struct hsm_event *ev, void *ctx)
{
	(void)l;
	(void)ctx;
	atomic_fetch_add(&entered, 1);
	if (touch_self && (ev->mask & FAN_PRE_FAULT))
		read_through_event_fd(ev);
	if (!(ev->mask & (FAN_PRE_ACCESS | FAN_PRE_FAULT)) || !ev->has_range)
		return FAN_ALLOW;
	if ((ev->mask & FAN_PRE_FAULT) && policy == DENY)
		return FAN_DENY_ERRNO(EIO);
	if (!(ev->mask & FAN_HSM_NOFILL))
		return fill(ev);
	if (policy == FREEZE) {
		/* The caller holds sb write access: the freeze waits for it */
		policy = FILL;
		freezer_pid = start_child(freezer, NULL);
		sleep_ms(200);
		freeze_pending = !child_exited(freezer_pid, NULL);
		/* A write to the fs now would wait for the freeze: deadlock */
		return FAN_DENY;
	}
	/* The caller may hold locks of this fs: answer from what is there */
	return range_filled(ev) ? FAN_ALLOW : FAN_DENY;
}

/* Fresh file of holes, marked with mask; empty log */
static void setup(struct listener *l, uint64_t size, uint64_t mask,
		  enum policy p)
{
	fanotify_mark(listener_fd(l), FAN_MARK_FLUSH, 0, AT_FDCWD, NULL);
	make_sparse(file, size);
	make_sparse(other, 0);
	if (mark(listener_fd(l), FAN_MARK_ADD, mask, file))
		t_fatal("mark %s", file);
	memset(filled, 0, sizeof(filled));
	touch_self = false;
	self_read = -1;
	policy = p;
	atomic_store(&entered, 0);
	listener_clear(l);
	memset(sh, 0, sizeof(*sh));
	sh->bad = -1;
	map_off = touch_off = map_flags = 0;
	map_len = size;
	touch_len = 1;
}

/* Logged events whose mask has all bits of want and none of without */
static int count(struct listener *l, uint64_t want, uint64_t without)
{
	struct hsm_event ev;
	int n = 0;

	for (int i = 0; listener_event(l, i, &ev); i++)
		if ((ev.mask & want) == want && !(ev.mask & without))
			n++;
	return n;
}

/* First logged event with the bits of want whose range holds off */
static bool find(struct listener *l, uint64_t want, uint64_t off,
		 struct hsm_event *out)
{
	for (int i = 0; listener_event(l, i, out); i++)
		if ((out->mask & want) == want && out->has_range &&
		    out->offset <= off && off < out->offset + out->count)
			return true;
	return false;
}

/* ---- children ----------------------------------------------------------- */

static int check(const unsigned char *buf, uint64_t off, size_t len)
{
	int64_t b = pattern_check(buf, off, len);

	if (b >= 0) {
		sh->bad = b;
		return 1;
	}
	return 0;
}

static unsigned char *map_file(void)
{
	int fd = open(file, O_RDONLY);
	void *p;

	if (fd < 0)
		return NULL;
	p = mmap(NULL, map_len, PROT_READ, MAP_SHARED | map_flags, fd,
		 map_off);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* Map, tell the parent, wait for its go (bounded), read the touch range */
static int do_map_touch(void *a)
{
	/* SIGBUS is expected in the deny check: no core file */
	struct rlimit nocore = { 0, 0 };
	unsigned char *p;

	(void)a;
	setrlimit(RLIMIT_CORE, &nocore);
	p = map_file();
	if (!p)
		return 2;
	sh->stage = 1;
	for (int i = 0; i < 20000 && !sh->go; i++)
		sleep_ms(1);
	return check(p + touch_off - map_off, touch_off, touch_len);
}

/* write() to a pipe from the mapping: the kernel faults, then user space */
static int do_pipe_write(void *a)
{
	static unsigned char buf[PAGE];
	unsigned char *p = map_file();
	int pp[2];

	(void)a;
	if (!p || pipe(pp))
		return 2;
	sh->ret = write(pp[1], p + touch_off, PAGE);
	sh->err = sh->ret < 0 ? errno : 0;
	if (sh->ret != -1 || sh->err != EFAULT)
		return 3;
	/* A user-space fault: the listener fills the range */
	if (check(p + touch_off, touch_off, 1))
		return 1;
	if (write(pp[1], p + touch_off, PAGE) != PAGE ||
	    read(pp[0], buf, PAGE) != PAGE)
		return 4;
	return check(buf, touch_off, PAGE);
}

/* write() to another file of the fs from the mapping; a = O_DIRECT */
static int do_file_write(void *a)
{
	int direct = a ? O_DIRECT : 0;
	int fd = open(other, O_WRONLY | O_TRUNC | direct);
	unsigned char *p = map_file();

	if (fd < 0)
		return direct && errno == EINVAL ? SKIPPED : 2;
	if (!p)
		return 2;
	sh->ret = write(fd, p + touch_off, write_len);
	sh->err = sh->ret < 0 ? errno : 0;
	return 0;
}

static int do_mremap(void *a)
{
	unsigned char *p = map_file(), *q;

	(void)a;
	if (!p || check(p, 0, 10))
		return 2;
	q = mremap(p, map_len, 4 * MiB, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		return 3;
	return check(q, 0, 10) || check(q + touch_off, touch_off, 10);
}

/* Wait until the child mapped the file, or exited */
static bool wait_mapped(pid_t pid)
{
	int64_t deadline = now_ms() + 10000;

	while (!sh->stage && !child_exited(pid, NULL) && now_ms() < deadline)
		sleep_ms(2);
	return sh->stage;
}

/* ---- checks ------------------------------------------------------------- */

static void lazy_fault(struct listener *l)
{
	const uint64_t off = 32 * MiB + 5;
	struct hsm_event ev;
	bool quiet;
	pid_t pid;
	int st;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	touch_self = true;
	touch_off = off;
	touch_len = 5;
	pid = start_child(do_map_touch, NULL);
	/* mmap() is synchronous: its event, if any, is logged by now */
	quiet = wait_mapped(pid) && !listener_wait(l, 1, 300);
	t_ok(quiet, "lazy mmap() of 64 MiB raises no event (%d)",
	     listener_nevents(l));
	sh->go = 1;
	st = wait_child(pid, 30000);
	listener_wait(l, 2, 300);
	t_ok(listener_nevents(l) == 1 && count(l, FAN_PRE_FAULT, 0) == 1,
	     "reading 5 bytes at 32 MiB + 5 raises one FAN_PRE_FAULT "
	     "(%d events)", listener_nevents(l));
	if (listener_event(l, 0, &ev))
		t_note("mask 0x%llx range [%llu, +%llu)",
		       (unsigned long long)ev.mask,
		       (unsigned long long)ev.offset,
		       (unsigned long long)ev.count);
	t_ok(find(l, FAN_PRE_FAULT, off, &ev) && ev.count <= 2 * MiB &&
	     ev.offset % PAGE == 0 && ev.count % PAGE == 0 &&
	     !(ev.mask & FAN_HSM_NOFILL),
	     "the range holds the page, is page aligned, <= 2 MiB, no NOFILL");
	t_ok(st == 0, "the child reads the filled bytes (status %d, bad %lld)",
	     st, (long long)sh->bad);
	t_ok(self_read == 0, "the listener's own fault through its event fd "
	     "raises no event and reads the hole (byte %d)", self_read);
}

static void sequential(struct listener *l)
{
	int st, n;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	map_len = touch_len = 4 * MiB;
	sh->go = 1;
	st = run_child(do_map_touch, NULL, 60000);
	n = count(l, FAN_PRE_FAULT, 0);
	t_note("sequential read of 4 MiB: %d FAN_PRE_FAULT events, %d "
	       "events in all", n, listener_nevents(l));
	t_ok(st == 0, "sequential read of 4 MiB sees the pattern (status %d, "
	     "bad %lld)", st, (long long)sh->bad);
	/* One per 64 KiB fault-around window, the mapping's address being
	 * page aligned only: 65 windows at most. */
	t_ok(n > 0 && n <= (int)(4 * MiB / (64 * 1024)) + 1,
	     "sequential read of 4 MiB: at most 65 fault events (%d)", n);
}

static void deny(struct listener *l)
{
	pid_t pid;
	int sig = -1;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, DENY);
	touch_off = 8 * MiB;
	sh->go = 1;
	pid = start_child(do_map_touch, NULL);
	/* Bounded: waitid() polls; on timeout wait_child() kills */
	for (int64_t end = now_ms() + 30000; now_ms() < end; sleep_ms(5))
		if (child_exited(pid, &sig))
			break;
	wait_child(pid, 1000);
	t_ok(sig == SIGBUS, "a denied fault (FAN_DENY_ERRNO(EIO)) kills the "
	     "child with SIGBUS (signal %d, %d events)", sig,
	     count(l, FAN_PRE_FAULT, 0));
}

static void no_opt_in(struct listener *l)
{
	struct hsm_event ev;
	bool one;
	pid_t pid;
	int st;

	setup(l, 4 * MiB, FAN_PRE_ACCESS, FILL);
	map_len = touch_len = 300000;
	pid = start_child(do_map_touch, NULL);
	one = wait_mapped(pid) && listener_nevents(l) == 1 &&
		listener_event(l, 0, &ev);
	t_ok(one && ev.mask == FAN_PRE_ACCESS && ev.has_range &&
	     ev.offset == 0 && ev.count == 74 * PAGE,
	     "without FAN_PRE_FAULT: one FAN_PRE_ACCESS at mmap() for the "
	     "mapped range [0, +%llu) (%d events, range [%llu, +%llu))",
	     74 * PAGE, listener_nevents(l),
	     one ? (unsigned long long)ev.offset : 0ull,
	     one ? (unsigned long long)ev.count : 0ull);
	sh->go = 1;
	st = wait_child(pid, 30000);
	listener_wait(l, 2, 300);
	t_ok(st == 0 && listener_nevents(l) == 1, "without FAN_PRE_FAULT: "
	     "touching the pages raises no event and sees the content "
	     "(status %d, %d events)", st, listener_nevents(l));
}

static void populate(struct listener *l)
{
	struct hsm_event ev;
	int st;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	map_off = touch_off = 16 * MiB;
	map_len = touch_len = MiB;
	map_flags = MAP_POPULATE;
	sh->go = 1;
	st = run_child(do_map_touch, NULL, 30000);
	t_note("MAP_POPULATE: %d events, %d FAN_PRE_FAULT",
	       listener_nevents(l), count(l, FAN_PRE_FAULT, 0));
	t_ok(count(l, FAN_PRE_ACCESS, FAN_PRE_FAULT) == 1 &&
	     find(l, FAN_PRE_ACCESS, 16 * MiB, &ev) &&
	     ev.offset == 16 * MiB && ev.count == MiB,
	     "MAP_POPULATE: one FAN_PRE_ACCESS for the whole range at mmap()");
	t_ok(st == 0, "MAP_POPULATE: the child reads the filled bytes "
	     "(status %d, bad %lld)", st, (long long)sh->bad);
}

static void kernel_fault(struct listener *l)
{
	struct hsm_event ev;
	int st;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	touch_off = 20 * MiB;
	st = run_child(do_pipe_write, NULL, 30000);
	if (!listener_event(l, 0, &ev))
		memset(&ev, 0, sizeof(ev));
	t_ok((ev.mask & FAN_PRE_FAULT) && (ev.mask & FAN_HSM_NOFILL) &&
	     ev.has_range && ev.offset <= touch_off &&
	     touch_off < ev.offset + ev.count && ev.response == FAN_DENY,
	     "write() to a pipe from an unfilled page: FAN_PRE_FAULT | "
	     "FAN_HSM_NOFILL, denied (mask 0x%llx)",
	     (unsigned long long)ev.mask);
	t_ok(sh->ret == -1 && sh->err == EFAULT, "the denied write() fails "
	     "with EFAULT (ret %zd, %s)", sh->ret, strerror(sh->err));
	t_ok(st == 0, "after a user-space fault filled it, write() of the "
	     "page passes the pattern (status %d, bad %lld)", st,
	     (long long)sh->bad);
}

static void freeze_deadlock(struct listener *l)
{
	int st, fst = CHILD_TIMEOUT;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FREEZE);
	touch_off = 24 * MiB;
	write_len = 65536;
	freezer_pid = 0;
	freeze_pending = false;
	st = run_child(do_file_write, NULL, 20000);
	/* The handler has answered: its log entry orders freezer_pid */
	listener_wait(l, 1, 1000);
	if (freezer_pid > 0)
		fst = wait_child(freezer_pid, 20000);
	thaw();
	t_ok(count(l, FAN_PRE_FAULT | FAN_HSM_NOFILL, 0) >= 1,
	     "buffered write() from the mapping: FAN_HSM_NOFILL event");
	t_note("freeze pending while the writer waited: %s",
	       freeze_pending ? "yes" : "no");
	t_ok(st == 0 && ((sh->ret == -1 && sh->err == EFAULT) ||
			 (sh->ret >= 0 && sh->ret < 65536)),
	     "the writer finishes with EFAULT or a short count while a "
	     "freeze is pending (status %d, ret %zd, %s)", st, sh->ret,
	     strerror(sh->err));
	t_ok(fst == 0, "the freeze completes (status %d)", fst);
}

static void frozen_fill(struct listener *l)
{
	bool blocked;
	pid_t pid;
	int st;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	touch_off = 40 * MiB + 123;
	touch_len = 100;
	sh->go = 1;
	if (!t_ok(run_child(freezer, NULL, 20000) == 0, "FIFREEZE")) {
		thaw();
		return;
	}
	pid = start_child(do_map_touch, NULL);
	for (int64_t end = now_ms() + 10000;
	     !atomic_load(&entered) && now_ms() < end; sleep_ms(5))
		;
	sleep_ms(300);
	/* The fill's pwrite waits for the thaw, and the fault for it */
	blocked = atomic_load(&entered) && !child_exited(pid, NULL);
	thaw();
	st = wait_child(pid, 30000);
	t_ok(blocked, "frozen fs: the fault waits for the listener's fill");
	t_ok(st == 0, "after the thaw the child reads the filled bytes "
	     "(status %d, bad %lld)", st, (long long)sh->bad);
}

static void direct_io(struct listener *l)
{
	int st;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	touch_off = 48 * MiB;
	write_len = PAGE;
	st = run_child(do_file_write, "direct", 30000);
	if (st == SKIPPED) {
		t_skip("O_DIRECT: not supported by this file system");
		return;
	}
	t_ok(count(l, FAN_PRE_FAULT | FAN_HSM_NOFILL, 0) >= 1,
	     "O_DIRECT write() from the mapping: FAN_HSM_NOFILL event");
	t_ok(st == 0 && sh->ret == -1 && sh->err == EFAULT,
	     "O_DIRECT write() from a denied page fails with EFAULT "
	     "(status %d, ret %zd, %s)", st, sh->ret, strerror(sh->err));
}

/* vmsplice() pins the mapping's pages from inside the system call */
static int do_vmsplice(void *a)
{
	unsigned char *p = map_file();
	struct iovec iov = { .iov_len = PAGE };
	int pp[2];

	(void)a;
	if (!p || pipe(pp))
		return 2;
	iov.iov_base = p + touch_off;
	sh->ret = vmsplice(pp[1], &iov, 1, 0);
	sh->err = sh->ret < 0 ? errno : 0;
	return 0;
}

static void splice_from_mapping(struct listener *l)
{
	int st;

	setup(l, BIG, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	touch_off = 40 * MiB;
	st = run_child(do_vmsplice, NULL, 30000);
	t_ok(count(l, FAN_PRE_FAULT | FAN_HSM_NOFILL, 0) >= 1,
	     "vmsplice() of an unfilled page of the mapping: FAN_HSM_NOFILL");
	t_ok(st == 0 && sh->ret == -1 && sh->err == EFAULT,
	     "the denied vmsplice() fails with EFAULT (status %d, ret %zd, "
	     "%s)", st, sh->ret, strerror(sh->err));
}

static void grow(struct listener *l)
{
	struct hsm_event ev;
	int st;

	setup(l, 4 * MiB, FAN_PRE_ACCESS | FAN_PRE_FAULT, FILL);
	map_len = MiB;
	touch_off = 3 * MiB + 7;
	st = run_child(do_mremap, NULL, 30000);
	t_ok(find(l, FAN_PRE_FAULT, touch_off, &ev),
	     "mremap() from 1 to 4 MiB: touching 3 MiB raises FAN_PRE_FAULT "
	     "(%d events)", listener_nevents(l));
	t_ok(st == 0, "mremap(): the child reads the filled bytes (status %d, "
	     "bad %lld)", st, (long long)sh->bad);
}

struct fault_check {
	const char *name;
	void (*fn)(struct listener *l);
	bool lazy;		/* needs FAN_PRE_FAULT */
};

static const struct fault_check checks[] = {
	{ "lazy mmap and one fault", lazy_fault, true },
	{ "sequential read", sequential, true },
	{ "denied fault", deny, true },
	{ "mmap without the opt-in", no_opt_in, false },
	{ "MAP_POPULATE", populate, true },
	{ "fault in write() to a pipe", kernel_fault, true },
	{ "fault in write() with a freeze pending", freeze_deadlock, true },
	{ "fault while the fs is frozen", frozen_fill, true },
	{ "fault in an O_DIRECT write()", direct_io, true },
	{ "vmsplice() from the mapping", splice_from_mapping, true },
	{ "mremap growth", grow, true },
};

int main(int argc, char **argv)
{
	struct listener *l;
	bool lazy;
	int err;

	t_init("t_fault", argc, argv, 400);
	file = t_path("fault.dat");
	other = t_path("fault.out");
	sh = shared_alloc(sizeof(*sh));
	freeze_setup();

	l = listener_start(handler, NULL);
	make_sparse(file, PAGE);
	err = mark(listener_fd(l), FAN_MARK_ADD,
		   FAN_PRE_ACCESS | FAN_PRE_FAULT, file);
	lazy = err == 0;
	if (hsm_kernel)
		t_ok(lazy, "FAN_PRE_FAULT marks are accepted (%s)",
		     strerror(-err));
	else
		t_ok(err == -EINVAL, "mainline refuses FAN_PRE_FAULT marks "
		     "with EINVAL (%s)", strerror(-err));

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		if (checks[i].lazy && !lazy)
			t_skip("%s: needs FAN_PRE_FAULT (httphsm kernel)",
			       checks[i].name);
		else
			checks[i].fn(l);
	}

	listener_stop(l);
	thaw();
	return t_done();
}
