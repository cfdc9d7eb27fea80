/* Link estimates: the bandwidth-delay product read-ahead is sized by. */
#include "linkstats.h"

#define MS 1000
#define KiB 1024

static void test_unknown_until_a_large_body(void)
{
	HsmLinkStats stats;

	hsm_link_stats_init(&stats);
	g_assert_cmpuint(hsm_link_stats_bandwidth_delay(&stats), ==, 0);
	hsm_link_stats_add(&stats, 50 * MS, 4 * KiB, 1 * MS); /* a listing */
	g_assert_cmpuint(hsm_link_stats_bandwidth_delay(&stats), ==, 0);
	hsm_link_stats_clear(&stats);
}

/* W1: 50 ms, 100 Mbit/s (12.5 bytes per usec) holds 625,000 bytes. */
static void test_w1(void)
{
	HsmLinkStats stats;

	hsm_link_stats_init(&stats);
	for (int i = 0; i < 10; i++)
		hsm_link_stats_add(&stats, 50 * MS, 1250000, 100 * MS);
	g_assert_cmpuint(hsm_link_stats_bandwidth_delay(&stats), ==, 625000);
	hsm_link_stats_clear(&stats);
}

/* Responses queued behind others take longer: the round trip stays near
 * the smallest, or bigger windows would queue more. */
static void test_queueing_barely_moves_the_round_trip(void)
{
	HsmLinkStats stats;

	hsm_link_stats_init(&stats);
	hsm_link_stats_add(&stats, 50 * MS, 1250000, 100 * MS);
	hsm_link_stats_add(&stats, 250 * MS, 1250000, 100 * MS);
	g_assert_cmpuint(stats.rtt_usec, <, 60 * MS);
	hsm_link_stats_add(&stats, 40 * MS, 1250000, 100 * MS);
	g_assert_cmpint(stats.rtt_usec, ==, 40 * MS);
	/* A route that got longer is learnt, slowly. */
	for (int i = 0; i < 200; i++)
		hsm_link_stats_add(&stats, 100 * MS, 1250000, 100 * MS);
	g_assert_cmpint(stats.rtt_usec, >, 95 * MS);
	hsm_link_stats_clear(&stats);
}

static void test_rate_follows_recent_bodies(void)
{
	HsmLinkStats stats;

	hsm_link_stats_init(&stats);
	hsm_link_stats_add(&stats, 10 * MS, 1000000, 1000 * MS); /* 1 byte/usec */
	for (int i = 0; i < 30; i++)
		hsm_link_stats_add(&stats, 10 * MS, 1000000, 100 * MS); /* 10 bytes/usec */
	g_assert_cmpfloat(stats.bytes_per_usec, >, 9.9);
	g_assert_cmpfloat(stats.bytes_per_usec, <=, 10.0);
	hsm_link_stats_clear(&stats);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/linkstats/unknown-until-a-large-body", test_unknown_until_a_large_body);
	g_test_add_func("/linkstats/w1", test_w1);
	g_test_add_func("/linkstats/queueing", test_queueing_barely_moves_the_round_trip);
	g_test_add_func("/linkstats/rate", test_rate_follows_recent_bodies);
	return g_test_run();
}
