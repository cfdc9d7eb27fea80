/* Listing parser against pages saved from real servers (see
 * tests/data/listings/make-samples.sh) and against hostile pages. */
#include "listing.h"
#include "url.h"

#include <string.h>

typedef struct {
	char *name;
	HsmEntryType type;
	guint64 size;
	gint64 mtime;
} Truth;

typedef struct {
	const char *file;
	gboolean sizes_shown;  /* the page shows a size for every file */
	gboolean all_exact;    /* ... and every one of them is exact */
	gboolean mtimes_shown;
} Sample;

static const Sample samples[] = {
	{ "nginx-exact", TRUE, TRUE, TRUE },
	{ "nginx-rounded", TRUE, FALSE, TRUE },
	{ "apache-fancy-table", TRUE, FALSE, TRUE },
	{ "apache-fancy-pre", TRUE, FALSE, TRUE },
	{ "apache-plain", FALSE, FALSE, FALSE },
	{ "lighttpd", TRUE, FALSE, TRUE },
	{ "caddy", TRUE, TRUE, TRUE },
	{ "python-http-server", FALSE, FALSE, FALSE },
};

static char *data_path(const char *name)
{
	const char *dir = g_getenv("HSM_TEST_DATA");

	return g_build_filename(dir ? dir : "tests/data", "listings", name, NULL);
}

static void free_truth(gpointer data)
{
	Truth *t = data;

	g_free(t->name);
	g_free(t);
}

static GPtrArray *load_truth(void)
{
	g_autofree char *path = data_path("sample.tsv");
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	GPtrArray *truth = g_ptr_array_new_with_free_func(free_truth);

	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	lines = g_strsplit(text, "\n", -1);
	for (char **line = lines; *line && **line; line++) {
		g_auto(GStrv) fields = g_strsplit(*line, "\t", 4);
		Truth *t = g_new0(Truth, 1);
		gsize len;

		g_assert_cmpuint(g_strv_length(fields), ==, 4);
		t->name = hsm_url_unescape(fields[0], strlen(fields[0]), &len);
		t->type = fields[1][0] == 'd' ? HSM_ENTRY_DIR : HSM_ENTRY_FILE;
		t->size = g_ascii_strtoull(fields[2], NULL, 10);
		t->mtime = g_ascii_strtoll(fields[3], NULL, 10);
		g_ptr_array_add(truth, t);
	}
	return truth;
}

static HsmListing *parse_file(const char *file, const char *url)
{
	g_autofree char *name = g_strconcat(file, ".html", NULL);
	g_autofree char *path = data_path(name);
	g_autofree char *html = NULL;
	gsize len;

	g_assert_true(g_file_get_contents(path, &html, &len, NULL));
	return hsm_listing_parse(html, len, url, NULL);
}

static const HsmListingEntry *find(HsmListing *listing, const char *name)
{
	for (guint i = 0; i < listing->entries->len; i++) {
		const HsmListingEntry *entry = listing->entries->pdata[i];

		if (!strcmp(entry->name, name))
			return entry;
	}
	return NULL;
}

/* A rounded size must still be close: nginx writes 2.38 MB as "2M". */
static void assert_size_estimate(guint64 estimate, guint64 truth)
{
	guint64 diff = estimate > truth ? estimate - truth : truth - estimate;

	g_assert_cmpuint(diff, <=, MAX(truth / 4, 1024));
}

static void check_entry(const Sample *sample, const Truth *t, const HsmListingEntry *e)
{
	g_assert_nonnull(e);
	g_assert_cmpint(e->type, ==, t->type);
	if (t->type == HSM_ENTRY_FILE) {
		/* Never claim exactness for a rounded size. */
		if (e->size_exact)
			g_assert_cmpuint(e->size, ==, t->size);
		else if (sample->sizes_shown)
			assert_size_estimate(e->size, t->size);
		if (sample->all_exact)
			g_assert_true(e->size_exact);
		if (!sample->sizes_shown)
			g_assert_false(e->size_exact);
		g_assert_cmpint(hsm_listing_entry_needs_head(e), ==,
				!(sample->all_exact && sample->mtimes_shown) &&
					!(e->size_exact && e->mtime >= 0));
	}
	if (sample->mtimes_shown) {
		/* Pages truncate to their precision (nginx and Apache: minutes). */
		g_assert_cmpint(e->mtime, <=, t->mtime);
		g_assert_cmpint(t->mtime - e->mtime, <, e->mtime_precision);
	} else {
		g_assert_cmpint(e->mtime, ==, -1);
	}
}

