/* Link estimates from completed responses; see linkstats.h. */
#include "linkstats.h"

/* Bodies smaller than this end before TCP reaches the link's rate. */
#define RATE_SAMPLE_MIN_BYTES (64 * 1024)

void hsm_link_stats_init(HsmLinkStats *stats)
{
	g_mutex_init(&stats->lock);
	stats->rtt_usec = 0;
	stats->bytes_per_usec = 0;
}

void hsm_link_stats_clear(HsmLinkStats *stats)
{
	g_mutex_clear(&stats->lock);
}

/* The round trip is the smallest recent request time: larger ones carry
 * server time and queueing behind other responses, which counting would
 * inflate the window, which would queue more.  Larger samples still pull
 * the estimate up slowly, for a route that got longer. */
static gint64 next_rtt(gint64 rtt, gint64 sample)
{
	if (!rtt || sample < rtt)
		return sample;
	return rtt + (sample - rtt) / 32;
}

void hsm_link_stats_add(HsmLinkStats *stats, gint64 request_usec, guint64 body_bytes,
			gint64 body_usec)
{
	g_mutex_lock(&stats->lock);
	if (request_usec > 0)
		stats->rtt_usec = next_rtt(stats->rtt_usec, request_usec);
	if (body_bytes >= RATE_SAMPLE_MIN_BYTES && body_usec > 0) {
		double rate = (double)body_bytes / (double)body_usec;

		stats->bytes_per_usec = stats->bytes_per_usec ?
					0.75 * stats->bytes_per_usec + 0.25 * rate : rate;
	}
	g_mutex_unlock(&stats->lock);
}

void hsm_link_stats_read(HsmLinkStats *stats, gint64 *rtt_usec, double *bytes_per_usec)
{
	g_mutex_lock(&stats->lock);
	*rtt_usec = stats->rtt_usec;
	*bytes_per_usec = stats->bytes_per_usec;
	g_mutex_unlock(&stats->lock);
}

guint64 hsm_link_stats_bandwidth_delay(HsmLinkStats *stats)
{
	gint64 rtt_usec;
	double bytes_per_usec;

	hsm_link_stats_read(stats, &rtt_usec, &bytes_per_usec);
	return (guint64)(bytes_per_usec * (double)rtt_usec);
}
