/* The core's facade: registries of directories and files; see tree.h.
 *
 * Files stay in the registry while referenced and for a while after (so a
 * fanotify daemon handling many events on one file does not reload its
 * state each time).  A flusher thread saves changed file states every second
 * and drops idle files.
 */
#include "tree.h"
#include "error.h"
#include "populate.h"
#include "url.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLUSH_INTERVAL_USEC G_USEC_PER_SEC
#define IDLE_USEC (30 * G_USEC_PER_SEC)
/* A listing checked this recently counts as fresh whatever the TTL: with
 * a TTL of 0, `ls -l` of a big directory (one lookup per entry) must not
 * cost one request per entry. */
#define MIN_REVALIDATE_USEC G_USEC_PER_SEC

/* What the tree remembers of a populated directory. */
typedef struct {
	gint64 checked;          /* monotonic usec of its last fetch or revalidation */
	gint64 max_age;          /* the server's Cache-Control max-age (s), or -1 */
	gboolean refresh;        /* revalidate at the next populate, whatever the TTL */
} DirRecord;

/* Locks: tree->lock is never held while a file's lock is taken, nor while
 * a fetch or a populate runs. */
struct HsmTree {
	HsmTreeOptions options;  /* immutable, like store and fetcher */
	HsmStore *store;
	HsmFetcher *fetcher;
	HsmFileShared shared;    /* what every file uses */
	HsmBudget *budget;       /* the size limit, if any, and LRU order */

	GMutex lock;
	GHashTable *files;       /* relpath -> HsmFile *; protected by lock */
	GHashTable *populated;   /* relpath -> DirRecord *; protected by lock */
	GHashTable *populating;  /* relpath -> NULL while listed; protected by lock */
	GPtrArray *detached;     /* files whose path went away; protected by lock */
	GCond populate_done;     /* a populate finished */
	GCond flusher_wake;
	gboolean stopping;       /* protected by lock */
	GThread *flusher;
};

void hsm_tree_options_init(HsmTreeOptions *options)
{
	memset(options, 0, sizeof(*options));
	hsm_fetch_options_init(&options->fetch);
	options->min_window = 256 * 1024;
	options->max_window = 8 * 1024 * 1024;
	options->max_listing = 64 * 1024 * 1024;
	options->dir_cache_time = 5 * 60 * G_USEC_PER_SEC;
}

void hsm_tree_options_clear(HsmTreeOptions *options)
{
	g_free(options->url);
	g_free(options->cache_dir);
	hsm_fetch_options_clear(&options->fetch);
}

char *hsm_tree_default_cache_dir(const char *url)
{
	return hsm_store_default_dir(url);
}

const char *hsm_tree_url(HsmTree *tree)
{
	return hsm_store_url(tree->store);
}

gint64 hsm_tree_dir_cache_time(HsmTree *tree)
{
	return tree->options.dir_cache_time;
}

const char *hsm_tree_cache_dir(HsmTree *tree)
{
	return hsm_store_dir(tree->store);
}

const char *hsm_tree_root_path(HsmTree *tree)
{
	return hsm_store_tree_path(tree->store);
}

int hsm_tree_root_fd(HsmTree *tree)
{
	return hsm_store_tree_fd(tree->store);
}

void hsm_tree_set_hooks(HsmTree *tree, const HsmFileHooks *hooks)
{
	hsm_file_set_hooks(&tree->shared, hooks);
}

/* ---- Files ---- */

/* A reference to relpath's file if it is open, else NULL. */
static HsmFile *open_file(HsmTree *tree, const char *relpath)
{
	HsmFile *file;

	g_mutex_lock(&tree->lock);
	file = g_hash_table_lookup(tree->files, relpath);
	if (file)
		hsm_file_ref(file);
	g_mutex_unlock(&tree->lock);
	return file;
}

HsmFile *hsm_tree_get_file(HsmTree *tree, const char *relpath, GError **err)
{
	HsmFile *file = open_file(tree, relpath), *raced;

	if (file)
		return file;

	file = hsm_file_open(&tree->shared, relpath, err);
	if (!file)
		return NULL;
	g_mutex_lock(&tree->lock);
	raced = g_hash_table_lookup(tree->files, relpath);
	if (raced)
		hsm_file_ref(raced);
	else
		g_hash_table_insert(tree->files, (gpointer)hsm_file_relpath(file), file);
	g_mutex_unlock(&tree->lock);
	if (raced) {
		hsm_file_unref(file);
		hsm_file_free(file);
		return raced;
	}
	return file;
}

