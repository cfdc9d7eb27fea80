/* `httphsm mount`: options, start-up checks, and handing over to a mode. */
#include "commands.h"
#include "control.h"
#include "daemon.h"
#include "error.h"
#include "fanotify-mode.h"
#include "fusefs.h"
#include "log.h"
#include "mountinfo.h"
#include "registry.h"
#include "tree.h"
#include "url.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	char *mode;
	char *cache_dir;
	gboolean foreground;
	GPtrArray *fuse_options; /* from -o, handed on to FUSE */
	gboolean sloppy;
	char *credentials;
	gboolean netrc;
	char *proxy;
	char *proxy_credentials;
	char *cacert;
	gboolean insecure;
	char *user_agent;
	gint max_connections;
	gint retries;
	gint stall_timeout;
	char *min_rate;
	char *min_window;
	char *max_window;
	char *dir_cache_time;
	char *cache_max_size;
	char *cache_max_age;
	char *populate;
	gint restarts;
	char *mmap;
	gboolean whole_mappings; /* from mmap */
	guint crawl_depth;       /* from populate */
	guint crawl_max_dirs;
	gboolean verbose;
	gboolean fuse_debug;
	char *log_file;
} MountOptions;

static const char mount_summary[] =
	"Makes the HTTP directory tree at URL (an nginx, Apache, lighttpd or Caddy\n"
	"autoindex listing, or python's http.server) appear at MOUNTPOINT.  Listings\n"
	"and file bytes are fetched only when touched, kept in a persistent cache\n"
	"directory, and served from there afterwards (also after a remount, and\n"
	"offline).\n"
	"\n"
	"Modes:\n"
	"  fuse      a read-only FUSE file system (libfuse3); works as any user\n"
	"            who can use fusermount3.\n"
	"  fanotify  the cache directory itself is bind-mounted read-only on\n"
	"            MOUNTPOINT and filled on demand through fanotify pre-content\n"
	"            events; once a file is complete its reads bypass the daemon.\n"
	"            Needs root, a cache on ext4, xfs or btrfs, and Linux 6.14+ or\n"
	"            the patched 6.1 kernel of kernel-patches/.  On mainline kernels\n"
	"            there are no readdir or lookup events: a directory is filled\n"
	"            when it is opened (ls), and a path inside a directory that was\n"
	"            never listed is not found.  The patched kernel fills\n"
	"            directories on lookup, so any path opens directly.  If the\n"
	"            daemon dies, a guardian process starts another, which takes\n"
	"            over the mount and finishes the reads in flight; if that keeps\n"
	"            failing (--restarts), it unmounts and answers EIO: unfetched\n"
	"            bytes never read as zeros.\n"
	"\n"
	"The daemon goes to the background once the mount works; errors found\n"
	"before that (unreachable URL, not a listing, bad mountpoint) are printed\n"
	"and make the command exit 1.  Stop it with `httphsm umount MOUNTPOINT`\n"
	"(or `fusermount3 -u MOUNTPOINT` in FUSE mode).";

static const char mount_details[] =
	"Cache: --cache-dir defaults to $XDG_CACHE_HOME/httphsm/HOST-HASH\n"
	"(~/.cache/httphsm/...).  It holds tree/ (the mirror, sparse files), state/\n"
	"(which byte ranges are present) and httphsm.log (the daemon's log).\n"
	"\n"
	"Sizes: listings that round sizes (\"1.2M\", as kernel.org's nginx does) get\n"
	"exact sizes from parallel HEAD requests when the directory is first read;\n"
	"exact listings need one request per directory.  The first read of a file\n"
	"region fetches the rest of its --min-window block, from the quarter block\n"
	"it falls in.  A sequential reader is kept fed ahead by twice the link's\n"
	"measured bandwidth-delay product (so one reader fills a long fat link),\n"
	"growing by at most a quarter of what it read per round trip, and later by\n"
	"a sixteenth of its run, up to --max-window: a reader that stops early has\n"
	"cost little more than it read.  Over HTTP/2, all requests share one\n"
	"connection; HTTP/1.1 gets --max-connections.\n"
	"\n"
	"Freshness: a listing older than --dir-cache-time is revalidated when its\n"
	"directory is next looked up or read, with a conditional GET (ETag or\n"
	"Last-Modified: an unchanged listing costs a 304 and no body; a server\n"
	"without validators sends the page again, compared with the old one).  A\n"
	"shorter Cache-Control max-age from the server wins; a listing checked\n"
	"less than a second ago counts as fresh even with 0.  New files appear,\n"
	"removed ones go, and files whose size or date changed lose their cached\n"
	"bytes and are fetched anew.  An error page or an outage keeps the old\n"
	"listing (logged).  FUSE mode lets the kernel cache names and attributes\n"
	"for the same time.\n"
	"\n"
	"Size: with --cache-max-size, once the file bytes in the cache pass it,\n"
	"whole files are evicted (their bytes freed, their names and listings\n"
	"kept: they are fetched again when read), least recently used first,\n"
	"down to 90% of it; with --cache-max-age, files unused for that long go\n"
	"too.  Files that are open, being fetched or pinned (prefetch --pin) are\n"
	"not evicted, so the cache may pass the limit by what they hold.  The\n"
	"count is rebuilt from the cache at every start.  A full cache file\n"
	"system evicts the same way and writes again; if nothing can go, the\n"
	"reader gets ENOSPC.  In fanotify mode reads of complete files bypass\n"
	"the daemon: \"used\" there means fetched, or read while incomplete.\n"
	"\n"
	"Examples:\n"
	"  httphsm mount https://cdn.kernel.org/pub/ /mnt/pub\n"
	"  tar tvf /mnt/pub/linux/kernel/v6.x/linux-6.1.tar.xz | head\n"
	"  httphsm umount /mnt/pub";

