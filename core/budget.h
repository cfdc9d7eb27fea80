/* The cache's size and age limits: when the file bytes present in the
 * cache pass the size, whole files are evicted, least recently used first,
 * down to a low-water mark; files unused for longer than the age go too.
 *
 * The budget knows each file by relpath, with the bytes it holds and when
 * it was last read (as far as the daemon sees reads: in fanotify mode,
 * reads of complete files bypass it, so there "used" means "fetched or
 * read through the daemon").  It starts from a scan of the cache tree
 * (allocated blocks, atime), so it needs no record of its own to survive
 * a crash.  Evicting is the owner's (a callback), which refuses files that
 * are open or being fetched; those are skipped.
 */
#ifndef HSM_BUDGET_H
#define HSM_BUDGET_H

#include "store.h"

#include <glib.h>

typedef struct HsmBudget HsmBudget;

/* Frees relpath's bytes; FALSE (with err) when it cannot now (open,
 * fetched, pinned).  Runs on the budget's thread, with no budget lock. */
typedef gboolean (*HsmBudgetEvict)(gpointer data, const char *relpath, GError **err);

/* A budget for store's tree: max_bytes > 0 (G_MAXUINT64: no limit),
 * max_age in usec (0: no limit).  Without either, it only serves
 * hsm_budget_reclaim(). */
HsmBudget *hsm_budget_new(HsmStore *store, guint64 max_bytes, gint64 max_age,
			  HsmBudgetEvict evict, gpointer evict_data);
/* Starts the scan of the tree and the evicting thread: evict may be called
 * from now on. */
void hsm_budget_start(HsmBudget *budget);
/* Stops the threads: no evict call runs once it returns; notes are still
 * taken.  The owner stops the budget before it tears down what evict
 * uses. */
void hsm_budget_stop(HsmBudget *budget);
/* Stops it if need be, and frees it. */
void hsm_budget_free(HsmBudget *budget);

/* relpath now holds present bytes and was just used.  Any thread; never
 * calls back.  TRUE when the cache is over its size limit: the caller (a
 * writer, holding no lock) should then call hsm_budget_enforce(). */
gboolean hsm_budget_note(HsmBudget *budget, const char *relpath, guint64 present);
/* Evicts, on the calling thread, until the cache is down to the low-water
 * mark (files but except): a writer that keeps writing while the budget's
 * thread evicts would take the cache past its limit. */
void hsm_budget_enforce(HsmBudget *budget, const char *except);
/* relpath and everything below it left the cache tree. */
void hsm_budget_forget(HsmBudget *budget, const char *relpath);

/* The cache file system is full: evicts least recently used files but
 * except (the file being written) until want bytes are freed or nothing
 * more can be; returns the bytes freed.  Blocks; no budget lock held by
 * the caller. */
guint64 hsm_budget_reclaim(HsmBudget *budget, guint64 want, const char *except);

/* Bytes the budget counts now, and its limit. */
guint64 hsm_budget_used(HsmBudget *budget);
guint64 hsm_budget_limit(HsmBudget *budget);

#endif
