/* One cached file (file.h): which bytes are present, and fetching the rest.
 *
 * The path of a read: hsm_file_ensure() finds the first missing byte of the
 * range; if a running fetch will write it, it waits for that fetch, else it
 * starts one (ending on a grid of blocks, sized by the sequential window, not
 * overlapping another fetch), with the validators of the version held.
 * The transfer thread writes each piece libcurl hands over straight into
 * the cache file and marks it present at once, waking the readers waiting
 * for it.
 */
#include "file.h"
#include "error.h"
#include "url.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The least a sequential reader is fetched ahead: on top of the kernel's
 * own readahead, enough to hide a LAN round trip, and no more, since a
 * reader that stops leaves both behind. */
#define READ_AHEAD_MIN (128 * 1024u)
/* A failed range fails at once for a while, rather than costing another
 * round of retries per reader system call (and kernel readahead). */
#define FAILURE_MEMORY_USEC (2 * G_USEC_PER_SEC)
/* A fetch nobody has waited for this long is cancelled (a read-ahead whose
 * reader went away, a trickle its readers gave up on). */
#define UNWANTED_AFTER_USEC (10 * G_USEC_PER_SEC)

/* How long after a change at the server HTTP caches are asked to
 * revalidate what they hold of the file (a common proxy_cache_valid). */
#define CACHES_STALE_FOR (3600)

/* Locks: save_lock before lock; hooks run with neither held.  refs,
 * last_used and detached are atomics, so that the owner can count users
 * under its own lock without taking this one. */
struct HsmFile {
	HsmFileShared *shared;   /* immutable, like relpath, url and fd */
	char *relpath;
	char *url;
	int fd;                  /* O_RDWR on the cache file */
	atomic_uint refs;
	_Atomic gint64 last_used; /* monotonic usec of the last unref */
	atomic_int detached;     /* the path now names another file */

	GMutex lock;
	GPtrArray *waiters;      /* readers waiting for bytes; protected by lock */
	HsmFileState state;      /* protected by lock */
	GPtrArray *fetches;      /* running fetches; protected by lock */
	gint64 remote_mtime;     /* protected by lock */
	guint generation;        /* protected by lock */
	guint64 seq_start;       /* where the sequential run began; protected by lock */
	guint64 seq_next;        /* end of the last read; protected by lock */
	guint64 window;          /* bytes kept ahead of the reader; protected by lock */
	gboolean dirty;          /* state differs from disk; protected by lock */
	GError *failure;         /* the last failed fetch, protected by lock... */
	HsmRange failed;         /* ...of these bytes... */
	gint64 failed_until;     /* ...is the answer until then (monotonic usec) */
	GMutex save_lock;        /* keeps saves in order */
};

typedef struct {
	HsmFile *file;
	guint refs;              /* protected by file->lock */
	guint64 start, end;      /* bytes it will write; protected by file->lock */
	guint generation;        /* the file's generation when it started */
	gint64 wanted_until;     /* monotonic usec; protected by file->lock */
	gboolean finished;       /* protected by file->lock */
	GError *error;           /* set when finished with an error */
} Fetch;

/* A reader waiting for [from, until) to be written by fetch.  Each has its
 * own condition, signalled only once it can go on: waking every reader at
 * every piece written costs more than the copying. */
typedef struct {
	guint64 from, until;
	Fetch *fetch;
	GCond ready;
} Waiter;

/* Fetches end on a grid of blocks, a power of two no bigger than the
 * least fetch (except at the end of the file), and start on a quarter of
 * it (fetch_start()): clients wanting the same bytes then send requests
 * for the same blocks, which an HTTP cache between them and the origin
 * can answer once for all. */
static guint64 block_size(const HsmFileShared *shared)
{
	return (guint64)1 << (g_bit_storage(shared->min_window) - 1);
}

static guint64 block_down(const HsmFileShared *shared, guint64 offset)
{
	return offset & ~(block_size(shared) - 1);
}

