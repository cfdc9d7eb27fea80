/* The core's facade: registries of directories and files; see tree.h.
 *
 * Files stay in the registry while referenced and for a while after (so a
 * fanotify daemon handling many events on one file does not reload its
 * state each time).  A flusher thread saves changed file states every second
 * and drops idle files.
 */
#include "error.h"
#include "tree-private.h"
#include "url.h"

#include <errno.h>
#include <string.h>

#define FLUSH_INTERVAL_USEC G_USEC_PER_SEC
#define IDLE_USEC (30 * G_USEC_PER_SEC)

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

HsmStore *hsm_tree_store(HsmTree *tree)
{
	return tree->store;
}

void hsm_tree_set_hooks(HsmTree *tree, const HsmTreeHooks *hooks)
{
	g_rw_lock_writer_lock(&tree->hooks_lock);
	if (hooks)
		tree->hooks = *hooks;
	else
		memset(&tree->hooks, 0, sizeof(tree->hooks));
	g_rw_lock_writer_unlock(&tree->hooks_lock);
}

void hsm_tree_hook_changed(HsmTree *tree, const char *relpath)
{
	g_rw_lock_reader_lock(&tree->hooks_lock);
	if (tree->hooks.changed)
		tree->hooks.changed(tree->hooks.user_data, relpath);
	g_rw_lock_reader_unlock(&tree->hooks_lock);
}

void hsm_tree_hook_evicting(HsmTree *tree, int fd)
{
	g_rw_lock_reader_lock(&tree->hooks_lock);
	if (tree->hooks.evicting)
		tree->hooks.evicting(tree->hooks.user_data, fd);
	g_rw_lock_reader_unlock(&tree->hooks_lock);
}

/* ---- Files ---- */

HsmFile *hsm_tree_get_file(HsmTree *tree, const char *relpath, GError **err)
{
	HsmFile *file, *raced;

	g_mutex_lock(&tree->lock);
	file = g_hash_table_lookup(tree->files, relpath);
	if (file)
		file->refs++;
	g_mutex_unlock(&tree->lock);
	if (file)
		return file;

	file = hsm_file_open(tree, relpath, err);
	if (!file)
		return NULL;
	g_mutex_lock(&tree->lock);
	raced = g_hash_table_lookup(tree->files, relpath);
	if (raced) {
		raced->refs++;
	} else {
		file->refs = 1;
		g_hash_table_insert(tree->files, file->relpath, file);
	}
	g_mutex_unlock(&tree->lock);
	if (raced) {
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

	ok = hsm_populate_dir(tree, relpath, err);

	g_mutex_lock(&tree->lock);
	if (ok)
		g_hash_table_add(tree->populated, g_strdup(relpath));
	g_hash_table_remove(tree->populating, relpath);
	g_cond_broadcast(&tree->populate_done);
	g_mutex_unlock(&tree->lock);
	return ok;
}

void hsm_tree_forget(HsmTree *tree, const char *relpath)
{
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
		g_atomic_int_set(&file->detached, 1);
		g_hash_table_iter_steal(&iter);
		g_ptr_array_add(tree->detached, file);
	}
	g_mutex_unlock(&tree->lock);
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
		if (!file->refs && (all || now - file->last_used > IDLE_USEC)) {
			g_hash_table_iter_steal(&iter);
			g_ptr_array_add(to_free, file);
		} else {
			file->refs++;
			g_ptr_array_add(to_save, file);
		}
	}
	for (guint i = tree->detached->len; i-- > 0;) {
		file = tree->detached->pdata[i];
		if (!file->refs) {
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
	g_mutex_init(&tree->lock);
	g_rw_lock_init(&tree->hooks_lock);
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
	g_rw_lock_clear(&tree->hooks_lock);
	hsm_store_close(tree->store);
	hsm_tree_options_clear(&tree->options);
	g_free(tree);
}
