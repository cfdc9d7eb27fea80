// SPDX-License-Identifier: GPL-2.0
/*
 * t_ignore - an ignore mark silences pre-content events.
 *
 * With a filesystem mark for FAN_PRE_ACCESS, a file raises events until the
 * listener adds an evictable ignore mark on it (what a daemon does once the
 * file is fully present); then it raises none, and again after the ignore
 * mark is removed.  Both ignore APIs are checked (FAN_MARK_IGNORE and the
 * legacy FAN_MARK_IGNORED_MASK).  On the httphsm kernel the same holds for a
 * directory: FAN_PRE_ACCESS | FAN_ONDIR (listing) and FAN_HSM_LOOKUP (lookup
 * of a missing name) stop once the directory has an ignore mark.
 * Runs on mainline (6.14+) too, without the directory part.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file, *other, *dir;
static const char *lookup_name;

static int lookup_missing(void *a)
{
	struct stat st;
	char path[4096];

	(void)a;
	snprintf(path, sizeof(path), "%s/%s", dir, lookup_name);
	return stat(path, &st) < 0 && errno == ENOENT ? 0 : 1;
}

/* Events raised by fn(arg) */
static int events_of(struct listener *l, int (*fn)(void *), void *arg)
{
	int st;

	listener_clear(l);
	st = run_child(fn, arg, 10000);
	if (st != 0)
		return -100 + st;
	return listener_nevents(l);
}

int main(int argc, char **argv)
{
	struct listener *l;
	int fan, n;

	t_init("t_ignore", argc, argv, 120);
	file = t_path("ignore.dat");
	other = t_path("ignore.other");
	dir = t_path("ignore.d");
	make_sparse(file, 65536);
	make_sparse(other, 65536);
	mkdir(dir, 0755);

	l = listener_start(NULL, NULL);
	fan = listener_fd(l);
	if (mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
		 FAN_PRE_ACCESS | (hsm_kernel ? FAN_ONDIR | FAN_HSM_LOOKUP : 0),
		 base_dir))
		t_fatal("filesystem mark");

	n = events_of(l, child_pread10, (void *)file);
	t_ok(n == 1, "file without ignore mark: %d events", n);

	if (mark(fan, FAN_MARK_ADD | FAN_MARK_IGNORE_SURV | FAN_MARK_EVICTABLE,
		 FAN_PRE_ACCESS, file))
		t_fatal("ignore mark");
	n = events_of(l, child_pread10, (void *)file);
	t_ok(n == 0, "evictable FAN_MARK_IGNORE mark: %d events", n);
	n = events_of(l, child_pread10, (void *)other);
	t_ok(n == 1, "other file still raises events: %d events", n);

	if (mark(fan, FAN_MARK_REMOVE | FAN_MARK_IGNORE_SURV, FAN_PRE_ACCESS,
		 file))
		t_fatal("remove ignore mark");
	n = events_of(l, child_pread10, (void *)file);
	t_ok(n == 1, "ignore mark removed: %d events", n);

	if (mark(fan, FAN_MARK_ADD | FAN_MARK_IGNORED_MASK |
		 FAN_MARK_IGNORED_SURV_MODIFY, FAN_PRE_ACCESS, other))
		t_fatal("legacy ignore mark");
	n = events_of(l, child_pread10, (void *)other);
	t_ok(n == 0, "legacy FAN_MARK_IGNORED_MASK mark: %d events", n);

	if (hsm_kernel) {
		n = events_of(l, child_list_dir, (void *)dir);
		t_ok(n >= 1 && listener_count(l, FAN_ONDIR) == n,
		     "directory listing without ignore mark: %d events", n);
		lookup_name = "missing1";
		n = events_of(l, lookup_missing, NULL);
		t_ok(n == 1 && listener_count(l, FAN_HSM_LOOKUP) == 1,
		     "lookup of a missing name: %d events", n);
		n = events_of(l, lookup_missing, NULL);
		t_ok(n == 0, "second lookup of the same missing name is a "
		     "dcache hit: %d events", n);

		if (mark(fan, FAN_MARK_ADD | FAN_MARK_IGNORE_SURV |
			 FAN_MARK_EVICTABLE,
			 FAN_PRE_ACCESS | FAN_ONDIR | FAN_HSM_LOOKUP, dir))
			t_fatal("directory ignore mark");
		n = events_of(l, child_list_dir, (void *)dir);
		t_ok(n == 0, "directory with ignore mark, listing: %d events",
		     n);
		lookup_name = "missing2";
		n = events_of(l, lookup_missing, NULL);
		t_ok(n == 0, "directory with ignore mark, lookup: %d events",
		     n);
	} else {
		t_skip("directory events need the httphsm kernel");
	}

	listener_stop(l);
	return t_done();
}