static guint64 block_up(const HsmFileShared *shared, guint64 offset)
{
	guint64 block = block_size(shared);

	return offset > G_MAXUINT64 - block ? G_MAXUINT64 : block_down(shared, offset + block - 1);
}

/* Where a fetch of the missing byte `missing` starts: on a quarter of the
 * grid, so that a reader waits for at most a quarter block of bytes it did
 * not ask for (at 100 Mbit/s, 5 ms of a 256 KiB block rather than 21).  A
 * slicing cache (docs/nginx-cache.conf) still fetches the whole block from
 * the origin once, as the fetch ends on the grid. */
static guint64 fetch_start(const HsmFileShared *shared, guint64 missing)
{
	guint64 grain = MAX(block_size(shared) / 4, 4096u);

	return missing & ~(grain - 1);
}

/* Signals the waiters that can go on.  Called with file->lock held. */
static void wake_waiters(HsmFile *file, gboolean all)
{
	for (guint i = 0; i < file->waiters->len; i++) {
		Waiter *w = file->waiters->pdata[i];

		if (all || w->fetch->finished ||
		    hsm_range_map_contains(&file->state.present, w->from, w->until))
			g_cond_signal(&w->ready);
	}
}

/* How often a waiter that can be interrupted looks at its flag. */
#define INTERRUPT_POLL_USEC (200 * 1000)

gboolean hsm_process_gone(gpointer pid)
{
	return kill(GPOINTER_TO_INT(pid), 0) < 0 && errno == ESRCH;
}

static gboolean reader_gone(const HsmReader *reader)
{
	return reader && reader->gone(reader->data);
}

/* Waits until fetch wrote [from, until) or finished, or the reader went
 * away.  Called with file->lock held. */
static void wait_for(HsmFile *file, Fetch *fetch, guint64 from, guint64 until,
		     const HsmReader *reader)
{
	Waiter w = { .from = from, .until = until, .fetch = fetch };
	guint generation = file->generation;

	g_cond_init(&w.ready);
	g_ptr_array_add(file->waiters, &w);
	while (!fetch->finished && generation == file->generation &&
	       !hsm_range_map_contains(&file->state.present, from, until) &&
	       !reader_gone(reader)) {
		if (reader)
			g_cond_wait_until(&w.ready, &file->lock,
					  g_get_monotonic_time() + INTERRUPT_POLL_USEC);
		else
			g_cond_wait(&w.ready, &file->lock);
	}
	g_ptr_array_remove_fast(file->waiters, &w);
	g_cond_clear(&w.ready);
}

/* ---- References ---- */

HsmFile *hsm_file_ref(HsmFile *file)
{
	atomic_fetch_add(&file->refs, 1);
	return file;
}

void hsm_file_unref(HsmFile *file)
{
	/* The time first: once refs is 0 the owner may free the file. */
	atomic_store(&file->last_used, g_get_monotonic_time());
	guint before = atomic_fetch_sub(&file->refs, 1);

	g_assert(before > 0);
}

gint64 hsm_file_unused_since(HsmFile *file)
{
	return atomic_load(&file->refs) ? -1 : atomic_load(&file->last_used);
}

void hsm_file_detach(HsmFile *file)
{
	atomic_store(&file->detached, 1);
}

const char *hsm_file_relpath(HsmFile *file)
{
	return file->relpath;
}

/* ---- Hooks ---- */

void hsm_file_shared_init(HsmFileShared *shared)
{
	memset(shared, 0, sizeof(*shared));
	g_rw_lock_init(&shared->hooks_lock);
}

void hsm_file_shared_clear(HsmFileShared *shared)
{
	g_rw_lock_clear(&shared->hooks_lock);
}

void hsm_file_set_hooks(HsmFileShared *shared, const HsmFileHooks *hooks)
{
	g_rw_lock_writer_lock(&shared->hooks_lock);
	if (hooks)
		shared->hooks = *hooks;
	else
		memset(&shared->hooks, 0, sizeof(shared->hooks));
	g_rw_lock_writer_unlock(&shared->hooks_lock);
}

