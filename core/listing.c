/* Directory index pages: see listing.h.
 *
 * The page is parsed with libxml2's forgiving HTML parser.  Each <a href>
 * that resolves to a direct child of the page's URL is an entry; its size and
 * mtime come from the rest of its table row (<tr>), or from the text that
 * follows it on the same line (<pre> listings), or are unknown (<li> lists).
 */
#include "listing.h"
#include "url.h"

#include <curl/curl.h>
#include <libxml/HTMLparser.h>
#include <string.h>

/* Where the page lives: links are resolved and compared against this. */
typedef struct {
	char *scheme;
	char *host;
	char *port;
	char *raw_path;         /* as sent, always ends with '/' */
	GPtrArray *segments;    /* decoded path segments of raw_path */
} PageLocation;

/* What the rest of a row tells about an entry. */
typedef struct {
	gint64 mtime;
	guint mtime_precision;
	gboolean have_size;
	guint64 size;
	gboolean size_exact;
} RowInfo;

static void free_entry(gpointer data)
{
	HsmListingEntry *entry = data;

	g_free(entry->name);
	g_free(entry);
}

void hsm_listing_free(HsmListing *listing)
{
	if (!listing)
		return;
	g_ptr_array_unref(listing->entries);
	g_free(listing);
}

gboolean hsm_listing_entry_needs_head(const HsmListingEntry *entry)
{
	return entry->type == HSM_ENTRY_FILE && (!entry->size_exact || entry->mtime < 0);
}

/* Splits a raw URL path on '/', applying RFC 3986 dot-segment removal to the
 * raw segments (so an encoded "%2e%2e" is a name, not a step up), and
 * returns the decoded segments.  *is_dir tells whether it ended with '/'. */
static GPtrArray *decode_path(const char *raw_path, gboolean *is_dir)
{
	GPtrArray *segments = g_ptr_array_new_with_free_func(g_free);
	char **parts = g_strsplit(raw_path, "/", -1);
	guint n = g_strv_length(parts);

	*is_dir = TRUE;
	for (guint i = 0; i < n; i++) {
		const char *part = parts[i];
		gboolean last = i + 1 == n;
		char *segment;
		gsize len;

		if (i == 0 && !*part)
			continue; /* the leading '/' */
		if (!strcmp(part, ".") || !strcmp(part, "..")) {
			if (!strcmp(part, "..") && segments->len)
				g_ptr_array_remove_index(segments, segments->len - 1);
			*is_dir = TRUE;
			continue;
		}
		if (last && !*part) {
			*is_dir = TRUE; /* the trailing '/' */
			break;
		}
		segment = hsm_url_unescape(part, strlen(part), &len);
		/* An encoded NUL empties the segment, which no name check accepts. */
		if (strlen(segment) != len)
			segment[0] = '\0';
		g_ptr_array_add(segments, segment);
		*is_dir = FALSE;
	}
	g_strfreev(parts);
	return segments;
}

