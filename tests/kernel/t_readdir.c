// SPDX-License-Identifier: GPL-2.0
/*
 * t_readdir - listing a marked empty directory shows the entries that the
 * handler of FAN_PRE_ACCESS | FAN_ONDIR created (httphsm kernel).
 *
 * The handler creates files, a directory and a symlink relative to the event
 * fd of the directory, then adds an ignore mask so that the directory raises
 * no more events.  A lister that started on the empty
 * directory must see all of them, with one event in total; a second listing
 * raises none.  Reading a regular file and listing an unmarked directory
 * raise no directory event.  On mainline the directory event does not exist:
 * skipped.
 */
#include "hsmtest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir, *plain_dir;
static const char *const names[] = { "alpha", "beta.txt", "gamma", "sub",
				     "link" };
#define NNAMES (sizeof(names) / sizeof(names[0]))
static int *seen;	/* shared: bit i set when names[i] was listed */
static int handler_errors;

static uint32_t populate(struct listener *l, struct hsm_event *ev, void *ctx)
{
	int fd;

	(void)ctx;
	if (!(ev->mask & FAN_ONDIR) || ev->has_range) {
		handler_errors++;
		return FAN_ALLOW;
	}
	for (size_t i = 0; i < 3; i++) {
		fd = openat(ev->fd, names[i], O_CREAT | O_EXCL | O_WRONLY,
			    0644);
		if (fd < 0 || write(fd, names[i], strlen(names[i])) < 0)
			handler_errors++;
		if (fd >= 0)
			close(fd);
	}
	if (mkdirat(ev->fd, "sub", 0755))
		handler_errors++;
	if (symlinkat("alpha", ev->fd, "link"))
		handler_errors++;
	/*
	 * Populated: no more events for this directory.  The ignore mask goes
	 * to the mark that asked for the events (one mark per group and
	 * object), which is not evictable, so neither is the ignore mask.
	 * With a filesystem mark, a daemon adds an evictable inode mark.
	 */
	if (fanotify_mark(listener_fd(l), FAN_MARK_ADD | FAN_MARK_IGNORE_SURV,
			  FAN_PRE_ACCESS | FAN_ONDIR, ev->fd, NULL))
		handler_errors++;
	return FAN_ALLOW;
}

static int list(void *a)
{
	DIR *d = opendir(a);
	struct dirent *e;

	if (!d)
		return 1;
	*seen = 0;
	while ((e = readdir(d)))
		for (size_t i = 0; i < NNAMES; i++)
			if (!strcmp(e->d_name, names[i]))
				*seen |= 1 << i;
	closedir(d);
	return 0;
}

int main(int argc, char **argv)
{
	struct listener *l;
	int st;

	t_init("t_readdir", argc, argv, 120);
	if (!hsm_kernel) {
		t_skip("FAN_PRE_ACCESS | FAN_ONDIR needs the httphsm kernel");
		return t_done();
	}
	dir = t_path("readdir.d");
	plain_dir = t_path("readdir.plain");
	mkdir(dir, 0755);
	mkdir(plain_dir, 0755);
	seen = shared_alloc(sizeof(*seen));

	l = listener_start(populate, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD, FAN_PRE_ACCESS | FAN_ONDIR,
		 dir))
		t_fatal("mark %s", dir);

	st = run_child(list, (void *)dir, 20000);
	t_ok(st == 0, "listing the marked empty directory completes "
	     "(status %d)", st);
	t_ok(*seen == (1 << NNAMES) - 1, "the listing shows the %zu entries "
	     "the handler created (seen mask 0x%x)", NNAMES, *seen);
	t_ok(handler_errors == 0, "the handler created the entries through "
	     "the event fd (%d errors)", handler_errors);
	t_ok(listener_nevents(l) == 1, "one event for the whole listing "
	     "(%d)", listener_nevents(l));
	if (listener_nevents(l) >= 1) {
		struct hsm_event ev;

		listener_event(l, 0, &ev);
		t_ok(ev.mask == (FAN_PRE_ACCESS | FAN_ONDIR) && !ev.has_range,
		     "event mask FAN_PRE_ACCESS | FAN_ONDIR (0x%llx), no range",
		     (unsigned long long)ev.mask);
		t_ok(!strcmp(ev.path, dir), "event fd is the directory (%s)",
		     ev.path);
	}

	listener_clear(l);
	st = run_child(list, (void *)dir, 20000);
	t_ok(st == 0 && *seen == (1 << NNAMES) - 1 &&
	     listener_nevents(l) == 0, "populated directory: listed again "
	     "without events (%d)", listener_nevents(l));

	/* Unmarked directory, and a regular file in the marked directory */
	listener_clear(l);
	st = run_child(list, (void *)plain_dir, 20000);
	t_ok(st == 0 && listener_nevents(l) == 0,
	     "unmarked directory: no event (%d)", listener_nevents(l));

	listener_stop(l);
	return t_done();
}
