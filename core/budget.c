/* The cache's limits (budget.h): a table of the files that hold bytes, a
 * scanner that fills it from the cache tree at start, and a thread that
 * evicts least recently used files while the total is over the size limit,
 * and those unused for longer than the age limit. */
#include "budget.h"
#include "url.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Evicting stops here, so that one new window does not start it again. */
#define LOW_WATER_PERCENT 90
/* A file that could not be evicted (open, being fetched) is left alone
 * for this long, and so is a budget with nothing it may evict. */
#define RETRY_USEC (5 * G_USEC_PER_SEC)

typedef struct {
	guint64 bytes;
	gint64 used;             /* wall-clock usec of the last use (atime when scanned) */
	gint64 retry_after;      /* monotonic usec: eviction was refused until then */
} Entry;

struct HsmBudget {
	HsmStore *store;         /* immutable, like the rest up to lock */
	guint64 max, low;
	gint64 max_age;          /* usec, 0: none */
	HsmBudgetEvict evict;
	gpointer evict_data;

	GMutex lock;
	GCond wake;
	GHashTable *entries;     /* relpath -> Entry *; protected by lock */
	guint64 total;           /* sum of their bytes; protected by lock */
	gboolean stopping;       /* protected by lock */
	gboolean over_logged;    /* "nothing to evict" said once; protected by lock */
	GThread *scanner;
	GThread *evictor;
};

/* Adds or updates relpath's entry; under budget->lock. */
static void set_entry(HsmBudget *budget, const char *relpath, guint64 bytes, gint64 used)
{
	Entry *entry = g_hash_table_lookup(budget->entries, relpath);

	if (!entry) {
		if (!bytes)
			return;
		entry = g_new0(Entry, 1);
		g_hash_table_insert(budget->entries, g_strdup(relpath), entry);
	}
	budget->total = budget->total - entry->bytes + bytes;
	entry->bytes = bytes;
	entry->used = used;
	if (!bytes)
		g_hash_table_remove(budget->entries, relpath);
	if (budget->total > budget->max)
		g_cond_signal(&budget->wake);
}

gboolean hsm_budget_note(HsmBudget *budget, const char *relpath, guint64 present)
{
	gboolean over;

	g_mutex_lock(&budget->lock);
	set_entry(budget, relpath, present, g_get_real_time());
	over = budget->total > budget->max;
	g_mutex_unlock(&budget->lock);
	return over;
}

void hsm_budget_forget(HsmBudget *budget, const char *relpath)
{
	GHashTableIter iter;
	gpointer key, value;

	g_mutex_lock(&budget->lock);
	g_hash_table_iter_init(&iter, budget->entries);
	while (g_hash_table_iter_next(&iter, &key, &value)) {
		if (!hsm_path_below(key, relpath))
			continue;
		budget->total -= ((Entry *)value)->bytes;
		g_hash_table_iter_remove(&iter);
	}
	g_mutex_unlock(&budget->lock);
}

guint64 hsm_budget_used(HsmBudget *budget)
{
	guint64 total;

	g_mutex_lock(&budget->lock);
	total = budget->total;
	g_mutex_unlock(&budget->lock);
	return total;
}

guint64 hsm_budget_limit(HsmBudget *budget)
{
	return budget->max;
}

static gboolean stopping(HsmBudget *budget)
{
	gboolean stop;

	g_mutex_lock(&budget->lock);
	stop = budget->stopping;
	g_mutex_unlock(&budget->lock);
	return stop;
}

/* ---- The scan ---- */

/* A file the daemon has not noted yet counts its allocated blocks. */
static void scan_file(HsmBudget *budget, const char *relpath, const struct stat *st)
{
	g_mutex_lock(&budget->lock);
	if (!g_hash_table_contains(budget->entries, relpath))
		set_entry(budget, relpath, (guint64)st->st_blocks * 512,
			  (gint64)st->st_atim.tv_sec * G_USEC_PER_SEC);
	g_mutex_unlock(&budget->lock);
}