gboolean hsm_tree_has_range(HsmTree *tree, const char *relpath, guint64 offset, guint64 length)
{
	HsmFile *file = open_file(tree, relpath);
	HsmFileState state;
	gboolean has;

	if (file) {
		has = hsm_file_has(file, offset, length);
		hsm_file_unref(file);
		return has;
	}
	/* Opening the file may repair its mtime (a write): its saved state,
	 * which is written only after the bytes it lists, says as much. */
	hsm_file_state_init(&state);
	has = hsm_store_load_file(tree->shared.store, relpath, &state) &&
	      hsm_file_state_has(&state, offset, length);
	hsm_file_state_clear(&state);
	return has;
}

gboolean hsm_tree_ensure_if_present(HsmTree *tree, const char *relpath, guint64 offset,
				    guint64 length, gboolean *complete)
{
	HsmFile *file = open_file(tree, relpath);
	gboolean present;

	if (!file)
		return FALSE;
	present = hsm_file_ensure_if_present(file, offset, length, complete);
	hsm_file_unref(file);
	return present;
}

/* ---- Directories ---- */

/* Remembers relpath as listed (or found unchanged) `age` usec ago; under
 * tree->lock. */
static void record_listing(HsmTree *tree, const char *relpath, gint64 age, gint64 max_age)
{
	DirRecord *dir = g_new0(DirRecord, 1);

	dir->checked = g_get_monotonic_time() - MAX(age, 0);
	dir->max_age = max_age;
	g_hash_table_replace(tree->populated, g_strdup(relpath), dir);
}

/* The record of a populated directory, from the store if the tree has none
 * yet (a listing made before this daemon started), or NULL; under
 * tree->lock. */
static DirRecord *dir_record(HsmTree *tree, const char *relpath)
{
	DirRecord *dir = g_hash_table_lookup(tree->populated, relpath);
	HsmDirState state;

	if (dir || !hsm_store_load_dir(tree->store, relpath, &state))
		return dir;
	/* Wall-clock age: the only clock that survives a restart. */
	record_listing(tree, relpath,
		       (g_get_real_time() / G_USEC_PER_SEC - state.listed) * G_USEC_PER_SEC,
		       state.max_age);
	hsm_dir_state_clear(&state);
	return g_hash_table_lookup(tree->populated, relpath);
}

static gboolean is_fresh(HsmTree *tree, const DirRecord *dir)
{
	gint64 lifetime = tree->options.dir_cache_time;

	if (!dir || dir->refresh)
		return FALSE;
	if (lifetime < 0)
		return TRUE;
	if (dir->max_age >= 0)
		lifetime = MIN(lifetime, dir->max_age * G_USEC_PER_SEC);
	return g_get_monotonic_time() - dir->checked < MAX(lifetime, MIN_REVALIDATE_USEC);
}