static gboolean page_location_init(PageLocation *page, const char *page_url)
{
	CURLU *url = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	gboolean is_dir, ok;

	ok = curl_url_set(url, CURLUPART_URL, page_url, 0) == CURLUE_OK &&
	     curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	     curl_url_get(url, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	     curl_url_get(url, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
	     curl_url_get(url, CURLUPART_PATH, &path, 0) == CURLUE_OK;
	if (ok) {
		page->scheme = g_ascii_strdown(scheme, -1);
		page->host = g_ascii_strdown(host, -1);
		page->port = g_strdup(port);
		page->raw_path = g_str_has_suffix(path, "/") ? g_strdup(path)
							     : g_strconcat(path, "/", NULL);
		page->segments = decode_path(page->raw_path, &is_dir);
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(url);
	return ok;
}

static void page_location_clear(PageLocation *page)
{
	g_free(page->scheme);
	g_free(page->host);
	g_free(page->port);
	g_free(page->raw_path);
	if (page->segments)
		g_ptr_array_unref(page->segments);
}

static gboolean has_scheme(const char *href)
{
	const char *p = href;

	if (!g_ascii_isalpha(*p))
		return FALSE;
	while (g_ascii_isalnum(*p) || *p == '+' || *p == '-' || *p == '.')
		p++;
	return *p == ':';
}

/* The raw path of an absolute link, or NULL when it points to another
 * scheme, host or port than the page. */
static char *same_origin_path(const PageLocation *page, const char *href)
{
	CURLU *url = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *result = NULL;
	char *full = g_str_has_prefix(href, "//") ? g_strconcat(page->scheme, ":", href, NULL)
						  : g_strdup(href);

	if (curl_url_set(url, CURLUPART_URL, full, CURLU_ALLOW_SPACE) == CURLUE_OK &&
	    curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(url, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(url, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
	    curl_url_get(url, CURLUPART_PATH, &path, 0) == CURLUE_OK &&
	    !g_ascii_strcasecmp(scheme, page->scheme) && !g_ascii_strcasecmp(host, page->host) &&
	    !strcmp(port, page->port))
		result = g_strdup(path);
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(url);
	g_free(full);
	return result;
}

/* The name of the direct child of the page that href points to, or NULL for
 * any other link (parent, self, sort links, other hosts, deeper paths).
 * *hostile is set when the link is a child whose name cannot be used. */
static char *child_name_from_href(const PageLocation *page, const char *href_attr,
				  HsmEntryType *type, gboolean *hostile)
{
	g_autofree char *href = g_strstrip(g_strdup(href_attr));
	g_autofree char *raw_path = NULL;
	g_autoptr(GPtrArray) segments = NULL;
	char *fragment = strchr(href, '#');
	const char *name;
	gboolean is_dir;
	guint i;

	*hostile = FALSE;
	if (fragment)
		*fragment = '\0';
	if (!*href || strchr(href, '?'))
		return NULL;
	if (has_scheme(href) || g_str_has_prefix(href, "//"))
		raw_path = same_origin_path(page, href);
	else if (href[0] == '/')
		raw_path = g_strdup(href);
	else
		raw_path = g_strconcat(page->raw_path, href, NULL);
	if (!raw_path)
		return NULL;

	segments = decode_path(raw_path, &is_dir);
	if (segments->len != page->segments->len + 1)
		return NULL;
	for (i = 0; i < page->segments->len; i++)
		if (strcmp(segments->pdata[i], page->segments->pdata[i]))
			return NULL;
	name = segments->pdata[i];
	if (!hsm_name_is_safe(name, strlen(name))) {
		*hostile = TRUE;
		return NULL;
	}
	*type = is_dir ? HSM_ENTRY_DIR : HSM_ENTRY_FILE;
	return g_strdup(name);
}

static const char *const months[] = { "jan", "feb", "mar", "apr", "may", "jun",
				      "jul", "aug", "sep", "oct", "nov", "dec" };

static int month_number(const char *text)
{
	for (int i = 0; i < 12; i++)
		if (!g_ascii_strncasecmp(text, months[i], 3))
			return i + 1;
	return 0;
}

static gint64 unix_time_utc(int year, int month, int day, int hour, int minute, int second)
{
	GDateTime *time = g_date_time_new_utc(year, month, day, hour, minute, second);
	gint64 result;

	if (!time)
		return -1;
	result = g_date_time_to_unix(time);
	g_date_time_unref(time);
	return result;
}

/* The date formats of the servers above: 02-Dec-2026 10:20 (nginx, old
 * Apache), 2026-12-02 10:20 (Apache), 2026-Dec-02 10:20:33 (lighttpd). */
static const char date_pattern[] =
	"(?<dmy>(?<d1>\\d{1,2})-(?<mon1>[A-Za-z]{3})-(?<y1>\\d{4}))"
	"|(?<ymd>(?<y2>\\d{4})-(?<m2>\\d{2})-(?<d2>\\d{2}))"
	"|(?<ymond>(?<y3>\\d{4})-(?<mon3>[A-Za-z]{3})-(?<d3>\\d{2}))";
static const char time_pattern[] = "\\s+(?<h>\\d{1,2}):(?<mi>\\d{2})(?::(?<s>\\d{2}))?";
static const char size_pattern[] =
	"^\\s+(?:(?<dash>-)|(?<num>\\d+(?:\\.\\d+)?)\\s?(?<unit>[KMGTPE]?)(?:i?B)?)(?![\\w.])";

static int named_int(GMatchInfo *match, const char *name)
{
	g_autofree char *text = g_match_info_fetch_named(match, name);

	return text && *text ? atoi(text) : -1;
}

static gboolean named_present(GMatchInfo *match, const char *name)
{
	g_autofree char *text = g_match_info_fetch_named(match, name);

	return text && *text;
}

static gint64 date_from_match(GMatchInfo *match, guint *precision)
{
	int year, month, day, second = named_int(match, "s");

	if (named_present(match, "dmy")) {
		g_autofree char *mon = g_match_info_fetch_named(match, "mon1");

		year = named_int(match, "y1"), month = month_number(mon), day = named_int(match, "d1");
	} else if (named_present(match, "ymd")) {
		year = named_int(match, "y2"), month = named_int(match, "m2");
		day = named_int(match, "d2");
	} else {
		g_autofree char *mon = g_match_info_fetch_named(match, "mon3");

		year = named_int(match, "y3"), month = month_number(mon), day = named_int(match, "d3");
	}
	*precision = second < 0 ? 60 : 1;
	return unix_time_utc(year, month, day, named_int(match, "h"), named_int(match, "mi"),
			     MAX(second, 0));
}

static void parse_size_token(GMatchInfo *match, RowInfo *info)
{
	static const char units[] = "KMGTPE";
	g_autofree char *num = g_match_info_fetch_named(match, "num");
	g_autofree char *unit = g_match_info_fetch_named(match, "unit");
	double value;

	if (!num || !*num)
		return; /* "-": a directory */
	value = g_ascii_strtod(num, NULL);
	if (*unit)
		value *= (double)(1ULL << (10 * (strchr(units, *unit) - units + 1)));
	/* 2^63: a size no off_t holds is no size (and converting a larger
	 * double to an integer is undefined). */
	if (!(value < 9223372036854775808.0))
		return;
	info->have_size = TRUE;
	info->size_exact = !*unit && !strchr(num, '.');
	info->size = (guint64)value;
}

/* Finds "date time size" in the text that follows a link.  The patterns
 * are ASCII and pages are not always valid UTF-8, so the regexes work on
 * bytes (G_REGEX_RAW): in UTF-8 mode, PCRE trusts GLib's promise that the
 * subject is valid and reads past the end of a truncated sequence. */
static void parse_row_text(const char *text, RowInfo *info)
{
	static GRegex *date_re, *size_re;
	g_autoptr(GMatchInfo) match = NULL;
	g_autoptr(GMatchInfo) size_match = NULL;
	int end;

	if (g_once_init_enter(&size_re)) {
		g_autofree char *pattern = g_strconcat("(?:", date_pattern, ")", time_pattern, NULL);

		date_re = g_regex_new(pattern, G_REGEX_OPTIMIZE | G_REGEX_RAW, 0, NULL);
		g_once_init_leave(&size_re,
				  g_regex_new(size_pattern, G_REGEX_OPTIMIZE | G_REGEX_RAW, 0, NULL));
	}
	if (!g_regex_match(date_re, text, 0, &match))
		return;
	if (info->mtime < 0)
		info->mtime = date_from_match(match, &info->mtime_precision);
	g_match_info_fetch_pos(match, 0, NULL, &end);
	if (!info->have_size && g_regex_match(size_re, text + end, 0, &size_match))
		parse_size_token(size_match, info);
}

static gboolean is_element(const xmlNode *node, const char *name)
{
	return node->type == XML_ELEMENT_NODE && !g_ascii_strcasecmp((const char *)node->name, name);
}

static char *get_attr(const xmlNode *node, const char *name)
{
	xmlChar *value = xmlGetProp(node, (const xmlChar *)name);
	char *copy = value ? g_strdup((const char *)value) : NULL;

	xmlFree(value);
	return copy;
}

/* Caddy puts the exact size in data-order (or data-size) and the time in
 * <time datetime="...">. */
static void parse_row_attributes(const xmlNode *node, RowInfo *info)
{
	g_autofree char *order = get_attr(node, "data-order");
	g_autofree char *size = order ? g_steal_pointer(&order) : get_attr(node, "data-size");
	g_autofree char *datetime = get_attr(node, "datetime");

	if (size && g_ascii_isdigit(g_strstrip(size)[0]) && !info->have_size) {
		info->size = g_ascii_strtoull(size, NULL, 10);
		info->have_size = info->size_exact = info->size <= G_MAXINT64;
	}
	if (datetime && info->mtime < 0) {
		g_autoptr(GTimeZone) utc = g_time_zone_new_utc();
		GDateTime *time = g_date_time_new_from_iso8601(g_strstrip(datetime), utc);

		if (time) {
			info->mtime = g_date_time_to_unix(time);
			info->mtime_precision = 1;
			g_date_time_unref(time);
		}
	}
}

/* Appends the text of node and its descendants; parses their attributes. */
static void collect_subtree(const xmlNode *node, GString *text, RowInfo *info)
{
	if (node->type == XML_TEXT_NODE) {
		g_string_append(text, (const char *)node->content);
		return;
	}
	if (node->type != XML_ELEMENT_NODE)
		return;
	parse_row_attributes(node, info);
	for (const xmlNode *child = node->children; child; child = child->next)
		collect_subtree(child, text, info);
}

static const xmlNode *enclosing(const xmlNode *node, const char *name)
{
	for (; node; node = node->parent)
		if (is_element(node, name))
			return node;
	return NULL;
}

/* A table row: everything after the cell holding the link. */
static void row_info_from_table(const xmlNode *link, const xmlNode *row, RowInfo *info)
{
	const xmlNode *cell = link;
	GString *text = g_string_new(NULL);

	while (cell->parent != row)
		cell = cell->parent;
	for (const xmlNode *node = cell->next; node; node = node->next) {
		g_string_append_c(text, ' ');
		collect_subtree(node, text, info);
	}
	parse_row_text(text->str, info);
	g_string_free(text, TRUE);
}

/* A preformatted line: the text after the link, up to the end of the line. */
static void row_info_from_line(const xmlNode *link, RowInfo *info)
{
	GString *text = g_string_new(NULL);

	for (const xmlNode *node = link->next; node; node = node->next) {
		const char *newline;

		collect_subtree(node, text, info);
		newline = strchr(text->str, '\n');
		if (newline) {
			g_string_truncate(text, newline - text->str);
			break;
		}
	}
	parse_row_text(text->str, info);
	g_string_free(text, TRUE);
}

static RowInfo row_info_for_link(const xmlNode *link)
{
	RowInfo info = { .mtime = -1, .mtime_precision = 1 };
	const xmlNode *row = enclosing(link, "tr");

	if (row)
		row_info_from_table(link, row, &info);
	else if (!enclosing(link, "li"))
		row_info_from_line(link, &info);
	return info;
}

/* A name may be linked twice (icon and text); keep what each link knows. */
static void add_entry(GHashTable *by_name, char *name, HsmEntryType type, const RowInfo *info)
{
	HsmListingEntry *entry = g_hash_table_lookup(by_name, name);

	if (!entry) {
		entry = g_new0(HsmListingEntry, 1);
		entry->name = name;
		entry->type = type;
		entry->mtime = -1;
		entry->mtime_precision = 1;
		g_hash_table_insert(by_name, entry->name, entry);
	} else {
		g_free(name);
		if (entry->type != type)
			return;
	}
	if (entry->mtime < 0 && info->mtime >= 0) {
		entry->mtime = info->mtime;
		entry->mtime_precision = info->mtime_precision;
	}
	if (!entry->size_exact && info->have_size && type == HSM_ENTRY_FILE) {
		entry->size = info->size;
		entry->size_exact = info->size_exact;
	}
}

static void collect_links(const xmlNode *node, const PageLocation *page, GHashTable *by_name,
			  guint *refused)
{
	for (; node; node = node->next) {
		if (is_element(node, "a")) {
			g_autofree char *href = get_attr(node, "href");
			HsmEntryType type;
			gboolean hostile;
			char *name = href ? child_name_from_href(page, href, &type, &hostile) : NULL;

			if (name) {
				RowInfo info = row_info_for_link(node);

				add_entry(by_name, name, type, &info);
			} else if (href && hostile) {
				g_warning("listing %s: refusing link to unsafe name '%s'", page->raw_path,
					  href);
				(*refused)++;
			}
		}
		if (node->type == XML_ELEMENT_NODE)
			collect_links(node->children, page, by_name, refused);
	}
}

static gint compare_entries(gconstpointer a, gconstpointer b)
{
	const HsmListingEntry *x = *(HsmListingEntry *const *)a;
	const HsmListingEntry *y = *(HsmListingEntry *const *)b;

	return strcmp(x->name, y->name);
}

/* Pages without a declared charset are read as UTF-8 (what every server
 * above writes), not as HTML's historical Latin-1. */
static const char *page_encoding(const char *html, gsize len, const char *charset)
{
	if (charset && *charset)
		return charset;
	if (g_strstr_len(html, MIN(len, 2048), "charset"))
		return NULL;
	return "UTF-8";
}

HsmListing *hsm_listing_parse(const char *html, gsize len, const char *page_url,
			      const char *charset)
{
	HsmListing *listing = g_new0(HsmListing, 1);
	PageLocation page = { 0 };
	GHashTable *by_name = g_hash_table_new(g_str_hash, g_str_equal);
	htmlDocPtr doc = NULL;
	GHashTableIter iter;
	gpointer entry;

	listing->entries = g_ptr_array_new_with_free_func(free_entry);
	if (!page_location_init(&page, page_url) || len > G_MAXINT)
		goto out;
	doc = htmlReadMemory(html, (int)len, page_url, page_encoding(html, len, charset),
			     HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
				     HTML_PARSE_NONET | HTML_PARSE_COMPACT);
	if (doc)
		collect_links(xmlDocGetRootElement(doc), &page, by_name, &listing->refused);
	g_hash_table_iter_init(&iter, by_name);
	while (g_hash_table_iter_next(&iter, NULL, &entry))
		g_ptr_array_add(listing->entries, entry);
	g_ptr_array_sort(listing->entries, compare_entries);
out:
	if (doc)
		xmlFreeDoc(doc);
	g_hash_table_unref(by_name);
	page_location_clear(&page);
	return listing;
}
