/* fuzz_url: the URL and path helpers of core/url.h.
 *
 * Their inputs come from the network (hrefs of listings are unescaped,
 * names are escaped back into request URLs) and from the command line (the
 * tree URL, paths under the mount point).  An escaped name must decode to
 * itself, or requests would ask for another file than the one listed.
 *
 * Input: a selector byte, then NUL-separated strings.
 */
#include "fuzz.h"
#include "url.h"

static const char *const bases[] = {
	"http://h/", "https://h:8443/pub/%20x/", "http://[::1]:8080/a/",
};

static gboolean is_unreserved(char c)
{
	return g_ascii_isalnum(c) || strchr("-._~", c);
}

static void check_unescape(const char *text, gsize len)
{
	gsize out_len = G_MAXSIZE;
	char *out = hsm_url_unescape(text, len, &out_len);

	FUZZ_CHECK(out_len <= len);
	FUZZ_CHECK(out[out_len] == '\0');
	if (!memchr(text, '%', len))
		FUZZ_CHECK(out_len == len && !memcmp(out, text, len));
	g_free(out);
}

static void check_escape_roundtrip(const char *name)
{
	char *escaped = hsm_url_escape_segment(name);
	gsize len;
	char *back;

	for (const char *p = escaped; *p; p++)
		FUZZ_CHECK(is_unreserved(*p) ||
			   (*p == '%' && g_ascii_isxdigit(p[1]) && g_ascii_isxdigit(p[2])));
	back = hsm_url_unescape(escaped, strlen(escaped), &len);
	FUZZ_CHECK(len == strlen(name) && !memcmp(back, name, len));
	g_free(back);
	g_free(escaped);
}

static void check_normalize(const char *url)
{
	GError *err = NULL;
	char *base = hsm_url_normalize_base(url, &err);

	FUZZ_CHECK(!base != !err);
	if (base) {
		FUZZ_CHECK(g_str_has_suffix(base, "/"));
		FUZZ_CHECK(!g_ascii_strncasecmp(base, "http://", 7) ||
			   !g_ascii_strncasecmp(base, "https://", 8));
		FUZZ_CHECK(!strchr(base, '?') && !strchr(base, '#'));
	}
	g_free(base);
	g_clear_error(&err);
}

/* relpaths are names joined by '/' (url.h); one made of slashes only is
 * outside the contract (its URL loses the base's trailing '/'). */
static void check_url_for_path(const char *base, const char *relpath, gboolean is_dir)
{
	char *url = hsm_url_for_path(base, relpath, is_dir);
	gboolean has_name = relpath[strspn(relpath, "/")] != '\0';

	if (has_name || !*relpath) {
		FUZZ_CHECK(g_str_has_prefix(url, base));
		for (const char *p = url + strlen(base); *p; p++)
			FUZZ_CHECK(is_unreserved(*p) || *p == '/' || *p == '%');
		FUZZ_CHECK(g_str_has_suffix(url, "/") == (is_dir || !has_name));
	}
	g_free(url);
}

static void check_paths(const char *dir, const char *name, const char *path)
{
	char *joined = hsm_path_join(dir, name);
	const char *below = hsm_path_below(path, dir);

	if (!*dir)
		FUZZ_CHECK(!strcmp(joined, name));
	else
		FUZZ_CHECK(g_str_has_prefix(joined, dir) && joined[strlen(dir)] == '/' &&
			   !strcmp(joined + strlen(dir) + 1, name));
	if (below)
		FUZZ_CHECK(below >= path && below <= path + strlen(path));
	if (*dir && !g_str_has_suffix(dir, "/")) {
		below = hsm_path_below(joined, dir);
		FUZZ_CHECK(below && !strcmp(below, name));
	}
	g_free(joined);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_silence_glib();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	guint8 selector = fuzz_byte(&data, &size);
	char *a, *b, *c;

	/* The raw bytes, NULs included, as an href's length-delimited text. */
	check_unescape((const char *)data, size);
	a = fuzz_string(&data, &size);
	b = fuzz_string(&data, &size);
	c = fuzz_string(&data, &size);
	check_escape_roundtrip(a);
	check_normalize(a);
	check_url_for_path(bases[selector % G_N_ELEMENTS(bases)], a, selector & 0x80);
	check_paths(a, b, c);
	g_free(a);
	g_free(b);
	g_free(c);
	return 0;
}