void hsm_file_shared_changed(HsmFileShared *shared, const char *relpath)
{
	g_rw_lock_reader_lock(&shared->hooks_lock);
	if (shared->hooks.changed)
		shared->hooks.changed(shared->hooks.user_data, relpath);
	g_rw_lock_reader_unlock(&shared->hooks_lock);
}

void hsm_file_shared_flush(HsmFileShared *shared)
{
	g_rw_lock_reader_lock(&shared->hooks_lock);
	if (shared->hooks.flush)
		shared->hooks.flush(shared->hooks.user_data);
	g_rw_lock_reader_unlock(&shared->hooks_lock);
}

/* Runs the front end's hook for a change of the remote file (or, with
 * evicting, for an eviction), if it set one. */
static void run_hook(HsmFile *file, gboolean evicting)
{
	HsmFileShared *shared = file->shared;

	if (!evicting) {
		hsm_file_shared_changed(shared, file->relpath);
		return;
	}
	g_rw_lock_reader_lock(&shared->hooks_lock);
	if (shared->hooks.evicting)
		shared->hooks.evicting(shared->hooks.user_data, file->fd);
	g_rw_lock_reader_unlock(&shared->hooks_lock);
}

/* ---- Opening ---- */

/* Loads the saved state, unless it is not about this file. */
static void load_state(HsmFile *file, const struct stat *st)
{
	HsmFileState *state = &file->state;

	if (hsm_store_load_file(file->shared->store, file->relpath, state) &&
	    state->size == (guint64)st->st_size)
		return;
	hsm_file_state_clear(state);
	hsm_file_state_init(state);
	state->size = st->st_size;
}

