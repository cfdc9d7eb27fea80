/* The cache's size limit: when the file bytes present in the cache pass
 * it, whole files are evicted, least recently used first, down to a
 * low-water mark.
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

/* Starts the scan of store's tree and the evicting thread.  max_bytes > 0
 * (G_MAXUINT64: no limit, the budget only serves hsm_budget_reclaim()). */
HsmBudget *hsm_budget_new(HsmStore *store, guint64 max_bytes, HsmBudgetEvict evict,
			  gpointer evict_data);
/* Stops the threads: no evict call runs once it returns; notes are still
 * taken.  The owner stops the budget before it tears down what evict
 * uses. */
void hsm_budget_stop(HsmBudget *budget);
/* Stops it if need be, and frees it. */
void hsm_budget_free(HsmBudget *budget);

/* relpath now holds present bytes and was just used.  Any thread; never
 * calls back. */
void hsm_budget_note(HsmBudget *budget, const char *relpath, guint64 present);
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