static void test_sample(gconstpointer data)
{
	const Sample *sample = data;
	g_autoptr(GPtrArray) truth = load_truth();
	HsmListing *listing = parse_file(sample->file, "http://127.0.0.1:18081/");

	g_assert_cmpuint(listing->entries->len, ==, truth->len);
	g_assert_cmpuint(listing->refused, ==, 0);
	for (guint i = 0; i < truth->len; i++) {
		const Truth *t = truth->pdata[i];

		g_test_message("%s: %s", sample->file, t->name);
		check_entry(sample, t, find(listing, t->name));
	}
	hsm_listing_free(listing);
}

/* nginx's rounded sizes: up to 9999 bytes exact, above with K/M/G. */
static void test_nginx_rounded_exactness(void)
{
	HsmListing *listing = parse_file("nginx-rounded", "http://127.0.0.1/");

	g_assert_true(find(listing, "exact-9999.bin")->size_exact);
	g_assert_true(find(listing, "empty")->size_exact);
	g_assert_false(find(listing, "rounded-12345.bin")->size_exact);
	g_assert_false(find(listing, "huge-5368709120.img")->size_exact);
	g_assert_cmpuint(find(listing, "huge-5368709120.img")->size, ==, 5368709120ULL);
	hsm_listing_free(listing);
}

/* The same page served from a subdirectory: links are relative to it. */
static void test_page_in_subdirectory(void)
{
	const char *html =
		"<pre><a href=\"../\">../</a>\n"
		"<a href=\"x.tar\">x.tar</a>   02-Dec-2026 10:20   1234\n"
		"<a href=\"/pub/linux/y/\">y/</a>   02-Dec-2026 10:20   -\n"
		"<a href=\"http://host:8080/pub/linux/z\">z</a>\n"
		"<a href=\"http://HOST:8080/pub/linux/upper\">z</a>\n"
		"<a href=\"//host:8080/pub/linux/proto-relative\">p</a>\n"
		"<a href=\"http://other:8080/pub/linux/elsewhere\">e</a>\n"
		"<a href=\"https://host:8080/pub/linux/other-scheme\">e</a>\n"
		"<a href=\"/pub/other/w\">w</a>\n"
		"<a href=\"deeper/file\">deeper</a>\n"
		"<a href=\"./\">self</a> <a href=\"\">empty</a> <a href=\"#top\">top</a>\n"
		"<a href=\"?C=N;O=D\">sort</a> <a href=\"q?x=1\">query</a>\n"
		"<a href=\"sub/../back\">normalised</a>\n"
		"</pre>";
	HsmListing *listing = hsm_listing_parse(html, strlen(html), "http://host:8080/pub/linux/",
						NULL);
	const char *expected[] = { "back", "proto-relative", "upper", "x.tar", "y", "z" };

	g_assert_cmpuint(listing->entries->len, ==, G_N_ELEMENTS(expected));
	for (guint i = 0; i < G_N_ELEMENTS(expected); i++)
		g_assert_cmpstr(((HsmListingEntry *)listing->entries->pdata[i])->name, ==, expected[i]);
	g_assert_cmpint(find(listing, "y")->type, ==, HSM_ENTRY_DIR);
	g_assert_cmpuint(find(listing, "x.tar")->size, ==, 1234);
	g_assert_true(find(listing, "x.tar")->size_exact);
	hsm_listing_free(listing);
}

