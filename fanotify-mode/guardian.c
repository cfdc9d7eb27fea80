/* The guardian process and the daemon's side of it; see guardian.h.
 *
 * The daemon shares a table of the events it is handling with the guardian
 * through a memfd: each slot holds an event descriptor number and its group.
 * A fanotify response names the event by that number, so the guardian can
 * answer events read by the dead daemon.  The guardian learns of the
 * daemon's death from EOF on a pipe whose write end only the daemon holds.
 */
#include "guardian.h"
#include "bindmount.h"
#include "error.h"
#include "fanotify-abi.h"
#include "group.h"

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

#define SLOTS 1024
#define MAX_GROUPS 2

typedef struct {
	gint32 fd;              /* -1: free */
	gint32 group;
} Slot;

struct HsmGuardian {
	int groups[MAX_GROUPS];
	guint n_groups;
	char *mountpoint;
	char *log_path;
	int table_fd;
	Slot *table;            /* shared with the guardian process */
	GMutex lock;
	GCond slot_freed;
	guint used;             /* protected by lock */
	pid_t pid;              /* protected by lock */
	int pipe_fd;            /* write end; protected by lock */
	gboolean stopping;      /* protected by lock */
	GThread *watcher;
};

extern char **environ;

/* ---- The daemon's side ---- */

static gboolean spawn_guardian(HsmGuardian *g, GError **err)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attr;
	GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
	GString *groups = g_string_new(NULL);
	int fds[2], rc;

	if (pipe2(fds, O_CLOEXEC) < 0) {
		g_set_error(err, HSM_ERROR, errno, "pipe: %s", g_strerror(errno));
		return FALSE;
	}
	for (guint i = 0; i < g->n_groups; i++)
		g_string_append_printf(groups, "%s%d", i ? "," : "", g->groups[i]);
	g_ptr_array_add(argv, g_strdup("httphsm"));
	g_ptr_array_add(argv, g_strdup("__guardian"));
	g_ptr_array_add(argv, g_string_free(groups, FALSE));
	g_ptr_array_add(argv, g_strdup_printf("%d", g->table_fd));
	g_ptr_array_add(argv, g_strdup_printf("%d", fds[0]));
	g_ptr_array_add(argv, g_strdup(g->mountpoint));
	g_ptr_array_add(argv, g_strdup(g->log_path));
	g_ptr_array_add(argv, NULL);

	/* dup2(fd, fd) clears close-on-exec: exactly these are inherited. */
	posix_spawn_file_actions_init(&actions);
	/* Not the daemon's stdio: it may be the pipe `httphsm mount` waits on. */
	posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	for (guint i = 0; i < g->n_groups; i++)
		posix_spawn_file_actions_adddup2(&actions, g->groups[i], g->groups[i]);
	posix_spawn_file_actions_adddup2(&actions, g->table_fd, g->table_fd);
	posix_spawn_file_actions_adddup2(&actions, fds[0], fds[0]);
	posix_spawnattr_init(&attr);
	/* Its own session: a signal to the daemon's process group spares it. */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	rc = posix_spawn(&g->pid, "/proc/self/exe", &actions, &attr, (char **)argv->pdata, environ);
	posix_spawn_file_actions_destroy(&actions);
	posix_spawnattr_destroy(&attr);
	g_ptr_array_unref(argv);
	close(fds[0]);
	if (rc) {
		close(fds[1]);
		g_set_error(err, HSM_ERROR, rc, "cannot start the guardian: %s", g_strerror(rc));
		return FALSE;
	}
	g->pipe_fd = fds[1];
	return TRUE;
}

/* Restarts the guardian whenever it dies, until the daemon stops. */
static gpointer watch_guardian(gpointer data)
{
	HsmGuardian *g = data;

	g_mutex_lock(&g->lock);
	while (!g->stopping) {
		pid_t pid = g->pid;
		int status;

		g_mutex_unlock(&g->lock);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		g_mutex_lock(&g->lock);
		if (g->stopping)
			break;
		g_warning("the guardian (pid %d) died; starting another", (int)pid);
		close(g->pipe_fd);
		if (!spawn_guardian(g, NULL)) {
			g_warning("cannot restart the guardian: a daemon crash would expose "
				  "unfetched bytes");
			break;
		}
	}
	g_mutex_unlock(&g->lock);
	return NULL;
}

HsmGuardian *hsm_guardian_start(const int *groups, guint n_groups, const char *mountpoint,
				const char *log_path, GError **err)
{
	HsmGuardian *g = g_new0(HsmGuardian, 1);

	g_assert(n_groups <= MAX_GROUPS);
	memcpy(g->groups, groups, n_groups * sizeof(int));
	g->n_groups = n_groups;
	g->mountpoint = g_strdup(mountpoint);
	g->log_path = g_strdup(log_path ? log_path : "/dev/null");
	g->pipe_fd = -1;
	g_mutex_init(&g->lock);
	g_cond_init(&g->slot_freed);
	g->table_fd = memfd_create("httphsm-events", MFD_CLOEXEC);
	if (g->table_fd < 0 || ftruncate(g->table_fd, SLOTS * sizeof(Slot)) < 0 ||
	    (g->table = mmap(NULL, SLOTS * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_SHARED,
			     g->table_fd, 0)) == MAP_FAILED) {
		g_set_error(err, HSM_ERROR, errno, "cannot share the event table: %s",
			    g_strerror(errno));
		g->table = NULL;
		hsm_guardian_release(g);
		return NULL;
	}
	memset(g->table, 0xff, SLOTS * sizeof(Slot));
	if (!spawn_guardian(g, err)) {
		hsm_guardian_release(g);
		return NULL;
	}
	g->watcher = g_thread_new("hsm-guardian", watch_guardian, g);
	return g;
}

