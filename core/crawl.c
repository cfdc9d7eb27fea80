/* Listing a tree ahead of use, breadth first: see crawl.h. */
#include "crawl.h"
#include "url.h"

#include <dirent.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct HsmCrawl {
	HsmTree *tree;
	guint max_depth, max_dirs, parallel;
	GThread *thread;
	atomic_int stop;
	GMutex lock;
	HsmCrawlStatus status;   /* protected by lock */
	GPtrArray *next_level;   /* relpaths found this level; protected by lock */
};

/* The subdirectories of relpath in the cache tree (just listed). */
static void add_subdirectories(HsmCrawl *crawl, const char *relpath)
{
	int fd = openat(hsm_tree_root_fd(crawl->tree), *relpath ? relpath : ".",
			O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *entry;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((entry = readdir(dir))) {
		struct stat st;

		if (entry->d_name[0] == '.' &&
		    (!entry->d_name[1] || (entry->d_name[1] == '.' && !entry->d_name[2])))
			continue;
		if (entry->d_type != DT_DIR &&
		    (entry->d_type != DT_UNKNOWN ||
		     fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		     !S_ISDIR(st.st_mode)))
			continue;
		g_mutex_lock(&crawl->lock);
		g_ptr_array_add(crawl->next_level, hsm_path_join(relpath, entry->d_name));
		g_mutex_unlock(&crawl->lock);
	}
	closedir(dir);
}

/* A worker of the level's pool: lists one directory. */
static void list_one(gpointer data, gpointer user_data)
{
	HsmCrawl *crawl = user_data;
	g_autofree char *relpath = data;
	g_autoptr(GError) err = NULL;
	gboolean ok = FALSE;

	if (!atomic_load(&crawl->stop)) {
		ok = hsm_tree_populate(crawl->tree, relpath, &err);
		if (ok && crawl->status.depth < crawl->max_depth)
			add_subdirectories(crawl, relpath);
		if (!ok)
			g_message("crawl: cannot list /%s: %s", relpath, err->message);
	}
	g_mutex_lock(&crawl->lock);
	crawl->status.queued--;
	if (ok)
		crawl->status.listed++;
	else if (err)
		crawl->status.failed++;
	g_mutex_unlock(&crawl->lock);
}

/* Lists the level's directories, parallel at a time; returns the next
 * level's, within max_dirs. */
static GPtrArray *list_level(HsmCrawl *crawl, GPtrArray *level)
{
	GThreadPool *pool = g_thread_pool_new(list_one, crawl, crawl->parallel, FALSE, NULL);
	GPtrArray *next;
	guint room;

	g_mutex_lock(&crawl->lock);
	crawl->status.queued = level->len;
	g_mutex_unlock(&crawl->lock);
	for (guint i = 0; i < level->len; i++)
		g_thread_pool_push(pool, g_strdup(level->pdata[i]), NULL);
	g_thread_pool_free(pool, FALSE, TRUE); /* waits for them all */
	g_mutex_lock(&crawl->lock);
	next = g_steal_pointer(&crawl->next_level);
	crawl->next_level = g_ptr_array_new_with_free_func(g_free);
	room = crawl->max_dirs - MIN(crawl->max_dirs, crawl->status.listed + crawl->status.failed);
	if (next->len > room) {
		crawl->status.truncated = TRUE;
		g_ptr_array_set_size(next, room);
	}
	g_mutex_unlock(&crawl->lock);
	return next;
}

static gpointer crawl_thread(gpointer data)
{
	HsmCrawl *crawl = data;
	GPtrArray *level = g_ptr_array_new_with_free_func(g_free);
	gint64 started = g_get_monotonic_time();

	g_ptr_array_add(level, g_strdup(""));
	for (guint depth = 0; level->len && !atomic_load(&crawl->stop); depth++) {
		GPtrArray *next;

		g_mutex_lock(&crawl->lock);
		crawl->status.depth = depth;
		g_mutex_unlock(&crawl->lock);
		next = list_level(crawl, level);
		g_ptr_array_unref(level);
		level = next;
	}
	g_ptr_array_unref(level);
	g_mutex_lock(&crawl->lock);
	crawl->status.done = TRUE;
	g_message("crawl: %u directories listed (%u failed) down to depth %u in %.1f s%s",
		  crawl->status.listed, crawl->status.failed, crawl->status.depth,
		  (double)(g_get_monotonic_time() - started) / G_USEC_PER_SEC,
		  crawl->status.truncated ? "; stopped at the limit of directories" : "");
	g_mutex_unlock(&crawl->lock);
	return NULL;
}

HsmCrawl *hsm_crawl_start(HsmTree *tree, guint max_depth, guint max_dirs, guint parallel)
{
	HsmCrawl *crawl = g_new0(HsmCrawl, 1);

	crawl->tree = tree;
	crawl->max_depth = crawl->status.max_depth = max_depth;
	crawl->max_dirs = MAX(max_dirs, 1u);
	crawl->parallel = MAX(parallel, 1u);
	g_mutex_init(&crawl->lock);
	crawl->next_level = g_ptr_array_new_with_free_func(g_free);
	crawl->thread = g_thread_new("crawl", crawl_thread, crawl);
	return crawl;
}

void hsm_crawl_get_status(HsmCrawl *crawl, HsmCrawlStatus *status)
{
	g_mutex_lock(&crawl->lock);
	*status = crawl->status;
	g_mutex_unlock(&crawl->lock);
}

void hsm_crawl_stop(HsmCrawl *crawl)
{
	if (!crawl)
		return;
	atomic_store(&crawl->stop, 1);
	g_thread_join(crawl->thread);
	g_ptr_array_unref(crawl->next_level);
	g_mutex_clear(&crawl->lock);
	g_free(crawl);
}
