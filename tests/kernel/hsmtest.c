// SPDX-License-Identifier: GPL-2.0
/*
 * hsmtest.c - shared helpers of the fanotify kernel tests, see hsmtest.h.
 */
#include "hsmtest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool hsm_kernel;
const char *base_dir;

static const char *test_name;
static int nchecks, nfailed;

/* ---- reporting ---------------------------------------------------------- */

static void (*timeout_hook)(void);

void t_on_timeout(void (*fn)(void))
{
	timeout_hook = fn;
}

static void on_alarm(int sig)
{
	static const char msg[] = "not ok - timed out (global alarm): "
				  "deadlock or hung wait\n";

	(void)sig;
	if (timeout_hook)
		timeout_hook();
	/* Only async-signal-safe calls here */
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

void t_init(const char *name, int argc, char **argv, unsigned timeout_s)
{
	struct utsname u;
	const char *env = getenv("HSM_KERNEL");

	test_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR\n"
			"DIR: an empty directory on the ext4/xfs under test\n",
			argv[0]);
		exit(2);
	}
	base_dir = argv[1];

	if (env)
		hsm_kernel = atoi(env) != 0;
	else
		hsm_kernel = uname(&u) == 0 && strstr(u.release, "httphsm");

	signal(SIGALRM, on_alarm);
	alarm(timeout_s);
	printf("# %s on %s (%s kernel)\n", name, base_dir,
	       hsm_kernel ? "httphsm" : "mainline");
}

static void vreport(const char *prefix, const char *fmt, va_list ap)
{
	printf("%s %d - ", prefix, nchecks);
	vprintf(fmt, ap);
	putchar('\n');
}

bool t_ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	nchecks++;
	if (!cond)
		nfailed++;
	va_start(ap, fmt);
	vreport(cond ? "ok" : "not ok", fmt, ap);
	va_end(ap);
	return cond;
}

void t_skip(const char *fmt, ...)
{
	va_list ap;

	nchecks++;
	printf("ok %d - # SKIP ", nchecks);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

void t_note(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

void t_fatal(const char *fmt, ...)
{
	va_list ap;

	printf("not ok - setup failed: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (errno %d: %s)\n", errno, strerror(errno));
	exit(1);
}

int t_done(void)
{
	printf("# %s: %d checks, %d failed\n", test_name, nchecks, nfailed);
	return nfailed ? 1 : 0;
}

const char *t_path(const char *rel)
{
	static char bufs[8][4096];
	static int next;
	char *b = bufs[next++ % 8];

	snprintf(b, sizeof(bufs[0]), "%s/%s", base_dir, rel);
	return b;
}

/* ---- content ------------------------------------------------------------ */

unsigned char pattern_byte(uint64_t off)
{
	/* Changes within a page and from page to page */
	return (unsigned char)((off * 131 + (off >> 12) * 7 + 1) % 251);
}

void pattern_fill(unsigned char *buf, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(off + i);
}

int64_t pattern_write(int fd, uint64_t off, uint64_t len)
{
	unsigned char buf[64 * 1024];
	uint64_t end = off + len;
	struct stat st;

	if (fstat(fd, &st))
		return -1;
	if (end > (uint64_t)st.st_size)
		end = st.st_size;
	for (; off < end; off += sizeof(buf)) {
		size_t n = end - off < sizeof(buf) ? end - off : sizeof(buf);

		pattern_fill(buf, off, n);
		if (pwrite(fd, buf, n, off) != (ssize_t)n)
			return -1;
	}
	return (int64_t)end;
}

int64_t pattern_check(const unsigned char *buf, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern_byte(off + i))
			return (int64_t)(off + i);
	return -1;
}

void make_sparse(const char *path, uint64_t size)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);

	if (fd < 0)
		t_fatal("create %s", path);
	if (ftruncate(fd, (off_t)size))
		t_fatal("ftruncate %s", path);
	close(fd);
}

/* ---- listener ----------------------------------------------------------- */

#define LOG_MAX 256

struct listener {
	int fan;
	pthread_t thread;
	hsm_handler handler;
	void *ctx;
	volatile bool stop;
	pthread_mutex_t lock;	/* protects log, nlog */
	pthread_cond_t cond;	/* signalled when an event is logged */
	struct hsm_event log[LOG_MAX];
	int nlog;
};

