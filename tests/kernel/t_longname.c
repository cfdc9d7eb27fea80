// SPDX-License-Identifier: GPL-2.0
/*
 * t_longname - a name longer than NAME_MAX raises no FAN_HSM_LOOKUP and
 * fails with ENAMETOOLONG (httphsm kernel).
 *
 * The path walk does not bound the length of a component before the file
 * system's ->lookup(), so a 300-byte name in a watched directory used to
 * reach the allocation of the name record of the lookup event, hit a
 * WARN_ON_ONCE there (a panic with panic_on_warn) and fail with ENOMEM.
 * Checks, with a filesystem mark for FAN_HSM_LOOKUP | FAN_PRE_ACCESS:
 *  - stat() and open() (with and without O_CREAT) of a 256- and a
 *    300-byte name fail with ENAMETOOLONG and raise no event;
 *  - so does a long name in the middle of a path;
 *  - a 255-byte name (NAME_MAX) still raises its event, with the whole
 *    name, and fails with ENOENT;
 *  - the kernel log gets no WARNING from any of this.
 * On mainline the lookup event does not exist: skipped.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int *result_errno;	/* shared */

struct access {
	const char *path;
	int how;		/* HOW_* */
};

#define HOW_STAT	0
#define HOW_OPEN	1
#define HOW_CREAT	2

static int child_access(void *arg)
{
	const struct access *a = arg;
	struct stat st;
	int fd;

	*result_errno = 0;
	switch (a->how) {
	case HOW_STAT:
		if (stat(a->path, &st))
			*result_errno = errno;
		return 0;
	case HOW_OPEN:
		fd = open(a->path, O_RDONLY);
		break;
	default:
		fd = open(a->path, O_CREAT | O_RDWR, 0644);
		break;
	}
	if (fd < 0)
		*result_errno = errno;
	else
		close(fd);
	return 0;
}

/* Opens /dev/kmsg at its end; -1 if the log cannot be read. */
static int kmsg_open_at_end(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Counts the records logged since kmsg_open_at_end() that contain s. */
static int kmsg_count(int fd, const char *s)
{
	char rec[8192];
	int n = 0;
	ssize_t len;

	for (;;) {
		len = read(fd, rec, sizeof(rec) - 1);
		if (len < 0) {
			if (errno == EPIPE)	/* overwritten records */
				continue;
			break;
		}
		rec[len] = '\0';
		if (strstr(rec, s))
			n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const char *const hows[] = { "stat", "open", "open(O_CREAT)" };
	static const size_t lens[] = { 256, 300 };
	char name[400], path[4096];
	struct listener *l;
	struct hsm_event ev;
	struct access a;
	int st, kmsg, warnings;
	const char *dir;

	t_init("t_longname", argc, argv, 120);
	if (!hsm_kernel) {
		t_skip("FAN_HSM_LOOKUP needs the httphsm kernel");
		return t_done();
	}
	dir = t_path("longname.d");
	if (mkdir(dir, 0755) && errno != EEXIST)
		t_fatal("mkdir %s", dir);
	result_errno = shared_alloc(sizeof(*result_errno));
	kmsg = kmsg_open_at_end();

	l = listener_start(NULL, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
		 FAN_HSM_LOOKUP | FAN_PRE_ACCESS | FAN_ONDIR, dir))
		t_fatal("filesystem mark");

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		memset(name, 'n', lens[i]);
		name[lens[i]] = '\0';
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		for (int how = HOW_STAT; how <= HOW_CREAT; how++) {
			listener_clear(l);
			a.path = path;
			a.how = how;
			st = run_child(child_access, &a, 30000);
			t_ok(st == 0 && *result_errno == ENAMETOOLONG &&
			     listener_nevents(l) == 0,
			     "%s of a %zu-byte name: %s, %d events", hows[how],
			     lens[i], st ? "child failed" :
			     strerror(*result_errno), listener_nevents(l));
		}
	}

	/* A long component in the middle of a path */
	memset(name, 'm', 300);
	name[300] = '\0';
	snprintf(path, sizeof(path), "%s/%s/file", dir, name);
	listener_clear(l);
	a.path = path;
	a.how = HOW_STAT;
	st = run_child(child_access, &a, 30000);
	t_ok(st == 0 && *result_errno == ENAMETOOLONG &&
	     listener_nevents(l) == 0,
	     "stat of dir/<300 bytes>/file: %s, %d events",
	     st ? "child failed" : strerror(*result_errno),
	     listener_nevents(l));

	/* NAME_MAX itself is a name like any other */
	memset(name, 'k', 255);
	name[255] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	listener_clear(l);
	a.path = path;
	a.how = HOW_STAT;
	st = run_child(child_access, &a, 30000);
	t_ok(st == 0 && *result_errno == ENOENT &&
	     listener_count(l, FAN_HSM_LOOKUP) == 1,
	     "stat of a 255-byte name: %s, %d lookup events",
	     st ? "child failed" : strerror(*result_errno),
	     listener_count(l, FAN_HSM_LOOKUP));
	if (listener_event(l, 0, &ev))
		t_ok(ev.has_name && strlen(ev.name) == 255 &&
		     !strcmp(ev.name, name),
		     "the event carries the whole 255-byte name (%zu bytes)",
		     strlen(ev.name));

	listener_stop(l);

	if (kmsg < 0) {
		t_skip("cannot read /dev/kmsg");
	} else {
		warnings = kmsg_count(kmsg, "WARNING");
		t_ok(warnings == 0, "no WARNING in the kernel log (%d)",
		     warnings);
		close(kmsg);
	}
	return t_done();
}
