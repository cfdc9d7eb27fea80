/* fanotify mode: setting up, serving and stopping; see fanotify-mode.h.
 *
 * The order matters: a detached read-only clone of the cache tree is marked
 * first, then the guardian takes copies of the groups, and only then is the
 * clone attached on the mount point, so that no file is ever opened there
 * without pre-content events.  The daemon writes through the cache path,
 * which is another mount and raises no events.
 *
 * Directories: with the kernel-patches/ series, one group gets readdir
 * (FAN_PRE_ACCESS | FAN_ONDIR) and lookup (FAN_HSM_LOOKUP) events.  Mainline
 * refuses FAN_ONDIR next to FAN_PRE_ACCESS, so a second group watches
 * directory opens (FAN_OPEN_PERM | FAN_ONDIR, with files ignored).
 *
 * A daemon restarted by the guardian finds all of that in place: it takes
 * the groups over, learns from their marks which events they report, and
 * finishes the events its predecessor left before serving new ones.
 */
#include "bindmount.h"
#include "error.h"
#include "fanotify-abi.h"
#include "fanotify-private.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int new_group(unsigned int class, GError **err)
{
	/* Non-blocking from the start: the readers and the guardian (which
	 * shares these open files) poll, then read until EAGAIN. */
	int group = fanotify_init(class | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE,
				  O_RDONLY | O_LARGEFILE | O_CLOEXEC);

	if (group < 0)
		g_set_error(err, HSM_ERROR, errno, "fanotify_init: %s", g_strerror(errno));
	return group;
}

static gboolean mark_mount(HsmFanotify *fan, guint group, unsigned int flags, guint64 mask,
			   GError **err)
{
	if (fanotify_mark(fan->groups[group], FAN_MARK_ADD | FAN_MARK_MOUNT | flags, mask,
			  fan->mount_fd, ".") == 0)
		return TRUE;
	g_set_error(err, HSM_ERROR, errno, "fanotify_mark(0x%llx) on the mount: %s",
		    (unsigned long long)mask, g_strerror(errno));
	return FALSE;
}

/* The events each group's mount mark reports, for these capabilities. */
static void set_marks(HsmFanotify *fan)
{
	fan->marks[FILE_GROUP] = FAN_PRE_ACCESS | (fan->lazy_mappings ? FAN_PRE_FAULT : 0);
	if (fan->caps.dir_readdir)
		fan->marks[FILE_GROUP] |= FAN_ONDIR | (fan->caps.dir_lookup ? FAN_HSM_LOOKUP : 0);
	fan->marks[DIR_GROUP] = FAN_OPEN_PERM | FAN_ONDIR;
}

static gboolean set_up_groups(HsmFanotify *fan, GError **err)
{
	set_marks(fan);
	fan->groups[FILE_GROUP] = new_group(FAN_CLASS_PRE_CONTENT, err);
	fan->n_groups = 1;
	if (fan->groups[FILE_GROUP] < 0 ||
	    !mark_mount(fan, FILE_GROUP, 0, fan->marks[FILE_GROUP], err))
		return FALSE;
	if (fan->caps.dir_readdir)
		return TRUE;
	fan->groups[DIR_GROUP] = new_group(FAN_CLASS_CONTENT, err);
	fan->n_groups = 2;
	/* Directory opens; the ignore mask (without FAN_ONDIR) spares file opens. */
	return fan->groups[DIR_GROUP] >= 0 &&
	       mark_mount(fan, DIR_GROUP, 0, fan->marks[DIR_GROUP], err) &&
	       mark_mount(fan, DIR_GROUP, FAN_MARK_IGNORE_SURV, FAN_OPEN_PERM, err);
}

static void close_groups(HsmFanotify *fan)
{
	for (guint i = 0; i < fan->n_groups; i++)
		if (fan->groups[i] >= 0)
			close(fan->groups[i]);
	fan->n_groups = 0;
}

static void on_evicting(gpointer user_data, int fd)
{
	hsm_fanotify_forget_complete(user_data, fd);
}

static HsmFanotify *fanotify_new(HsmTree *tree, const char *mountpoint)
{
	HsmFanotify *fan = g_new0(HsmFanotify, 1);

	fan->tree = tree;
	fan->mountpoint = g_strdup(mountpoint);
	fan->groups[0] = fan->groups[1] = -1;
	fan->mount_fd = -1;
	fan->wake_fd = eventfd(0, EFD_CLOEXEC);
	fan->null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return fan;
}

static void fanotify_free(HsmFanotify *fan)
{
	hsm_guardian_release(fan->guardian);
	close_groups(fan);
	if (fan->mount_fd >= 0)
		close(fan->mount_fd);
	close(fan->wake_fd);
	if (fan->null_fd >= 0)
		close(fan->null_fd);
	g_free(fan->mountpoint);
	g_free(fan);
}

static void serve_tree(HsmFanotify *fan)
{
	hsm_tree_set_hooks(fan->tree,
			   &(HsmFileHooks){ .evicting = on_evicting, .user_data = fan });
	g_message("fanotify mode: %s", hsm_kernel_caps_describe(&fan->caps));
	g_message("mappings: %s", fan->lazy_mappings
		  ? "lazy (a page fault fetches the pages it maps; a system call whose buffer is "
		    "an unfetched part of a mapping fails with EFAULT)"
		  : "whole (mmap() fetches the mapped range first)");
}

