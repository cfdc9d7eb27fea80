// SPDX-License-Identifier: GPL-2.0
/*
 * t_uring - a slow pre-content listener does not stall an io_uring ring.
 *
 * One ring gets, in this order: a read and a write of unfilled ranges of a
 * watched file (the listener waits 2 s before filling and allowing each),
 * a read of an unwatched file, and a NOP.  The httphsm kernel punts the
 * watched requests to io-wq (patch 0011), so io_uring_enter() returns at
 * once and the last two complete long before the first two; the read then
 * returns the bytes the listener wrote.  Mainline raises the event inline in
 * the submitting task: there the stall is only reported (skipped).
 * Raw syscalls, no liburing; skipped where io_uring is not available.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DELAY_MS	2000
#define NREQ		4
#define LEN		4096

enum { REQ_READ_HSM, REQ_WRITE_HSM, REQ_READ_PLAIN, REQ_NOP };
static const char *const req_name[NREQ] = {
	"read of the watched file", "write of the watched file",
	"read of an unwatched file", "NOP",
};

static const char *hsm_file, *plain_file;

struct result {
	int setup_errno;	/* io_uring_setup() failed: skip */
	int error;		/* other failure of the child, as errno */
	int64_t enter_ms;	/* duration of the submitting io_uring_enter() */
	int64_t done_ms[NREQ];	/* completion seen, from before the submit */
	int res[NREQ];
	int64_t bad_byte;	/* first wrong byte of the read, or -1 */
};
static struct result *r;

static uint32_t slow_fill(struct listener *l, struct hsm_event *ev,
			  void *ctx)
{
	static unsigned char buf[1 << 16];

	(void)l;
	(void)ctx;
	if (!ev->has_range || ev->count > sizeof(buf))
		return FAN_ALLOW;
	sleep_ms(DELAY_MS);
	pattern_fill(buf, ev->offset, ev->count);
	if (pwrite(ev->fd, buf, ev->count, ev->offset) != (ssize_t)ev->count)
		return FAN_DENY_ERRNO(EIO);
	return FAN_ALLOW;
}

static int ring_setup(unsigned entries, struct io_uring_params *p)
{
	return (int)syscall(__NR_io_uring_setup, entries, p);
}

static int ring_enter(int fd, unsigned submit, unsigned min, unsigned flags)
{
	return (int)syscall(__NR_io_uring_enter, fd, submit, min, flags, NULL,
			    0);
}

static int child_ring(void *a)
{
	static unsigned char rbuf[LEN], wbuf[10], pbuf[8];
	struct io_uring_params p = { 0 };
	unsigned char *sq, *cq;
	struct io_uring_sqe *sqes;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	size_t sq_len, cq_len;
	int ring, hfd, pfd, seen = 0;
	int64_t t0;

	(void)a;
	memset(wbuf, 'w', sizeof(wbuf));
	ring = ring_setup(8, &p);
	if (ring < 0) {
		r->setup_errno = errno;
		return 0;
	}
	hfd = open(hsm_file, O_RDWR);
	pfd = open(plain_file, O_RDONLY);
	if (hfd < 0 || pfd < 0)
		goto fail;

	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if ((p.features & IORING_FEAT_SINGLE_MMAP) && cq_len > sq_len)
		sq_len = cq_len;
	sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  ring, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		goto fail;
	cq = sq;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			goto fail;
	}
	sqes = mmap(NULL, p.sq_entries * sizeof(*sqes), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sqes == MAP_FAILED)
		goto fail;
	sq_tail = (unsigned *)(sq + p.sq_off.tail);
	sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	sq_array = (unsigned *)(sq + p.sq_off.array);
	cq_head = (unsigned *)(cq + p.cq_off.head);
	cq_tail = (unsigned *)(cq + p.cq_off.tail);
	cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);

	for (unsigned i = 0; i < NREQ; i++) {
		unsigned tail = *sq_tail + i, idx = tail & *sq_mask;
		struct io_uring_sqe *s = &sqes[idx];

		memset(s, 0, sizeof(*s));
		s->user_data = i;
		switch (i) {
		case REQ_READ_HSM:
			s->opcode = IORING_OP_READ;
			s->fd = hfd;
			s->addr = (uintptr_t)rbuf;
			s->len = LEN;
			s->off = 0;
			break;
		case REQ_WRITE_HSM:
			s->opcode = IORING_OP_WRITE;
			s->fd = hfd;
			s->addr = (uintptr_t)wbuf;
			s->len = sizeof(wbuf);
			s->off = 8 * PAGE + 5;
			break;
		case REQ_READ_PLAIN:
			s->opcode = IORING_OP_READ;
			s->fd = pfd;
			s->addr = (uintptr_t)pbuf;
			s->len = 5;
			s->off = 0;
			break;
		default:
			s->opcode = IORING_OP_NOP;
			break;
		}
		sq_array[idx] = idx;
	}
	__atomic_store_n(sq_tail, *sq_tail + NREQ, __ATOMIC_RELEASE);

	t0 = now_ms();
	if (ring_enter(ring, NREQ, 0, 0) != NREQ)
		goto fail;
	r->enter_ms = now_ms() - t0;

	while (seen < NREQ) {
		unsigned head = *cq_head;

		if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
			if (ring_enter(ring, 0, 1, IORING_ENTER_GETEVENTS) < 0 &&
			    errno != EINTR)
				goto fail;
			continue;
		}
		for (; head != __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);
		     head++) {
			struct io_uring_cqe *c = &cqes[head & *cq_mask];

			if (c->user_data < NREQ) {
				r->done_ms[c->user_data] = now_ms() - t0;
				r->res[c->user_data] = c->res;
				seen++;
			}
		}
		__atomic_store_n(cq_head, head, __ATOMIC_RELEASE);
	}
	if (r->res[REQ_READ_HSM] == LEN)
		r->bad_byte = pattern_check(rbuf, 0, LEN);
	return 0;
