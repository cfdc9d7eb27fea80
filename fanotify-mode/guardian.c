/* The daemon's side of the guardian; see guardian.h and guardian-table.h.
 *
 * The guardian learns of the daemon's death from EOF on a pipe whose write
 * end only the daemon holds; a byte on it says goodbye ('b') or, from a
 * restarted daemon, that it serves ('r').  The daemon watches the guardian
 * through a pidfd (it is the daemon's child, or, for a restarted daemon,
 * its parent) and starts another if it dies.
 */
#include "guardian.h"
#include "error.h"
#include "guardian-table.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

struct HsmGuardian {
	int groups[HSM_GUARDIAN_MAX_GROUPS];
	guint n_groups;
	char *mountpoint;
	char *log_path;
	guint restarts;
	char *cwd;              /* where the daemon was started: its argv may be relative */
	char **daemon_argv;     /* how to start the daemon again */
	int table_fd;
	HsmEventSlot *table;    /* shared with the guardian process */
	GMutex lock;
	GCond slot_freed;
	guint used;             /* protected by lock */
	pid_t pid;              /* protected by lock */
	int pipe_fd;            /* write end; protected by lock */
	gboolean stopping;      /* protected by lock */
	gboolean adopting;      /* a restarted daemon, not serving yet */
	GThread *watcher;
};

/* What a guardian handed to the daemon it started. */
static struct {
	gboolean given;
	int groups[HSM_GUARDIAN_MAX_GROUPS];
	guint n_groups;
	int table_fd;
	int pipe_fd;
} handover;

extern char **environ;

static char **read_own_argv(void)
{
	g_autofree char *cmdline = NULL;
	gsize length;
	GPtrArray *argv = g_ptr_array_new();

	if (g_file_get_contents("/proc/self/cmdline", &cmdline, &length, NULL))
		for (gsize at = 0; at < length; at += strlen(cmdline + at) + 1)
			g_ptr_array_add(argv, g_strdup(cmdline + at));
	g_ptr_array_add(argv, NULL);
	return (char **)g_ptr_array_free(argv, FALSE);
}

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
	g_ptr_array_add(argv, g_strdup_printf("%u", g->restarts));
	g_ptr_array_add(argv, g_strdup(g->cwd));
	for (char **arg = g->daemon_argv; *arg; arg++)
		g_ptr_array_add(argv, g_strdup(*arg));
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

