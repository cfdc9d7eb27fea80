/* Range map: merging, splitting, queries and the persisted text form. */
#include "rangemap.h"

static char *dump(HsmRangeMap *map)
{
	return hsm_range_map_to_string(map);
}

static void assert_map(HsmRangeMap *map, const char *expected)
{
	g_autofree char *text = dump(map);

	g_assert_cmpstr(text, ==, expected);
}

static void test_add_merges(void)
{
	HsmRangeMap map;

	hsm_range_map_init(&map);
	hsm_range_map_add(&map, 100, 200);
	hsm_range_map_add(&map, 300, 400);
	assert_map(&map, "100-200,300-400");
	hsm_range_map_add(&map, 200, 300); /* adjacent on both sides */
	assert_map(&map, "100-400");
	hsm_range_map_add(&map, 0, 50);
	hsm_range_map_add(&map, 500, 600);
	hsm_range_map_add(&map, 40, 550); /* swallows three */
	assert_map(&map, "0-600");
	hsm_range_map_add(&map, 10, 10); /* empty: no-op */
	assert_map(&map, "0-600");
	g_assert_cmpuint(hsm_range_map_total(&map), ==, 600);
	hsm_range_map_clear(&map);
}

static void test_remove_splits(void)
{
	HsmRangeMap map;

	hsm_range_map_init(&map);
	hsm_range_map_add(&map, 0, 1000);
	hsm_range_map_remove(&map, 100, 200);
	assert_map(&map, "0-100,200-1000");
	hsm_range_map_remove(&map, 50, 300);
	assert_map(&map, "0-50,300-1000");
	hsm_range_map_add(&map, 2000, 3000);
	hsm_range_map_remove(&map, 900, 2100);
	assert_map(&map, "0-50,300-900,2100-3000");
	hsm_range_map_remove(&map, 0, 5000);
	assert_map(&map, "");
	hsm_range_map_clear(&map);
}

static void test_queries(void)
{
	HsmRangeMap map;

	hsm_range_map_init(&map);
	hsm_range_map_add(&map, 4096, 8192);
	hsm_range_map_add(&map, 12288, 16384);
	g_assert_true(hsm_range_map_contains(&map, 4096, 8192));
	g_assert_true(hsm_range_map_contains(&map, 5000, 6000));
	g_assert_false(hsm_range_map_contains(&map, 4000, 5000));
	g_assert_false(hsm_range_map_contains(&map, 8000, 8193));
	g_assert_true(hsm_range_map_contains(&map, 7, 7)); /* empty range */
	g_assert_cmpuint(hsm_range_map_first_missing(&map, 0, 100), ==, 0);
	g_assert_cmpuint(hsm_range_map_first_missing(&map, 4096, 20000), ==, 8192);
	g_assert_cmpuint(hsm_range_map_first_missing(&map, 4096, 6000), ==, 6000);
	g_assert_cmpuint(hsm_range_map_first_missing(&map, 8192, 9000), ==, 8192);
	g_assert_cmpuint(hsm_range_map_next_present(&map, 0), ==, 4096);
	g_assert_cmpuint(hsm_range_map_next_present(&map, 5000), ==, 5000);
	g_assert_cmpuint(hsm_range_map_next_present(&map, 8192), ==, 12288);
	g_assert_cmpuint(hsm_range_map_next_present(&map, 16384), ==, G_MAXUINT64);
	g_assert_cmpuint(hsm_range_map_count(&map), ==, 2);
	hsm_range_map_clear(&map);
}

static void test_text_form(void)
{
	HsmRangeMap map;

	hsm_range_map_init(&map);
	g_assert_true(hsm_range_map_parse(&map, "0-10,20-30,25-40"));
	assert_map(&map, "0-10,20-40");
	g_assert_true(hsm_range_map_parse(&map, ""));
	assert_map(&map, "");
	hsm_range_map_add(&map, 1, 2);
	/* Malformed text never replaces what is known. */
	g_assert_false(hsm_range_map_parse(&map, "5-3"));
	g_assert_false(hsm_range_map_parse(&map, "1-2,"));
	g_assert_false(hsm_range_map_parse(&map, "x-2"));
	g_assert_false(hsm_range_map_parse(&map, "-1-2"));
	g_assert_false(hsm_range_map_parse(&map, "1-2;3-4"));
	g_assert_false(hsm_range_map_parse(&map, "99999999999999999999999-1"));
	assert_map(&map, "1-2");
	hsm_range_map_clear(&map);
}

/* Against a byte array model, random operations keep the same answers. */
static void test_random_against_model(void)
{
	enum { SIZE = 512 };
	gboolean model[SIZE] = { 0 };
	HsmRangeMap map;
	GRand *rand = g_rand_new_with_seed(42);

	hsm_range_map_init(&map);
	for (int step = 0; step < 20000; step++) {
		guint a = g_rand_int_range(rand, 0, SIZE), b = g_rand_int_range(rand, 0, SIZE + 1);
		guint lo = MIN(a, b), hi = MAX(a, b);
		gboolean add = g_rand_boolean(rand);

		if (add)
			hsm_range_map_add(&map, lo, hi);
		else
			hsm_range_map_remove(&map, lo, hi);
		for (guint i = lo; i < hi; i++)
			model[i] = add;

		a = g_rand_int_range(rand, 0, SIZE);
		b = g_rand_int_range(rand, a, SIZE + 1);
		guint missing = b;
		for (guint i = a; i < b; i++)
			if (!model[i]) {
				missing = i;
				break;
			}
		g_assert_cmpuint(hsm_range_map_first_missing(&map, a, b), ==, missing);
	}
	guint64 total = 0;
	for (guint i = 0; i < SIZE; i++)
		total += model[i];
	g_assert_cmpuint(hsm_range_map_total(&map), ==, total);
	hsm_range_map_clear(&map);
	g_rand_free(rand);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/rangemap/add-merges", test_add_merges);
	g_test_add_func("/rangemap/remove-splits", test_remove_splits);
	g_test_add_func("/rangemap/queries", test_queries);
	g_test_add_func("/rangemap/text-form", test_text_form);
	g_test_add_func("/rangemap/random", test_random_against_model);
	return g_test_run();
}
