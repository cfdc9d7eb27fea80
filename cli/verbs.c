/* `httphsm status|prefetch|evict|unpin|refresh PATH...`: ask the daemon
 * serving PATH. */
#include "commands.h"
#include "control.h"
#include "registry.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
	const char *verb;
	const char *usage;
	const char *option;     /* the verb's one option, or NULL */
	const char *request;    /* sent instead of verb with the option, or NULL */
	gboolean option_given;  /* --bytes: raw numbers; refresh -r: a subtree */
} Verb;

/* "1.3 GiB", with a plain space (GLib's is a no-break space, two bytes,
 * which would shift printf's columns). */
static char *human_size(guint64 bytes, gboolean raw)
{
	g_autofree char *text = NULL;
	GString *plain;

	if (raw)
		return g_strdup_printf("%" G_GUINT64_FORMAT, bytes);
	text = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
	plain = g_string_new(text);
	g_string_replace(plain, "\u00a0", " ", 0);
	return g_string_free(plain, FALSE);
}

/* One line of status: the same columns for files, directories and the
 * cache, so that a listing of both lines up. */
static void print_row(const char *state, const char *amount, const char *of, const char *share,
		      const char *path)
{
	printf("%-11s %12s %-14s %6s  %s\n", state, amount, of, share, path);
}

/* Connects to the daemon serving path and sends "verb relpath". */
static int ask_daemon(const char *verb, const char *path, GError **err)
{
	g_autofree char *absolute = g_canonicalize_filename(path, NULL);
	g_autofree char *relpath = NULL;
	g_autofree char *escaped = NULL;
	g_autofree char *socket_path = NULL;
	g_autofree char *request = NULL;
	struct sockaddr_un addr;
	HsmRegistryEntry entry;
	int fd, dir_fd = -1;

	if (!hsm_registry_find_path(absolute, &entry, &relpath)) {
		g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_NOENT,
			    "%s is not inside a mounted httphsm tree", path);
		return -1;
	}
	socket_path = hsm_control_socket_path(entry.cache_dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || !hsm_control_address(entry.cache_dir, &addr, &dir_fd) ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errno),
			    "cannot reach the daemon at %s: %s", socket_path, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		if (dir_fd >= 0)
			close(dir_fd);
		hsm_registry_entry_clear(&entry);
		return -1;
	}
	close(dir_fd);
	hsm_registry_entry_clear(&entry);
	escaped = g_uri_escape_string(relpath, "/", FALSE);
	request = g_strdup_printf("%s %s\n", verb, escaped);
	if (send(fd, request, strlen(request), MSG_NOSIGNAL) < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errno), "%s", g_strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The next answer line, or NULL at the end. */
static char *read_line(FILE *in)
{
	char *line = NULL;
	size_t size = 0;

	if (getline(&line, &size, in) < 0) {
		free(line);
		return NULL;
	}
	g_strchomp(line);
	return line;
}

static char *human_age(gint64 seconds)
{
	if (seconds < 120)
		return g_strdup_printf("%" G_GINT64_FORMAT " s", seconds);
	if (seconds < 2 * 3600)
		return g_strdup_printf("%" G_GINT64_FORMAT " min", seconds / 60);
	if (seconds < 2 * 86400)
		return g_strdup_printf("%" G_GINT64_FORMAT " h", seconds / 3600);
	return g_strdup_printf("%" G_GINT64_FORMAT " days", seconds / 86400);
}