HsmFile *hsm_file_open(HsmFileShared *shared, const char *relpath, GError **err)
{
	HsmFile *file;
	struct stat st;
	int fd = openat(hsm_store_tree_fd(shared->store), relpath, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int code = fd < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;

		g_set_error(err, HSM_ERROR, code, "%s: %s", relpath, g_strerror(code));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	file = g_new0(HsmFile, 1);
	file->shared = shared;
	file->relpath = g_strdup(relpath);
	file->url = hsm_url_for_path(hsm_store_url(shared->store), relpath, FALSE);
	file->fd = fd;
	file->refs = 1;
	g_mutex_init(&file->lock);
	file->waiters = g_ptr_array_new();
	g_mutex_init(&file->save_lock);
	file->fetches = g_ptr_array_new();
	file->window = shared->min_window;
	hsm_file_state_init(&file->state);
	load_state(file, &st);
	/* A crash between a write and putting the mtime back leaves it wrong. */
	file->remote_mtime = hsm_store_restore_mtime(fd);
	if (file->remote_mtime < 0)
		file->remote_mtime = st.st_mtime;
	return file;
}

void hsm_file_free(HsmFile *file)
{
	g_assert(file->fetches->len == 0);
	hsm_file_save(file, NULL);
	close(file->fd);
	hsm_file_state_clear(&file->state);
	g_clear_error(&file->failure);
	g_ptr_array_unref(file->fetches);
	g_mutex_clear(&file->lock);
	g_ptr_array_unref(file->waiters);
	g_mutex_clear(&file->save_lock);
	g_free(file->relpath);
	g_free(file->url);
	g_free(file);
}

void hsm_file_get_status(HsmFile *file, HsmFileStatus *status)
{
	g_mutex_lock(&file->lock);
	status->size = file->state.size;
	status->present = hsm_range_map_total(&file->state.present);
	status->generation = file->generation;
	status->pinned = file->state.pinned;
	g_mutex_unlock(&file->lock);
}

gboolean hsm_file_has(HsmFile *file, guint64 offset, guint64 length)
{
	gboolean has;

	g_mutex_lock(&file->lock);
	has = hsm_file_state_has(&file->state, offset, length);
	g_mutex_unlock(&file->lock);
	return has;
}

/* ---- Saving ---- */

gboolean hsm_file_save(HsmFile *file, GError **err)
{
	GError *local = NULL;
	HsmFileState snapshot;

	g_mutex_lock(&file->save_lock);
	g_mutex_lock(&file->lock);
	if (!file->dirty || atomic_load(&file->detached)) {
		g_mutex_unlock(&file->lock);
		g_mutex_unlock(&file->save_lock);
		return TRUE;
	}
	snapshot = file->state;
	snapshot.etag = g_strdup(file->state.etag);
	hsm_range_map_copy(&snapshot.present, &file->state.present);
	file->dirty = FALSE;
	g_mutex_unlock(&file->lock);

	/* The bytes must be durable before the state that calls them present. */
	if (fdatasync(file->fd) < 0)
		g_set_error(&local, HSM_ERROR, errno, "cannot save the state of %s: %s",
			    file->relpath, g_strerror(errno));
	else if (!hsm_store_save_file(file->shared->store, file->relpath, &snapshot, &local))
		g_prefix_error(&local, "cannot save the state of %s: ", file->relpath);
	if (local) {
		g_warning("%s", local->message);
		g_mutex_lock(&file->lock);
		file->dirty = TRUE;
		g_mutex_unlock(&file->lock);
		g_propagate_error(err, local);
	}
	hsm_file_state_clear(&snapshot);
	g_mutex_unlock(&file->save_lock);
	return local == NULL;
}

/* ---- Remote changes ---- */

/* Tells the size budget what the file holds now, and that it was used
 * (the budget's lock is a leaf: fine under file->lock); TRUE when the
 * cache is over its limit. */
static gboolean note_usage(HsmFile *file)
{
	return file->shared->budget && !atomic_load(&file->detached) &&
	       hsm_budget_note(file->shared->budget, file->relpath,
			       hsm_range_map_total(&file->state.present));
}

/* Every range absent from now on; readers of the old ranges start over.
 * Called with file->lock held. */
static void forget_ranges(HsmFile *file)
{
	hsm_range_map_clear(&file->state.present);
	hsm_range_map_init(&file->state.present);
	file->generation++;
	file->dirty = TRUE;
	note_usage(file);
}

static int punch_all(HsmFile *file)
{
	return fallocate(file->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			 (off_t)MAX(file->state.size, 1));
}

/* The remote file is not the one whose bytes we hold: drop them all and
 * adopt the new size.  Called with file->lock held. */
static void reset_content(HsmFile *file, const HsmRemoteInfo *info)
{
	HsmFileState *state = &file->state;
	guint64 size = info->size != G_MAXUINT64 ? info->size : state->size;

	if (punch_all(file) < 0 || ftruncate(file->fd, (off_t)size) < 0)
		g_warning("%s: cannot drop stale data: %s", file->relpath, g_strerror(errno));
	if (info->mtime >= 0)
		file->remote_mtime = info->mtime;
	hsm_store_set_mtime(file->fd, file->remote_mtime);
	forget_ranges(file);
	state->size = size;
	g_free(state->etag);
	state->etag = g_strdup(info->etag);
	state->last_modified = info->mtime;
	state->changed = g_get_real_time() / G_USEC_PER_SEC;
	wake_waiters(file, TRUE);
}

/* ---- Fetches ---- */

static void fetch_unref(Fetch *fetch)
{
	if (--fetch->refs)
		return;
	g_clear_error(&fetch->error);
	g_free(fetch);
}

static gboolean pwrite_all(int fd, const guint8 *data, gsize len, guint64 offset, GError **err)
{
	while (len) {
		ssize_t n = pwrite(fd, data, len, (off_t)offset);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int code = n < 0 ? errno : EIO;

			g_set_error(err, HSM_ERROR, code, "cannot write the cache: %s",
				    g_strerror(code));
			return FALSE;
		}
		data += n, len -= n, offset += n;
	}
	return TRUE;
}

/* The cache file system is full: evicts least recently used files (as
 * much as a window, so that the rest of this fetch fits too) and tries
 * once more. */