static void scan_dir(HsmBudget *budget, int fd, const char *relpath)
{
	DIR *dir = fdopendir(fd);
	struct dirent *d;

	if (!dir) {
		close(fd);
		return;
	}
	while ((d = readdir(dir)) && !stopping(budget)) {
		g_autofree char *path = NULL;
		struct stat st;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
		    fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		path = hsm_path_join(relpath, d->d_name);
		if (S_ISREG(st.st_mode) && st.st_blocks) {
			scan_file(budget, path, &st);
		} else if (S_ISDIR(st.st_mode)) {
			int child = openat(dirfd(dir), d->d_name,
					   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (child >= 0)
				scan_dir(budget, child, path);
		}
	}
	closedir(dir);
}

static gpointer scanner_main(gpointer data)
{
	HsmBudget *budget = data;
	int fd = openat(hsm_store_tree_fd(budget->store), ".",
			O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0)
		scan_dir(budget, fd, "");
	/* What the scan found may be over a limit already. */
	g_mutex_lock(&budget->lock);
	g_cond_signal(&budget->wake);
	g_mutex_unlock(&budget->lock);
	g_debug("cache scanned: %" G_GUINT64_FORMAT " bytes of files (limit %" G_GUINT64_FORMAT
		")", hsm_budget_used(budget), budget->max);
	return NULL;
}

/* ---- Evicting ---- */

typedef struct {
	char *relpath;
	gint64 used;
} Candidate;

static gint by_use(gconstpointer a, gconstpointer b)
{
	gint64 x = ((const Candidate *)a)->used, y = ((const Candidate *)b)->used;

	return x < y ? -1 : x > y;
}

static void candidate_clear(gpointer data)
{
	g_free(((Candidate *)data)->relpath);
}

/* The files that may be evicted now, least recently used first; under
 * budget->lock. */
static GArray *candidates(HsmBudget *budget)
{
	GArray *out = g_array_new(FALSE, FALSE, sizeof(Candidate));
	gint64 now = g_get_monotonic_time();
	GHashTableIter iter;
	gpointer key, value;

	g_array_set_clear_func(out, candidate_clear);
	g_hash_table_iter_init(&iter, budget->entries);
	while (g_hash_table_iter_next(&iter, &key, &value)) {
		Entry *entry = value;

		if (entry->retry_after <= now) {
			Candidate c = { g_strdup(key), entry->used };

			g_array_append_val(out, c);
		}
	}
	g_array_sort(out, by_use);
	return out;
}

static void refused(HsmBudget *budget, const char *relpath, GError *err)
{
	Entry *entry;

	g_debug("not evicting %s: %s", relpath, err->message);
	g_mutex_lock(&budget->lock);
	entry = g_hash_table_lookup(budget->entries, relpath);
	if (entry)
		entry->retry_after = g_get_monotonic_time() + RETRY_USEC;
	g_mutex_unlock(&budget->lock);
}

/* Evicts relpath; called and returns with budget->lock held, which it
 * releases meanwhile.  TRUE when the bytes went. */
static gboolean evict_one(HsmBudget *budget, const char *relpath, const char *why)
{
	GError *err = NULL;
	gboolean evicted;

	g_mutex_unlock(&budget->lock);
	evicted = budget->evict(budget->evict_data, relpath, &err);
	if (evicted)
		g_debug("evicted %s: %s", relpath, why);
	else
		refused(budget, relpath, err);
	g_clear_error(&err);
	g_mutex_lock(&budget->lock);
	return evicted;
}

/* Evicts candidates in order: for size, until the total is down to the
 * low-water mark; else those last used before the age limit.  Called and
 * returns with budget->lock held. */
static void evict_round(HsmBudget *budget, gboolean for_size, const char *except)
{
	g_autoptr(GArray) list = candidates(budget);
	gint64 cutoff = g_get_real_time() - budget->max_age;

	for (guint i = 0; i < list->len && !budget->stopping; i++) {
		const Candidate *c = &g_array_index(list, Candidate, i);

		if (for_size ? budget->total <= budget->low : c->used >= cutoff)
			break;
		if (!except || strcmp(c->relpath, except))
			evict_one(budget, c->relpath,
				  for_size ? "the cache is over its size" : "unused for too long");
	}
}

/* How often the age limit is checked: a tenth of it, 1 s to a minute. */
static gint64 age_check_interval(HsmBudget *budget)
{
	return CLAMP(budget->max_age / 10, G_USEC_PER_SEC, 60 * G_USEC_PER_SEC);
}

void hsm_budget_enforce(HsmBudget *budget, const char *except)
{
	g_mutex_lock(&budget->lock);
	if (budget->total > budget->max)
		evict_round(budget, TRUE, except);
	g_mutex_unlock(&budget->lock);
}

guint64 hsm_budget_reclaim(HsmBudget *budget, guint64 want, const char *except)
{
	g_autoptr(GArray) list = NULL;
	guint64 freed = 0;

	g_mutex_lock(&budget->lock);
	list = candidates(budget);
	for (guint i = 0; i < list->len && freed < want; i++) {
		const char *relpath = g_array_index(list, Candidate, i).relpath;
		Entry *entry = g_hash_table_lookup(budget->entries, relpath);
		guint64 bytes = entry ? entry->bytes : 0;

		if (bytes && strcmp(relpath, except) &&
		    evict_one(budget, relpath, "the cache file system is full"))
			freed += bytes;
	}
	g_mutex_unlock(&budget->lock);
	return freed;
}

static gpointer evictor_main(gpointer data)
{
	HsmBudget *budget = data;

	g_mutex_lock(&budget->lock);
	while (!budget->stopping) {
		if (budget->max_age)
			evict_round(budget, FALSE, NULL);
		if (budget->total > budget->max)
			evict_round(budget, TRUE, NULL);
		if (budget->total > budget->max && !budget->stopping) {
			if (!budget->over_logged)
				g_warning("the cache holds %" G_GUINT64_FORMAT " bytes, over its limit "
					  "of %" G_GUINT64_FORMAT ", in files that are open, being "
					  "fetched or pinned; evicting them once they are not",
					  budget->total, budget->max);
			budget->over_logged = TRUE;
			g_cond_wait_until(&budget->wake, &budget->lock,
					  g_get_monotonic_time() + RETRY_USEC);
			continue;
		}
		budget->over_logged = FALSE;
		if (budget->max_age)
			g_cond_wait_until(&budget->wake, &budget->lock,
					  g_get_monotonic_time() + age_check_interval(budget));
		else if (!budget->stopping)
			g_cond_wait(&budget->wake, &budget->lock);
	}
	g_mutex_unlock(&budget->lock);
	return NULL;
}

/* ---- Life cycle ---- */

HsmBudget *hsm_budget_new(HsmStore *store, guint64 max_bytes, gint64 max_age,
			  HsmBudgetEvict evict, gpointer evict_data)
{
	HsmBudget *budget = g_new0(HsmBudget, 1);

	g_assert(max_bytes > 0);
	budget->store = store;
	budget->max = max_bytes;
	budget->low = max_bytes / 100 * LOW_WATER_PERCENT;
	budget->max_age = MAX(max_age, 0);
	budget->evict = evict;
	budget->evict_data = evict_data;
	g_mutex_init(&budget->lock);
	g_cond_init(&budget->wake);
	budget->entries = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	return budget;
}

void hsm_budget_start(HsmBudget *budget)
{
	budget->scanner = g_thread_new("hsm-scan", scanner_main, budget);
	budget->evictor = g_thread_new("hsm-evict", evictor_main, budget);
}

void hsm_budget_stop(HsmBudget *budget)
{
	if (!budget || !budget->evictor)
		return;
	g_mutex_lock(&budget->lock);
	budget->stopping = TRUE;
	g_cond_signal(&budget->wake);
	g_mutex_unlock(&budget->lock);
	g_thread_join(budget->scanner);
	g_thread_join(budget->evictor);
	budget->scanner = budget->evictor = NULL;
}

void hsm_budget_free(HsmBudget *budget)
{
	if (!budget)
		return;
	hsm_budget_stop(budget);
	g_hash_table_unref(budget->entries);
	g_cond_clear(&budget->wake);
	g_mutex_clear(&budget->lock);
	g_free(budget);
}