fail:
	r->error = errno ? errno : EIO;
	return 1;
}

int main(int argc, char **argv)
{
	struct listener *l;
	int64_t slowest_fast = 0;
	int fd, st;
	bool stalled;

	t_init("t_uring", argc, argv, 120);
	hsm_file = t_path("uring_hsm.dat");
	plain_file = t_path("uring_plain.dat");
	make_sparse(hsm_file, 16 * PAGE);
	fd = open(plain_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || pwrite(fd, "plain", 5, 0) != 5 || close(fd))
		t_fatal("create %s", plain_file);
	r = shared_alloc(sizeof(*r));
	r->bad_byte = -1;

	l = listener_start(slow_fill, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS, hsm_file))
		t_fatal("mark");

	st = run_child(child_ring, NULL, 60000);
	listener_stop(l);
	if (r->setup_errno) {
		t_skip("io_uring not available: io_uring_setup: %s",
		       strerror(r->setup_errno));
		return t_done();
	}
	if (!t_ok(st == 0, "ring child done (status %d, %s)", st,
		  r->error ? strerror(r->error) : "no error"))
		return t_done();

	for (int i = 0; i < NREQ; i++)
		t_note("%s: res %d after %lld ms", req_name[i], r->res[i],
		       (long long)r->done_ms[i]);
	t_note("io_uring_enter() submitting took %lld ms",
	       (long long)r->enter_ms);

	t_ok(r->res[REQ_READ_HSM] == LEN && r->bad_byte < 0,
	     "read of the watched file returns the listener's bytes "
	     "(res %d, first wrong byte %lld)", r->res[REQ_READ_HSM],
	     (long long)r->bad_byte);
	t_ok(r->res[REQ_WRITE_HSM] == 10, "write of the watched file "
	     "(res %d)", r->res[REQ_WRITE_HSM]);
	t_ok(r->res[REQ_READ_PLAIN] == 5 && r->res[REQ_NOP] == 0,
	     "unwatched read and NOP succeed (res %d, %d)",
	     r->res[REQ_READ_PLAIN], r->res[REQ_NOP]);
	t_ok(r->done_ms[REQ_READ_HSM] >= DELAY_MS - 100,
	     "the watched read waited for the listener (%lld ms)",
	     (long long)r->done_ms[REQ_READ_HSM]);

	for (int i = REQ_READ_PLAIN; i < NREQ; i++)
		if (r->done_ms[i] > slowest_fast)
			slowest_fast = r->done_ms[i];
	/* Half the listener's delay: room for a slow (TCG) guest */
	stalled = r->enter_ms >= DELAY_MS / 2 || slowest_fast >= DELAY_MS / 2;
	if (!hsm_kernel && stalled) {
		t_skip("mainline: the ring stalled (submit %lld ms, unwatched "
		       "read and NOP after %lld ms)", (long long)r->enter_ms,
		       (long long)slowest_fast);
		return t_done();
	}
	t_ok(r->enter_ms < DELAY_MS / 2, "io_uring_enter() returns without "
	     "waiting for the listener (%lld ms)", (long long)r->enter_ms);
	t_ok(slowest_fast < DELAY_MS / 2 &&
	     slowest_fast < r->done_ms[REQ_READ_HSM],
	     "unwatched read and NOP complete before the watched read "
	     "(%lld ms vs %lld ms)", (long long)slowest_fast,
	     (long long)r->done_ms[REQ_READ_HSM]);
	return t_done();
}
