/* What the link to the origin can carry: round-trip time and transfer
 * rate, estimated from completed responses, so that read-ahead keeps as
 * many bytes in flight as the link holds (its bandwidth-delay product)
 * and no more.
 *
 * Thread-safe: the engine adds samples on its thread, readers ask from
 * theirs.
 */
#ifndef HSM_LINKSTATS_H
#define HSM_LINKSTATS_H

#include <glib.h>

typedef struct {
	GMutex lock;
	gint64 rtt_usec;        /* 0 until the first sample */
	double bytes_per_usec;  /* 0 until the first large body */
} HsmLinkStats;

void hsm_link_stats_init(HsmLinkStats *stats);
void hsm_link_stats_clear(HsmLinkStats *stats);

/* One response: request_usec from sending the request to its first byte;
 * body_bytes received in body_usec after that. */
void hsm_link_stats_add(HsmLinkStats *stats, gint64 request_usec, guint64 body_bytes,
			gint64 body_usec);

/* The estimates (0 while unknown). */
void hsm_link_stats_read(HsmLinkStats *stats, gint64 *rtt_usec, double *bytes_per_usec);

/* Bytes the link holds in one round trip; 0 while unknown. */
guint64 hsm_link_stats_bandwidth_delay(HsmLinkStats *stats);

#endif