/* Names that would escape the tree or cannot exist are refused, loudly. */
static void test_hostile_names(void)
{
	const char *html =
		"<ul><li><a href=\"%2e%2e/\">dotdot</a></li>"
		"<li><a href=\"%2E\">dot</a></li>"
		"<li><a href=\"a%2Fb\">slash</a></li>"
		"<li><a href=\"nul%00byte\">nul</a></li>"
		"<li><a href=\"..%2f..%2fetc%2fpasswd\">traversal</a></li>"
		"<li><a href=\"../../etc/passwd\">parent</a></li>"
		"<li><a href=\"good\">good</a></li></ul>";
	HsmListing *listing;

	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*unsafe name*");
	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*unsafe name*");
	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*unsafe name*");
	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*unsafe name*");
	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*unsafe name*");
	listing = hsm_listing_parse(html, strlen(html), "http://h/d/", NULL);
	g_test_assert_expected_messages();
	g_assert_cmpuint(listing->refused, ==, 5);
	g_assert_cmpuint(listing->entries->len, ==, 1);
	g_assert_cmpstr(((HsmListingEntry *)listing->entries->pdata[0])->name, ==, "good");
	hsm_listing_free(listing);
}

/* Broken HTML and garbage never crash and never invent entries. */
static void test_broken_html(void)
{
	const char *pages[] = {
		"",
		"<",
		"<a href=",
		"<a href=\"unterminated",
		"<pre><a href=\"ok\">ok</a> 99-Xyz-2026 99:99 12Q\n",
		"<table><tr><td><a href=\"t\">t</a><td>2026-13-45 10:20<td>5\xff\xfeK",
		"\x00\x01\x02<a href=x>x</a>",
		"<html><body><a href=\"f\"><a href=\"g/\">nested</a></a></body>",
	};

	for (guint i = 0; i < G_N_ELEMENTS(pages); i++) {
		gsize len = i == 6 ? sizeof("\x00\x01\x02<a href=x>x</a>") - 1 : strlen(pages[i]);
		HsmListing *listing = hsm_listing_parse(pages[i], len, "http://h/", NULL);

		g_assert_cmpuint(listing->entries->len, <=, 2);
		for (guint j = 0; j < listing->entries->len; j++) {
			const HsmListingEntry *e = listing->entries->pdata[j];

			g_assert_true(hsm_name_is_safe(e->name, strlen(e->name)));
			g_assert_false(e->size_exact && e->size != 5 && e->size != 0);
		}
		hsm_listing_free(listing);
	}
	/* An invalid date is not a date; the size after it is not trusted. */
	HsmListing *listing = hsm_listing_parse(pages[4], strlen(pages[4]), "http://h/", NULL);
	g_assert_cmpuint(listing->entries->len, ==, 1);
	g_assert_cmpint(find(listing, "ok")->mtime, ==, -1);
	g_assert_false(find(listing, "ok")->size_exact);
	hsm_listing_free(listing);
}

/* Invalid UTF-8 in the text after a link (the date and size columns) is
 * read as bytes: the row still parses, nothing crashes.  It once reached a
 * UTF-mode JIT regex and crashed the daemon. */
static void test_invalid_utf8_row(void)
{
	const char *pages[] = {
		"<a href=x>x</a>\xf4\xf4\xf4\xf4 02-Dec-2026 10:20 12\n",
		"<pre><a href=\"y\">y</a> \xc3 02-Dec-2026 10:20   345\n</pre>",
		("<table><tr><td><a href=\"z\">z</a></td><td>\xed\xa0\x80</td>"
		 "<td>2026-12-02 10:20 </td><td>\xf8\x88\x80\x80\x80</td></tr></table>"),
	};
	const char *charsets[] = { NULL, "utf-8", "iso-8859-1" };

	for (guint c = 0; c < G_N_ELEMENTS(charsets); c++) {
		for (guint i = 0; i < G_N_ELEMENTS(pages); i++) {
			HsmListing *listing =
				hsm_listing_parse(pages[i], strlen(pages[i]), "http://h/", charsets[c]);

			g_assert_cmpuint(listing->entries->len, ==, 1);
			g_assert_cmpint(((HsmListingEntry *)listing->entries->pdata[0])->mtime, ==,
					1796206800);
			hsm_listing_free(listing);
		}
	}
	HsmListing *listing = hsm_listing_parse(pages[1], strlen(pages[1]), "http://h/", NULL);
	g_assert_cmpuint(find(listing, "y")->size, ==, 345);
	g_assert_true(find(listing, "y")->size_exact);
	hsm_listing_free(listing);
}

