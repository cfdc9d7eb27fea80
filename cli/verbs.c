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
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	const char *verb;
	const char *usage;
	const char *option;     /* the verb's one option, or NULL */
	const char *request;    /* sent instead of verb with the option, or NULL */
	gboolean option_given;  /* --bytes: raw numbers; refresh -r: a subtree */
	gboolean walks;         /* prefetch: -r takes the files below a directory */
	gboolean recursive;     /* -r was given */
} Verb;

/* What a progress bar shows: one file, or all the files of prefetch -r. */
typedef struct {
	guint64 total;          /* bytes of all the files */
	guint64 finished;       /* bytes of the files done */
	guint64 fetched;        /* bytes fetched so far (for the rate) */
	guint64 last_present;   /* of the current file, at its last progress line */
	gint64 started;         /* monotonic usec */
	const char *label;
} Progress;

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

	guint listed, failed, queued, depth, max_depth, passes;
	int done, truncated;
	long long next;

	if (sscanf(answer, "crawl %u %u %u %u %u %d %d %u %lld", &listed, &failed, &queued,
		   &depth, &max_depth, &done, &truncated, &passes, &next) == 9) {
		printf("%-11s %u directories listed, %u failed; %s\n", "crawl", listed, failed,
		       !done ? "going" : truncated ? "stopped at its limit of directories"
						  : "done");
		if (!done)
			printf("%-11s depth %u of %u, %u to go at this depth\n", "", depth,
			       max_depth, queued);
		if (done && next >= 0)
			printf("%-11s pass %u done; the next revalidates the listings in %lld s\n",
			       "", passes, next);
		return;
	}
	if (g_str_has_prefix(answer, "source ")) {
		g_auto(GStrv) fields = g_strsplit(answer + 7, " ", 2);

		if (fields[0] && fields[1])
			printf("%-11s %s  (cache %s)\n", "source", fields[0], fields[1]);
		return;
	}
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

/* One line on stderr: a bar, bytes present of the total, the rate of
 * this run and the time left at that rate. */
static void draw_progress(Progress *progress, guint64 present, guint64 size)
{
	guint64 total = progress->total ? progress->total : size;
	guint64 done = MIN(progress->finished + present, total);
	int width = 30, filled = total ? (int)(width * done / total) : width;
	double seconds = (double)(g_get_monotonic_time() - progress->started) / G_USEC_PER_SEC;
	guint64 rate = seconds > 0.2 ? (guint64)((double)progress->fetched / seconds) : 0;
	g_autofree char *p = human_size(done, FALSE);
	g_autofree char *t = human_size(total, FALSE);
	g_autofree char *r = human_size(rate, FALSE);
	g_autofree char *eta = rate ? g_strdup_printf("%" G_GUINT64_FORMAT " s left",
						      (total - done) / rate)
				    : g_strdup("");

	fprintf(stderr, "\r[%.*s%*s] %5.1f%% %s / %s  %s/s %s  %s\033[K", filled,
		"##############################", width - filled, "",
		total ? 100.0 * (double)done / (double)total : 100.0, p, t, r, eta,
		progress->label);
	fflush(stderr);
}

/* A progress line of the daemon's: counts what it fetched, and draws. */
static void note_progress(Progress *progress, gboolean tty, guint64 present, guint64 size)
{
	if (present > progress->last_present)
		progress->fetched += present - progress->last_present;
	progress->last_present = present;
	if (tty)
		draw_progress(progress, present, size);
}

/* Runs one verb on one path; prints what it answered.  progress: the
 * files of prefetch -r, or NULL for this path alone. */
static gboolean run(const Verb *verb, const char *path, Progress *progress)
{
	Progress own = { .started = g_get_monotonic_time(), .label = path };
	gboolean first_progress = TRUE;
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
			if (!progress)
				progress = &own;
			if (first_progress) /* present already: not fetched by us */
				progress->last_present = a;
			first_progress = FALSE;
			note_progress(progress, tty, a, b);
		} else if (g_str_has_prefix(line, "done ")) {
			if (tty && progress == &own)
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
	  "Usage: httphsm prefetch [--pin] [-r] PATH...\n\n"
	  "Fetches whole files into the local cache now (with a progress bar on\n"
	  "a terminal: bytes, rate, time left), so that later reads need no\n"
	  "network.  -r (--recursive) takes every file below a directory, with\n"
	  "one progress bar for them all.  --pin also keeps them there: neither\n"
	  "--cache-max-size nor evict frees a pinned file (httphsm unpin undoes\n"
	  "it).\n",
	  "--pin", "prefetch-pin", .walks = TRUE },
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

/* The regular files at or below path (not following symbolic links), and
 * their sizes.  Listing a directory of the mount fetches its listing. */
static void collect_files(const char *path, GPtrArray *files, GArray *sizes)
{
	struct stat st;
	GDir *dir;
	const char *name;

	if (lstat(path, &st) < 0) {
		fprintf(stderr, "httphsm prefetch: %s: %s\n", path, g_strerror(errno));
		return;
	}
	if (S_ISREG(st.st_mode)) {
		guint64 size = st.st_size;

		g_ptr_array_add(files, g_strdup(path));
		g_array_append_val(sizes, size);
		return;
	}
	if (!S_ISDIR(st.st_mode) || !(dir = g_dir_open(path, 0, NULL)))
		return;
	while ((name = g_dir_read_name(dir))) {
		g_autofree char *child = g_build_filename(path, name, NULL);

		collect_files(child, files, sizes);
	}
	g_dir_close(dir);
}

/* prefetch -r: every file below the paths, with one progress bar. */
static gboolean prefetch_tree(const Verb *verb, GPtrArray *paths)
{
	g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GArray) sizes = g_array_new(FALSE, FALSE, sizeof(guint64));
	Progress progress = { .started = g_get_monotonic_time() };
	gboolean tty = isatty(STDERR_FILENO);
	g_autofree char *fetched = NULL;
	int failures = 0;

	for (guint i = 0; i < paths->len; i++)
		collect_files(paths->pdata[i], files, sizes);
	for (guint i = 0; i < sizes->len; i++)
		progress.total += g_array_index(sizes, guint64, i);
	for (guint i = 0; i < files->len; i++) {
		progress.label = files->pdata[i];
		failures += !run(verb, files->pdata[i], &progress);
		progress.finished += g_array_index(sizes, guint64, i);
	}
	if (tty && files->len)
		fputc('\n', stderr);
	fetched = human_size(progress.fetched, FALSE);
	printf("prefetched %u of %u file%s, %s fetched\n", files->len - failures, files->len,
	       files->len == 1 ? "" : "s", fetched);
	return failures == 0;
}

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
		} else if (verb.walks && (!strcmp(argv[i], "-r") ||
					  !strcmp(argv[i], "--recursive"))) {
			verb.recursive = TRUE;
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
	if (verb.recursive)
		return prefetch_tree(&verb, paths) ? 0 : 1;
	for (guint i = 0; i < paths->len; i++)
		failures += !run(&verb, paths->pdata[i], NULL);
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
