/* fanotify mode: reading permission events and answering them.
 *
 * One reader thread per group reads events; it answers reads of bytes that
 * are present itself and hands the rest to a worker pool, so that a slow
 * fetch never holds up reads of other files or of bytes already present.
 * At most MAX_QUEUED events, and one read's worth per reader, are in the
 * daemon's hands; beyond that the readers stop reading and the kernel
 * queues.  Every event read is answered exactly once, whatever happens:
 * allowed once its bytes or entries are in the cache, denied with EIO when
 * they cannot be.
 */
#include "bindmount.h"
#include "error.h"
#include "fanotify-abi.h"
#include "fanotify-private.h"
#include "group.h"
#include "guardian-table.h"
#include "url.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_QUEUED 512
#define WORKERS 32

/* All the events in the daemon's hands fit in the guardian's table, so that
 * recording one never waits for a slot. */
G_STATIC_ASSERT(MAX_QUEUED + HSM_GUARDIAN_MAX_GROUPS * HSM_FAN_READ_BUFFER /
		sizeof(struct fanotify_event_metadata) <= HSM_GUARDIAN_SLOTS);

typedef struct {
	HsmEventRecord rec;     /* rec.relpath is the owned relpath below */
	char *relpath;
	char *name;             /* what a lookup event looks up, for the log */
	guint slot;
} Event;

/* The path of an event's object relative to the mount, or NULL.  The mount
 * can be moved or lazily detached meanwhile: the path counts only if it
 * starts from the same place before and after it was read. */
static char *relpath_of(HsmFanotify *fan, int fd)
{
	char link[64];
	g_autofree char *root = hsm_bindmount_root(fan->mount_id, fan->mountpoint);
	g_autofree char *path = NULL;
	g_autofree char *root_after = NULL;
	const char *below;

	g_snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	path = g_file_read_link(link, NULL);
	root_after = hsm_bindmount_root(fan->mount_id, fan->mountpoint);
	below = path && !strcmp(root, root_after) ? hsm_path_below(path, root) : NULL;
	return below ? g_strdup(below) : NULL;
}

/* The event's file keeps its mount busy: once answered, the reader may go on
 * and unmount at once, before our close() runs.  So the file is dropped
 * first; the answer names the event by its fd number only, which /dev/null
 * keeps until then so that no other event is given it. */
static void release_object(HsmFanotify *fan, int fd)
{
	if (fan->null_fd >= 0 && dup3(fan->null_fd, fd, O_CLOEXEC) < 0)
		g_debug("cannot release an event's file: %s", g_strerror(errno));
}

static void respond(HsmFanotify *fan, const HsmEventRecord *ev, guint32 response)
{
	gboolean downgraded;
	gboolean answered;

	release_object(fan, ev->fd);
	answered = hsm_fan_respond(fan->groups[ev->group], ev->fd, response, &downgraded);

	if (downgraded) /* a kernel without errno responses: plain EPERM from now on */
		g_atomic_int_set(&fan->errno_responses, 0);
	/* ENOENT: the access was cancelled (its process was killed). */
	if (!answered && errno != ENOENT)
		g_warning("cannot answer a fanotify event: %s", g_strerror(errno));
}

static guint32 denial(HsmFanotify *fan, const GError *err)
{
	int code = hsm_error_errno(err);

	if (!g_atomic_int_get(&fan->errno_responses))
		return FAN_DENY;
	/* The kernel accepts only a few errnos; readers get EIO for the rest. */
	switch (code) {
	case EIO:
	case EPERM:
	case EBUSY:
	case ETXTBSY:
	case EAGAIN:
	case ENOSPC:
	case EDQUOT:
		break;
	default:
		code = EIO;
	}
	return FAN_DENY_ERRNO(code);
}

/* Events of this inode stop once it needs nothing more.  Evictable: if the
 * kernel forgets the inode, events come back and are answered at once. */
static void ignore_from_now_on(HsmFanotify *fan, guint group, int fd, guint64 mask)
{
	if (fanotify_mark(fan->groups[group],
			  FAN_MARK_ADD | FAN_MARK_IGNORE_SURV | FAN_MARK_EVICTABLE, mask, fd,
			  NULL) < 0)
		g_debug("cannot add an ignore mark: %s", g_strerror(errno));
}

static gboolean populate(HsmFanotify *fan, const HsmEventRecord *ev, GError **err)
{
	if (!hsm_tree_populate(fan->tree, ev->relpath, err))
		return FALSE;
	/* Silence the directory for the group that asked, for all it reports,
	 * unless its listing must be revalidated later: its next event does
	 * that (an event on a fresh listing is answered at once). */
	if (hsm_tree_dir_cache_time(fan->tree) < 0)
		ignore_from_now_on(fan, ev->group, ev->fd, fan->marks[ev->group]);
	return TRUE;
}