static gboolean parse_size(const char *text, guint64 *out, GError **err)
{
	static const char units[] = "KMGT";
	const char *unit;
	guint shift = 0;
	guint64 value;
	char *end;

	if (!text)
		return TRUE;
	value = g_ascii_strtoull(text, &end, 10);
	unit = *end ? strchr(units, g_ascii_toupper(*end)) : NULL;
	if (unit) {
		shift = 10 * (guint)(unit - units + 1);
		end++;
	}
	if (end == text || *end || !g_ascii_isdigit(*text) || value == 0 ||
	    value > G_MAXUINT64 >> shift) {
		g_set_error(err, HSM_ERROR, EINVAL, "'%s' is not a size (e.g. 256K, 8M, 20G)", text);
		return FALSE;
	}
	*out = value << shift;
	return TRUE;
}

/* A duration in microseconds: NUMBER[s|m|h|d] (seconds without a unit),
 * or "inf" for -1, forever. */
static gboolean parse_duration(const char *text, gint64 *out, GError **err)
{
	static const struct { char unit; gint64 seconds; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 },
	};
	gint64 scale = 1;
	guint64 value;
	char *end;

	if (!text)
		return TRUE;
	if (!strcmp(text, "inf")) {
		*out = -1;
		return TRUE;
	}
	value = g_ascii_strtoull(text, &end, 10);
	for (guint i = 0; i < G_N_ELEMENTS(units); i++)
		if (end != text && *end == units[i].unit) {
			scale = units[i].seconds;
			end++;
			break;
		}
	/* Ten years is forever enough, and far from overflowing. */
	if (end == text || *end || !g_ascii_isdigit(*text) || value > (guint64)(315360000 / scale)) {
		g_set_error(err, HSM_ERROR, EINVAL,
			    "'%s' is not a duration (e.g. 90s, 5m, 2h, 1d, 0, inf)", text);
		return FALSE;
	}
	*out = (gint64)value * scale * G_USEC_PER_SEC;
	return TRUE;
}

/* --cache-max-age: inf (or 0, which would evict everything at once) is no
 * limit. */
static gboolean parse_max_age(const char *text, gint64 *out, GError **err)
{
	gint64 age = 0;

	if (!parse_duration(text, &age, err))
		return FALSE;
	*out = MAX(age, 0);
	return TRUE;
}

/* The options of `httphsm mount`, declared once: for the command line
 * (with arg_data an offset into MountOptions) and for -o NAME=VALUE. */
#define FIELD(name) GSIZE_TO_POINTER(G_STRUCT_OFFSET(MountOptions, name))

static gboolean on_mount_options(const char *name, const char *value, gpointer data,
				 GError **err);