/* A byte the declared charset does not define loses no entry after it. */
static void test_undefined_byte_of_charset(void)
{
	const char *html = "<pre><a href=\"a\">a</a> 02-Dec-2026 10:20 1\n"
			   "<a href=\"b\">b</a> \x81 02-Dec-2026 10:20 2\n"
			   "<a href=\"c\">c</a> 02-Dec-2026 10:20 3\n</pre>";
	const char *charsets[] = { "windows-1252", "shift_jis", "utf-8", "iso-8859-1", "bogus" };

	for (guint i = 0; i < G_N_ELEMENTS(charsets); i++) {
		HsmListing *listing;

		if (i != 2 && i != 3) /* not UTF-8 (an unknown one is tried as UTF-8) */
			g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*read as ISO-8859-1*");
		listing = hsm_listing_parse(html, strlen(html), "http://h/", charsets[i]);
		g_test_assert_expected_messages();
		g_assert_cmpuint(listing->entries->len, ==, 3);
		g_assert_cmpuint(find(listing, "c")->size, ==, 3);
		hsm_listing_free(listing);
	}
}

/* A size no off_t can hold is no size (the entry then needs a HEAD), and
 * converting it is not undefined behaviour. */
static void test_size_overflow(void)
{
	const char *html =
		"<pre><a href=\"a\">a</a> 02-Dec-2026 10:20 99999999999E\n"
		"<a href=\"b\">b</a> 02-Dec-2026 10:20 99999999999999999999999\n"
		"<a href=\"c\">c</a> 02-Dec-2026 10:20 8E\n"
		"<a href=\"d\">d</a> 02-Dec-2026 10:20 7.9E\n"
		"<a href=\"f\">f</a> 02-Dec-2026 10:20 9007199254740993\n</pre>"
		"<table><tr><td data-order=\"18446744073709551615\"><a href=\"e\">e</a></td>"
		"</tr></table>";
	HsmListing *listing = hsm_listing_parse(html, strlen(html), "http://h/", NULL);

	g_assert_cmpuint(listing->entries->len, ==, 6);
	g_assert_true(find(listing, "f")->size_exact);
	g_assert_cmpuint(find(listing, "f")->size, ==, 9007199254740993ULL); /* 2^53 + 1 */
	for (const char *name = "abce"; *name; name++) {
		char n[2] = { *name, 0 };

		g_assert_false(find(listing, n)->size_exact);
		g_assert_true(hsm_listing_entry_needs_head(find(listing, n)));
	}
	g_assert_cmpuint(find(listing, "d")->size, ==, (guint64)(7.9 * (double)(1ULL << 60)));
	hsm_listing_free(listing);
}

/* A large listing (kernel.org's v6.x has thousands of entries) parses whole. */
static void test_large_listing(void)
{
	GString *html = g_string_new("<html><body><pre><a href=\"../\">../</a>\n");
	HsmListing *listing;

	for (int i = 0; i < 5000; i++)
		g_string_append_printf(html, "<a href=\"file-%05d.txt\">file-%05d.txt</a>"
					     "   02-Dec-2026 10:20   %d\n", i, i, i);
	g_string_append(html, "</pre></body></html>");
	listing = hsm_listing_parse(html->str, html->len, "http://h/big/", NULL);
	g_assert_cmpuint(listing->entries->len, ==, 5000);
	g_assert_cmpuint(find(listing, "file-04999.txt")->size, ==, 4999);
	hsm_listing_free(listing);
	g_string_free(html, TRUE);
}

static void assert_same_listing(HsmListing *a, HsmListing *b)
{
	g_assert_cmpuint(a->entries->len, ==, b->entries->len);
	g_assert_cmpuint(a->refused, ==, b->refused);
	for (guint i = 0; i < a->entries->len; i++) {
		const HsmListingEntry *x = a->entries->pdata[i], *y = b->entries->pdata[i];

		g_assert_cmpstr(x->name, ==, y->name);
		g_assert_cmpint(x->type, ==, y->type);
		g_assert_cmpuint(x->size, ==, y->size);
		g_assert_cmpint(x->size_exact, ==, y->size_exact);
		g_assert_cmpint(x->mtime, ==, y->mtime);
		g_assert_cmpuint(x->mtime_precision, ==, y->mtime_precision);
	}
}