/* Returns once process pid has exited, and reaps it if it is a child. */
static void wait_for_exit(pid_t pid)
{
	int pidfd = pidfd_open(pid, 0);
	struct pollfd poll_exit = { .fd = pidfd, .events = POLLIN };

	if (pidfd >= 0) {
		while (poll(&poll_exit, 1, -1) < 0 && errno == EINTR)
			;
		close(pidfd);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Restarts the guardian whenever it dies, until the daemon stops. */
static gpointer watch_guardian(gpointer data)
{
	HsmGuardian *g = data;

	g_mutex_lock(&g->lock);
	while (!g->stopping) {
		pid_t pid = g->pid;

		g_mutex_unlock(&g->lock);
		wait_for_exit(pid);
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

static HsmGuardian *guardian_new(const char *mountpoint, const char *log_path, guint restarts)
{
	HsmGuardian *g = g_new0(HsmGuardian, 1);

	g->mountpoint = g_strdup(mountpoint);
	g->log_path = g_strdup(log_path ? log_path : "/dev/null");
	g->restarts = restarts;
	g->cwd = g_get_current_dir();
	g->daemon_argv = read_own_argv();
	g->pipe_fd = g->table_fd = -1;
	g_mutex_init(&g->lock);
	g_cond_init(&g->slot_freed);
	return g;
}

static gboolean map_table(HsmGuardian *g, GError **err)
{
	g->table = mmap(NULL, HSM_GUARDIAN_TABLE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
			g->table_fd, 0);
	if (g->table != MAP_FAILED)
		return TRUE;
	g->table = NULL;
	g_set_error(err, HSM_ERROR, errno, "cannot share the event table: %s", g_strerror(errno));
	return FALSE;
}

HsmGuardian *hsm_guardian_start(const int *groups, guint n_groups, const char *mountpoint,
				const char *log_path, guint restarts, GError **err)
{
	HsmGuardian *g = guardian_new(mountpoint, log_path, restarts);

	g_assert(n_groups <= HSM_GUARDIAN_MAX_GROUPS);
	memcpy(g->groups, groups, n_groups * sizeof(int));
	g->n_groups = n_groups;
	g->table_fd = memfd_create("httphsm-events", MFD_CLOEXEC);
	if (g->table_fd < 0 || ftruncate(g->table_fd, HSM_GUARDIAN_TABLE_SIZE) < 0) {
		g_set_error(err, HSM_ERROR, errno, "cannot make the event table: %s",
			    g_strerror(errno));
		hsm_guardian_release(g);
		return NULL;
	}
	if (!map_table(g, err) || !spawn_guardian(g, err)) {
		hsm_guardian_release(g);
		return NULL;
	}
	g->watcher = g_thread_new("hsm-guardian", watch_guardian, g);
	return g;
}

static gboolean parse_fd(const char *text, int *fd)
{
	guint64 value;

	if (!g_ascii_string_to_unsigned(text, 10, 3, G_MAXINT, &value, NULL))
		return FALSE;
	*fd = (int)value;
	return TRUE;
}

/* "GROUPS;TABLE;PIPE" */
static gboolean parse_handover(const char *text)
{
	g_auto(GStrv) parts = g_strsplit(text, ";", 3);
	g_auto(GStrv) groups = NULL;

	if (g_strv_length(parts) != 3 || !parse_fd(parts[1], &handover.table_fd) ||
	    !parse_fd(parts[2], &handover.pipe_fd))
		return FALSE;
	groups = g_strsplit(parts[0], ",", 0);
	if (g_strv_length(groups) < 1 || g_strv_length(groups) > HSM_GUARDIAN_MAX_GROUPS)
		return FALSE;
	for (guint i = 0; groups[i]; i++)
		if (!parse_fd(groups[i], &handover.groups[handover.n_groups++]))
			return FALSE;
	return TRUE;
}

gboolean hsm_guardian_take_handover(void)
{
	const char *text = g_getenv(HSM_GUARDIAN_ADOPT_ENV);

	if (!text)
		return FALSE;
	handover.given = parse_handover(text);
	if (!handover.given)
		g_warning("ignoring %s='%s'", HSM_GUARDIAN_ADOPT_ENV, text);
	g_unsetenv(HSM_GUARDIAN_ADOPT_ENV); /* not for the guardians this daemon starts */
	return handover.given;
}

gboolean hsm_guardian_handed_over(void)
{
	return handover.given;
}

static void set_cloexec(int fd)
{
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		g_warning("fd %d: %s", fd, g_strerror(errno));
}

HsmGuardian *hsm_guardian_adopt(int *groups, guint *n_groups, const char *mountpoint,
				const char *log_path, guint restarts, GError **err)
{
	HsmGuardian *g = guardian_new(mountpoint, log_path, restarts);

	g_assert(handover.given);
	handover.given = FALSE;
	memcpy(g->groups, handover.groups, sizeof(handover.groups));
	g->n_groups = handover.n_groups;
	g->table_fd = handover.table_fd;
	g->pipe_fd = handover.pipe_fd;
	for (guint i = 0; i < g->n_groups; i++)
		set_cloexec(g->groups[i]);
	set_cloexec(g->table_fd);
	set_cloexec(g->pipe_fd);
	g->pid = getppid();
	if (!map_table(g, err)) {
		hsm_guardian_release(g);
		return NULL;
	}
	for (guint slot = 0; slot < HSM_GUARDIAN_SLOTS; slot++)
		g->used += __atomic_load_n(&g->table[slot].used, __ATOMIC_ACQUIRE) ? 1 : 0;
	memcpy(groups, g->groups, sizeof(g->groups));
	*n_groups = g->n_groups;
	g->adopting = TRUE;
	return g;
}

void hsm_guardian_foreach_inherited(HsmGuardian *g,
				    void (*fn)(guint slot, const HsmEventRecord *event,
					       gpointer data),
				    gpointer data)
{
	for (guint slot = 0; slot < HSM_GUARDIAN_SLOTS; slot++) {
		const HsmEventSlot *s = &g->table[slot];
		HsmEventRecord event;

		if (!__atomic_load_n(&s->used, __ATOMIC_ACQUIRE))
			continue;
		event = (HsmEventRecord){
			.group = MIN(s->group, g->n_groups - 1), .fd = s->fd, .mask = s->mask,
			.has_range = s->has_range != 0, .offset = s->offset, .count = s->count,
			.pid = s->pid, .relpath = s->placed ? s->relpath : NULL,
		};
		fn(slot, &event, data);
	}
}

void hsm_guardian_serving(HsmGuardian *g)
{
	g_mutex_lock(&g->lock);
	g->adopting = FALSE;
	if (write(g->pipe_fd, "r", 1) != 1)
		g_warning("cannot tell the guardian: %s", g_strerror(errno));
	g_mutex_unlock(&g->lock);
	g->watcher = g_thread_new("hsm-guardian", watch_guardian, g);
}

guint hsm_guardian_track(HsmGuardian *g, const HsmEventRecord *event)
{
	HsmEventSlot *s;
	guint slot;

	g_mutex_lock(&g->lock);
	while (g->used == HSM_GUARDIAN_SLOTS)
		g_cond_wait(&g->slot_freed, &g->lock);
	for (slot = 0; __atomic_load_n(&g->table[slot].used, __ATOMIC_RELAXED); slot++)
		;
	g->used++;
	s = &g->table[slot];
	s->fd = event->fd;
	s->group = event->group;
	s->pid = event->pid;
	s->mask = event->mask;
	s->has_range = event->has_range;
	s->offset = event->offset;
	s->count = event->count;
	s->placed = event->relpath && g_strlcpy(s->relpath, event->relpath,
						sizeof(s->relpath)) < sizeof(s->relpath);
	__atomic_store_n(&s->used, 1, __ATOMIC_RELEASE);
	g_mutex_unlock(&g->lock);
	return slot;
}

void hsm_guardian_untrack(HsmGuardian *g, guint slot)
{
	g_mutex_lock(&g->lock);
	__atomic_store_n(&g->table[slot].used, 0, __ATOMIC_RELEASE);
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
	/* A restarted daemon that could not take over just exits: to the
	 * guardian, a failed restart. */
	if (g->pipe_fd >= 0 && !g->adopting && write(g->pipe_fd, "b", 1) != 1)
		g_warning("cannot dismiss the guardian: %s", g_strerror(errno));
	g_mutex_unlock(&g->lock);
	if (g->watcher)
		g_thread_join(g->watcher);
	if (g->pipe_fd >= 0)
		close(g->pipe_fd);
	if (g->table)
		munmap(g->table, HSM_GUARDIAN_TABLE_SIZE);
	if (g->table_fd >= 0)
		close(g->table_fd);
	g_mutex_clear(&g->lock);
	g_cond_clear(&g->slot_freed);
	g_free(g->mountpoint);
	g_free(g->log_path);
	g_free(g->cwd);
	g_strfreev(g->daemon_argv);
	g_free(g);
}
