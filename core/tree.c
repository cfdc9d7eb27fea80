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

#include <errno.h>
#include <string.h>

#define FLUSH_INTERVAL_USEC G_USEC_PER_SEC
#define IDLE_USEC (30 * G_USEC_PER_SEC)

/* Locks: tree->lock is never held while a file's lock is taken, nor while
 * a fetch or a populate runs. */
struct HsmTree {
	HsmTreeOptions options;  /* immutable, like store and fetcher */
	HsmStore *store;
	HsmFetcher *fetcher;
	HsmFileShared shared;    /* what every file uses */

	GMutex lock;
	GHashTable *files;       /* relpath -> HsmFile *; protected by lock */
	GHashTable *populated;   /* set of relpaths; protected by lock */
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

HsmFile *hsm_tree_get_file(HsmTree *tree, const char *relpath, GError **err)
{
	HsmFile *file, *raced;

	g_mutex_lock(&tree->lock);
	file = g_hash_table_lookup(tree->files, relpath);
	if (file)
		hsm_file_ref(file);
	g_mutex_unlock(&tree->lock);
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

/* ---- Directories ---- */

gboolean hsm_tree_is_populated(HsmTree *tree, const char *relpath)
{
	gboolean populated;

	g_mutex_lock(&tree->lock);
	populated = g_hash_table_contains(tree->populated, relpath);
	g_mutex_unlock(&tree->lock);
	if (!populated && hsm_store_dir_is_populated(tree->store, relpath)) {
		g_mutex_lock(&tree->lock);
		g_hash_table_add(tree->populated, g_strdup(relpath));
		g_mutex_unlock(&tree->lock);
		populated = TRUE;
	}
	return populated;
}

/* Forgets everything in memory about relpath and what is below it: the
 * entry is being removed from the cache tree. */
static void forget(gpointer data, const char *relpath)
{
	HsmTree *tree = data;
	GHashTableIter iter;
	gpointer key, value;

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

gboolean hsm_tree_populate(HsmTree *tree, const char *relpath, GError **err)
{
	gboolean ok;

	if (hsm_tree_is_populated(tree, relpath))
		return TRUE;
	g_mutex_lock(&tree->lock);
	while (g_hash_table_contains(tree->populating, relpath))
		g_cond_wait(&tree->populate_done, &tree->lock);
	if (g_hash_table_contains(tree->populated, relpath)) {
		g_mutex_unlock(&tree->lock);
		return TRUE;
	}
	g_hash_table_add(tree->populating, g_strdup(relpath));
	g_mutex_unlock(&tree->lock);

	ok = hsm_populate_dir(&(HsmPopulator){ .store = tree->store,
						.fetcher = tree->fetcher,
						.max_listing = tree->options.max_listing,
						.forget = forget,
						.forget_data = tree },
			      relpath, err);

	g_mutex_lock(&tree->lock);
	if (ok)
		g_hash_table_add(tree->populated, g_strdup(relpath));
	g_hash_table_remove(tree->populating, relpath);
	g_cond_broadcast(&tree->populate_done);
	g_mutex_unlock(&tree->lock);
	return ok;
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
	g_mutex_init(&tree->lock);
	g_cond_init(&tree->populate_done);
	g_cond_init(&tree->flusher_wake);
	tree->files = g_hash_table_new(g_str_hash, g_str_equal);
	tree->populated = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	tree->populating = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	tree->detached = g_ptr_array_new();
	tree->flusher = g_thread_new("hsm-flusher", flusher_main, tree);
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
	/* Ends the transfers first: their completions still touch the files. */
	hsm_fetcher_free(tree->fetcher);
	flush_files(tree, TRUE);
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
