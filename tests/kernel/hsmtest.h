/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hsmtest.h - shared helpers of the fanotify kernel tests (tests/kernel/).
 *
 * Each test program checks one behaviour of the pre-content events, prints
 * one TAP-like line per check ("ok N - ..." / "not ok N - ..."), and exits
 * non-zero if any check failed.  Every wait is bounded: accesses run in child
 * processes that are killed after a timeout, and the whole program is killed
 * by an alarm, so a kernel deadlock fails the test instead of hanging it.
 *
 * The listener is a thread of the test process; accessors are children.
 * If the test process dies, its fanotify group is released and the kernel
 * answers every pending event (EIO for pre-content events on the httphsm
 * kernel, allow on mainline), so children never stay blocked.
 */
#ifndef HSMTEST_H
#define HSMTEST_H

#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../fanotify-mode/fanotify-abi.h"

#define PAGE 4096ull

/* ---- reporting ---------------------------------------------------------- */

/* Set from uname: true on the httphsm kernel, false on mainline. */
extern bool hsm_kernel;
/* Directory on the file system under test, given as argv[1]. */
extern const char *base_dir;

/* Parse arguments, arm the global alarm, print the plan header. */
void t_init(const char *name, int argc, char **argv, unsigned timeout_s);
/* Async-signal-safe cleanup run before exiting on the global alarm. */
void t_on_timeout(void (*fn)(void));
/* Record one check; returns cond. */
bool t_ok(bool cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void t_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Abort the program with a failure (setup errors). */
void t_fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
/* Print the summary; returns the exit status. */
int t_done(void);

/* base_dir + "/" + rel, in a static ring of buffers. */
const char *t_path(const char *rel);

/* ---- content ------------------------------------------------------------ */

/* The content the listener "fetches" for a file: a function of the offset. */
unsigned char pattern_byte(uint64_t off);
void pattern_fill(unsigned char *buf, uint64_t off, size_t len);
/* Write the pattern over [off, off + len) of fd (an event fd), clipped to
 * the file size; returns the end of what was written, or -1. */
int64_t pattern_write(int fd, uint64_t off, uint64_t len);
/* Offset of the first byte that differs from the pattern, or -1. */
int64_t pattern_check(const unsigned char *buf, uint64_t off, size_t len);

/* Create (or truncate) a sparse file of the given size: all holes. */
void make_sparse(const char *path, uint64_t size);

/* ---- listener ----------------------------------------------------------- */

struct hsm_event {
	uint64_t mask;
	int fd;			/* event fd, valid only inside the handler */
	pid_t pid;
	bool has_range;
	uint64_t offset, count;
	bool has_name;
	char name[256];
	char path[4096];	/* readlink of the event fd */
	uint32_t response;	/* what the handler answered */
	int resp_errno;		/* errno of writing the response, or 0 */
};

struct listener;

/*
 * Called on the listener thread for each event; returns the response to a
 * permission event.  If writing the response fails (the kernel refused it),
 * the failure is recorded in the event log and FAN_ALLOW is sent instead.
 */
typedef uint32_t (*hsm_handler)(struct listener *l, struct hsm_event *ev,
				void *ctx);

/* fanotify_init(FAN_CLASS_PRE_CONTENT | ...) and a thread reading events. */
struct listener *listener_start(hsm_handler handler, void *ctx);
int listener_fd(struct listener *l);
void listener_stop(struct listener *l);
/* Event log, filled by the listener thread. */
void listener_clear(struct listener *l);
int listener_nevents(struct listener *l);
/* Copy of event i of the log (0 = oldest); false if out of range. */
bool listener_event(struct listener *l, int i, struct hsm_event *out);
/* Number of logged events whose mask has any bit of mask. */
int listener_count(struct listener *l, uint64_t mask);
/* Wait until at least n events are logged, at most timeout_ms. */
bool listener_wait(struct listener *l, int n, int timeout_ms);

/* fanotify_mark() wrapper that returns 0 or -errno. */
int mark(int fan, unsigned flags, uint64_t mask, const char *path);
/*
 * Remove every mark of the group, then close it: the orderly way out.  On
 * the httphsm kernel a pre-content group released with mount or filesystem
 * marks in place makes accesses there fail with EIO (t_orphan), which would
 * break the programs that run after on the same file system.
 */
void fan_close(int fan);

/* ---- children ----------------------------------------------------------- */

/* Result of run_child(): exit status, or one of these. */
#define CHILD_TIMEOUT	-1	/* killed after the timeout */
#define CHILD_SIGNALED	-2

/*
 * Run fn(arg) in a child process and wait for it at most timeout_ms.
 * The child's return value is its exit status.  Children must only use
 * syscalls and the helpers above that do not print (no stdio).
 */
int run_child(int (*fn)(void *), void *arg, int timeout_ms);
/* Same, but do not wait: returns the pid; finish with wait_child(). */
pid_t start_child(int (*fn)(void *), void *arg);
int wait_child(pid_t pid, int timeout_ms);

/* Child bodies: read 10 bytes at offset 0 of the file path, or list the
 * directory path to its end.  0 on success, 1 on failure. */
int child_pread10(void *path);
int child_list_dir(void *path);

/* Shared (MAP_SHARED) memory for results of children. */
void *shared_alloc(size_t size);

/* Milliseconds since an arbitrary start. */
int64_t now_ms(void);
void sleep_ms(int ms);

/* Freezing the file system under test (base_dir's): freeze_setup() opens
 * it and has the global timeout thaw it; freezer() is a child's body that
 * freezes it (FIFREEZE, which waits for writers in progress); thaw() thaws
 * it, returning what FITHAW did (0 on success). */
void freeze_setup(void);
int freezer(void *unused);
int thaw(void);

#endif /* HSMTEST_H */