guint hsm_guardian_track(HsmGuardian *g, guint group, int event_fd)
{
	guint slot;

	g_mutex_lock(&g->lock);
	while (g->used == SLOTS)
		g_cond_wait(&g->slot_freed, &g->lock);
	for (slot = 0; __atomic_load_n(&g->table[slot].fd, __ATOMIC_RELAXED) >= 0; slot++)
		;
	g->used++;
	__atomic_store_n(&g->table[slot].group, (gint32)group, __ATOMIC_RELAXED);
	__atomic_store_n(&g->table[slot].fd, event_fd, __ATOMIC_RELEASE);
	g_mutex_unlock(&g->lock);
	return slot;
}

void hsm_guardian_untrack(HsmGuardian *g, guint slot)
{
	g_mutex_lock(&g->lock);
	__atomic_store_n(&g->table[slot].fd, -1, __ATOMIC_RELEASE);
	g->used--;
	g_cond_signal(&g->slot_freed);
	g_mutex_unlock(&g->lock);
}

void hsm_guardian_release(HsmGuardian *g)
{
	if (!g)
		return;
	g_mutex_lock(&g->lock);
	g->stopping = TRUE;
	if (g->pipe_fd >= 0 && write(g->pipe_fd, "b", 1) != 1)
		g_warning("cannot dismiss the guardian: %s", g_strerror(errno));
	g_mutex_unlock(&g->lock);
	if (g->watcher)
		g_thread_join(g->watcher);
	if (g->pipe_fd >= 0)
		close(g->pipe_fd);
	if (g->table)
		munmap(g->table, SLOTS * sizeof(Slot));
	if (g->table_fd >= 0)
		close(g->table_fd);
	g_mutex_clear(&g->lock);
	g_cond_clear(&g->slot_freed);
	g_free(g->mountpoint);
	g_free(g->log_path);
	g_free(g);
}

/* ---- The guardian process ---- */

static FILE *guardian_log;

static void say(const char *format, ...) G_GNUC_PRINTF(1, 2);

static void say(const char *format, ...)
{
	va_list args;

	if (!guardian_log)
		return;
	fprintf(guardian_log, "[guardian %d] ", (int)getpid());
	va_start(args, format);
	vfprintf(guardian_log, format, args);
	va_end(args);
	fputc('\n', guardian_log);
	fflush(guardian_log);
}

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

static int take_over(int *groups, guint n_groups, Slot *table, const char *mountpoint)
{
	guint answered = 0;

	if (umount2(mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
		say("detaching %s: %s", mountpoint, strerror(errno));
	for (guint slot = 0; slot < SLOTS; slot++) {
		int fd = __atomic_load_n(&table[slot].fd, __ATOMIC_ACQUIRE);
		int group = __atomic_load_n(&table[slot].group, __ATOMIC_RELAXED);

		if (fd >= 0 && group >= 0 && (guint)group < n_groups) {
			deny(groups[group], fd);
			answered++;
		}
	}
	say("the daemon died: %s detached, %u pending events denied; denying the rest "
	    "until its last open file is closed", mountpoint, answered);
	for (;;) {
		struct pollfd polls[MAX_GROUPS];
		gboolean alive = FALSE;

		for (guint i = 0; i < n_groups; i++) {
			polls[i].fd = groups[i];
			polls[i].events = POLLIN;
		}
		poll(polls, n_groups, 1000);
		for (guint i = 0; i < n_groups; i++) {
			deny_queued(groups[i]);
			alive = alive || hsm_bindmount_alive(groups[i]);
		}
		if (!alive) {
			say("the mount is gone; exiting");
			return 0;
		}
	}
}

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
	int groups[MAX_GROUPS];
	guint n_groups = 0;
	g_auto(GStrv) numbers = NULL;
	Slot *table;
	char byte;
	ssize_t n;
	int table_fd, pipe_fd;

	if (argc != 6)
		return 2;
	numbers = g_strsplit(argv[1], ",", MAX_GROUPS);
	for (char **number = numbers; *number; number++)
		groups[n_groups++] = atoi(*number);
	table_fd = atoi(argv[2]);
	pipe_fd = atoi(argv[3]);
	{
		int keep[MAX_GROUPS + 2] = { table_fd, pipe_fd };

		memcpy(keep + 2, groups, n_groups * sizeof(int));
		close_inherited(keep, n_groups + 2);
	}
	guardian_log = fopen(argv[5], "ae");
	shield_from_oom();
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	if (chdir("/") < 0)
		return 1;
	table = mmap(NULL, SLOTS * sizeof(Slot), PROT_READ, MAP_SHARED, table_fd, 0);
	if (table == MAP_FAILED)
		return 1;
	while ((n = read(pipe_fd, &byte, 1)) < 0 && errno == EINTR)
		;
	if (n == 1)
		return 0; /* dismissed: a clean stop */
	return take_over(groups, n_groups, table, argv[4]);
}