static void parse_records(struct fanotify_event_metadata *m,
			  struct hsm_event *ev)
{
	char *p = (char *)m + m->metadata_len;
	char *end = (char *)m + m->event_len;

	while (p + sizeof(struct fanotify_event_info_header) <= end) {
		struct fanotify_event_info_header hdr;

		memcpy(&hdr, p, sizeof(hdr));
		if (hdr.len < sizeof(hdr) || p + hdr.len > end)
			break;
		if (hdr.info_type == FAN_EVENT_INFO_TYPE_RANGE) {
			struct fanotify_event_info_range r;

			memcpy(&r, p, sizeof(r));
			ev->has_range = true;
			ev->offset = r.offset;
			ev->count = r.count;
		} else if (hdr.info_type == FAN_EVENT_INFO_TYPE_HSM_NAME) {
			struct fanotify_event_info_hsm_name n;
			size_t len;

			memcpy(&n, p, sizeof(n));
			len = n.name_len;
			if (len >= sizeof(ev->name))
				len = sizeof(ev->name) - 1;
			memcpy(ev->name, p + sizeof(n), len);
			ev->name[len] = '\0';
			ev->has_name = true;
		}
		p += hdr.len;
	}
}

static void handle_one(struct listener *l, struct fanotify_event_metadata *m)
{
	struct hsm_event ev;
	char link[64];
	int slot, resp_errno = 0;
	ssize_t n;

	memset(&ev, 0, sizeof(ev));
	ev.mask = m->mask;
	ev.fd = m->fd;
	ev.pid = m->pid;
	parse_records(m, &ev);
	if (m->fd >= 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", m->fd);
		n = readlink(link, ev.path, sizeof(ev.path) - 1);
		ev.path[n > 0 ? n : 0] = '\0';
	}

	ev.response = FAN_ALLOW;
	if (l->handler)
		ev.response = l->handler(l, &ev, l->ctx);

	/*
	 * Log before answering: once the accessor returns, its event is in
	 * the log.  Only the main thread clears the log, and only while no
	 * accessor runs, so slot stays ours.
	 */
	pthread_mutex_lock(&l->lock);
	slot = l->nlog < LOG_MAX ? l->nlog++ : -1;
	if (slot >= 0) {
		l->log[slot] = ev;
		l->log[slot].fd = -1;
	}
	pthread_mutex_unlock(&l->lock);

	if (m->mask & (FAN_PRE_ACCESS | FAN_PRE_FAULT | FAN_HSM_LOOKUP |
		       FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_OPEN_EXEC_PERM)) {
		struct fanotify_response r = { .fd = m->fd,
					       .response = ev.response };

		if (write(l->fan, &r, sizeof(r)) != sizeof(r)) {
			/* Refused answer: record it, then let the access go */
			resp_errno = errno;
			pthread_mutex_lock(&l->lock);
			if (slot >= 0 && slot < l->nlog)
				l->log[slot].resp_errno = resp_errno;
			pthread_mutex_unlock(&l->lock);
			r.response = FAN_ALLOW;
			if (write(l->fan, &r, sizeof(r)) != sizeof(r))
				perror("fanotify response");
		}
	}
	if (m->fd >= 0)
		close(m->fd);

	pthread_mutex_lock(&l->lock);
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static void *listener_main(void *arg)
{
	struct listener *l = arg;
	/* Aligned for the 64-bit fields of the metadata and records */
	static _Alignas(8) char buf[65536];

	while (!l->stop) {
		struct pollfd pfd = { .fd = l->fan, .events = POLLIN };
		struct fanotify_event_metadata *m;
		ssize_t len;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		len = read(l->fan, buf, sizeof(buf));
		if (len <= 0)
			continue;
		m = (struct fanotify_event_metadata *)buf;
		for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len))
			handle_one(l, m);
	}
	return NULL;
}

struct listener *listener_start(hsm_handler handler, void *ctx)
{
	struct listener *l = calloc(1, sizeof(*l));

	if (!l)
		t_fatal("calloc");
	l->fan = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC |
			       FAN_NONBLOCK, O_RDWR | O_LARGEFILE);
	if (l->fan < 0)
		t_fatal("fanotify_init(FAN_CLASS_PRE_CONTENT)");
	l->handler = handler;
	l->ctx = ctx;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	if (pthread_create(&l->thread, NULL, listener_main, l))
		t_fatal("pthread_create");
	return l;
}