static const GOptionEntry mount_table[] = {
	{ "mode", 'm', 0, G_OPTION_ARG_STRING, FIELD(mode),
	  "How to serve the tree: fuse (default) or fanotify", "MODE" },
	{ "cache-dir", 'c', 0, G_OPTION_ARG_FILENAME, FIELD(cache_dir),
	  "Cache directory (default: ~/.cache/httphsm/HOST-HASH)", "DIR" },
	{ "foreground", 'f', 0, G_OPTION_ARG_NONE, FIELD(foreground),
	  "Stay in the foreground and log to stderr", NULL },
	{ "options", 'o', 0, G_OPTION_ARG_CALLBACK, on_mount_options,
	  "Options as mount(8) gives them: any option above as NAME=VALUE (a flag as "
	  "NAME), FUSE options such as allow_other, ro, default_permissions (FUSE "
	  "mode), and mount(8)'s own (defaults, _netdev, nofail, noauto, x-*), ignored; "
	  "\\, is a comma within a value", "OPT[,OPT...]" },
	{ "sloppy", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, FIELD(sloppy),
	  "Ignore unknown -o options (mount -s)", NULL },
	{ "user", 'u', 0, G_OPTION_ARG_STRING, FIELD(credentials),
	  "HTTP authentication", "USER:PASSWORD" },
	{ "netrc", 0, 0, G_OPTION_ARG_NONE, FIELD(netrc),
	  "Take HTTP credentials from ~/.netrc", NULL },
	{ "proxy", 0, 0, G_OPTION_ARG_STRING, FIELD(proxy),
	  "HTTP or HTTPS proxy, e.g. http://squid:3128 (default: the http_proxy, "
	  "https_proxy and no_proxy variables, as curl reads them)", "URL" },
	{ "proxy-user", 0, 0, G_OPTION_ARG_STRING, FIELD(proxy_credentials),
	  "Proxy authentication (Basic, Digest or NTLM, as the proxy asks)",
	  "USER:PASSWORD" },
	{ "cacert", 0, 0, G_OPTION_ARG_FILENAME, FIELD(cacert),
	  "CA certificates to verify the server with", "FILE" },
	{ "insecure", 'k', 0, G_OPTION_ARG_NONE, FIELD(insecure),
	  "Do not verify the server's TLS certificate", NULL },
	{ "user-agent", 0, 0, G_OPTION_ARG_STRING, FIELD(user_agent),
	  "User-Agent header (default: httphsm/VERSION)", "TEXT" },
	{ "max-connections", 0, 0, G_OPTION_ARG_INT, FIELD(max_connections),
	  "HTTP/1.1 connections to the server (default: 8); over HTTP/2, "
	  "requests share them as streams, up to 100 per connection", "N" },
	{ "retries", 0, 0, G_OPTION_ARG_INT, FIELD(retries),
	  "Retries of a failed request, with backoff (default: 5)", "N" },
	{ "timeout", 0, 0, G_OPTION_ARG_INT, FIELD(stall_timeout),
	  "Window over which a transfer must average --min-rate (default: 30)",
	  "SECONDS" },
	{ "min-rate", 0, 0, G_OPTION_ARG_STRING, FIELD(min_rate),
	  "Slowest transfer accepted, in bytes per second; slower ones fail and are "
	  "retried (default: 1K)", "SIZE" },
	{ "min-window", 0, 0, G_OPTION_ARG_STRING, FIELD(min_window),
	  "Block of the fetch grid: a random read fetches the rest of its block, from "
	  "the quarter block it falls in (default: 256K)", "SIZE" },
	{ "max-window", 0, 0, G_OPTION_ARG_STRING, FIELD(max_window),
	  "Most bytes fetched ahead of a sequential reader (default: 8M)", "SIZE" },
	{ "cache-max-size", 0, 0, G_OPTION_ARG_STRING, FIELD(cache_max_size),
	  "Most bytes of file data the cache keeps; past it, files are evicted least "
	  "recently used first (default: no limit)", "SIZE" },
	{ "cache-max-age", 0, 0, G_OPTION_ARG_STRING, FIELD(cache_max_age),
	  "Evict a file's bytes once unused for this long, e.g. 7d "
	  "(0 or inf: never, the default)", "DURATION" },
	{ "dir-cache-time", 0, 0, G_OPTION_ARG_STRING, FIELD(dir_cache_time),
	  "How long a directory listing is used before it is revalidated, "
	  "e.g. 90s, 5m, 2h; 0: at every access; inf: never (default: 5m)", "DURATION" },
	{ "populate", 0, 0, G_OPTION_ARG_STRING, FIELD(populate),
	  "lazy: list a directory when it is first used; eager[:DEPTH[:DIRS]]: also "
	  "list the tree in the background from the mount on, breadth first, DEPTH "
	  "levels down (default 3), at most DIRS directories (default 10000), and again "
	  "when the listings expire (at most every 5 minutes); "
	  "`status MOUNTPOINT` shows its progress (default: eager in fanotify "
	  "mode on kernels without lookup events, where a path is found only once "
	  "its directories are listed; lazy otherwise)", "MODE" },
	{ "restarts", 0, 0, G_OPTION_ARG_INT, FIELD(restarts),
	  "fanotify mode: how many times in a row the guardian restarts a daemon that "
	  "died (a restart counts as failed if the new daemon dies within a minute); "
	  "readers waiting at the crash get their bytes from the new daemon.  Past it, "
	  "or with 0, the guardian unmounts and readers get EIO (default: 3)", "N" },
	{ "mmap", 0, 0, G_OPTION_ARG_STRING, FIELD(mmap),
	  "fanotify mode: lazy: a mapping of a file fetches the pages its page faults "
	  "touch; a system call whose buffer is a part of a mapping not fetched yet "
	  "(write(2) from it, O_DIRECT) fails with EFAULT, since the kernel cannot let "
	  "the daemon write while that call may hold the file system; whole: mmap() "
	  "fetches the whole mapped range first (mainline's rule).  Default: lazy where "
	  "the kernel reports page faults (kernel-patches/ 0013), whole elsewhere", "MODE" },
	{ "log-file", 0, 0, G_OPTION_ARG_FILENAME, FIELD(log_file),
	  "Daemon log (default: CACHE/httphsm.log)", "FILE" },
	{ "verbose", 'v', 0, G_OPTION_ARG_NONE, FIELD(verbose), "Log debug messages", NULL },
	{ "debug-fuse", 0, 0, G_OPTION_ARG_NONE, FIELD(fuse_debug),
	  "Log every FUSE request (implies -f)", NULL },
	{ NULL },
};