static gboolean write_when_full(HsmFile *file, guint64 offset, const void *data, gsize len,
				GError **err)
{
	guint64 freed = 0;

	if (file->shared->budget)
		freed = hsm_budget_reclaim(file->shared->budget, MAX(len, file->shared->max_window),
					   file->relpath);
	g_warning("%s: the cache file system is full (%s); evicted %" G_GUINT64_FORMAT
		  " bytes of the least recently used files%s", file->relpath, (*err)->message,
		  freed, freed ? " and writing again" : ": nothing could go");
	if (!freed)
		return FALSE;
	g_clear_error(err);
	return pwrite_all(file->fd, data, len, offset, err);
}

/* Writes fetched bytes and marks them present, if the file is still the
 * version this fetch started on.  (The mtime is put back when the fetch
 * ends.) */
static gboolean write_present(Fetch *fetch, guint64 offset, const void *data, gsize len,
			      GError **err)
{
	HsmFile *file = fetch->file;
	gboolean over_limit = FALSE;

	if (!pwrite_all(file->fd, data, len, offset, err) &&
	    !((g_error_matches(*err, HSM_ERROR, ENOSPC) ||
	       g_error_matches(*err, HSM_ERROR, EDQUOT)) &&
	      write_when_full(file, offset, data, len, err)))
		return FALSE;
	g_mutex_lock(&file->lock);
	if (fetch->generation == file->generation) {
		hsm_range_map_add(&file->state.present, offset, offset + len);
		file->dirty = TRUE;
		over_limit = note_usage(file);
		wake_waiters(file, FALSE);
	}
	g_mutex_unlock(&file->lock);
	/* Past the limit: room is made before more bytes come. */
	if (over_limit)
		hsm_budget_enforce(file->shared->budget, file->relpath);
	return TRUE;
}

/* The response describes another version than the bytes we hold: another
 * size, another ETag, or (when there are no ETags) another Last-Modified. */
static gboolean validators_differ(const HsmFileState *state, const HsmRemoteInfo *info)
{
	if (info->size != G_MAXUINT64 && info->size != state->size)
		return TRUE;
	if (state->etag && info->etag)
		return strcmp(state->etag, info->etag) != 0;
	return state->last_modified >= 0 && info->mtime >= 0 &&
	       state->last_modified != info->mtime;
}

static gboolean fetch_check(gpointer user_data, const HsmRemoteInfo *info, GError **err)
{
	Fetch *fetch = user_data;
	HsmFile *file = fetch->file;
	HsmFileState *state = &file->state;
	gboolean changed, notify = FALSE;

	g_mutex_lock(&file->lock);
	changed = validators_differ(state, info);
	if (fetch->generation != file->generation) {
		g_set_error(err, HSM_ERROR, EIO, "%s changed on the server during the read",
			    file->relpath);
	} else if (changed) {
		g_set_error(err, HSM_ERROR, EIO,
			    "%s changed on the server (size %" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT
			    ", ETag %s -> %s); cached data dropped",
			    file->relpath, state->size, info->size, state->etag ? state->etag : "none",
			    info->etag ? info->etag : "none");
		reset_content(file, info);
		notify = TRUE;
	} else {
		if (!state->etag && info->etag) {
			state->etag = g_strdup(info->etag);
			file->dirty = TRUE;
		}
		if (state->last_modified < 0 && info->mtime >= 0) {
			state->last_modified = info->mtime;
			file->dirty = TRUE;
		}
		if (info->whole_body) {
			/* The server ignores Range: this transfer brings everything. */
			fetch->start = 0;
			fetch->end = state->size;
		}
	}
	g_mutex_unlock(&file->lock);
	if (notify)
		run_hook(file, FALSE);
	return *err == NULL;
}

static gboolean fetch_write(gpointer user_data, guint64 offset, const void *data, gsize len,
			    GError **err)
{
	return write_present(user_data, offset, data, len, err);
}

/* Writing made the mtime "now"; once per fetch (an inode update costs as
 * much as a write), it is put back. Called with file->lock held. */
static void restore_mtime(HsmFile *file)
{
	hsm_store_put_mtime(file->fd, file->remote_mtime);
}