/* Whether entry of dir is a directory (not following symbolic links). */
static gboolean is_subdir(DIR *dir, const struct dirent *entry)
{
	struct stat st;

	if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
		return FALSE;
	if (entry->d_type != DT_UNKNOWN)
		return entry->d_type == DT_DIR;
	return fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

GPtrArray *hsm_tree_subdirs(HsmTree *tree, const char *relpath)
{
	GPtrArray *subdirs = g_ptr_array_new_with_free_func(g_free);
	int fd = openat(hsm_tree_root_fd(tree), *relpath ? relpath : ".",
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *entry;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return subdirs;
	}
	while ((entry = readdir(dir)))
		if (is_subdir(dir, entry))
			g_ptr_array_add(subdirs, hsm_path_join(relpath, entry->d_name));
	closedir(dir);
	return subdirs;
}

gboolean hsm_tree_is_populated(HsmTree *tree, const char *relpath)
{
	gboolean populated;

	g_mutex_lock(&tree->lock);
	populated = dir_record(tree, relpath) != NULL;
	g_mutex_unlock(&tree->lock);
	return populated;
}

void hsm_tree_cache_usage(HsmTree *tree, guint64 *used, guint64 *limit)
{
	*used = hsm_budget_used(tree->budget);
	*limit = hsm_budget_limit(tree->budget);
}

gint64 hsm_tree_listing_age(HsmTree *tree, const char *relpath)
{
	DirRecord *dir;
	gint64 age;

	g_mutex_lock(&tree->lock);
	dir = dir_record(tree, relpath);
	age = dir ? (g_get_monotonic_time() - dir->checked) / G_USEC_PER_SEC : -1;
	g_mutex_unlock(&tree->lock);
	return age;
}

/* Forgets everything in memory about relpath and what is below it: the
 * entry is being removed from the cache tree. */
static void forget(gpointer data, const char *relpath)
{
	HsmTree *tree = data;
	GHashTableIter iter;
	gpointer key, value;

	hsm_budget_forget(tree->budget, relpath);
	g_mutex_lock(&tree->lock);
	g_hash_table_iter_init(&iter, tree->populated);
	while (g_hash_table_iter_next(&iter, &key, NULL))
		if (hsm_path_below(key, relpath))
			g_hash_table_iter_remove(&iter);
	g_hash_table_iter_init(&iter, tree->files);
	while (g_hash_table_iter_next(&iter, &key, &value)) {
		HsmFile *file = value;

		if (!hsm_path_below(key, relpath))
			continue;
		hsm_file_detach(file);
		g_hash_table_iter_steal(&iter);
		g_ptr_array_add(tree->detached, file);
	}
	g_mutex_unlock(&tree->lock);
}

static void report_change(gpointer data, const char *relpath)
{
	HsmTree *tree = data;

	hsm_file_shared_changed(&tree->shared, relpath);
}

/* Lists relpath, or revalidates the listing the store has of it; a failed
 * revalidation keeps the old listing (an outage or an error page must not
 * empty a directory).  Runs once per directory at a time. */
static gboolean list_dir(HsmTree *tree, const char *relpath, GError **err)
{
	HsmPopulator pop = { .store = tree->store,
			     .fetcher = tree->fetcher,
			     .max_listing = tree->options.max_listing,
			     .forget = forget,
			     .changed = report_change,
			     .data = tree };
	HsmDirState known, listed;
	gboolean populated = hsm_store_load_dir(tree->store, relpath, &known);
	gboolean ok = hsm_populate_dir(&pop, relpath, populated ? &known : NULL, &listed, err);

	if (!ok && populated) {
		g_warning("cannot revalidate the listing of %s/ (keeping the one of %" G_GINT64_FORMAT
			  " s ago): %s", relpath, g_get_real_time() / G_USEC_PER_SEC - known.listed,
			  (*err)->message);
		g_clear_error(err);
		listed.max_age = known.max_age;
		ok = TRUE;
	}
	g_mutex_lock(&tree->lock);
	if (ok)
		record_listing(tree, relpath, 0, listed.max_age);
	g_mutex_unlock(&tree->lock);
	hsm_dir_state_clear(&known);
	hsm_dir_state_clear(&listed);
	return ok;
}

gboolean hsm_tree_populate(HsmTree *tree, const char *relpath, GError **err)
{
	gboolean ok;

	g_mutex_lock(&tree->lock);
	while (g_hash_table_contains(tree->populating, relpath))
		g_cond_wait(&tree->populate_done, &tree->lock);
	if (is_fresh(tree, dir_record(tree, relpath))) {
		g_mutex_unlock(&tree->lock);
		return TRUE;
	}
	g_hash_table_add(tree->populating, g_strdup(relpath));
	g_mutex_unlock(&tree->lock);

	ok = list_dir(tree, relpath, err);

	g_mutex_lock(&tree->lock);
	g_hash_table_remove(tree->populating, relpath);
	g_cond_broadcast(&tree->populate_done);
	g_mutex_unlock(&tree->lock);
	return ok;
}

gboolean hsm_tree_refresh(HsmTree *tree, const char *relpath, GError **err)
{
	DirRecord *dir;

	g_mutex_lock(&tree->lock);
	dir = dir_record(tree, relpath);
	if (dir)
		dir->refresh = TRUE;
	g_mutex_unlock(&tree->lock);
	if (!hsm_tree_populate(tree, relpath, err))
		return FALSE;
	hsm_file_shared_flush(&tree->shared);
	return TRUE;
}

/* ---- Flushing ---- */

/* Saves changed states; frees files idle for a while (all when stopping). */
static void flush_files(HsmTree *tree, gboolean all)
{
	g_autoptr(GPtrArray) to_save = g_ptr_array_new();
	g_autoptr(GPtrArray) to_free = g_ptr_array_new();
	gint64 now = g_get_monotonic_time();
	GHashTableIter iter;
	HsmFile *file;

	g_mutex_lock(&tree->lock);
	g_hash_table_iter_init(&iter, tree->files);
	while (g_hash_table_iter_next(&iter, NULL, (gpointer *)&file)) {
		/* Running fetches hold references: an unreferenced file is idle. */
		gint64 unused_since = hsm_file_unused_since(file);

		if (unused_since >= 0 && (all || now - unused_since > IDLE_USEC)) {
			g_hash_table_iter_steal(&iter);
			g_ptr_array_add(to_free, file);
		} else {
			g_ptr_array_add(to_save, hsm_file_ref(file));
		}
	}
	for (guint i = tree->detached->len; i-- > 0;) {
		file = tree->detached->pdata[i];
		if (hsm_file_unused_since(file) >= 0) {
			g_ptr_array_remove_index_fast(tree->detached, i);
			g_ptr_array_add(to_free, file);
		}
	}
	g_mutex_unlock(&tree->lock);
	for (guint i = 0; i < to_save->len; i++) {
		hsm_file_save(to_save->pdata[i], NULL);
		hsm_file_unref(to_save->pdata[i]);
	}
	for (guint i = 0; i < to_free->len; i++)
		hsm_file_free(to_free->pdata[i]);
}

static gpointer flusher_main(gpointer data)
{
	HsmTree *tree = data;

	g_mutex_lock(&tree->lock);
	while (!tree->stopping) {
		gint64 deadline = g_get_monotonic_time() + FLUSH_INTERVAL_USEC;

		g_cond_wait_until(&tree->flusher_wake, &tree->lock, deadline);
		g_mutex_unlock(&tree->lock);
		flush_files(tree, FALSE);
		g_mutex_lock(&tree->lock);
	}
	g_mutex_unlock(&tree->lock);
	return NULL;
}

/* ---- Life cycle ---- */

/* The budget's way of freeing a file: as `httphsm evict` does it, so an
 * open file or one being fetched is refused. */
static gboolean evict_for_budget(gpointer data, const char *relpath, GError **err)
{
	HsmFile *file = hsm_tree_get_file(data, relpath, err);
	guint64 freed;
	gboolean ok;

	if (!file)
		return FALSE;
	ok = hsm_file_evict(file, &freed, err);
	hsm_file_unref(file);
	return ok;
}

static void copy_options(HsmTreeOptions *to, const HsmTreeOptions *from)
{
	*to = *from;
	to->url = g_strdup(from->url);
	to->cache_dir = from->cache_dir ? g_strdup(from->cache_dir)
					: hsm_store_default_dir(from->url);
	hsm_fetch_options_copy(&to->fetch, &from->fetch);
	to->min_window = MAX(from->min_window, 4096u);
	to->max_window = MAX(from->max_window, to->min_window);
}

HsmTree *hsm_tree_open(const HsmTreeOptions *options, GError **err)
{
	HsmTree *tree = g_new0(HsmTree, 1);

	copy_options(&tree->options, options);
	tree->store = hsm_store_open(tree->options.cache_dir, tree->options.url, TRUE, err);
	if (!tree->store) {
		hsm_tree_options_clear(&tree->options);
		g_free(tree);
		return NULL;
	}
	tree->fetcher = hsm_fetcher_new(&tree->options.fetch);
	hsm_file_shared_init(&tree->shared);
	tree->shared.store = tree->store;
	tree->shared.fetcher = tree->fetcher;
	tree->shared.min_window = tree->options.min_window;
	tree->shared.max_window = tree->options.max_window;
	/* Without a limit, still there: a full file system evicts too. */
	tree->budget = tree->shared.budget = hsm_budget_new(
		tree->store, tree->options.max_cache_size ? tree->options.max_cache_size : G_MAXUINT64,
		tree->options.max_cache_age, evict_for_budget, tree);
	g_mutex_init(&tree->lock);
	g_cond_init(&tree->populate_done);
	g_cond_init(&tree->flusher_wake);
	tree->files = g_hash_table_new(g_str_hash, g_str_equal);
	tree->populated = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	tree->populating = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	tree->detached = g_ptr_array_new();
	tree->flusher = g_thread_new("hsm-flusher", flusher_main, tree);
	hsm_budget_start(tree->budget);
	return tree;
}

void hsm_tree_close(HsmTree *tree)
{
	if (!tree)
		return;
	g_mutex_lock(&tree->lock);
	tree->stopping = TRUE;
	g_cond_signal(&tree->flusher_wake);
	g_mutex_unlock(&tree->lock);
	g_thread_join(tree->flusher);
	hsm_budget_stop(tree->budget);
	/* Ends the transfers first: their completions still touch the files. */
	hsm_fetcher_free(tree->fetcher);
	flush_files(tree, TRUE);
	hsm_budget_free(tree->budget);
	if (g_hash_table_size(tree->files) || tree->detached->len)
		g_warning("%u files still referenced at close",
			  g_hash_table_size(tree->files) + tree->detached->len);
	g_hash_table_unref(tree->files);
	g_ptr_array_unref(tree->detached);
	g_hash_table_unref(tree->populated);
	g_hash_table_unref(tree->populating);
	g_cond_clear(&tree->populate_done);
	g_cond_clear(&tree->flusher_wake);
	g_mutex_clear(&tree->lock);
	hsm_file_shared_clear(&tree->shared);
	hsm_store_close(tree->store);
	hsm_tree_options_clear(&tree->options);
	g_free(tree);
}