static gpointer field_of(MountOptions *o, const GOptionEntry *entry)
{
	return (char *)o + GPOINTER_TO_SIZE(entry->arg_data);
}

static GOptionContext *mount_context(MountOptions *o)
{
	GOptionEntry entries[G_N_ELEMENTS(mount_table)];
	GOptionContext *context = g_option_context_new("URL MOUNTPOINT");
	GOptionGroup *group = g_option_group_new(NULL, NULL, NULL, o, NULL);

	for (gsize i = 0; i < G_N_ELEMENTS(mount_table); i++) {
		entries[i] = mount_table[i];
		if (entries[i].long_name && entries[i].arg != G_OPTION_ARG_CALLBACK)
			entries[i].arg_data = field_of(o, &mount_table[i]);
	}
	g_option_group_add_entries(group, entries); /* copied */
	g_option_context_set_main_group(context, group);
	g_option_context_set_summary(context, mount_summary);
	g_option_context_set_description(context, mount_details);
	return context;
}

/* -o options handed on to FUSE (libfuse's mount options), and mount(8)'s or
 * systemd's own, which are not ours to act on. */
static const char *const fuse_mount_options[] = {
	"allow_other", "allow_root", "default_permissions", "auto_unmount", "ro", "rw",
	"dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "diratime",
	"nodiratime", "relatime", "norelatime", "strictatime", "nostrictatime", "sync",
	"async", "dirsync", "fsname=", "subtype=", "max_read=", NULL
};
static const char *const ignored_mount_options[] = {
	"defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev",
	"nofail", "comment=", "x-", NULL
};

/* Whether option (NAME or NAME=VALUE) is one of list, whose entries ending
 * in '=' or '-' match any value or suffix. */
static gboolean option_in(const char *option, const char *const *list)
{
	for (; *list; list++) {
		gsize len = strlen(*list);
		char last = (*list)[len - 1];

		if ((last == '=' || last == '-') ? !strncmp(option, *list, len)
						 : !strcmp(option, *list))
			return TRUE;
	}
	return FALSE;
}

/* Sets the field of a table option from -o NAME=VALUE, as the same long
 * option would. */
static gboolean set_from_mount_option(MountOptions *o, const GOptionEntry *entry,
				      const char *value, GError **err)
{
	gpointer field = field_of(o, entry);
	gint64 number;

	if ((entry->arg == G_OPTION_ARG_NONE) != (value == NULL)) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    value ? "-o %s takes no value" : "-o %s needs a value (%s=...)",
			    entry->long_name, entry->long_name);
		return FALSE;
	}
	switch (entry->arg) {
	case G_OPTION_ARG_NONE:
		*(gboolean *)field = TRUE;
		return TRUE;
	case G_OPTION_ARG_INT:
		if (!g_ascii_string_to_signed(value, 10, G_MININT, G_MAXINT, &number, NULL)) {
			g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
				    "-o %s=%s: not a number", entry->long_name, value);
			return FALSE;
		}
		*(gint *)field = (gint)number;
		return TRUE;
	default: /* strings and file names */
		g_free(*(char **)field);
		*(char **)field = g_strdup(value);
		return TRUE;
	}
}