static void remember_failure(HsmFile *file, Fetch *fetch)
{
	g_clear_error(&file->failure);
	file->failure = g_error_copy(fetch->error);
	file->failed.start = fetch->start;
	file->failed.end = fetch->end;
	file->failed_until = g_get_monotonic_time() + FAILURE_MEMORY_USEC;
}

/* The recent failure that byte offset is part of, or NULL. */
static const GError *recent_failure(HsmFile *file, guint64 offset)
{
	if (file->failure && file->failed.start <= offset && offset < file->failed.end &&
	    g_get_monotonic_time() < file->failed_until)
		return file->failure;
	return NULL;
}

static void fetch_done(gpointer user_data, GError *err)
{
	Fetch *fetch = user_data;
	HsmFile *file = fetch->file;

	if (err && !g_error_matches(err, HSM_ERROR, ECANCELED))
		g_warning("%s", err->message);
	else if (err)
		g_debug("%s", err->message);
	g_mutex_lock(&file->lock);
	restore_mtime(file);
	fetch->finished = TRUE;
	fetch->error = err;
	if (err && !g_error_matches(err, HSM_ERROR, ECANCELED))
		remember_failure(file, fetch);
	g_ptr_array_remove(file->fetches, fetch);
	wake_waiters(file, FALSE);
	fetch_unref(fetch);
	g_mutex_unlock(&file->lock);
	hsm_file_unref(file);
}

/* Wanted while a reader waits for it (each holds a reference besides the
 * transfer's), or a reader did not long ago. */
static gboolean fetch_wanted(gpointer user_data)
{
	Fetch *fetch = user_data;
	gboolean wanted;

	g_mutex_lock(&fetch->file->lock);
	wanted = fetch->refs > 1 || g_get_monotonic_time() < fetch->wanted_until;
	g_mutex_unlock(&fetch->file->lock);
	return wanted;
}

static const HsmRangeSink fetch_sink = {
	.check = fetch_check,
	.write = fetch_write,
	.done = fetch_done,
	.wanted = fetch_wanted,
};

/* The running fetch that will write byte offset, or NULL. */
static Fetch *fetch_covering(HsmFile *file, guint64 offset)
{
	for (guint i = 0; i < file->fetches->len; i++) {
		Fetch *fetch = file->fetches->pdata[i];

		if (fetch->start <= offset && offset < fetch->end)
			return fetch;
	}
	return NULL;
}

/* Where a fetch starting at offset must stop so as not to fetch again what
 * is present or already being fetched. */
static guint64 fetch_limit(HsmFile *file, guint64 offset)
{
	guint64 limit = MIN(hsm_range_map_next_present(&file->state.present, offset),
			    file->state.size);

	for (guint i = 0; i < file->fetches->len; i++) {
		Fetch *fetch = file->fetches->pdata[i];

		if (fetch->start > offset)
			limit = MIN(limit, fetch->start);
	}
	return limit;
}

/* Whether the server's copy changed within the last CACHES_STALE_FOR:
 * HTTP caches on the way may still hold parts of the old version then. */
static gboolean changed_lately(const HsmFileState *state)
{
	return state->changed >= 0 &&
	       g_get_real_time() / G_USEC_PER_SEC - state->changed < CACHES_STALE_FOR;
}

/* Starts fetching from the missing byte `missing` to at least `want_end`.
 * Called with file->lock held. */
static Fetch *start_fetch(HsmFile *file, guint64 missing, guint64 want_end)
{
	Fetch *fetch = g_new0(Fetch, 1);
	const HsmFileShared *shared = file->shared;
	HsmHeldVersion held = { .size = file->state.size, .etag = file->state.etag,
				.mtime = file->state.last_modified,
				.revalidate = changed_lately(&file->state) };

	fetch->file = file;
	fetch->refs = 1; /* the transfer's */
	fetch->generation = file->generation;
	fetch->wanted_until = g_get_monotonic_time() + UNWANTED_AFTER_USEC;
	/* On the grain even where that fetches again a few bytes present (left
	 * by a fetch that failed or was cancelled half way). */
	fetch->start = fetch_start(shared, missing);
	fetch->end = MIN(block_up(shared, MIN(want_end, fetch_limit(file, missing))),
			 file->state.size);
	g_ptr_array_add(file->fetches, fetch);
	hsm_file_ref(file);
	hsm_fetch_range(shared->fetcher, file->url, fetch->start, fetch->end, &held, &fetch_sink,
			fetch);
	return fetch;
}

