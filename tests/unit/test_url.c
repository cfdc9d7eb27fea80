/* URL joining, escaping and the entry-name checks. */
#include "error.h"
#include "url.h"

#include <errno.h>

#include <string.h>

static void test_normalize(void)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *a = hsm_url_normalize_base("http://127.0.0.1:8080/pub/linux", NULL);
	g_autofree char *b = hsm_url_normalize_base("https://Example.org/pub/", NULL);
	g_autofree char *c = hsm_url_normalize_base("http://example.org", NULL);
	g_autofree char *d = hsm_url_normalize_base("http://example.org/x/#frag", NULL);
	char *bad;

	g_assert_cmpstr(a, ==, "http://127.0.0.1:8080/pub/linux/");
	g_assert_cmpstr(b, ==, "https://Example.org/pub/");
	g_assert_cmpstr(c, ==, "http://example.org/");
	g_assert_cmpstr(d, ==, "http://example.org/x/");
	bad = hsm_url_normalize_base("ftp://example.org/", &err);
	g_assert_null(bad);
	g_assert_error(err, HSM_ERROR, EPROTONOSUPPORT);
	g_clear_error(&err);
	g_assert_null(hsm_url_normalize_base("not a url", &err));
	g_assert_nonnull(err);
	g_clear_error(&err);
	g_assert_null(hsm_url_normalize_base("http://example.org/?C=N", &err));
	g_assert_nonnull(err);
}

static void test_escape_roundtrip(void)
{
	const char *names[] = { "plain.txt", "with space & amp", "percent%41", "ünï-名前",
				"q?h#s;p+", "quote\"<>" };

	for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
		g_autofree char *escaped = hsm_url_escape_segment(names[i]);
		gsize len;
		g_autofree char *back = hsm_url_unescape(escaped, strlen(escaped), &len);

		g_assert_null(strpbrk(escaped, " /?#<>\"&;+"));
		g_assert_cmpstr(back, ==, names[i]);
		g_assert_cmpuint(len, ==, strlen(names[i]));
	}
}

static void test_unescape_edges(void)
{
	gsize len;
	g_autofree char *a = hsm_url_unescape("a%2", 3, &len);
	g_autofree char *b = hsm_url_unescape("%zz+%41", 7, &len);
	g_autofree char *c = NULL;

	g_assert_cmpstr(a, ==, "a%2");
	g_assert_cmpstr(b, ==, "%zz+A");
	g_assert_cmpuint(len, ==, 5);
	c = hsm_url_unescape("x%00y", 5, &len);
	g_assert_cmpuint(len, ==, 3);
	g_assert_cmpint(c[1], ==, '\0');
}

static void test_for_path(void)
{
	g_autofree char *root = hsm_url_for_path("http://h/pub/", "", TRUE);
	g_autofree char *file = hsm_url_for_path("http://h/pub/", "linux/v6.x/a b.tar", FALSE);
	g_autofree char *dir = hsm_url_for_path("http://h/pub/", "linux/v6.x", TRUE);
	g_autofree char *odd = hsm_url_for_path("http://h/", "%41/?#", FALSE);

	g_assert_cmpstr(root, ==, "http://h/pub/");
	g_assert_cmpstr(file, ==, "http://h/pub/linux/v6.x/a%20b.tar");
	g_assert_cmpstr(dir, ==, "http://h/pub/linux/v6.x/");
	g_assert_cmpstr(odd, ==, "http://h/%2541/%3F%23");
}

static void test_names(void)
{
	g_assert_true(hsm_name_is_safe("a", 1));
	g_assert_true(hsm_name_is_safe("...", 3));
	g_assert_true(hsm_name_is_safe(".hidden", 7));
	g_assert_false(hsm_name_is_safe("", 0));
	g_assert_false(hsm_name_is_safe(".", 1));
	g_assert_false(hsm_name_is_safe("..", 2));
	g_assert_false(hsm_name_is_safe("a/b", 3));
	g_assert_false(hsm_name_is_safe("a\0b", 3));
	char long_name[300];
	memset(long_name, 'x', sizeof(long_name));
	g_assert_true(hsm_name_is_safe(long_name, 255));
	g_assert_false(hsm_name_is_safe(long_name, 256));
}

static void test_join(void)
{
	g_autofree char *a = hsm_path_join("", "x");
	g_autofree char *b = hsm_path_join("a/b", "x");

	g_assert_cmpstr(a, ==, "x");
	g_assert_cmpstr(b, ==, "a/b/x");
}

static void test_path_below(void)
{
	g_assert_cmpstr(hsm_path_below("/mnt/pub/a/b", "/mnt/pub"), ==, "a/b");
	g_assert_cmpstr(hsm_path_below("/mnt/pub", "/mnt/pub"), ==, "");
	g_assert_null(hsm_path_below("/mnt/public/a", "/mnt/pub"));
	g_assert_null(hsm_path_below("/mnt", "/mnt/pub"));
	g_assert_cmpstr(hsm_path_below("/a/b", "/"), ==, "a/b");
	g_assert_cmpstr(hsm_path_below("/", "/"), ==, "");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/url/normalize", test_normalize);
	g_test_add_func("/url/escape-roundtrip", test_escape_roundtrip);
	g_test_add_func("/url/unescape-edges", test_unescape_edges);
	g_test_add_func("/url/for-path", test_for_path);
	g_test_add_func("/url/names", test_names);
	g_test_add_func("/url/join", test_join);
	g_test_add_func("/url/path-below", test_path_below);
	return g_test_run();
}