static gboolean fill(HsmFanotify *fan, const HsmEventRecord *ev, GError **err)
{
	/* A killed reader's access is cancelled by the kernel (its wait is
	 * killable): nobody will take the answer. */
	HsmReader reader = { hsm_process_gone, GINT_TO_POINTER(ev->pid) };
	HsmFile *file = hsm_tree_get_file(fan->tree, ev->relpath, err);
	HsmFileStatus status;
	gboolean ok;

	if (!file)
		return FALSE;
	ok = hsm_file_ensure(file, ev->has_range ? ev->offset : 0,
			     ev->has_range ? ev->count : G_MAXUINT64, ev->pid > 0 ? &reader : NULL, err);
	hsm_file_get_status(file, &status);
	if (ok && status.present == status.size)
		ignore_from_now_on(fan, ev->group, ev->fd, hsm_fan_content_events(fan));
	hsm_file_unref(file);
	return ok;
}

/* A fault inside a system call (FAN_HSM_NOFILL): its caller may hold locks
 * of the cache's file system (a write() from a mapped buffer holds its
 * freeze protection), so nothing is written now; the access goes on only
 * if the bytes are there. */
static gboolean check_present(HsmFanotify *fan, const HsmEventRecord *ev, GError **err)
{
	gboolean present = hsm_tree_has_range(fan->tree, ev->relpath, ev->offset, ev->count);

	if (!present)
		g_set_error(err, HSM_ERROR, EFAULT,
			    "a system call used bytes %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT
			    " of a mapping of it as its buffer before they were fetched "
			    "(they cannot be fetched inside the call: EFAULT)",
			    ev->offset, ev->count);
	return present;
}

static void log_event(const Event *event)
{
	const HsmEventRecord *ev = &event->rec;

	g_debug("fanotify event 0x%llx on '%s'%s%s%s range %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT,
		(unsigned long long)ev->mask, ev->relpath ? ev->relpath : "?",
		event->name ? " (lookup of '" : "", event->name ? event->name : "",
		event->name ? "')" : "", ev->offset, ev->count);
}

/* Answers the event, then forgets it. */
static void finish_event(HsmFanotify *fan, Event *event, gboolean ok, GError *err)
{
	const HsmEventRecord *ev = &event->rec;

	if (!ok && g_error_matches(err, HSM_ERROR, EINTR))
		g_debug("%s (the reader is gone)", err->message);
	else if (!ok)
		g_warning("denying access to %s: %s", ev->relpath ? ev->relpath : "?",
			  err->message);
	respond(fan, ev, ok ? FAN_ALLOW : denial(fan, err));
	hsm_guardian_untrack(fan->guardian, event->slot);
	close(ev->fd);
	g_free(event->relpath);
	g_free(event->name);
	g_free(event);
}

static void handle_event(gpointer data, gpointer user_data)
{
	Event *event = data;
	const HsmEventRecord *ev = &event->rec;
	HsmFanotify *fan = user_data;
	GError *err = NULL;
	struct stat st;
	gboolean ok = TRUE;

	log_event(event);
	/* Only our mount is marked: an object we cannot place is never let
	 * through, as its bytes may not be there. */
	if (!ev->relpath || fstat(ev->fd, &st) < 0) {
		g_set_error(&err, HSM_ERROR, EIO, "cannot tell which file of %s this is",
			    fan->mountpoint);
		ok = FALSE;
	} else if (S_ISDIR(st.st_mode)) {
		ok = populate(fan, ev, &err);
	} else if (ev->mask & FAN_HSM_NOFILL) {
		ok = check_present(fan, ev, &err);
	} else if (ev->mask & (FAN_PRE_ACCESS | FAN_PRE_FAULT)) {
		ok = fill(fan, ev, &err);
	}
	finish_event(fan, event, ok, err);
	g_clear_error(&err);
	g_mutex_lock(&fan->lock);
	fan->queued--;
	g_cond_signal(&fan->room);
	g_mutex_unlock(&fan->lock);
}

/* A read of bytes that are present, of a file the daemon has open (a file
 * read only in part raises an event for every read), is answered by the
 * reader thread at once: handing it to a worker would cost more than
 * answering it. */