/* How far ahead of a sequential reader to keep bytes present or coming.
 * Enough to keep the link busy: twice its bandwidth-delay product, since
 * the next piece is fetched once half the window is left; but at most a
 * quarter of the run so far, so that a reader that stops early (head, a
 * tar listing) costs little more than it read: the window grows by a
 * quarter per round trip, like TCP's slow start.  As the run grows, a
 * sixteenth of it, so that a long read moves big pieces (the run includes
 * the kernel's own readahead). */
static guint64 sequential_window(HsmFile *file)
{
	const HsmFileShared *shared = file->shared;
	guint64 run = file->seq_next - file->seq_start;
	guint64 link = 2 * hsm_fetcher_bandwidth_delay(shared->fetcher);

	return CLAMP(MAX(run / 16, MIN(link, run / 4)), READ_AHEAD_MIN, shared->max_window);
}

/* Reads close behind the previous one continue a sequential run; others
 * start a new one, whose fetch is as big as the read (within bounds). */
static gboolean note_access(HsmFile *file, guint64 offset, guint64 end)
{
	const HsmFileShared *shared = file->shared;
	gboolean sequential = file->seq_next && offset <= file->seq_next + shared->min_window &&
			      offset + shared->max_window >= file->seq_next;

	if (sequential) {
		file->seq_next = MAX(file->seq_next, end);
		file->window = sequential_window(file);
	} else {
		file->seq_start = offset;
		file->seq_next = end;
		file->window = CLAMP(end - offset, shared->min_window, shared->max_window);
	}
	return sequential;
}

/* Keeps a sequential reader fed, as the kernel's readahead does: once what
 * is present or coming ahead of it is less than half a window, the rest
 * of the window is fetched. */
static void read_ahead(HsmFile *file, guint64 from)
{
	guint64 size = file->state.size, ahead = from;

	for (;;) {
		guint64 missing = hsm_range_map_first_missing(&file->state.present, ahead, size);
		Fetch *fetch;

		if (missing >= size)
			return;
		fetch = fetch_covering(file, missing);
		if (!fetch) {
			ahead = missing;
			break;
		}
		ahead = fetch->end;
	}
	if (ahead - from >= file->window / 2)
		return;
	start_fetch(file, ahead, from + file->window);
}

/* The end of [offset, offset + length) clipped to the file size. */
static guint64 read_end(HsmFile *file, guint64 offset, guint64 length)
{
	return MIN(offset + MIN(length, G_MAXUINT64 - offset), file->state.size);
}

gboolean hsm_file_ensure_if_present(HsmFile *file, guint64 offset, guint64 length,
				    gboolean *complete)
{
	guint64 end;
	gboolean present;

	g_mutex_lock(&file->lock);
	end = read_end(file, offset, length);
	present = hsm_file_state_has(&file->state, offset, length);
	/* A lookup in the range map, not its sum (hsm_file_get_status()): this
	 * runs for every read of a file fetched in part. */
	*complete = present && hsm_file_state_has(&file->state, 0, G_MAXUINT64);
	if (present) {
		gboolean sequential = note_access(file, offset, end);

		note_usage(file);
		if (sequential && end < file->state.size)
			read_ahead(file, end);
	}
	g_mutex_unlock(&file->lock);
	return present;
}

