/* Listing a tree ahead of use, breadth first: see crawl.h. */
#include "crawl.h"

#include <stdatomic.h>

struct HsmCrawl {
	HsmTree *tree;
	guint max_depth, max_dirs, parallel;
	gint64 repeat_every;
	GThread *thread;
	atomic_int stop;         /* also under lock, for stopped */
	GMutex lock;
	GCond stopped;
	guint depth;             /* of the level being listed; set between levels */
	HsmCrawlStatus status;   /* protected by lock */
	GPtrArray *level;        /* relpaths of the level being listed... */
	guint next_item;         /* ...and the next to take; protected by lock */
	GPtrArray *next_level;   /* relpaths found this level; protected by lock */
};

#define MAX_PARALLEL 16

/* The subdirectories of relpath (just listed) go to the next level. */
static void add_subdirectories(HsmCrawl *crawl, const char *relpath)
{
	GPtrArray *subdirs = hsm_tree_subdirs(crawl->tree, relpath);

	g_mutex_lock(&crawl->lock);
	g_ptr_array_extend_and_steal(crawl->next_level, subdirs);
	g_mutex_unlock(&crawl->lock);
}

/* Lists one directory and notes its subdirectories for the next level. */
static void list_one(HsmCrawl *crawl, const char *relpath)
{
	g_autoptr(GError) err = NULL;
	gboolean ok = FALSE;

	if (!atomic_load(&crawl->stop)) {
		ok = hsm_tree_populate(crawl->tree, relpath, &err);
		if (ok && crawl->depth < crawl->max_depth)
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

/* A worker: takes the level's directories one at a time until none is
 * left.  (Plain threads rather than a GThreadPool, whose locking
 * ThreadSanitizer cannot see.) */
static gpointer level_worker(gpointer data)
{
	HsmCrawl *crawl = data;

	for (;;) {
		const char *relpath = NULL;

		g_mutex_lock(&crawl->lock);
		if (crawl->next_item < crawl->level->len)
			relpath = crawl->level->pdata[crawl->next_item++];
		g_mutex_unlock(&crawl->lock);
		if (!relpath)
			return NULL;
		list_one(crawl, relpath);
	}
}

/* Lists the level's directories, parallel at a time; returns the next
 * level's, within max_dirs. */
static GPtrArray *list_level(HsmCrawl *crawl, GPtrArray *level)
{
	GThread *workers[MAX_PARALLEL];
	guint count = MIN(crawl->parallel, level->len);
	GPtrArray *next;
	guint room;

	g_mutex_lock(&crawl->lock);
	crawl->level = level;
	crawl->next_item = 0;
	crawl->status.queued = level->len;
	g_mutex_unlock(&crawl->lock);
	for (guint i = 0; i < count; i++)
		workers[i] = g_thread_new("crawl-list", level_worker, crawl);
	for (guint i = 0; i < count; i++)
		g_thread_join(workers[i]);
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

/* One pass over the tree, breadth first. */
static void crawl_once(HsmCrawl *crawl)
{
	GPtrArray *level = g_ptr_array_new_with_free_func(g_free);
	gint64 started = g_get_monotonic_time();

	g_mutex_lock(&crawl->lock);
	crawl->status.listed = crawl->status.failed = 0;
	crawl->status.done = crawl->status.truncated = FALSE;
	crawl->status.next_pass = -1;
	g_mutex_unlock(&crawl->lock);
	g_ptr_array_add(level, g_strdup(""));
	for (guint depth = 0; level->len && !atomic_load(&crawl->stop); depth++) {
		GPtrArray *next;

		g_mutex_lock(&crawl->lock);
		crawl->status.depth = crawl->depth = depth;
		g_mutex_unlock(&crawl->lock);
		next = list_level(crawl, level);
		g_ptr_array_unref(level);
		level = next;
	}
	g_ptr_array_unref(level);
	g_mutex_lock(&crawl->lock);
	crawl->status.done = TRUE;
	crawl->status.passes++;
	g_message("crawl: %u directories listed (%u failed) down to depth %u in %.1f s%s",
		  crawl->status.listed, crawl->status.failed, crawl->status.depth,
		  (double)(g_get_monotonic_time() - started) / G_USEC_PER_SEC,
		  crawl->status.truncated ? "; stopped at the limit of directories" : "");
	g_mutex_unlock(&crawl->lock);
}

/* Waits until the next pass is due; FALSE if the crawl was stopped. */
static gboolean wait_for_next_pass(HsmCrawl *crawl)
{
	gboolean go_on;

	g_mutex_lock(&crawl->lock);
	crawl->status.next_pass = g_get_monotonic_time() + crawl->repeat_every;
	while (!atomic_load(&crawl->stop) &&
	       g_cond_wait_until(&crawl->stopped, &crawl->lock, crawl->status.next_pass))
		;
	go_on = !atomic_load(&crawl->stop);
	g_mutex_unlock(&crawl->lock);
	return go_on;
}

static gpointer crawl_thread(gpointer data)
{
	HsmCrawl *crawl = data;

	for (;;) {
		crawl_once(crawl);
		if (crawl->repeat_every < 0 || !wait_for_next_pass(crawl))
			return NULL;
	}
}

HsmCrawl *hsm_crawl_start(HsmTree *tree, guint max_depth, guint max_dirs, guint parallel,
			  gint64 repeat_every)
{
	HsmCrawl *crawl = g_new0(HsmCrawl, 1);

	crawl->repeat_every = repeat_every;
	crawl->status.next_pass = -1;
	g_cond_init(&crawl->stopped);
	crawl->tree = tree;
	crawl->max_depth = crawl->status.max_depth = max_depth;
	crawl->max_dirs = MAX(max_dirs, 1u);
	crawl->parallel = CLAMP(parallel, 1u, MAX_PARALLEL);
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
	g_mutex_lock(&crawl->lock);
	atomic_store(&crawl->stop, 1);
	g_cond_signal(&crawl->stopped);
	g_mutex_unlock(&crawl->lock);
	g_thread_join(crawl->thread);
	g_ptr_array_unref(crawl->next_level);
	g_mutex_clear(&crawl->lock);
	g_cond_clear(&crawl->stopped);
	g_free(crawl);
}