static gboolean answered_at_once(HsmFanotify *fan, Event *event)
{
	const HsmEventRecord *ev = &event->rec;
	gboolean complete;
	struct stat st;

	if (!ev->relpath || !(ev->mask & (FAN_PRE_ACCESS | FAN_PRE_FAULT)) ||
	    (ev->mask & FAN_HSM_NOFILL) || fstat(ev->fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    !hsm_tree_ensure_if_present(fan->tree, ev->relpath, ev->has_range ? ev->offset : 0,
					ev->has_range ? ev->count : G_MAXUINT64, &complete))
		return FALSE;
	log_event(event);
	if (complete)
		ignore_from_now_on(fan, ev->group, ev->fd, hsm_fan_content_events(fan));
	finish_event(fan, event, TRUE, NULL);
	return TRUE;
}

/* A lookup event's name record (kernel-patches/): the name, bounded by the record. */
static char *name_of(const struct fanotify_event_info_header *hdr)
{
	const struct fanotify_event_info_hsm_name *record = (const void *)hdr;
	gsize room = hdr->len - sizeof(*record);

	return g_strndup(record->name, MIN(record->name_len, room));
}

static void parse_info(Event *event, const struct fanotify_event_metadata *meta)
{
	HsmEventRecord *ev = &event->rec;
	const char *p = (const char *)meta + meta->metadata_len;
	const char *end = (const char *)meta + meta->event_len;

	while (p + sizeof(struct fanotify_event_info_header) <= end) {
		const struct fanotify_event_info_header *hdr = (const void *)p;

		if (hdr->len < sizeof(*hdr) || p + hdr->len > end)
			break;
		if (hdr->info_type == FAN_EVENT_INFO_TYPE_RANGE &&
		    hdr->len >= sizeof(struct fanotify_event_info_range)) {
			const struct fanotify_event_info_range *range = (const void *)p;

			ev->has_range = TRUE;
			ev->offset = range->offset;
			ev->count = range->count;
		} else if (hdr->info_type == FAN_EVENT_INFO_TYPE_HSM_NAME &&
			   hdr->len >= sizeof(struct fanotify_event_info_hsm_name) && !event->name) {
			event->name = name_of(hdr);
		}
		p += hdr->len;
	}
}

/* Waits for room among the events in the daemon's hands, and takes one. */
static void take_room(HsmFanotify *fan)
{
	g_mutex_lock(&fan->lock);
	while (fan->queued >= MAX_QUEUED)
		g_cond_wait(&fan->room, &fan->lock);
	fan->queued++;
	g_mutex_unlock(&fan->lock);
}

/* Records the event in the guardian's table at once; the workers get it
 * once the whole batch is recorded (see read_events). */
static Event *record(HsmFanotify *fan, guint group, const struct fanotify_event_metadata *meta)
{
	Event *event;

	if (meta->fd < 0)
		return NULL; /* queue overflow notices and the like carry no object */
	if (!(meta->mask & HSM_FAN_PERMISSION_EVENTS)) {
		close(meta->fd);
		return NULL;
	}
	event = g_new0(Event, 1);
	event->rec.group = group;
	event->rec.fd = meta->fd;
	event->rec.mask = meta->mask;
	event->rec.pid = meta->pid;
	parse_info(event, meta);
	event->relpath = relpath_of(fan, meta->fd);
	event->rec.relpath = event->relpath;
	event->slot = hsm_guardian_track(fan->guardian, &event->rec);
	return event;
}

/* An event a dead daemon left: its object is opened anew, through the cache,
 * onto the fd number the answer names (held by a placeholder until now). */
static void resume(guint slot, const HsmEventRecord *rec, gpointer data)
{
	HsmFanotify *fan = data;
	Event *event = g_new0(Event, 1);
	g_autofree char *path = rec->relpath ? g_build_filename(hsm_tree_root_path(fan->tree),
								 rec->relpath, NULL)
					     : NULL;
	int fd = path ? open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC) : -1;

	event->rec = *rec;
	event->slot = slot;
	if (fd >= 0 && dup3(fd, rec->fd, O_CLOEXEC) >= 0)
		event->relpath = g_strdup(rec->relpath);
	else
		g_warning("cannot reopen %s for an event in flight: %s", path ? path : "?",
			  g_strerror(errno));
	if (fd >= 0)
		close(fd);
	event->rec.relpath = event->relpath; /* NULL: answered with EIO */
	take_room(fan);
	g_thread_pool_push(fan->workers, event, NULL);
}

typedef struct {
	HsmFanotify *fan;
	guint group;
	GPtrArray *batch;
} GroupOf;

/* For tests only, like git's GIT_TEST_* variables: if the file that
 * HTTPHSM_TEST_DIE_UNRECORDED names exists, remove it and die as a daemon
 * killed between reading an event and recording it would.  Looked up once,
 * before the readers start, not for every event. */
static const char *die_unrecorded_flag;