int listener_fd(struct listener *l)
{
	return l->fan;
}

void fan_close(int fan)
{
	static const unsigned int types[] = { FAN_MARK_INODE, FAN_MARK_MOUNT,
					      FAN_MARK_FILESYSTEM };

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		fanotify_mark(fan, FAN_MARK_FLUSH | types[i], 0, AT_FDCWD, NULL);
	close(fan);
}

void listener_stop(struct listener *l)
{
	l->stop = true;
	pthread_join(l->thread, NULL);
	fan_close(l->fan);
	free(l);
}

void listener_clear(struct listener *l)
{
	pthread_mutex_lock(&l->lock);
	l->nlog = 0;
	pthread_mutex_unlock(&l->lock);
}

int listener_nevents(struct listener *l)
{
	int n;

	pthread_mutex_lock(&l->lock);
	n = l->nlog;
	pthread_mutex_unlock(&l->lock);
	return n;
}

bool listener_event(struct listener *l, int i, struct hsm_event *out)
{
	bool found = false;

	pthread_mutex_lock(&l->lock);
	if (i >= 0 && i < l->nlog) {
		*out = l->log[i];
		found = true;
	}
	pthread_mutex_unlock(&l->lock);
	return found;
}

int listener_count(struct listener *l, uint64_t mask)
{
	int n = 0;

	pthread_mutex_lock(&l->lock);
	for (int i = 0; i < l->nlog; i++)
		if (l->log[i].mask & mask)
			n++;
	pthread_mutex_unlock(&l->lock);
	return n;
}

bool listener_wait(struct listener *l, int n, int timeout_ms)
{
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&l->lock);
	while (l->nlog < n)
		if (pthread_cond_timedwait(&l->cond, &l->lock, &ts))
			break;
	ok = l->nlog >= n;
	pthread_mutex_unlock(&l->lock);
	return ok;
}

int mark(int fan, unsigned flags, uint64_t mask, const char *path)
{
	if (fanotify_mark(fan, flags, mask, AT_FDCWD, path))
		return -errno;
	return 0;
}

/* ---- children ----------------------------------------------------------- */

pid_t start_child(int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		t_fatal("fork");
	if (pid == 0) {
		alarm(0);
		_exit(fn(arg) & 0xff);
	}
	return pid;
}

int wait_child(pid_t pid, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return CHILD_SIGNALED;
		if (now_ms() > deadline) {
			/*
			 * A task waiting for a fanotify answer is killable; one
			 * stuck in the kernel (e.g. a freeze) may not be: do
			 * not wait for it forever.
			 */
			kill(pid, SIGKILL);
			for (int i = 0; i < 200; i++) {
				if (waitpid(pid, &status, WNOHANG) == pid)
					break;
				sleep_ms(10);
			}
			return CHILD_TIMEOUT;
		}
		sleep_ms(5);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return CHILD_SIGNALED;
}

int child_pread10(void *path)
{
	char buf[10];
	int fd = open(path, O_RDONLY);

	return fd >= 0 && pread(fd, buf, sizeof(buf), 0) == sizeof(buf) ? 0 : 1;
}

int child_list_dir(void *path)
{
	DIR *d = opendir(path);

	if (!d)
		return 1;
	while (readdir(d))
		;
	closedir(d);
	return 0;
}

int run_child(int (*fn)(void *), void *arg, int timeout_ms)
{
	return wait_child(start_child(fn, arg), timeout_ms);
}

void *shared_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		t_fatal("mmap shared");
	return p;
}

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int frozen_fs_fd = -1;	/* any fd on the fs, for FIFREEZE/FITHAW */

int thaw(void)
{
	return frozen_fs_fd >= 0 ? ioctl(frozen_fs_fd, FITHAW, 0) : -1;
}

static void thaw_on_timeout(void)
{
	thaw();
}

void freeze_setup(void)
{
	frozen_fs_fd = open(base_dir, O_RDONLY | O_DIRECTORY);
	if (frozen_fs_fd < 0)
		t_fatal("open %s", base_dir);
	t_on_timeout(thaw_on_timeout);
}

int freezer(void *unused)
{
	(void)unused;
	return ioctl(frozen_fs_fd, FIFREEZE, 0) ? 1 : 0;
}
