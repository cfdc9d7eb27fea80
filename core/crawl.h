/* Listing a tree ahead of use, breadth first.
 *
 * For fanotify mode on kernels without a lookup event (mainline): a path
 * can only be opened once every directory above it is listed, so the
 * directories nearest the root are listed in the background at mount,
 * level by level, a few at a time, down to a depth and up to a number of
 * directories.  A listing still fresh costs no request, so a crawl after a
 * remount only fetches what is new or stale.  Where listings expire, the
 * crawl runs again once they have (new directories appear, removed ones
 * go), so that paths created on the server become reachable. */
#ifndef HSM_CRAWL_H
#define HSM_CRAWL_H

#include "tree.h"

#include <glib.h>

typedef struct HsmCrawl HsmCrawl;

typedef struct {
	guint listed;        /* directories listed (or found fresh) */
	guint failed;        /* directories whose listing failed */
	guint queued;        /* directories of the current level not done yet */
	guint depth;         /* the level being listed (0: the root) */
	guint max_depth;
	gboolean done;       /* this pass finished, stopped, or out of its bounds */
	gboolean truncated;  /* stopped at max_dirs */
	guint passes;        /* passes finished */
	gint64 next_pass;    /* monotonic usec when the next starts, or -1: never */
} HsmCrawlStatus;

/* Starts listing tree's directories down to max_depth levels below the
 * root and at most max_dirs of them, parallel at a time, and again every
 * repeat_every usec after a pass ends (-1: once); returns at once. */
HsmCrawl *hsm_crawl_start(HsmTree *tree, guint max_depth, guint max_dirs, guint parallel,
			  gint64 repeat_every);
/* A consistent snapshot; any thread. */
void hsm_crawl_get_status(HsmCrawl *crawl, HsmCrawlStatus *status);
/* Stops (listings running finish first) and frees; NULL is fine. */
void hsm_crawl_stop(HsmCrawl *crawl);

#endif