static HsmListing *parse_in_pieces(const char *html, gsize len, gsize piece, const char *charset)
{
	HsmListingParser *parser = hsm_listing_parser_new("http://h/pub/", charset);

	for (gsize done = 0; done < len; done += MIN(piece, len - done))
		hsm_listing_parser_feed(parser, html + done, MIN(piece, len - done));
	return hsm_listing_parser_finish(parser);
}

/* However the network cuts a page (a page is parsed as it arrives), its
 * listing is the same: every server's sample, cut into pieces of 1 byte,
 * a few, around the charset sniffing size, and half of it. */
static void test_pieces_give_the_same_listing(void)
{
	for (guint i = 0; i < G_N_ELEMENTS(samples); i++) {
		g_autofree char *name = g_strconcat(samples[i].file, ".html", NULL);
		g_autofree char *path = data_path(name);
		g_autofree char *html = NULL;
		gsize len;
		HsmListing *whole;

		g_assert_true(g_file_get_contents(path, &html, &len, NULL));
		whole = hsm_listing_parse(html, len, "http://h/pub/", NULL);
		g_assert_cmpuint(whole->entries->len, >, 0);
		for (gsize piece = 1; piece <= len; piece = piece < 16 ? piece + 5 : piece * 3) {
			HsmListing *cut = parse_in_pieces(html, len, piece, NULL);

			assert_same_listing(whole, cut);
			hsm_listing_free(cut);
		}
		hsm_listing_free(whole);
	}
}

/* A page in a charset it breaks is read again as Latin-1, from what the
 * parser kept: no entry is lost whatever the pieces. */
static void test_pieces_of_a_page_read_again(void)
{
	GString *html = g_string_new("<pre>");
	HsmListing *whole;

	for (int i = 0; i < 300; i++) /* past the sniffing size before the bad byte */
		g_string_append_printf(html, "<a href=\"f%03d\">f%03d</a> 02-Dec-2026 10:20 %d\n", i,
				       i, i);
	g_string_append(html, "<a href=\"b\">b</a> \x81 02-Dec-2026 10:20 2\n"
			      "<a href=\"c\">c</a> 02-Dec-2026 10:20 3\n</pre>");
	g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*read as ISO-8859-1*");
	whole = hsm_listing_parse(html->str, html->len, "http://h/pub/", "windows-1252");
	g_test_assert_expected_messages();
	g_assert_cmpuint(whole->entries->len, ==, 302);
	for (gsize piece = 1; piece <= html->len; piece *= 7) {
		HsmListing *cut;

		g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*read as ISO-8859-1*");
		cut = parse_in_pieces(html->str, html->len, piece, "windows-1252");
		g_test_assert_expected_messages();
		assert_same_listing(whole, cut);
		hsm_listing_free(cut);
	}
	hsm_listing_free(whole);
	g_string_free(html, TRUE);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	for (guint i = 0; i < G_N_ELEMENTS(samples); i++) {
		g_autofree char *path = g_strconcat("/listing/server/", samples[i].file, NULL);

		g_test_add_data_func(path, &samples[i], test_sample);
	}
	g_test_add_func("/listing/nginx-rounded-exactness", test_nginx_rounded_exactness);
	g_test_add_func("/listing/subdirectory", test_page_in_subdirectory);
	g_test_add_func("/listing/hostile-names", test_hostile_names);
	g_test_add_func("/listing/broken-html", test_broken_html);
	g_test_add_func("/listing/large", test_large_listing);
	g_test_add_func("/listing/pieces", test_pieces_give_the_same_listing);
	g_test_add_func("/listing/pieces-read-again", test_pieces_of_a_page_read_again);
	g_test_add_func("/listing/invalid-utf8-row", test_invalid_utf8_row);
	g_test_add_func("/listing/size-overflow", test_size_overflow);
	g_test_add_func("/listing/undefined-byte-of-charset", test_undefined_byte_of_charset);
	return g_test_run();
}