/* One -o item: a table option, a FUSE option, or one of mount(8)'s. */
static gboolean apply_mount_option(MountOptions *o, const char *option, GError **err)
{
	g_autofree char *name = g_strndup(option, strcspn(option, "="));
	const char *value = option[strlen(name)] == '=' ? option + strlen(name) + 1 : NULL;

	for (gsize i = 0; i < G_N_ELEMENTS(mount_table) && mount_table[i].long_name; i++) {
		if (strcmp(name, mount_table[i].long_name) ||
		    mount_table[i].arg == G_OPTION_ARG_CALLBACK)
			continue;
		return set_from_mount_option(o, &mount_table[i], value, err);
	}
	if (option_in(option, fuse_mount_options)) {
		g_ptr_array_add(o->fuse_options, g_strdup(option));
		return TRUE;
	}
	if (option_in(option, ignored_mount_options))
		return TRUE;
	if (o->sloppy) {
		g_printerr("httphsm mount: ignoring unknown mount option '%s'\n", option);
		return TRUE;
	}
	g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION,
		    "unknown mount option '%s' (see 'httphsm mount --help')", option);
	return FALSE;
}

/* Splits a -o list at commas not escaped as "\\,". */
static char **split_mount_options(const char *list)
{
	GPtrArray *items = g_ptr_array_new();
	GString *item = g_string_new(NULL);

	for (const char *p = list;; p++) {
		if (*p == '\\' && p[1] == ',') {
			g_string_append_c(item, ',');
			p++;
		} else if (*p == ',' || !*p) {
			if (item->len)
				g_ptr_array_add(items, g_strdup(item->str));
			g_string_truncate(item, 0);
			if (!*p)
				break;
		} else {
			g_string_append_c(item, *p);
		}
	}
	g_string_free(item, TRUE);
	g_ptr_array_add(items, NULL);
	return (char **)g_ptr_array_free(items, FALSE);
}

static gboolean on_mount_options(const char *name, const char *value, gpointer data,
				 GError **err)
{
	g_auto(GStrv) items = split_mount_options(value);

	(void)name;
	for (char **item = items; *item; item++)
		if (!apply_mount_option(data, *item, err))
			return FALSE;
	return TRUE;
}

static void mount_options_clear(MountOptions *o)
{
	g_free(o->mode);
	g_free(o->cache_dir);
	g_ptr_array_unref(o->fuse_options);
	g_free(o->credentials);
	g_free(o->proxy);
	g_free(o->proxy_credentials);
	g_free(o->cacert);
	g_free(o->user_agent);
	g_free(o->min_rate);
	g_free(o->min_window);
	g_free(o->max_window);
	g_free(o->dir_cache_time);
	g_free(o->cache_max_size);
	g_free(o->cache_max_age);
	g_free(o->populate);
	g_free(o->mmap);
	g_free(o->log_file);
}

static gboolean tree_options_from(const MountOptions *o, const char *url,
				  HsmTreeOptions *tree, GError **err)
{
	guint64 min_rate = 0;

	hsm_tree_options_init(tree);
	tree->url = hsm_url_normalize_base(url, err);
	if (!tree->url)
		return FALSE;
	tree->cache_dir = o->cache_dir ? g_canonicalize_filename(o->cache_dir, NULL)
				       : hsm_tree_default_cache_dir(tree->url);
	tree->fetch.credentials = g_strdup(o->credentials);
	tree->fetch.netrc = o->netrc;
	tree->fetch.proxy = g_strdup(o->proxy);
	tree->fetch.proxy_credentials = g_strdup(o->proxy_credentials);
	tree->fetch.cacert = g_strdup(o->cacert);
	tree->fetch.insecure = o->insecure;
	tree->fetch.user_agent = g_strdup(o->user_agent);
	if (o->max_connections > 0)
		tree->fetch.max_connections = o->max_connections;
	if (o->retries >= 0)
		tree->fetch.retries = o->retries;
	if (o->stall_timeout > 0)
		tree->fetch.stall_timeout = o->stall_timeout;
	if (!parse_size(o->min_rate, &min_rate, err))
		return FALSE;
	if (min_rate)
		tree->fetch.min_rate = (guint)MIN(min_rate, G_MAXUINT);
	return parse_size(o->min_window, &tree->min_window, err) &&
	       parse_size(o->max_window, &tree->max_window, err) &&
	       parse_duration(o->dir_cache_time, &tree->dir_cache_time, err) &&
	       parse_size(o->cache_max_size, &tree->max_cache_size, err) &&
	       parse_max_age(o->cache_max_age, &tree->max_cache_age, err);
}