static HsmFanotify *mount_anew(HsmTree *tree, const char *mountpoint, const char *log_path,
			       const HsmFanotifyOptions *options, GError **err)
{
	HsmFanotify *fan = fanotify_new(tree, mountpoint);

	fan->mount_fd = hsm_bindmount_clone(hsm_tree_root_path(tree), err);
	fan->mount_id = fan->mount_fd >= 0 ? hsm_bindmount_id(fan->mount_fd) : 0;
	if (fan->mount_fd < 0 || !hsm_kernel_probe(fan->mount_fd, &fan->caps, err))
		goto fail;
	fan->lazy_mappings = fan->caps.page_faults && !options->whole_mappings;
	if (!set_up_groups(fan, err))
		goto fail;
	fan->guardian = hsm_guardian_start(fan->groups, fan->n_groups, mountpoint, log_path,
					   options->restarts, err);
	if (!fan->guardian)
		goto fail;
	hsm_fanotify_events_start(fan);
	if (!hsm_bindmount_attach(fan->mount_fd, mountpoint, err)) {
		hsm_fanotify_events_stop(fan);
		goto fail;
	}
	close(fan->mount_fd);
	fan->mount_fd = -1;
	serve_tree(fan);
	return fan;
fail:
	fanotify_free(fan);
	return NULL;
}

/* A restarted daemon: the guardian's groups, with their marks on the mount. */
static HsmFanotify *adopt_mount(HsmTree *tree, const char *mountpoint, const char *log_path,
			      const HsmFanotifyOptions *options, GError **err)
{
	HsmFanotify *fan = fanotify_new(tree, mountpoint);
	guint64 mask = 0;

	fan->guardian = hsm_guardian_adopt(fan->groups, &fan->n_groups, mountpoint, log_path,
					   options->restarts, err);
	if (!fan->guardian) {
		fanotify_free(fan);
		return NULL;
	}
	fan->mount_id = hsm_bindmount_marked(fan->groups[FILE_GROUP], &mask);
	if (!fan->mount_id) {
		g_set_error(err, HSM_ERROR, ENOENT, "the mount the guardian handed over is gone");
		fanotify_free(fan);
		return NULL;
	}
	fan->caps.dir_readdir = (mask & FAN_ONDIR) != 0;
	fan->caps.dir_lookup = (mask & FAN_HSM_LOOKUP) != 0;
	fan->caps.page_faults = fan->lazy_mappings = (mask & FAN_PRE_FAULT) != 0;
	set_marks(fan);
	hsm_fanotify_events_answer_unrecorded(fan);
	hsm_fanotify_events_start(fan);
	hsm_fanotify_events_resume(fan);
	serve_tree(fan);
	hsm_guardian_serving(fan->guardian);
	g_message("took over %s from a daemon that died", mountpoint);
	return fan;
}

gboolean hsm_fanotify_restarted(void)
{
	return hsm_guardian_take_handover();
}

HsmFanotify *hsm_fanotify_mount(HsmTree *tree, const char *mountpoint, const char *log_path,
				const HsmFanotifyOptions *options, GError **err)
{
	return hsm_guardian_handed_over() ? adopt_mount(tree, mountpoint, log_path, options, err)
		     : mount_anew(tree, mountpoint, log_path, options, err);
}

void hsm_fanotify_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

gboolean hsm_fanotify_has_lookup_events(HsmFanotify *fan)
{
	return fan->caps.dir_lookup;
}

int hsm_fanotify_serve(HsmFanotify *fan)
{
	const struct timespec second = { 1, 0 };
	gboolean stopping = FALSE;
	sigset_t signals;

	hsm_fanotify_stop_signals(&signals);
	for (;;) {
		/* Once asked to stop, look every second whether the mount is gone. */
		int sig = stopping ? sigtimedwait(&signals, NULL, &second)
				   : sigwaitinfo(&signals, NULL);
		int code;

		if (sig < 0 && errno != EAGAIN)
			continue;
		if (hsm_bindmount_detach(fan->mountpoint)) {
			g_message("unmounted %s", fan->mountpoint);
			return 0;
		}
		code = errno;
		if (!hsm_bindmount_alive(fan->groups[FILE_GROUP])) {
			g_message("%s was unmounted", fan->mountpoint);
			return 0;
		}
		/* Closing the group now would let open files read holes as zeros. */
		if (code == EBUSY) {
			g_warning("%s is busy; still serving it", fan->mountpoint);
			stopping = FALSE;
		} else if (!stopping) {
			g_message("cannot unmount %s (%s), but the mount is still in use (moved, "
				  "or detached with files open); serving it until it is released",
				  fan->mountpoint, g_strerror(code));
			stopping = TRUE;
		}
	}
}

void hsm_fanotify_forget_complete(HsmFanotify *fan, int fd)
{
	if (fanotify_mark(fan->groups[FILE_GROUP], FAN_MARK_REMOVE | FAN_MARK_IGNORE_SURV,
			  hsm_fan_content_events(fan), fd, NULL) < 0 && errno != ENOENT)
		g_warning("cannot remove an ignore mark: %s", g_strerror(errno));
}

void hsm_fanotify_free(HsmFanotify *fan)
{
	if (!fan)
		return;
	hsm_tree_set_hooks(fan->tree, NULL);
	hsm_fanotify_events_stop(fan);
	fanotify_free(fan);
}
