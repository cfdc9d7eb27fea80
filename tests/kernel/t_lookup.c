// SPDX-License-Identifier: GPL-2.0
/*
 * t_lookup - a never listed deep path resolves after the handler of
 * FAN_HSM_LOOKUP creates each level (httphsm kernel).
 *
 * A filesystem mark asks for FAN_HSM_LOOKUP.  The handler plays a remote
 * tree: when a name of that tree is looked up in a directory and is not in
 * the dentry cache, it creates the entry relative to the event fd (a
 * directory, or a file with its content).  Checks:
 *  - open()+read() of root/a/b/c/d/file works, with one event per level,
 *    carrying the names in order;
 *  - once resolved, the same path raises no event (dcache hits);
 *  - a name that is not in the tree: ENOENT, one event, then a negative
 *    dentry and no more events;
 *  - open(O_CREAT) of a remote file opens the remote content, not an empty
 *    new file;
 *  - FAN_DENY_ERRNO(EIO) fails the lookup with EIO;
 *  - lookups relative to the event fd raise no events (the handler looks a
 *    name up itself, which would deadlock otherwise);
 *  - an ignore mark on a directory silences its lookups;
 *  - after the caches are dropped, lookups raise events again and find the
 *    entries created before.
 * On mainline the lookup event does not exist: skipped.
 */
#include "hsmtest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;
static int handler_errors;
static int self_lookup_done;

/* The remote tree: directories end with '/'; files have content */
static const struct remote {
	const char *path;
	const char *content;
} tree[] = {
	{ "a/", NULL },
	{ "a/b/", NULL },
	{ "a/b/c/", NULL },
	{ "a/b/c/d/", NULL },
	{ "a/b/c/d/file", "hello from the deep\n" },
	{ "a/b/other", "other\n" },
	{ "x/", NULL },
	{ "x/y.txt", "remote y\n" },
	{ "forbidden", "never\n" },
};

static const struct remote *find_remote(const char *rel)
{
	for (size_t i = 0; i < sizeof(tree) / sizeof(tree[0]); i++) {
		size_t n = strlen(tree[i].path);

		if (!strcmp(tree[i].path, rel) ||
		    (tree[i].path[n - 1] == '/' && n - 1 == strlen(rel) &&
		     !strncmp(tree[i].path, rel, n - 1)))
			return &tree[i];
	}
	return NULL;
}

static uint32_t remote_lookup(struct listener *l, struct hsm_event *ev,
			      void *ctx)
{
	const struct remote *r;
	size_t rootlen = strlen(root);
	char rel[4096];
	struct stat st;
	int fd;

	(void)l;
	(void)ctx;
	if (!(ev->mask & FAN_HSM_LOOKUP) || !ev->has_name)
		return FAN_ALLOW;

	/* Path of the directory relative to root, then the name */
	if (strncmp(ev->path, root, rootlen))
		return FAN_ALLOW;
	snprintf(rel, sizeof(rel), "%s%s%s", ev->path + rootlen +
		 (ev->path[rootlen] == '/'), ev->path[rootlen] ? "/" : "",
		 ev->name);

	if (!strcmp(ev->name, "self-lookup")) {
		/* Must not raise an event: we are the only listener thread */
		if (fstatat(ev->fd, "not-there", &st, 0) == 0 ||
		    errno != ENOENT)
			handler_errors++;
		self_lookup_done = 1;
		return FAN_ALLOW;
	}
	r = find_remote(rel);
	if (!r)
		return FAN_ALLOW;	/* no such remote entry: ENOENT */
	if (!strcmp(ev->name, "forbidden"))
		return FAN_DENY_ERRNO(EIO);
	if (!r->content) {
		if (mkdirat(ev->fd, ev->name, 0755) && errno != EEXIST)
			handler_errors++;
		return FAN_ALLOW;
	}
	fd = openat(ev->fd, ev->name, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0) {
		if (errno != EEXIST)
			handler_errors++;
		return FAN_ALLOW;
	}
	if (write(fd, r->content, strlen(r->content)) < 0)
		handler_errors++;
	close(fd);
	return FAN_ALLOW;
}

static char *read_result;	/* shared */
static int *result_errno;	/* shared */

/* Opens root/rel with flags and reads it into read_result (errno into
 * result_errno). */
static int open_and_read(const char *rel, int flags)
{
	char path[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	*result_errno = 0;
	read_result[0] = '\0';
	fd = open(path, flags, 0644);
	if (fd < 0) {
		*result_errno = errno;
		return 0;
	}
	n = read(fd, read_result, 255);
	read_result[n > 0 ? n : 0] = '\0';
	return 0;
}

static int read_path(void *a)
{
	return open_and_read(a, O_RDONLY);
}

static int create_path(void *a)
{
	return open_and_read(a, O_CREAT | O_RDWR);
}

static int stat_path(void *a)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, (char *)a);
	*result_errno = stat(path, &st) ? errno : 0;
	return 0;
}