/* The mount at path, if path is a mount point (mounting over it would hide
 * it, or stack a second httphsm on the first and lose track of it). */
static char *mount_at(const char *path)
{
	g_autoptr(GPtrArray) mounts = hsm_mountinfo_read();

	for (guint i = 0; mounts && i < mounts->len; i++) {
		const HsmMount *m = mounts->pdata[i];

		if (!strcmp(m->mount_point, path))
			return g_strdup(m->fs_type);
	}
	return NULL;
}

/* --populate: how deep to list the tree at mount; CRAWL_AUTO: eager where
 * the kernel has no lookup events, CRAWL_NONE: lazy. */
#define CRAWL_NONE 0
#define CRAWL_AUTO G_MAXUINT
#define CRAWL_DEPTH 3
#define CRAWL_MAX_DIRS 10000
#define CRAWL_PARALLEL 4
/* Listings are revalidated by a new pass once they expire, but a tree of
 * thousands of directories is not asked for more often than this. */
#define CRAWL_REPEAT_FLOOR (5 * 60 * G_USEC_PER_SEC)

static gboolean parse_populate(const char *text, guint *depth, guint *max_dirs, GError **err)
{
	g_auto(GStrv) parts = text ? g_strsplit(text, ":", 3) : NULL;
	guint64 value;

	*depth = !text ? CRAWL_AUTO : !strcmp(text, "lazy") ? CRAWL_NONE : CRAWL_DEPTH;
	*max_dirs = CRAWL_MAX_DIRS;
	if (!text || !strcmp(text, "lazy") || !strcmp(text, "eager"))
		return TRUE;
	if (strcmp(parts[0], "eager") || !parts[1] ||
	    !g_ascii_string_to_unsigned(parts[1], 10, 1, 1000, &value, NULL))
		goto bad;
	*depth = (guint)value;
	if (parts[2] && !g_ascii_string_to_unsigned(parts[2], 10, 1, 100000000, &value, NULL))
		goto bad;
	if (parts[2])
		*max_dirs = (guint)value;
	return TRUE;
bad:
	g_set_error(err, HSM_ERROR, EINVAL,
		    "--populate '%s': lazy, eager or eager:DEPTH[:DIRECTORIES]", text);
	return FALSE;
}

static gboolean parse_mmap(const char *text, gboolean *whole, GError **err)
{
	*whole = text && !strcmp(text, "whole");
	if (!text || *whole || !strcmp(text, "lazy"))
		return TRUE;
	g_set_error(err, HSM_ERROR, EINVAL, "--mmap '%s': lazy or whole", text);
	return FALSE;
}

static gboolean check_mountpoint(const char *path, GError **err)
{
	g_autofree char *mounted = NULL;
	struct stat st;

	if (stat(path, &st) < 0) {
		g_set_error(err, HSM_ERROR, errno, "mountpoint %s: %s", path, g_strerror(errno));
		return FALSE;
	}
	if (!S_ISDIR(st.st_mode)) {
		g_set_error(err, HSM_ERROR, ENOTDIR, "mountpoint %s is not a directory", path);
		return FALSE;
	}
	mounted = mount_at(path);
	if (mounted) {
		g_set_error(err, HSM_ERROR, EBUSY,
			    "%s is already a mount point (%s); unmount it first, or mount "
			    "on a directory inside it", path, mounted);
		return FALSE;
	}
	return TRUE;
}

/* fanotify mode needs CAP_SYS_ADMIN (fanotify_init, the bind mount): said
 * before anything is touched. */
