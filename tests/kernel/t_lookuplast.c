// SPDX-License-Identifier: GPL-2.0
/*
 * t_lookuplast - the last component of unlink, rmdir, mkdir, mknod,
 * symlink, link and rename raises FAN_HSM_LOOKUP before the directory is
 * locked (httphsm kernel).
 *
 * These calls look their last component up under the directory's lock,
 * which the path walk's lookup event does not cover: without an event of
 * their own, unlink() of a name that exists only remotely fails with ENOENT
 * and mkdir() creates a local directory next to a remote one.  A
 * filesystem mark asks for FAN_HSM_LOOKUP; the handler creates the entries
 * of a small remote tree relative to the event fd.  Checks:
 *  - unlink() and rmdir() of remote-only names succeed, after one event
 *    for the name;
 *  - mkdir() and mknod() of remote names fail with EEXIST;
 *  - rename() of a remote-only file moves the remote content, with an
 *    event for each name;
 *  - link() and symlink() of new names raise one event for the new name
 *    and succeed;
 *  - unlinkat() relative to the event fd in the handler raises no event
 *    (it would wait for the handler itself).
 * On mainline the lookup event does not exist: skipped.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;
static int handler_errors;
static int *result_errno;	/* shared */
static char *read_result;	/* shared */

/* The remote tree: names ending with '/' are directories */
static const char *const remote[] = {
	"gone-file", "gone-dir/", "taken-dir/", "taken-fifo", "old-name",
};

static uint32_t remote_lookup(struct listener *l, struct hsm_event *ev,
			      void *ctx)
{
	char want[300];
	int fd;

	(void)l;
	(void)ctx;
	if (!(ev->mask & FAN_HSM_LOOKUP) || !ev->has_name ||
	    strcmp(ev->path, dir))
		return FAN_ALLOW;
	if (!strcmp(ev->name, "self-unlink")) {
		/* Must not raise an event: we are the only listener thread */
		if (unlinkat(ev->fd, "not-there", 0) == 0 || errno != ENOENT)
			handler_errors++;
		return FAN_ALLOW;
	}
	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
		snprintf(want, sizeof(want), "%s/", ev->name);
		if (!strcmp(remote[i], want)) {
			if (mkdirat(ev->fd, ev->name, 0755))
				handler_errors++;
			return FAN_ALLOW;
		}
		if (strcmp(remote[i], ev->name))
			continue;
		fd = openat(ev->fd, ev->name, O_CREAT | O_EXCL | O_WRONLY,
			    0644);
		if (fd < 0 || write(fd, "remote\n", 7) != 7)
			handler_errors++;
		if (fd >= 0)
			close(fd);
		return FAN_ALLOW;
	}
	return FAN_ALLOW;	/* not remote: nothing to create */
}

enum op { UNLINK, RMDIR, MKDIR, MKNOD, SYMLINK, LINK, RENAME };

struct call {
	enum op op;
	const char *a, *b;	/* names in dir */
};

static int child_call(void *arg)
{
	const struct call *c = arg;
	char a[4096], b[4096];
	int r = -1, fd;
	ssize_t n;

	snprintf(a, sizeof(a), "%s/%s", dir, c->a);
	snprintf(b, sizeof(b), "%s/%s", dir, c->b ? c->b : "");
	switch (c->op) {
	case UNLINK:
		r = unlink(a);
		break;
	case RMDIR:
		r = rmdir(a);
		break;
	case MKDIR:
		r = mkdir(a, 0755);
		break;
	case MKNOD:
		r = mknod(a, S_IFIFO | 0644, 0);
		break;
	case SYMLINK:
		r = symlink("target", a);
		break;
	case LINK:
		r = link(b, a);
		break;
	case RENAME:
		r = rename(a, b);
		break;
	}
	*result_errno = r ? errno : 0;
	read_result[0] = '\0';
	if (!r && c->op == RENAME) {
		fd = open(b, O_RDONLY);
		n = fd >= 0 ? read(fd, read_result, 63) : -1;
		read_result[n > 0 ? n : 0] = '\0';
	}
	return 0;
}