static void names_of_events(struct listener *l, char *out, size_t size)
{
	struct hsm_event ev;

	out[0] = '\0';
	for (int i = 0; listener_event(l, i, &ev); i++) {
		if (!(ev.mask & FAN_HSM_LOOKUP))
			continue;
		if (out[0])
			strncat(out, ",", size - strlen(out) - 1);
		strncat(out, ev.name, size - strlen(out) - 1);
	}
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd < 0 || write(fd, "2", 1) != 1)
		t_note("cannot drop caches");
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	char names[1024];
	struct listener *l;
	struct hsm_event ev;
	int st, fan;

	t_init("t_lookup", argc, argv, 180);
	if (!hsm_kernel) {
		t_skip("FAN_HSM_LOOKUP needs the httphsm kernel");
		return t_done();
	}
	root = t_path("lookup.root");
	if (mkdir(root, 0755) && errno != EEXIST)
		t_fatal("mkdir %s", root);
	read_result = shared_alloc(256);
	result_errno = shared_alloc(sizeof(*result_errno));

	l = listener_start(remote_lookup, NULL);
	fan = listener_fd(l);
	if (mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_HSM_LOOKUP,
		 root))
		t_fatal("filesystem mark");

	/* The deep path */
	st = run_child(read_path, "a/b/c/d/file", 30000);
	t_ok(st == 0 && *result_errno == 0 &&
	     !strcmp(read_result, "hello from the deep\n"),
	     "open+read of never listed a/b/c/d/file: %s, \"%s\"",
	     *result_errno ? strerror(*result_errno) : "ok", read_result);
	names_of_events(l, names, sizeof(names));
	t_ok(!strcmp(names, "a,b,c,d,file"), "one FAN_HSM_LOOKUP per level, "
	     "in order: %s", names);
	if (listener_event(l, 0, &ev)) {
		t_ok(ev.mask == FAN_HSM_LOOKUP && ev.has_name && !ev.has_range,
		     "event mask FAN_HSM_LOOKUP (0x%llx) with a name record",
		     (unsigned long long)ev.mask);
		t_ok(!strcmp(ev.path, root), "event fd is the directory the "
		     "name is looked up in (%s)", ev.path);
	}
	t_ok(handler_errors == 0, "the handler created the entries "
	     "(%d errors)", handler_errors);

	listener_clear(l);
	st = run_child(stat_path, "a/b/c/d/file", 30000);
	t_ok(st == 0 && *result_errno == 0 && listener_nevents(l) == 0,
	     "resolved path: stat again without events (%d)",
	     listener_nevents(l));

	/* Names that do not exist remotely */
	listener_clear(l);
	st = run_child(stat_path, "a/b/nothing", 30000);
	t_ok(st == 0 && *result_errno == ENOENT && listener_nevents(l) == 1,
	     "missing name: %s with one event (%d)",
	     strerror(*result_errno), listener_nevents(l));
	listener_clear(l);
	st = run_child(stat_path, "a/b/nothing", 30000);
	t_ok(st == 0 && *result_errno == ENOENT && listener_nevents(l) == 0,
	     "missing name again: negative dentry, no event (%d)",
	     listener_nevents(l));

	/* O_CREAT of an entry that exists remotely */
	listener_clear(l);
	st = run_child(create_path, "x/y.txt", 30000);
	names_of_events(l, names, sizeof(names));
	t_ok(st == 0 && *result_errno == 0 &&
	     !strcmp(read_result, "remote y\n"),
	     "open(O_CREAT) of remote x/y.txt opens the remote content "
	     "(\"%s\", events %s)", read_result, names);

	/* Deny with an errno */
	listener_clear(l);
	st = run_child(stat_path, "forbidden", 30000);
	t_ok(st == 0 && *result_errno == EIO, "FAN_DENY_ERRNO(EIO) on a "
	     "lookup: stat fails with %s", strerror(*result_errno));

	/* The listener's own lookups relative to the event fd */
	listener_clear(l);
	st = run_child(stat_path, "self-lookup", 30000);
	t_ok(st == 0 && self_lookup_done && handler_errors == 0 &&
	     listener_nevents(l) == 1, "lookup relative to the event fd "
	     "raises no event (%d events)", listener_nevents(l));

	/* Ignore mark on a populated directory */
	if (mark(fan, FAN_MARK_ADD | FAN_MARK_IGNORE_SURV | FAN_MARK_EVICTABLE,
		 FAN_HSM_LOOKUP, t_path("lookup.root/a/b")))
		t_fatal("ignore mark");
	listener_clear(l);
	st = run_child(stat_path, "a/b/nothing-either", 30000);
	t_ok(st == 0 && *result_errno == ENOENT && listener_nevents(l) == 0,
	     "directory with an ignore mark: no event (%d)",
	     listener_nevents(l));

	/* Evicted from the caches: events again, entries found on disk */
	drop_caches();
	listener_clear(l);
	st = run_child(read_path, "a/b/c/d/file", 30000);
	names_of_events(l, names, sizeof(names));
	t_ok(st == 0 && *result_errno == 0 &&
	     !strcmp(read_result, "hello from the deep\n"),
	     "after dropping caches the path still resolves (events %s)",
	     names);

	listener_stop(l);
	return t_done();
}