static gboolean check_privileges(gboolean fanotify, GError **err)
{
	g_autofree char *status = NULL;
	const char *line;
	guint64 effective;

	if (!fanotify || !g_file_get_contents("/proc/self/status", &status, NULL, NULL))
		return TRUE;
	line = strstr(status, "\nCapEff:");
	effective = line ? g_ascii_strtoull(line + strlen("\nCapEff:"), NULL, 16) : 0;
	if (effective & (1ull << 21)) /* CAP_SYS_ADMIN */
		return TRUE;
	g_set_error(err, HSM_ERROR, EPERM,
		    "fanotify mode needs root (CAP_SYS_ADMIN); FUSE mode (--mode fuse) does not");
	return FALSE;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)type, (void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

/* A mount that failed leaves no cache directory it created behind. */
static void remove_new_cache_dir(const char *dir)
{
	if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		g_warning("cannot remove %s: %s", dir, g_strerror(errno));
}

static char *log_path(const MountOptions *o, const HsmTreeOptions *tree)
{
	return o->log_file ? g_strdup(o->log_file)
			   : g_build_filename(tree->cache_dir, "httphsm.log", NULL);
}

/* A daemon restarted by the guardian has no terminal: it always logs to the file. */
static gboolean open_log(const MountOptions *o, const HsmTreeOptions *tree, const char *path,
			 gboolean restarted, GError **err)
{
	if (o->foreground && !o->log_file && !restarted)
		return TRUE;
	if (g_mkdir_with_parents(tree->cache_dir, 0755) < 0) {
		g_set_error(err, HSM_ERROR, errno, "cannot create %s: %s", tree->cache_dir,
			    g_strerror(errno));
		return FALSE;
	}
	return hsm_log_to_file(path, err);
}

/* Lists the root once, so that a wrong URL fails the mount command itself.
 * A cache that was populated before works without the server. */
static gboolean check_root(HsmTree *tree, GError **err)
{
	if (!hsm_tree_populate(tree, "", err)) {
		g_prefix_error(err, "cannot list %s: ", hsm_tree_url(tree));
		return FALSE;
	}
	return TRUE;
}

/* The mount works: open the control socket, tell the world, then the parent. */
static HsmControl *announce(HsmTree *tree, const char *mountpoint, const char *mode)
{
	g_autoptr(GError) err = NULL;
	HsmControl *control = hsm_control_start(tree, &err);

	if (!control)
		g_warning("%s (status, prefetch and evict will not work)", err->message);
	g_clear_error(&err);
	if (!hsm_registry_add(mountpoint, hsm_tree_cache_dir(tree), mode, &err))
		g_warning("%s (httphsm umount/status will not find this mount)", err->message);
	g_message("serving %s on %s (%s mode, cache %s)", hsm_tree_url(tree), mountpoint, mode,
		  hsm_tree_cache_dir(tree));
	hsm_daemon_ready();
	return control;
}

/* Lists the tree in the background if asked, or if the kernel would not
 * find unlisted paths. */
static HsmCrawl *start_crawl(HsmTree *tree, HsmControl *control, guint depth,
			     guint max_dirs, gboolean finds_any_path)
{
	HsmCrawl *crawl;
	gint64 ttl;

	if (depth == CRAWL_AUTO)
		depth = finds_any_path ? CRAWL_NONE : CRAWL_DEPTH;
	if (depth == CRAWL_NONE)
		return NULL;
	ttl = hsm_tree_dir_cache_time(tree);
	crawl = hsm_crawl_start(tree, depth, max_dirs, CRAWL_PARALLEL,
				ttl < 0 ? -1 : MAX(ttl, CRAWL_REPEAT_FLOOR));
	hsm_control_set_crawl(control, crawl);
	return crawl;
}

static char *join_fuse_options(const MountOptions *o)
{
	GString *joined = g_string_new(NULL);

	for (guint i = 0; i < o->fuse_options->len; i++)
		g_string_append_printf(joined, "%s%s", i ? "," : "",
				       (const char *)o->fuse_options->pdata[i]);
	return g_string_free(joined, joined->len == 0);
}

/* Serves until unmounted; err is set only if the mount itself failed. */
static int serve_fuse(HsmTree *tree, const MountOptions *o, const char *mountpoint,
		      GError **err)
{
	HsmCrawl *crawl;
	g_autofree char *fuse_options = join_fuse_options(o);
	HsmFuse *fuse = hsm_fuse_mount(tree, mountpoint, fuse_options, o->fuse_debug, err);
	HsmControl *control;
	int rc;

	if (!fuse)
		return 1;
	control = announce(tree, mountpoint, "fuse");
	crawl = start_crawl(tree, control, o->crawl_depth, o->crawl_max_dirs, TRUE);
	rc = hsm_fuse_serve(fuse);
	hsm_daemon_stopping();
	hsm_registry_remove(mountpoint);
	hsm_control_stop(control);
	hsm_crawl_stop(crawl); /* before the hooks it may call go */
	hsm_fuse_free(fuse);
	g_message("unmounted %s", mountpoint);
	return rc ? 1 : 0;
}

#define DEFAULT_RESTARTS 3

static int serve_fanotify(HsmTree *tree, const MountOptions *o, const char *mountpoint,
			  const char *log_path, GError **err)
{
	HsmFanotifyOptions options = {
		.restarts = o->restarts < 0 ? DEFAULT_RESTARTS : (guint)o->restarts,
		.whole_mappings = o->whole_mappings,
	};
	HsmFanotify *fan = hsm_fanotify_mount(tree, mountpoint, log_path, &options, err);
	HsmControl *control;
	HsmCrawl *crawl;
	int rc;

	if (!fan)
		return 1;
	control = announce(tree, mountpoint, "fanotify");
	crawl = start_crawl(tree, control, o->crawl_depth, o->crawl_max_dirs,
			    hsm_fanotify_has_lookup_events(fan));
	rc = hsm_fanotify_serve(fan);
	hsm_daemon_stopping();
	hsm_registry_remove(mountpoint);
	hsm_control_stop(control);
	hsm_crawl_stop(crawl); /* before the hooks it may call go */
	hsm_fanotify_free(fan);
	return rc;
}

static void block_stop_signals(void)
{
	sigset_t signals;

	hsm_fanotify_stop_signals(&signals);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
}

int hsm_command_mount(int argc, char **argv)
{
	MountOptions o = { .retries = -1, .restarts = -1, .fuse_options = g_ptr_array_new_with_free_func(g_free) };
	g_autoptr(GOptionContext) context = mount_context(&o);
	g_autoptr(GError) err = NULL;
	HsmTreeOptions tree_options = { 0 };
	g_autofree char *mountpoint = NULL;
	g_autofree char *log_file_path = NULL;
	HsmTree *tree = NULL;
	gboolean fanotify, restarted, new_cache_dir = FALSE;
	int rc = 1;

	if (!g_option_context_parse(context, &argc, &argv, &err))
		goto usage_error;
	if (argc != 3) {
		g_set_error(&err, HSM_ERROR, EINVAL, "expected URL and MOUNTPOINT");
		goto usage_error;
	}
	if (o.mode && strcmp(o.mode, "fuse") && strcmp(o.mode, "fanotify")) {
		g_set_error(&err, HSM_ERROR, EINVAL, "unknown --mode '%s' (fuse or fanotify)",
			    o.mode);
		goto usage_error;
	}
	o.foreground = o.foreground || o.fuse_debug;
	hsm_log_init(o.verbose, o.foreground);
	mountpoint = g_canonicalize_filename(argv[2], NULL);
	fanotify = o.mode && !strcmp(o.mode, "fanotify");
	/* Started by the guardian of a daemon that died: its mount is ours. */
	restarted = fanotify && hsm_fanotify_restarted();
	if (!check_privileges(fanotify, &err) ||
	    !parse_populate(o.populate, &o.crawl_depth, &o.crawl_max_dirs, &err) ||
	    !parse_mmap(o.mmap, &o.whole_mappings, &err) ||
	    !tree_options_from(&o, argv[1], &tree_options, &err) ||
	    (!restarted && !check_mountpoint(mountpoint, &err))) {
		fprintf(stderr, "%s: %s\n", g_get_prgname(), err->message);
		goto out;
	}

	log_file_path = log_path(&o, &tree_options);
	new_cache_dir = !g_file_test(tree_options.cache_dir, G_FILE_TEST_EXISTS);
	hsm_daemon_start(!o.foreground && !restarted);
	if (fanotify)
		block_stop_signals(); /* before any thread exists: sigwait() takes them */
	/* A restarted daemon serves from the cache at once, reachable server or not. */
	if (!open_log(&o, &tree_options, log_file_path, restarted, &err) ||
	    !(tree = hsm_tree_open(&tree_options, &err)) ||
	    (!restarted && !check_root(tree, &err)))
		goto failed;
	if (fanotify)
		rc = serve_fanotify(tree, &o, mountpoint, log_file_path, &err);
	else
		rc = serve_fuse(tree, &o, mountpoint, &err);
	if (err)
		goto failed;
	goto out;

failed:
	/* Cleaned up before the parent is told, which then exits. */
	hsm_tree_close(g_steal_pointer(&tree));
	if (new_cache_dir)
		remove_new_cache_dir(tree_options.cache_dir);
	hsm_daemon_failed(err->message);
	rc = 1;
	goto out;

usage_error:
	fprintf(stderr, "%s: %s\nTry 'httphsm mount --help'.\n", g_get_prgname(), err->message);
	rc = 2;
out:
	hsm_tree_close(tree);
	hsm_tree_options_clear(&tree_options);
	mount_options_clear(&o);
	return rc;
}