/* Runs the call; the names of the lookup events, comma separated. */
static int run_call(struct listener *l, enum op op, const char *a,
		    const char *b, char *names, size_t size)
{
	struct call c = { op, a, b };
	struct hsm_event ev;
	int st;

	listener_clear(l);
	st = run_child(child_call, &c, 30000);
	names[0] = '\0';
	for (int i = 0; listener_event(l, i, &ev); i++) {
		if (!(ev.mask & FAN_HSM_LOOKUP))
			continue;
		if (names[0])
			strncat(names, ",", size - strlen(names) - 1);
		strncat(names, ev.name, size - strlen(names) - 1);
	}
	return st ? -1 : *result_errno;
}

static const char *errname(int err)
{
	return err >= 0 ? strerror(err) : "child failed";
}

static bool exists(const char *name)
{
	struct stat st;
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

int main(int argc, char **argv)
{
	char names[1024];
	struct listener *l;
	int err, fd;

	t_init("t_lookuplast", argc, argv, 180);
	if (!hsm_kernel) {
		t_skip("FAN_HSM_LOOKUP needs the httphsm kernel");
		return t_done();
	}
	dir = t_path("lookuplast.d");
	if (mkdir(dir, 0755) && errno != EEXIST)
		t_fatal("mkdir %s", dir);
	fd = open(t_path("lookuplast.d/local"), O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		t_fatal("create local file");
	close(fd);
	result_errno = shared_alloc(sizeof(*result_errno));
	read_result = shared_alloc(64);

	l = listener_start(remote_lookup, NULL);
	if (mark(listener_fd(l), FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
		 FAN_HSM_LOOKUP, dir))
		t_fatal("filesystem mark");

	err = run_call(l, UNLINK, "gone-file", NULL, names, sizeof(names));
	t_ok(err == 0 && !strcmp(names, "gone-file") && !exists("gone-file"),
	     "unlink() of a remote-only file: %s, events %s", errname(err),
	     names);

	err = run_call(l, RMDIR, "gone-dir", NULL, names, sizeof(names));
	t_ok(err == 0 && !strcmp(names, "gone-dir") && !exists("gone-dir"),
	     "rmdir() of a remote-only directory: %s, events %s",
	     errname(err), names);

	err = run_call(l, MKDIR, "taken-dir", NULL, names, sizeof(names));
	t_ok(err == EEXIST && !strcmp(names, "taken-dir"),
	     "mkdir() of a remote name: %s, events %s", errname(err), names);

	err = run_call(l, MKNOD, "taken-fifo", NULL, names, sizeof(names));
	t_ok(err == EEXIST && !strcmp(names, "taken-fifo"),
	     "mknod() of a remote name: %s, events %s", errname(err), names);

	err = run_call(l, RENAME, "old-name", "new-name", names,
		       sizeof(names));
	t_ok(err == 0 && !strcmp(names, "old-name,new-name") &&
	     !strcmp(read_result, "remote\n"),
	     "rename() of a remote-only file: %s, events %s, content \"%s\"",
	     errname(err), names, read_result);

	err = run_call(l, SYMLINK, "new-symlink", NULL, names, sizeof(names));
	t_ok(err == 0 && !strcmp(names, "new-symlink"),
	     "symlink() of a new name: %s, events %s", errname(err), names);

	err = run_call(l, LINK, "new-link", "local", names, sizeof(names));
	t_ok(err == 0 && !strcmp(names, "new-link"),
	     "link() to a new name: %s, events %s", errname(err), names);

	err = run_call(l, UNLINK, "gone-file", NULL, names, sizeof(names));
	t_ok(err == ENOENT && !names[0],
	     "unlink() again: %s from the negative dentry, events %s",
	     errname(err), names);

	err = run_call(l, UNLINK, "self-unlink", NULL, names, sizeof(names));
	t_ok(err == ENOENT && !strcmp(names, "self-unlink") &&
	     handler_errors == 0,
	     "unlinkat() relative to the event fd raises no event (%s, "
	     "events %s)", errname(err), names);

	t_ok(handler_errors == 0, "the handler created the entries (%d "
	     "errors)", handler_errors);
	listener_stop(l);
	return t_done();
}
