// SPDX-License-Identifier: GPL-2.0
/*
 * t_exec - an executable whose content is not present yet runs after the
 * listener fills it.
 *
 * The file has the size of /bin/true and only holes.  exec reads its header
 * and maps its segments, each raising FAN_PRE_ACCESS; the handler copies the
 * reported range from /bin/true through the event fd.  For that, exec must
 * not deny writes (ETXTBSY) to a file watched for pre-content events, as in
 * mainline.  Also checks that a file descriptor opened before the mark gets
 * no pre-content events (as mainline decides at open).  Runs on mainline
 * (6.14+) too.
 *
 * With a listener of page faults (FAN_PRE_FAULT, lazy mappings), exec still
 * gets its segments filled at mmap time: the kernel touches them inside
 * execve() (the bss tail is cleared with clear_user()), where a fault can
 * only be answered from what is there (FAN_HSM_NOFILL): the handler denies
 * such an event unless it filled the range before.  Skipped on mainline.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOURCE "/bin/true"
/* Its data segment ends 145 KiB in, with a bss: far from what exec reads */
#define LAZY_SOURCE "/bin/ls"

static const char *prog;
static int source_fd = -1;
static int fill_errors;
static int nofill_denied;
static int pre_fd = -1;
static bool filled[1024];	/* pages of the program filled */

static bool range_filled(uint64_t off, uint64_t end)
{
	for (uint64_t p = off / PAGE; p * PAGE < end; p++)
		if (p >= sizeof(filled) || !filled[p])
			return false;
	return true;
}

static uint32_t fill_from_source(struct listener *l, struct hsm_event *ev,
				 void *ctx)
{
	static unsigned char buf[1 << 20];
	uint64_t off = ev->offset, end = ev->offset + ev->count;

	(void)l;
	(void)ctx;
	if (!ev->has_range)
		return FAN_ALLOW;
	/* Must not write: allowed only if filled before */
	if (ev->mask & FAN_HSM_NOFILL) {
		if (range_filled(off, end))
			return FAN_ALLOW;
		nofill_denied++;
		return FAN_DENY;
	}
	while (off < end) {
		size_t n = end - off < sizeof(buf) ? end - off : sizeof(buf);
		ssize_t got = pread(source_fd, buf, n, off);

		if (got <= 0)
			break;	/* past the end of the source */
		if (pwrite(ev->fd, buf, got, off) != got) {
			fill_errors++;
			return FAN_DENY_ERRNO(EIO);
		}
		off += got;
	}
	for (uint64_t p = ev->offset / PAGE; p * PAGE < off && p < sizeof(filled); p++)
		filled[p] = true;
	return FAN_ALLOW;
}

static int run_prog(void *a)
{
	char *argv[] = { (char *)prog, NULL };

	(void)a;
	execv(prog, argv);
	return errno == ETXTBSY ? 100 : 101;
}

static int read_pre_opened(void *a)
{
	char buf[16];

	(void)a;
	return pread(pre_fd, buf, sizeof(buf), 0) == sizeof(buf) ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct listener *l;
	struct stat st;
	int status;

	t_init("t_exec", argc, argv, 120);
	prog = t_path("exec.prog");
	source_fd = open(SOURCE, O_RDONLY);
	if (source_fd < 0 || fstat(source_fd, &st))
		t_fatal("open %s", SOURCE);
	make_sparse(prog, st.st_size);
	if (chmod(prog, 0755))
		t_fatal("chmod");

	/* Opened before the mark: no pre-content events through this fd */
	pre_fd = open(prog, O_RDONLY);
	if (pre_fd < 0)
		t_fatal("open %s", prog);

	l = listener_start(fill_from_source, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, prog))
		t_fatal("mark %s", prog);

	status = run_child(read_pre_opened, NULL, 10000);
	t_ok(status == 0 && listener_nevents(l) == 0, "a file descriptor "
	     "opened before the mark raises no pre-content event (%d)",
	     listener_nevents(l));
	close(pre_fd);

	status = run_child(run_prog, NULL, 30000);
	t_ok(status == 0, "the never filled executable runs (status %d%s)",
	     status, status == 100 ? ": exec denied writes, ETXTBSY" :
	     status == CHILD_TIMEOUT ? ": timeout" : "");
	t_ok(listener_nevents(l) > 0 && fill_errors == 0, "exec raised "
	     "FAN_PRE_ACCESS and the handler filled it (%d events, %d "
	     "errors)", listener_nevents(l), fill_errors);

	listener_stop(l);

	/* The same with lazy mappings, on a file never filled */
	close(source_fd);
	source_fd = open(LAZY_SOURCE, O_RDONLY);
	if (source_fd < 0 || fstat(source_fd, &st))
		t_fatal("open %s", LAZY_SOURCE);
	prog = t_path("exec.lazy");
	make_sparse(prog, st.st_size);
	if (chmod(prog, 0755))
		t_fatal("chmod");
	l = listener_start(fill_from_source, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS | FAN_PRE_FAULT, prog)) {
		t_skip("no FAN_PRE_FAULT on this kernel (%s)", strerror(errno));
	} else {
		status = run_child(run_prog, NULL, 30000);
		t_ok(status == 0 && nofill_denied == 0 && fill_errors == 0,
		     "with FAN_PRE_FAULT the never filled executable runs, "
		     "its pages filled before the kernel touches them "
		     "(status %d, %d events, %d FAN_HSM_NOFILL denied)", status,
		     listener_nevents(l), nofill_denied);
	}
	listener_stop(l);
	return t_done();
}
