/* The daemon's control socket (CACHE/control.sock), shared by both modes.
 *
 * `httphsm status|prefetch|evict` talk to the daemon serving a path, since
 * only it knows which bytes are present right now, and only it may drop
 * them safely.  One request line per connection:
 *     status RELPATH    ->  "file SIZE PRESENT [pinned]" | "dir populated AGE" |
 *                           "dir unpopulated" (AGE: seconds since the listing was
 *                           fetched or revalidated); for the root, first
 *                           "source URL CACHE_DIR", with --populate eager
 *                           "crawl LISTED FAILED QUEUED DEPTH MAX_DEPTH DONE
 *                           TRUNCATED PASSES NEXT" (of the pass running or last
 *                           run; NEXT: seconds to the next pass, -1: none), and
 *                           "cache USED LIMIT" (LIMIT 0: none)
 *     prefetch RELPATH  ->  "progress PRESENT SIZE"... then "done SIZE"
 *     prefetch-pin RELPATH  the same, the file pinned first (never evicted)
 *     unpin RELPATH     ->  "unpinned"
 *     evict RELPATH     ->  "evicted FREED"
 *     refresh RELPATH   ->  "refreshed 1": its listing revalidated now
 *     refresh-r RELPATH ->  "refreshed COUNT": and those below it listed before
 * RELPATH is percent-escaped; failures answer "error ERRNO MESSAGE".
 */
#include "control.h"
#include "error.h"
#include "url.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define PREFETCH_STEP (8ull * 1024 * 1024)
#define MAX_CLIENTS 8

struct HsmControl {
	HsmTree *tree;
	HsmCrawl *crawl;         /* or NULL; atomic (set while serving) */
	char *path;
	int listen_fd;
	int wake_fd;
	GThread *acceptor;
	GThreadPool *clients;
};

char *hsm_control_socket_path(const char *cache_dir)
{
	return g_build_filename(cache_dir, "control.sock", NULL);
}

gboolean hsm_control_address(const char *cache_dir, struct sockaddr_un *addr, int *dir_fd)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	*dir_fd = open(cache_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dir_fd < 0)
		return FALSE;
	g_snprintf(addr->sun_path, sizeof(addr->sun_path), "/proc/self/fd/%d/control.sock",
		   *dir_fd);
	return TRUE;
}

static void reply(int fd, const char *format, ...) G_GNUC_PRINTF(2, 3);

static void reply(int fd, const char *format, ...)
{
	va_list args;
	g_autofree char *line = NULL;

	va_start(args, format);
	line = g_strdup_vprintf(format, args);
	va_end(args);
	if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0)
		g_debug("control client went away: %s", g_strerror(errno));
}

static void reply_error(int fd, GError *err)
{
	reply(fd, "error %d %s\n", hsm_error_errno(err), err->message);
}

static void report_crawl(HsmControl *control, int fd)
{
	HsmCrawlStatus c;

	HsmCrawl *crawl = g_atomic_pointer_get(&control->crawl);

	if (!crawl)
		return;
	hsm_crawl_get_status(crawl, &c);
	reply(fd, "crawl %u %u %u %u %u %d %d %u %" G_GINT64_FORMAT "\n", c.listed, c.failed,
	      c.queued, c.depth, c.max_depth, c.done, c.truncated, c.passes,
	      c.next_pass < 0 ? -1
			      : MAX(c.next_pass - g_get_monotonic_time(), 0) / G_USEC_PER_SEC);
}

void hsm_control_set_crawl(HsmControl *control, HsmCrawl *crawl)
{
	if (control)
		g_atomic_pointer_set(&control->crawl, crawl);
}