static void die_unrecorded_if_asked(void)
{
	if (die_unrecorded_flag && unlink(die_unrecorded_flag) == 0)
		raise(SIGKILL);
}

static void record_event(const struct fanotify_event_metadata *meta, gpointer data)
{
	GroupOf *of = data;
	Event *event;

	die_unrecorded_if_asked();
	event = record(of->fan, of->group, meta);

	if (event)
		g_ptr_array_add(of->batch, event);
}

/* Reads what group has and answers it or hands it to the workers; FALSE
 * when nothing was there.  Every event of a read is in the guardian's table
 * before waiting for room for any, so that a daemon killed meanwhile leaves
 * none unknown. */
static gboolean read_events(HsmFanotify *fan, guint group)
{
	g_autoptr(GPtrArray) batch = g_ptr_array_new();
	GroupOf of = { fan, group, batch };
	gboolean got;

	errno = 0;
	got = hsm_fan_read_events(fan->groups[group], record_event, &of);
	if (!got && errno && errno != EAGAIN && errno != EINTR)
		g_warning("reading fanotify events: %s", g_strerror(errno));
	for (guint i = 0; i < batch->len; i++) {
		if (answered_at_once(fan, batch->pdata[i]))
			continue;
		take_room(fan);
		g_thread_pool_push(fan->workers, batch->pdata[i], NULL);
	}
	return got;
}

typedef struct {
	HsmFanotify *fan;
	guint group;
} Reader;

static gpointer reader_main(gpointer data)
{
	Reader *reader = data;
	HsmFanotify *fan = reader->fan;
	guint group = reader->group;
	struct pollfd polls[2] = {
		{ .fd = fan->groups[group], .events = POLLIN },
		{ .fd = fan->wake_fd, .events = POLLIN },
	};

	g_free(reader);
	for (;;) {
		if (poll(polls, 2, -1) < 0 && errno != EINTR)
			g_error("poll: %s", g_strerror(errno));
		if (polls[0].revents & POLLIN)
			read_events(fan, group);
		if (polls[1].revents & POLLIN)
			break;
	}
	while (read_events(fan, group))
		; /* what was queued before the stop */
	return NULL;
}

void hsm_fanotify_events_start(HsmFanotify *fan)
{
	g_mutex_init(&fan->lock);
	g_cond_init(&fan->room);
	g_atomic_int_set(&fan->errno_responses, 1);
	die_unrecorded_flag = g_getenv("HTTPHSM_TEST_DIE_UNRECORDED");
	fan->workers = g_thread_pool_new(handle_event, fan, WORKERS, FALSE, NULL);
	for (guint i = 0; i < fan->n_groups; i++) {
		Reader *reader = g_new(Reader, 1);

		reader->fan = fan;
		reader->group = i;
		fan->readers[i] = g_thread_new("hsm-fanotify", reader_main, reader);
	}
}

static void claim_inherited(guint slot, const HsmEventRecord *rec, gpointer data)
{
	GHashTable **claimed = data;

	(void)slot;
	g_hash_table_add(claimed[rec->group], GINT_TO_POINTER(rec->fd));
}

static gboolean is_claimed(int fd, gpointer data)
{
	return g_hash_table_contains(data, GINT_TO_POINTER(fd));
}

void hsm_fanotify_events_answer_unrecorded(HsmFanotify *fan)
{
	GHashTable *claimed[HSM_GUARDIAN_MAX_GROUPS];
	guint answered = 0;

	for (guint i = 0; i < fan->n_groups; i++)
		claimed[i] = g_hash_table_new(NULL, NULL);
	hsm_guardian_foreach_inherited(fan->guardian, claim_inherited, claimed);
	for (guint i = 0; i < fan->n_groups; i++) {
		answered += hsm_fan_answer_unclaimed(fan->groups[i], FAN_DENY_ERRNO(EIO),
						     is_claimed, claimed[i]);
		g_hash_table_destroy(claimed[i]);
	}
	if (answered)
		g_warning("%u accesses that the dead daemon read but did not record fail with "
			  "EIO", answered);
}

void hsm_fanotify_events_resume(HsmFanotify *fan)
{
	hsm_guardian_foreach_inherited(fan->guardian, resume, fan);
}

void hsm_fanotify_events_stop(HsmFanotify *fan)
{
	guint64 one = 1;

	if (write(fan->wake_fd, &one, sizeof(one)) != sizeof(one))
		g_warning("cannot stop the event readers: %s", g_strerror(errno));
	for (guint i = 0; i < fan->n_groups; i++)
		g_thread_join(fan->readers[i]);
	g_thread_pool_free(fan->workers, FALSE, TRUE);
	g_mutex_clear(&fan->lock);
	g_cond_clear(&fan->room);
}
