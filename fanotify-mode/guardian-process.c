/* The guardian process: `httphsm __guardian GROUPS TABLE PIPE MOUNTPOINT LOG
 * RESTARTS CWD DAEMON-ARGV...`; see guardian.h.
 *
 * It holds the fanotify groups and the event table and waits on the pipe.
 * When the daemon dies, it starts a new one (its own child) with the same
 * arguments in the same directory, handing over the groups, the table and a
 * new pipe through inherited descriptors (HSM_GUARDIAN_ADOPT_ENV says which),
 * with a placeholder at each fd number of an event in flight.  When it may
 * not restart any more, it takes over: detaches the mount and denies.
 */
#include "bindmount.h"
#include "fanotify-abi.h"
#include "group.h"
#include "guardian-table.h"
#include "guardian.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

/* A restarted daemon that has not said it serves by then is killed. */
#define START_TIMEOUT_MS (60 * 1000)
/* A daemon that served this long before dying is not a failed restart. */
#define STABLE_USEC (60 * G_USEC_PER_SEC)

typedef struct {
	int groups[HSM_GUARDIAN_MAX_GROUPS];
	guint n_groups;
	int table_fd;
	const HsmEventSlot *table;
	const char *mountpoint;
	guint restarts;
	const char *cwd;
	char **daemon_argv;
} Guardian;

typedef enum { DISMISSED, DIED } Verdict;

extern char **environ;

static FILE *guardian_log;

static void say(const char *format, ...) G_GNUC_PRINTF(1, 2);

static void say(const char *format, ...)
{
	g_autoptr(GDateTime) now = g_date_time_new_now_utc();
	g_autofree char *stamp = g_date_time_format(now, "%Y-%m-%dT%H:%M:%S");
	va_list args;

	if (!guardian_log)
		return;
	/* The daemon's format, so that one log reads in order. */
	fprintf(guardian_log, "%s.%03dZ [guardian %d] ", stamp,
		g_date_time_get_microsecond(now) / 1000, (int)getpid());
	va_start(args, format);
	vfprintf(guardian_log, format, args);
	va_end(args);
	fputc('\n', guardian_log);
	fflush(guardian_log);
}

/* ---- Restarting the daemon ---- */

/* Waits for the daemon on the other end of pipe_fd to say goodbye or die.
 * *serving_since: when it said it serves (unchanged if it did not);
 * a daemon that neither serves nor dies within START_TIMEOUT_MS of
 * started_at is killed (pid > 0: the guardian's child). */
