/* Response header values from untrusted servers. */
#include "headers.h"

static void test_content_range(void)
{
	guint64 first, last;

	g_assert_true(hsm_content_range_parse("bytes 0-99/1000", &first, &last));
	g_assert_cmpuint(first, ==, 0);
	g_assert_cmpuint(last, ==, 99);
	g_assert_true(hsm_content_range_parse("BYTES 5-5/*", &first, &last));
	g_assert_cmpuint(hsm_content_range_total("bytes 0-99/1000"), ==, 1000);
	g_assert_cmpuint(hsm_content_range_total("bytes 0-99/*"), ==, G_MAXUINT64);
	g_assert_cmpuint(hsm_content_range_total("bytes */1000"), ==, 1000);

	const char *bad[] = {
		NULL, "", "bytes", "bytes -5/10", "bytes 5-/10", "bytes 9-5/10", "bytes 0-9",
		"bytes +1-9/10", "bytes 0- 9/10", "items 0-9/10",
		"bytes 0-18446744073709551615/*", "bytes 0-99999999999999999999/*",
	};
	for (guint i = 0; i < G_N_ELEMENTS(bad); i++)
		g_assert_false(hsm_content_range_parse(bad[i], &first, &last));
	g_assert_cmpuint(hsm_content_range_total("bytes 0-9/99999999999999999999"), ==,
			 G_MAXUINT64);
	g_assert_cmpuint(hsm_content_range_total("bytes 0-9/12x"), ==, G_MAXUINT64);
	g_assert_cmpuint(hsm_content_range_total(NULL), ==, G_MAXUINT64);
}

static void test_retry_after(void)
{
	g_assert_cmpint(hsm_retry_after_parse("120"), ==, 120);
	g_assert_cmpint(hsm_retry_after_parse("99999999999999999999999"), ==, -1);
	g_assert_cmpint(hsm_retry_after_parse("9999999"), ==, 86400);
	g_assert_cmpint(hsm_retry_after_parse("Wed, 21 Oct 2015 07:28:00 GMT"), ==, -1);
	g_assert_cmpint(hsm_retry_after_parse("-5"), ==, -1);
}

static void test_charset(void)
{
	g_autofree char *a = hsm_content_type_charset("text/html; charset=ISO-8859-1");
	g_autofree char *b = hsm_content_type_charset("text/html; charset=\"utf-8\"; x=y");
	g_autofree char *c = hsm_content_type_charset("text/html; charset=");

	g_assert_cmpstr(a, ==, "ISO-8859-1");
	g_assert_cmpstr(b, ==, "utf-8");
	g_assert_null(c);
	g_assert_null(hsm_content_type_charset("text/html"));
}

static void test_cache_control(void)
{
	g_assert_cmpint(hsm_cache_control_max_age("max-age=300"), ==, 300);
	g_assert_cmpint(hsm_cache_control_max_age("public, MAX-AGE=\"60\", must-revalidate"), ==,
			60);
	g_assert_cmpint(hsm_cache_control_max_age("max-age=60, no-cache"), ==, 0);
	g_assert_cmpint(hsm_cache_control_max_age("no-store"), ==, 0);
	g_assert_cmpint(hsm_cache_control_max_age("no-cachex, max-agex=5"), ==, -1);
	g_assert_cmpint(hsm_cache_control_max_age("max-age=99999999999999999999999"), ==, -1);
	g_assert_cmpint(hsm_cache_control_max_age("max-age=999999999"), ==, HSM_MAX_AGE_LIMIT);
	g_assert_cmpint(hsm_cache_control_max_age("max-age=-1"), ==, -1);
	g_assert_cmpint(hsm_cache_control_max_age("private"), ==, -1);
	g_assert_cmpint(hsm_cache_control_max_age(""), ==, -1);
	g_assert_cmpint(hsm_cache_control_max_age(NULL), ==, -1);
}

static void test_age(void)
{
	g_assert_cmpint(hsm_age_parse("120"), ==, 120);
	g_assert_cmpint(hsm_age_parse(" 7"), ==, 7);
	g_assert_cmpint(hsm_age_parse("-5"), ==, 0);
	g_assert_cmpint(hsm_age_parse("99999999999999999999999"), ==, 0);
	g_assert_cmpint(hsm_age_parse("999999999"), ==, HSM_MAX_AGE_LIMIT);
	g_assert_cmpint(hsm_age_parse(NULL), ==, 0);
}

static void test_http_date(void)
{
	g_autofree char *epoch = hsm_http_date_format(0);
	g_autofree char *rfc_example = hsm_http_date_format(784111777);
	g_autofree char *leap_day = hsm_http_date_format(1709164800);

	g_assert_cmpstr(epoch, ==, "Thu, 01 Jan 1970 00:00:00 GMT");
	g_assert_cmpstr(rfc_example, ==, "Sun, 06 Nov 1994 08:49:37 GMT");
	g_assert_cmpstr(leap_day, ==, "Thu, 29 Feb 2024 00:00:00 GMT");
	g_assert_null(hsm_http_date_format(G_MAXINT64));
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/headers/content-range", test_content_range);
	g_test_add_func("/headers/retry-after", test_retry_after);
	g_test_add_func("/headers/charset", test_charset);
	g_test_add_func("/headers/cache-control", test_cache_control);
	g_test_add_func("/headers/age", test_age);
	g_test_add_func("/headers/http-date", test_http_date);
	return g_test_run();
}
