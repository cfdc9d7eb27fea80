/* URL building and entry-name checks; see url.h. */
#include "url.h"
#include "error.h"

#include <errno.h>

#include <curl/curl.h>
#include <limits.h>
#include <string.h>

char *hsm_url_normalize_base(const char *url, GError **err)
{
	CURLU *parsed = curl_url();
	char *scheme = NULL, *path = NULL, *query = NULL, *full = NULL;
	char *result = NULL;

	if (curl_url_set(parsed, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
		g_set_error(err, HSM_ERROR, EINVAL,
			    "'%s' is not a valid URL", url);
		goto out;
	}
	if (g_ascii_strcasecmp(scheme, "http") && g_ascii_strcasecmp(scheme, "https")) {
		g_set_error(err, HSM_ERROR, EPROTONOSUPPORT,
			    "'%s': only http:// and https:// URLs are supported", url);
		goto out;
	}
	if (curl_url_get(parsed, CURLUPART_QUERY, &query, 0) == CURLUE_OK) {
		g_set_error(err, HSM_ERROR, EINVAL,
			    "'%s': a tree URL cannot have a query string", url);
		goto out;
	}
	curl_url_set(parsed, CURLUPART_FRAGMENT, NULL, 0);
	curl_url_get(parsed, CURLUPART_PATH, &path, 0);
	if (!g_str_has_suffix(path, "/")) {
		char *slashed = g_strconcat(path, "/", NULL);

		curl_url_set(parsed, CURLUPART_PATH, slashed, 0);
		g_free(slashed);
	}
	curl_url_get(parsed, CURLUPART_URL, &full, 0);
	result = g_strdup(full);
out:
	curl_free(scheme);
	curl_free(path);
	curl_free(query);
	curl_free(full);
	curl_url_cleanup(parsed);
	return result;
}

char *hsm_url_escape_segment(const char *name)
{
	return g_uri_escape_string(name, NULL, FALSE);
}

static int hex_value(char c)
{
	return g_ascii_isxdigit(c) ? g_ascii_xdigit_value(c) : -1;
}

char *hsm_url_unescape(const char *text, gsize len, gsize *out_len)
{
	char *out = g_malloc(len + 1);
	gsize n = 0;

	for (gsize i = 0; i < len; i++) {
		if (text[i] == '%' && i + 2 < len && hex_value(text[i + 1]) >= 0 &&
		    hex_value(text[i + 2]) >= 0) {
			out[n++] = (char)(hex_value(text[i + 1]) << 4 | hex_value(text[i + 2]));
			i += 2;
		} else {
			out[n++] = text[i];
		}
	}
	out[n] = '\0';
	*out_len = n;
	return out;
}

char *hsm_url_for_path(const char *base, const char *relpath, gboolean is_dir)
{
	GString *url = g_string_new(base);
	char **names = g_strsplit(relpath, "/", -1);

	for (char **name = names; *name; name++) {
		char *escaped;

		if (!**name)
			continue;
		escaped = hsm_url_escape_segment(*name);
		g_string_append(url, escaped);
		g_string_append_c(url, '/');
		g_free(escaped);
	}
	g_strfreev(names);
	if (!is_dir && g_str_has_suffix(url->str, "/") && *relpath)
		g_string_truncate(url, url->len - 1);
	return g_string_free(url, FALSE);
}

gboolean hsm_name_is_safe(const char *name, gsize len)
{
	if (len == 0 || len > NAME_MAX)
		return FALSE;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return FALSE;
	return memchr(name, '/', len) == NULL && memchr(name, '\0', len) == NULL;
}

char *hsm_path_join(const char *dir, const char *name)
{
	return *dir ? g_strconcat(dir, "/", name, NULL) : g_strdup(name);
}

const char *hsm_path_below(const char *path, const char *top)
{
	gsize len = strlen(top);

	if (strncmp(path, top, len))
		return NULL;
	if (path[len] == '\0' || (len && top[len - 1] == '/')) /* top "/" */
		return path + len;
	return path[len] == '/' ? path + len + 1 : NULL;
}