static Verdict wait_for_daemon(int pipe_fd, pid_t pid, gint64 *serving_since)
{
	gint64 started_at = g_get_monotonic_time();

	for (;;) {
		struct pollfd poll_pipe = { .fd = pipe_fd, .events = POLLIN };
		gboolean starting = *serving_since < started_at && pid > 0;
		int timeout = starting ? START_TIMEOUT_MS : -1;
		char byte;
		ssize_t n;

		if (poll(&poll_pipe, 1, timeout) == 0) {
			say("the restarted daemon (pid %d) did not start serving; killing it",
			    (int)pid);
			kill(pid, SIGKILL);
			continue;
		}
		n = read(pipe_fd, &byte, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return DIED;
		if (byte == 'b')
			return DISMISSED;
		if (byte == 'r')
			*serving_since = g_get_monotonic_time();
	}
}

static void reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* The first descriptor number above everything the new daemon inherits. */
static int spare_fd_number(const Guardian *g, int pipe_write)
{
	int highest = MAX(g->table_fd, pipe_write);

	for (guint i = 0; i < g->n_groups; i++)
		highest = MAX(highest, g->groups[i]);
	for (guint slot = 0; slot < HSM_GUARDIAN_SLOTS; slot++)
		if (__atomic_load_n(&g->table[slot].used, __ATOMIC_ACQUIRE))
			highest = MAX(highest, g->table[slot].fd);
	return highest + 1;
}

static char **handover_environment(const Guardian *g, int pipe_fd)
{
	GString *groups = g_string_new(NULL);
	g_autofree char *value = NULL;

	for (guint i = 0; i < g->n_groups; i++)
		g_string_append_printf(groups, "%s%d", i ? "," : "", g->groups[i]);
	value = g_strdup_printf("%s;%d;%d", groups->str, g->table_fd, pipe_fd);
	g_string_free(groups, TRUE);
	return g_environ_setenv(g_strdupv(environ), HSM_GUARDIAN_ADOPT_ENV, value, TRUE);
}

/* Starts a daemon to take over; returns the read end of its pipe, or -1. */
static int start_daemon(const Guardian *g, pid_t *pid)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attr;
	g_auto(GStrv) env = NULL;
	int fds[2], spare, rc;

	if (pipe2(fds, O_CLOEXEC) < 0) {
		say("pipe: %s", strerror(errno));
		return -1;
	}
	spare = spare_fd_number(g, fds[1]);
	env = handover_environment(g, spare);
	posix_spawn_file_actions_init(&actions);
	for (guint i = 0; i < g->n_groups; i++)
		posix_spawn_file_actions_adddup2(&actions, g->groups[i], g->groups[i]);
	posix_spawn_file_actions_adddup2(&actions, g->table_fd, g->table_fd);
	posix_spawn_file_actions_adddup2(&actions, fds[1], spare);
	/* Keeps each number an answer still names out of the new daemon's use. */
	for (guint slot = 0; slot < HSM_GUARDIAN_SLOTS; slot++)
		if (__atomic_load_n(&g->table[slot].used, __ATOMIC_ACQUIRE))
			posix_spawn_file_actions_addopen(&actions, g->table[slot].fd, "/dev/null",
							 O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addchdir_np(&actions, g->cwd);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	rc = posix_spawn(pid, "/proc/self/exe", &actions, &attr, g->daemon_argv, env);
	posix_spawn_file_actions_destroy(&actions);
	posix_spawnattr_destroy(&attr);
	close(fds[1]);
	if (rc) {
		say("cannot start a daemon: %s", strerror(rc));
		close(fds[0]);
		return -1;
	}
	return fds[0];
}

static guint events_in_flight(const Guardian *g)
{
	guint count = 0;

	for (guint slot = 0; slot < HSM_GUARDIAN_SLOTS; slot++)
		count += __atomic_load_n(&g->table[slot].used, __ATOMIC_ACQUIRE) ? 1 : 0;
	return count;
}

/* ---- Taking over ---- */

static void deny(int group, int fd)
{
	gboolean downgraded;

	/* Other failures are events the daemon answered after all. */
	if (!hsm_fan_respond(group, fd, FAN_DENY_ERRNO(EIO), &downgraded) && downgraded)
		say("cannot answer event fd %d: %s", fd, strerror(errno));
}

static void deny_event(const struct fanotify_event_metadata *event, gpointer data)
{
	if (event->fd < 0)
		return;
	if (event->mask & HSM_FAN_PERMISSION_EVENTS)
		deny(GPOINTER_TO_INT(data), event->fd);
	close(event->fd);
}

/* Denies every event queued in group. */
static void deny_queued(int group)
{
	while (hsm_fan_read_events(group, deny_event, GINT_TO_POINTER(group)))
		;
}

static int take_over(const Guardian *g)
{
	guint answered = 0;

	if (umount2(g->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
		say("detaching %s: %s", g->mountpoint, strerror(errno));
	/* By number, not from the table: the daemon may have died before it
	 * recorded the last events it read. */
	for (guint i = 0; i < g->n_groups; i++)
		answered += hsm_fan_answer_unclaimed(g->groups[i], FAN_DENY_ERRNO(EIO), NULL, NULL);
	say("%s detached, %u pending events denied; denying the rest until its last open "
	    "file is closed", g->mountpoint, answered);
	for (;;) {
		struct pollfd polls[HSM_GUARDIAN_MAX_GROUPS];
		gboolean alive = FALSE;

		for (guint i = 0; i < g->n_groups; i++) {
			polls[i].fd = g->groups[i];
			polls[i].events = POLLIN;
		}
		poll(polls, g->n_groups, 1000);
		for (guint i = 0; i < g->n_groups; i++) {
			deny_queued(g->groups[i]);
			alive = alive || hsm_bindmount_alive(g->groups[i]);
		}
		if (!alive) {
			say("the mount is gone; exiting");
			return 0;
		}
	}
}

/* Restarts the daemon each time it dies, until it says goodbye or has
 * failed g->restarts times in a row. */
static int guard(const Guardian *g, int pipe_fd)
{
	gint64 serving_since = g_get_monotonic_time(); /* the first daemon serves */
	guint failures = 0;
	pid_t pid = 0;

	for (;;) {
		if (wait_for_daemon(pipe_fd, pid, &serving_since) == DISMISSED)
			return 0; /* a clean stop */
		close(pipe_fd);
		reap_children();
		if (g_get_monotonic_time() - serving_since >= STABLE_USEC)
			failures = 0;
		if (failures++ >= g->restarts) {
			say("the daemon died%s", g->restarts ? ", too often" : "");
			return take_over(g);
		}
		pipe_fd = start_daemon(g, &pid);
		if (pipe_fd < 0)
			return take_over(g);
		say("the daemon died; started another (pid %d, restart %u of %u in a row) to "
		    "finish %u events in flight", (int)pid, failures, g->restarts,
		    events_in_flight(g));
	}
}

/* ---- Start-up ---- */

/* The daemon's other descriptors (its HTTP connections, files it serves)
 * are not the guardian's to hold: closed, keeping keep[0..count). */
static void close_inherited(const int *keep, guint count)
{
	DIR *fds = opendir("/proc/self/fd");
	struct dirent *entry;

	if (!fds)
		return;
	while ((entry = readdir(fds))) {
		int fd = atoi(entry->d_name);
		gboolean kept = fd <= STDERR_FILENO || fd == dirfd(fds) || entry->d_name[0] == '.';

		for (guint i = 0; i < count && !kept; i++)
			kept = keep[i] == fd;
		if (!kept)
			close(fd);
	}
	closedir(fds);
}

/* The guardian must outlive the daemon: an OOM kill of the daemon's
 * memory hog must not take it first.  Needs CAP_SYS_RESOURCE (root has it). */
static void shield_from_oom(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "-1000", 5) < 0)
		say("cannot set oom_score_adj: %s", g_strerror(errno));
	close(fd);
}

int hsm_guardian_main(int argc, char **argv)
{
	Guardian g = { 0 };
	g_auto(GStrv) numbers = NULL;
	int keep[HSM_GUARDIAN_MAX_GROUPS + 2];
	guint64 restarts;
	int pipe_fd;

	if (argc < 9 || !g_ascii_string_to_unsigned(argv[6], 10, 0, 1000, &restarts, NULL))
		return 2;
	numbers = g_strsplit(argv[1], ",", HSM_GUARDIAN_MAX_GROUPS);
	for (char **number = numbers; *number; number++)
		g.groups[g.n_groups++] = atoi(*number);
	g.table_fd = atoi(argv[2]);
	pipe_fd = atoi(argv[3]);
	g.mountpoint = argv[4];
	g.restarts = (guint)restarts;
	g.cwd = argv[7];
	g.daemon_argv = argv + 8;
	keep[0] = g.table_fd;
	keep[1] = pipe_fd;
	memcpy(keep + 2, g.groups, g.n_groups * sizeof(int));
	close_inherited(keep, g.n_groups + 2);
	guardian_log = fopen(argv[5], "ae");
	shield_from_oom();
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	if (chdir("/") < 0)
		return 1;
	g.table = mmap(NULL, HSM_GUARDIAN_TABLE_SIZE, PROT_READ, MAP_SHARED, g.table_fd, 0);
	if (g.table == MAP_FAILED)
		return 1;
	return guard(&g, pipe_fd);
}