static void print_status(const char *path, const char *answer, gboolean raw)
{
	guint64 size, present;
	gint64 age;

	if (sscanf(answer, "cache %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT, &size, &present) ==
	    2) {
		g_autofree char *used = human_size(size, raw);
		g_autofree char *limit = human_size(present, raw);
		g_autofree char *of = g_strconcat("/ ", present ? limit : "no limit", NULL);

		print_row("cache", used, of, "", "(file data in the cache / --cache-max-size)");
		return;
	}
	if (sscanf(answer, "dir populated %" G_GINT64_FORMAT, &age) == 1) {
		g_autofree char *text = raw ? g_strdup_printf("%" G_GINT64_FORMAT " s", age)
					    : human_age(age);
		g_autofree char *ago = g_strconcat(text, " ago", NULL);

		print_row("listed", ago, "", "", path);
		return;
	}
	if (g_str_has_prefix(answer, "dir ")) {
		print_row(answer + 4, "", "", "", path);
		return;
	}
	if (sscanf(answer, "file %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT, &size, &present) != 2)
		return;
	g_autofree char *p = human_size(present, raw);
	g_autofree char *s = human_size(size, raw);
	g_autofree char *of = g_strconcat("/ ", s, NULL);
	g_autofree char *share = g_strdup_printf("%.1f%%", size ? 100.0 * (double)present /
								(double)size : 100.0);
	g_autofree char *shown = g_strconcat(path, g_str_has_suffix(answer, " pinned") ?
						   "  (pinned)" : "", NULL);

	print_row(present == 0 && size ? "online" : present < size ? "partial" : "full", p, of,
		  share, shown);
}

static void draw_progress(const char *path, guint64 present, guint64 size)
{
	int width = 30, filled = size ? (int)(width * present / size) : width;
	g_autofree char *p = human_size(present, FALSE);
	g_autofree char *s = human_size(size, FALSE);

	fprintf(stderr, "\r[%.*s%*s] %5.1f%% %s / %s  %s", filled,
		"##############################", width - filled, "",
		size ? 100.0 * (double)present / (double)size : 100.0, p, s, path);
	fflush(stderr);
}

/* Runs one verb on one path; prints what it answered. */
static gboolean run(const Verb *verb, const char *path)
{
	g_autoptr(GError) err = NULL;
	int fd = ask_daemon(verb->option_given && verb->request ? verb->request : verb->verb, path,
			    &err);
	gboolean ok = FALSE, tty = isatty(STDERR_FILENO);
	FILE *in;
	char *line;

	if (fd < 0) {
		fprintf(stderr, "httphsm %s: %s\n", verb->verb, err->message);
		return FALSE;
	}
	in = fdopen(fd, "r");
	while ((line = read_line(in))) {
		guint64 a, b;

		if (g_str_has_prefix(line, "error ")) {
			char *message = strchr(line + 6, ' ');

			fprintf(stderr, "%shttphsm %s: %s: %s\n", tty ? "\n" : "", verb->verb, path,
				message ? message + 1 : line);
		} else if (sscanf(line, "progress %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT, &a,
				  &b) == 2) {
			if (tty)
				draw_progress(path, a, b);
		} else if (g_str_has_prefix(line, "done ")) {
			if (tty)
				fputc('\n', stderr);
			ok = TRUE;
		} else if (sscanf(line, "evicted %" G_GUINT64_FORMAT, &a) == 1) {
			g_autofree char *freed = human_size(a, verb->option_given);

			printf("evicted %s  %s\n", freed, path);
			ok = TRUE;
		} else if (!strcmp(line, "unpinned")) {
			printf("unpinned  %s\n", path);
			ok = TRUE;
		} else if (sscanf(line, "refreshed %" G_GUINT64_FORMAT, &a) == 1) {
			printf("refreshed %" G_GUINT64_FORMAT " listing%s  %s\n", a,
			       a == 1 ? "" : "s", path);
			ok = TRUE;
		} else {
			print_status(path, line, verb->option_given);
			ok = TRUE;
		}
		free(line);
	}
	fclose(in);
	return ok;
}

enum { STATUS, PREFETCH, EVICT, UNPIN, REFRESH };

static const Verb verbs[] = {
	[STATUS] = { "status",
	  "Usage: httphsm status [--bytes] PATH...\n\n"
	  "Shows how much of each file is in the local cache: online (nothing\n"
	  "yet), partial or full, with present bytes / size; for directories,\n"
	  "how long ago their listing was fetched or found unchanged (or\n"
	  "unpopulated: never listed).  --bytes prints exact byte counts and\n"
	  "ages in seconds.\n",
	  "--bytes" },
	[PREFETCH] = { "prefetch",
	  "Usage: httphsm prefetch [--pin] PATH...\n\n"
	  "Fetches whole files into the local cache now (with a progress bar on\n"
	  "a terminal), so that later reads need no network.  --pin also keeps\n"
	  "them there: neither --cache-max-size nor evict frees a pinned file\n"
	  "(httphsm unpin undoes it).\n",
	  "--pin", "prefetch-pin" },
	[EVICT] = { "evict",
	  "Usage: httphsm evict [--bytes] PATH...\n\n"
	  "Frees the local copy of files (they stay visible and are fetched\n"
	  "again when read).  A file that is open or pinned is left alone (exit\n"
	  "status 1).\n",
	  "--bytes" },
	[UNPIN] = { "unpin",
	  "Usage: httphsm unpin PATH...\n\n"
	  "Lets files pinned by prefetch --pin be evicted again (they keep their\n"
	  "bytes until then).\n" },
	[REFRESH] = { "refresh",
	  "Usage: httphsm refresh [-r] DIRECTORY...\n\n"
	  "Revalidates the listing of each directory now, whatever its age (see\n"
	  "--dir-cache-time of mount): new files appear, removed ones go, changed\n"
	  "ones lose their cached bytes.  With -r, also every directory below it\n"
	  "that was listed before (parents first).  An unchanged listing costs a\n"
	  "304 where the server sends validators.\n",
	  "-r", "refresh-r" },
};

/* Options may come anywhere among the paths, as in most commands; "--"
 * ends them (for a path that starts with '-'). */
static int run_verb(const Verb *which, int argc, char **argv)
{
	g_autoptr(GPtrArray) paths = g_ptr_array_new();
	gboolean options_end = FALSE;
	int failures = 0;
	Verb verb = *which;

	for (int i = 1; i < argc; i++) {
		if (options_end || argv[i][0] != '-' || !argv[i][1]) {
			g_ptr_array_add(paths, argv[i]);
		} else if (!strcmp(argv[i], "--")) {
			options_end = TRUE;
		} else if (verb.option && !strcmp(argv[i], verb.option)) {
			verb.option_given = TRUE;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fprintf(stdout, "%s", verb.usage);
			return 0;
		} else {
			fprintf(stderr, "httphsm %s: unknown option '%s'\n%s", verb.verb, argv[i],
				verb.usage);
			return 2;
		}
	}
	if (!paths->len) {
		fprintf(stderr, "%s", verb.usage);
		return 2;
	}
	for (guint i = 0; i < paths->len; i++)
		failures += !run(&verb, paths->pdata[i]);
	return failures ? 1 : 0;
}

int hsm_command_status(int argc, char **argv)
{
	return run_verb(&verbs[STATUS], argc, argv);
}

int hsm_command_prefetch(int argc, char **argv)
{
	return run_verb(&verbs[PREFETCH], argc, argv);
}

int hsm_command_evict(int argc, char **argv)
{
	return run_verb(&verbs[EVICT], argc, argv);
}

int hsm_command_unpin(int argc, char **argv)
{
	return run_verb(&verbs[UNPIN], argc, argv);
}

int hsm_command_refresh(int argc, char **argv)
{
	return run_verb(&verbs[REFRESH], argc, argv);
}