static void do_status(HsmControl *control, int fd, const char *relpath)
{
	g_autoptr(GError) err = NULL;
	HsmFileStatus status;
	HsmFile *file;
	struct stat st;

	/* AT_EMPTY_PATH: "" is the root itself. */
	if (fstatat(hsm_tree_root_fd(control->tree), relpath, &st,
		    AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0) {
		reply(fd, "error %d %s: %s\n", errno, relpath, g_strerror(errno));
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		gint64 age = hsm_tree_listing_age(control->tree, relpath);
		guint64 used, limit;

		if (!*relpath) {
			/* findmnt shows a bind mount's source as the cache
			 * directory: the URL is told here. */
			reply(fd, "source %s %s\n", hsm_tree_url(control->tree),
			      hsm_tree_cache_dir(control->tree));
			report_crawl(control, fd);
			hsm_tree_cache_usage(control->tree, &used, &limit);
			reply(fd, "cache %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n", used,
			      limit == G_MAXUINT64 ? 0 : limit);
		}
		if (age >= 0)
			reply(fd, "dir populated %" G_GINT64_FORMAT "\n", age);
		else
			reply(fd, "dir unpopulated\n");
		return;
	}
	file = hsm_tree_get_file(control->tree, relpath, &err);
	if (!file) {
		reply_error(fd, err);
		return;
	}
	hsm_file_get_status(file, &status);
	hsm_file_unref(file);
	reply(fd, "file %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "%s\n", status.size,
	      status.present, status.pinned ? " pinned" : "");
}

/* pin: pinned before the first byte, so the size limit never takes it. */
static void do_prefetch(HsmControl *control, int fd, const char *relpath, gboolean pin)
{
	g_autoptr(GError) err = NULL;
	HsmFile *file = hsm_tree_get_file(control->tree, relpath, &err);
	HsmFileStatus status;

	if (!file || (pin && !hsm_file_set_pinned(file, TRUE, &err))) {
		reply_error(fd, err);
		if (file)
			hsm_file_unref(file);
		return;
	}
	hsm_file_get_status(file, &status);
	/* What was there before: the client counts the rate from it. */
	reply(fd, "progress %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n", status.present,
	      status.size);
	/* Steps in order: the reads look sequential, so the window grows. */
	for (guint64 offset = 0; offset < status.size; offset += PREFETCH_STEP) {
		HsmFileStatus now;

		if (!hsm_file_ensure(file, offset, PREFETCH_STEP, NULL, &err))
			break;
		hsm_file_get_status(file, &now);
		reply(fd, "progress %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n", now.present,
		      now.size);
	}
	/* "done" means it survives a crash from now on. */
	if (!err)
		hsm_file_save(file, &err);
	if (err)
		reply_error(fd, err);
	else
		reply(fd, "done %" G_GUINT64_FORMAT "\n", status.size);
	hsm_file_unref(file);
}

static void do_unpin(HsmControl *control, int fd, const char *relpath)
{
	g_autoptr(GError) err = NULL;
	HsmFile *file = hsm_tree_get_file(control->tree, relpath, &err);

	if (file && hsm_file_set_pinned(file, FALSE, &err))
		reply(fd, "unpinned\n");
	else
		reply_error(fd, err);
	if (file)
		hsm_file_unref(file);
}

static void do_evict(HsmControl *control, int fd, const char *relpath)
{
	g_autoptr(GError) err = NULL;
	HsmFile *file = hsm_tree_get_file(control->tree, relpath, &err);
	guint64 freed = 0;

	if (file && hsm_file_evict(file, &freed, &err))
		reply(fd, "evicted %" G_GUINT64_FORMAT "\n", freed);
	else
		reply_error(fd, err);
	if (file)
		hsm_file_unref(file);
}

/* The subdirectories of relpath that were listed, so worth revalidating. */
static GPtrArray *listed_subdirs(HsmControl *control, const char *relpath)
{
	GPtrArray *subdirs = hsm_tree_subdirs(control->tree, relpath);

	for (guint i = subdirs->len; i-- > 0;)
		if (!hsm_tree_is_populated(control->tree, subdirs->pdata[i]))
			g_ptr_array_remove_index(subdirs, i);
	return subdirs;
}

/* Parents first: a subdirectory gone from its parent's new listing is not
 * asked for. */
static gboolean refresh_dir(HsmControl *control, const char *relpath, gboolean recursive,
			    guint *count, GError **err)
{
	g_autoptr(GPtrArray) subdirs = NULL;

	if (!hsm_tree_refresh(control->tree, relpath, err))
		return FALSE;
	(*count)++;
	if (!recursive)
		return TRUE;
	subdirs = listed_subdirs(control, relpath);
	for (guint i = 0; i < subdirs->len; i++)
		if (!refresh_dir(control, subdirs->pdata[i], TRUE, count, err))
			return FALSE;
	return TRUE;
}

static void do_refresh(HsmControl *control, int fd, const char *relpath, gboolean recursive)
{
	g_autoptr(GError) err = NULL;
	struct stat st;
	guint count = 0;

	if (fstatat(hsm_tree_root_fd(control->tree), relpath, &st,
		    AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0) {
		reply(fd, "error %d %s: %s\n", errno, *relpath ? relpath : "/", g_strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		reply(fd, "error %d %s: not a directory\n", ENOTDIR, relpath);
		return;
	}
	if (refresh_dir(control, relpath, recursive, &count, &err))
		reply(fd, "refreshed %u\n", count);
	else
		reply_error(fd, err);
}

static char *read_request(int fd)
{
	GString *line = g_string_new(NULL);
	char c;

	while (line->len < 8192 && recv(fd, &c, 1, 0) == 1 && c != '\n')
		g_string_append_c(line, c);
	return g_string_free(line, FALSE);
}

/* "" or names that hsm_name_is_safe() accepts, joined by '/'. */
static gboolean path_is_safe(const char *relpath)
{
	g_auto(GStrv) names = g_strsplit(relpath, "/", -1);

	for (char **name = names; *relpath && *name; name++)
		if (!hsm_name_is_safe(*name, strlen(*name)))
			return FALSE;
	return TRUE;
}

static void serve_client(gpointer data, gpointer user_data)
{
	HsmControl *control = user_data;
	int fd = GPOINTER_TO_INT(data);
	g_autofree char *request = read_request(fd);
	char *arg = strchr(request, ' ');
	g_autofree char *relpath = NULL;
	gsize len;

	if (!arg) {
		reply(fd, "error %d bad request\n", EINVAL);
		close(fd);
		return;
	}
	*arg++ = '\0';
	relpath = hsm_url_unescape(arg, strlen(arg), &len);
	if (strlen(relpath) != len || !path_is_safe(relpath))
		reply(fd, "error %d bad path\n", EINVAL);
	else if (!strcmp(request, "status"))
		do_status(control, fd, relpath);
	else if (!strcmp(request, "prefetch") || !strcmp(request, "prefetch-pin"))
		do_prefetch(control, fd, relpath, !strcmp(request, "prefetch-pin"));
	else if (!strcmp(request, "unpin"))
		do_unpin(control, fd, relpath);
	else if (!strcmp(request, "evict"))
		do_evict(control, fd, relpath);
	else if (!strcmp(request, "refresh") || !strcmp(request, "refresh-r"))
		do_refresh(control, fd, relpath, !strcmp(request, "refresh-r"));
	else
		reply(fd, "error %d unknown request '%s'\n", EINVAL, request);
	close(fd);
}

static gpointer accept_clients(gpointer data)
{
	HsmControl *control = data;
	struct pollfd polls[2] = {
		{ .fd = control->listen_fd, .events = POLLIN },
		{ .fd = control->wake_fd, .events = POLLIN },
	};

	while (poll(polls, 2, -1) >= 0 || errno == EINTR) {
		int client;

		if (polls[1].revents & POLLIN)
			break;
		if (!(polls[0].revents & POLLIN))
			continue;
		client = accept4(control->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (client >= 0)
			g_thread_pool_push(control->clients, GINT_TO_POINTER(client), NULL);
	}
	return NULL;
}

HsmControl *hsm_control_start(HsmTree *tree, GError **err)
{
	HsmControl *control = g_new0(HsmControl, 1);
	const char *cache_dir = hsm_tree_cache_dir(tree);
	struct sockaddr_un addr;
	int dir_fd = -1;

	control->tree = tree;
	control->path = hsm_control_socket_path(cache_dir);
	control->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	control->wake_fd = eventfd(0, EFD_CLOEXEC);
	unlink(control->path); /* a previous daemon's; the cache lock says it is gone */
	if (!hsm_control_address(cache_dir, &addr, &dir_fd) ||
	    bind(control->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(control->listen_fd, 16) < 0) {
		g_set_error(err, HSM_ERROR, errno, "control socket %s: %s", control->path,
			    g_strerror(errno));
		if (dir_fd >= 0)
			close(dir_fd);
		goto fail;
	}
	close(dir_fd);
	chmod(control->path, 0600);
	control->clients = g_thread_pool_new(serve_client, control, MAX_CLIENTS, FALSE, NULL);
	control->acceptor = g_thread_new("hsm-control", accept_clients, control);
	return control;
fail:
	close(control->listen_fd);
	close(control->wake_fd);
	g_free(control->path);
	g_free(control);
	return NULL;
}

void hsm_control_stop(HsmControl *control)
{
	guint64 one = 1;

	if (!control)
		return;
	if (write(control->wake_fd, &one, sizeof(one)) < 0)
		g_warning("cannot stop the control thread: %s", g_strerror(errno));
	g_thread_join(control->acceptor);
	g_thread_pool_free(control->clients, FALSE, TRUE);
	close(control->listen_fd);
	close(control->wake_fd);
	unlink(control->path);
	g_free(control->path);
	g_free(control);
}