gboolean hsm_file_ensure(HsmFile *file, guint64 offset, guint64 length, const HsmReader *reader,
			 GError **err)
{
	gboolean sequential, started = FALSE, ok = TRUE;
	guint generation;
	guint64 end;

	g_mutex_lock(&file->lock);
	generation = file->generation;
	end = read_end(file, offset, length);
	sequential = note_access(file, offset, end);
	note_usage(file);
	while (offset < end) {
		guint64 missing = hsm_range_map_first_missing(&file->state.present, offset, end);
		Fetch *fetch;

		if (missing >= end)
			break;
		if (file->generation != generation) {
			g_set_error(err, HSM_ERROR, EIO, "%s changed on the server during the read",
				    file->relpath);
			ok = FALSE;
			break;
		}
		fetch = fetch_covering(file, missing);
		if (!fetch && recent_failure(file, missing)) {
			g_propagate_error(err, g_error_copy(recent_failure(file, missing)));
			ok = FALSE;
			break;
		}
		if (!fetch) {
			fetch = start_fetch(file, missing,
					    MAX(end, block_down(file->shared, missing) + file->window));
			started = TRUE;
		}
		fetch->refs++;
		wait_for(file, fetch, missing, MIN(end, fetch->end), reader);
		fetch->wanted_until = g_get_monotonic_time() + UNWANTED_AFTER_USEC;
		if (reader_gone(reader)) {
			g_set_error(err, HSM_ERROR, EINTR, "%s: the read was interrupted",
				    file->relpath);
			ok = FALSE;
		}
		if (ok && fetch->finished && fetch->error &&
		    !hsm_range_map_contains(&file->state.present, missing, missing + 1)) {
			g_propagate_error(err, g_error_copy(fetch->error));
			ok = FALSE;
		}
		fetch_unref(fetch);
		if (!ok)
			break;
	}
	/* A read that had to fetch already has that fetch ahead of it. */
	if (ok && sequential && !started && end < file->state.size)
		read_ahead(file, end);
	g_mutex_unlock(&file->lock);
	return ok;
}

/* ---- Eviction ---- */

gboolean hsm_file_set_pinned(HsmFile *file, gboolean pinned, GError **err)
{
	g_mutex_lock(&file->lock);
	file->dirty = file->dirty || file->state.pinned != pinned;
	file->state.pinned = pinned;
	g_mutex_unlock(&file->lock);
	return hsm_file_save(file, err);
}

/* Forgets every range, under file->lock; FALSE while fetches run. */
static gboolean forget_all(HsmFile *file, guint64 *freed, GError **err)
{
	gboolean ok;

	g_mutex_lock(&file->lock);
	ok = file->fetches->len == 0;
	if (ok) {
		*freed = hsm_range_map_total(&file->state.present);
		forget_ranges(file);
	} else {
		g_set_error(err, HSM_ERROR, EBUSY, "%s is being fetched", file->relpath);
	}
	g_mutex_unlock(&file->lock);
	return ok;
}

gboolean hsm_file_evict(HsmFile *file, guint64 *freed, GError **err)
{
	gboolean ok = FALSE, pinned;
	gint64 mtime;

	g_mutex_lock(&file->lock);
	mtime = file->remote_mtime;
	pinned = file->state.pinned;
	g_mutex_unlock(&file->lock);
	if (pinned) {
		g_set_error(err, HSM_ERROR, EPERM, "%s is pinned (httphsm unpin it first)",
			    file->relpath);
		return FALSE;
	}
	run_hook(file, TRUE);
	/* While we hold it, nobody else has the file open, and opens wait. */
	if (fcntl(file->fd, F_SETLEASE, F_WRLCK) < 0) {
		g_set_error(err, HSM_ERROR, errno == EAGAIN ? EBUSY : errno, "%s: %s",
			    file->relpath,
			    errno == EAGAIN ? "the file is open; close it first" : g_strerror(errno));
		return FALSE;
	}
	if (forget_all(file, freed, err)) {
		hsm_file_save(file, NULL); /* absent on disk before the bytes go */
		ok = punch_all(file) == 0;
		if (!ok)
			g_set_error(err, HSM_ERROR, errno, "%s: cannot free the space: %s",
				    file->relpath, g_strerror(errno));
		hsm_store_put_mtime(file->fd, mtime);
	}
	fcntl(file->fd, F_SETLEASE, F_UNLCK);
	return ok;
}
