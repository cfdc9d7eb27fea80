/* Directory index pages: see listing.h.
 *
 * The page is parsed with libxml2's forgiving HTML parser, as SAX events.
 * Each <a href> that resolves to a direct child of the page's URL is an
 * entry; its size and mtime come from the rest of its table row (<tr>), or
 * from the text that follows it on the same line (<pre> listings), or are
 * unknown (<li> lists).
 */
#include "listing.h"
#include "url.h"

#include <curl/curl.h>
#include <libxml/HTMLparser.h>
#include <libxml/parserInternals.h>
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
	if (!*unit && !strchr(num, '.')) {
		/* Exact: as an integer (a double rounds sizes past 2^53). */
		guint64 exact;

		if (!g_ascii_string_to_unsigned(num, 10, 0, G_MAXINT64, &exact, NULL))
			return;
		info->have_size = info->size_exact = TRUE;
		info->size = exact;
		return;
	}
	value = g_ascii_strtod(num, NULL);
	if (*unit)
		value *= (double)(1ULL << (10 * (strchr(units, *unit) - units + 1)));
	/* 2^63: a size no off_t holds is no size (and converting a larger
	 * double to an integer is undefined). */
	if (!(value < 9223372036854775808.0))
		return;
	info->have_size = TRUE;
	info->size_exact = FALSE;
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

/* Caddy puts the exact size in data-order (or data-size) and the time in
 * <time datetime="...">. */
static void parse_row_attributes(const xmlChar **attrs, RowInfo *info)
{
	const char *size = NULL, *datetime = NULL;

	for (; attrs && attrs[0]; attrs += 2) {
		const char *name = (const char *)attrs[0], *value = (const char *)attrs[1];

		if (!value)
			continue;
		if (!g_ascii_strcasecmp(name, "data-order") ||
		    (!size && !g_ascii_strcasecmp(name, "data-size")))
			size = value;
		else if (!g_ascii_strcasecmp(name, "datetime"))
			datetime = value;
	}
	while (size && g_ascii_isspace(*size))
		size++;
	if (size && g_ascii_isdigit(*size) && !info->have_size) {
		info->size = g_ascii_strtoull(size, NULL, 10);
		info->have_size = info->size_exact = info->size <= G_MAXINT64;
	}
	if (datetime && info->mtime < 0) {
		g_autoptr(GTimeZone) utc = g_time_zone_new_utc();
		g_autofree char *stripped = g_strstrip(g_strdup(datetime));
		GDateTime *time = g_date_time_new_from_iso8601(stripped, utc);

		if (time) {
			info->mtime = g_date_time_to_unix(time);
			info->mtime_precision = 1;
			g_date_time_unref(time);
		}
	}
}

static void add_entry(GPtrArray *links, char *name, HsmEntryType type, const RowInfo *info)
{
	HsmListingEntry *entry = g_new0(HsmListingEntry, 1);

	entry->name = name;
	entry->type = type;
	entry->mtime = info->mtime;
	entry->mtime_precision = info->mtime_precision;
	if (info->have_size && type == HSM_ENTRY_FILE) {
		entry->size = info->size;
		entry->size_exact = info->size_exact;
	}
	g_ptr_array_add(links, entry);
}

/* What a later link to the same name adds to what the first one knew. */
static void merge_entry(HsmListingEntry *entry, const HsmListingEntry *other)
{
	if (entry->type != other->type)
		return;
	if (entry->mtime < 0 && other->mtime >= 0) {
		entry->mtime = other->mtime;
		entry->mtime_precision = other->mtime_precision;
	}
	if (!entry->size_exact && (other->size_exact || (!entry->size && other->size))) {
		entry->size = other->size;
		entry->size_exact = other->size_exact;
	}
}

static gint compare_entries(gconstpointer a, gconstpointer b)
{
	const HsmListingEntry *x = *(HsmListingEntry *const *)a;
	const HsmListingEntry *y = *(HsmListingEntry *const *)b;

	return strcmp(x->name, y->name);
}

/* A name may be linked twice (icon and text): one entry per name, with
 * what each link knew.  The sort is stable, so the first link wins. */
static void merge_links(GPtrArray *links)
{
	guint kept = 0;

	g_ptr_array_sort(links, compare_entries);
	for (guint i = 0; i < links->len; i++) {
		HsmListingEntry *entry = links->pdata[i];

		if (kept && !strcmp(((HsmListingEntry *)links->pdata[kept - 1])->name, entry->name)) {
			merge_entry(links->pdata[kept - 1], entry);
			free_entry(entry);
		} else {
			links->pdata[kept++] = entry;
		}
	}
	links->len = kept;
}

/* ---- The page, read as a stream of SAX events ----
 *
 * No document tree is built (a 1,000,000-entry page would take ~1 GB as
 * one).  A link's row is what follows it: in a table, the cells after the
 * one holding the link, up to the end of the row; elsewhere, the text after
 * the link up to the end of its line (or of its parent element, or the
 * next link); inside <li>, nothing.
 */

/* A few links may share a table row (an icon link, then the name). */
#define MAX_LINKS_PER_ROW 4

typedef enum {
	ELEMENT_OTHER,
	ELEMENT_TR,
	ELEMENT_LI,
} ElementKind;

/* A link whose row is being read. */
typedef struct {
	char *name;
	HsmEntryType type;
	RowInfo info;
	guint start_at;          /* collect once the element at this depth closed */
	guint end_at;            /* the row ends when the element at this depth closes */
	gboolean collecting;
	GString *text;
} PendingRow;

typedef struct {
	const PageLocation *page;
	GPtrArray *links;        /* an entry per link, in page order */
	guint *refused;
	GArray *open;            /* ElementKind of each open element */
	PendingRow table[MAX_LINKS_PER_ROW];
	guint table_rows;        /* links of the current table row */
	PendingRow line;         /* the <pre>-style link, when line.name */
} PageReader;

static void pending_finish(PageReader *reader, PendingRow *row)
{
	if (!row->name)
		return;
	if (row->text)
		parse_row_text(row->text->str, &row->info);
	add_entry(reader->links, row->name, row->type, &row->info);
	if (row->text)
		g_string_free(row->text, TRUE);
	memset(row, 0, sizeof(*row));
}

static void pending_start(PendingRow *row, char *name, HsmEntryType type, guint start_at,
			  guint end_at)
{
	*row = (PendingRow){ .name = name, .type = type, .start_at = start_at, .end_at = end_at,
			     .text = g_string_new(NULL) };
	row->info = (RowInfo){ .mtime = -1, .mtime_precision = 1 };
}

static void finish_table_rows(PageReader *reader)
{
	for (guint i = 0; i < reader->table_rows; i++)
		pending_finish(reader, &reader->table[i]);
	reader->table_rows = 0;
}

/* Depth of the innermost open element of that kind, or -1. */
static int innermost(PageReader *reader, ElementKind kind)
{
	for (guint i = reader->open->len; i-- > 0;)
		if (g_array_index(reader->open, ElementKind, i) == kind)
			return (int)i;
	return -1;
}

static const char *attr_value(const xmlChar **attrs, const char *name)
{
	for (; attrs && attrs[0]; attrs += 2)
		if (!g_ascii_strcasecmp((const char *)attrs[0], name))
			return (const char *)attrs[1];
	return NULL;
}

/* A link was opened at depth `depth`: a child of the page starts a row. */
static void on_link(PageReader *reader, const xmlChar **attrs, guint depth)
{
	const char *href = attr_value(attrs, "href");
	int tr = innermost(reader, ELEMENT_TR);
	HsmEntryType type;
	gboolean hostile;
	char *name = href ? child_name_from_href(reader->page, href, &type, &hostile) : NULL;

	if (!name) {
		if (href && hostile) {
			g_warning("listing %s: refusing link to unsafe name '%s'",
				  reader->page->raw_path, href);
			(*reader->refused)++;
		}
		return;
	}
	if (tr >= 0 && reader->table_rows < MAX_LINKS_PER_ROW) {
		pending_start(&reader->table[reader->table_rows++], name, type, (guint)tr + 1,
			      (guint)tr);
	} else if (tr >= 0 || innermost(reader, ELEMENT_LI) >= 0) {
		RowInfo none = { .mtime = -1, .mtime_precision = 1 };

		add_entry(reader->links, name, type, &none);
	} else {
		pending_start(&reader->line, name, type, depth, depth - 1);
	}
}

static void each_collecting(PageReader *reader, void (*fn)(PendingRow *row, gconstpointer data),
			    gconstpointer data)
{
	for (guint i = 0; i < reader->table_rows; i++)
		if (reader->table[i].collecting)
			fn(&reader->table[i], data);
	if (reader->line.name && reader->line.collecting)
		fn(&reader->line, data);
}

/* An element starts: its attributes may tell, and its text is a new
 * word (cells are not run together: "2.4M" "-" is not "2.4M-"). */
static void row_element(PendingRow *row, gconstpointer attrs)
{
	parse_row_attributes((const xmlChar **)attrs, &row->info);
	g_string_append_c(row->text, ' ');
}

static void on_start_element(void *user, const xmlChar *tag, const xmlChar **attrs)
{
	PageReader *reader = user;
	const char *name = (const char *)tag;
	ElementKind kind = !g_ascii_strcasecmp(name, "tr")   ? ELEMENT_TR
			   : !g_ascii_strcasecmp(name, "li") ? ELEMENT_LI
							     : ELEMENT_OTHER;
	gboolean link = !g_ascii_strcasecmp(name, "a");

	if (kind == ELEMENT_TR)
		finish_table_rows(reader);
	if (link)
		pending_finish(reader, &reader->line);
	each_collecting(reader, row_element, attrs);
	g_array_append_val(reader->open, kind);
	if (link)
		on_link(reader, attrs, reader->open->len - 1);
}

static void on_end_element(void *user, const xmlChar *tag)
{
	PageReader *reader = user;
	guint depth;

	(void)tag;
	if (!reader->open->len)
		return;
	depth = reader->open->len - 1;
	g_array_set_size(reader->open, depth);
	for (guint i = 0; i < reader->table_rows; i++)
		if (depth == reader->table[i].start_at)
			reader->table[i].collecting = TRUE;
	if (reader->table_rows && depth <= reader->table[0].end_at)
		finish_table_rows(reader);
	if (reader->line.name && depth == reader->line.start_at)
		reader->line.collecting = TRUE;
	else if (reader->line.name && depth <= reader->line.end_at)
		pending_finish(reader, &reader->line);
}

typedef struct {
	const char *text;
	gsize len;
} Chars;

static void row_text(PendingRow *row, gconstpointer data)
{
	const Chars *chars = data;

	g_string_append_len(row->text, chars->text, (gssize)chars->len);
}

static void on_characters(void *user, const xmlChar *text, int len)
{
	PageReader *reader = user;
	Chars chars = { (const char *)text, (gsize)MAX(len, 0) };
	const char *newline;

	for (guint i = 0; i < reader->table_rows; i++)
		if (reader->table[i].collecting)
			row_text(&reader->table[i], &chars);
	if (!reader->line.name || !reader->line.collecting)
		return;
	newline = memchr(chars.text, '\n', chars.len);
	if (newline)
		chars.len = newline - chars.text;
	row_text(&reader->line, &chars);
	if (newline)
		pending_finish(reader, &reader->line);
}

/* Feeds the page in pieces: the parser's input buffer stays small. */
#define PARSE_CHUNK (256 * 1024)

/* A parser for a page in encoding (NULL: as the page's own <meta> says),
 * or NULL if libxml2 cannot make one. */
static htmlParserCtxtPtr start_page(PageReader *reader, const char *page_url,
				    const char *encoding)
{
	static htmlSAXHandler sax = {
		.startElement = on_start_element,
		.endElement = on_end_element,
		.characters = on_characters,
		.ignorableWhitespace = on_characters,
	};
	htmlParserCtxtPtr ctxt =
		htmlCreatePushParserCtxt(&sax, reader, NULL, 0, page_url, XML_CHAR_ENCODING_NONE);
	xmlCharEncodingHandlerPtr handler = encoding ? xmlFindCharEncodingHandler(encoding) : NULL;

	if (!ctxt)
		return NULL;
	htmlCtxtUseOptions(ctxt, HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
					 HTML_PARSE_NONET | HTML_PARSE_COMPACT);
	if (handler)
		xmlSwitchToEncoding(ctxt, handler);
	else if (encoding)
		xmlSwitchEncoding(ctxt, XML_CHAR_ENCODING_UTF8); /* unknown: as UTF-8 */
	return ctxt;
}

/* The length of html up to its last '<' if that tag is not complete in
 * it, else len. */
static gsize before_unfinished_tag(const char *html, gsize len)
{
	for (gsize i = len; i > 0; i--) {
		if (html[i - 1] == '>')
			return len;
		if (html[i - 1] == '<')
			return i - 1;
	}
	return len;
}

/* Gives html to the parser in pieces of at most PARSE_CHUNK, each ending
 * before a tag it does not complete: libxml2 (2.9) takes everything after
 * a <style> or <script> whose end tag straddles two pieces as its text, so
 * a network that cut a page there would empty its listing.  Returns how
 * much was used; the rest (an unfinished tag) waits for more unless
 * at_end.  A tag longer than a piece is cut all the same. */
static gsize feed_page(htmlParserCtxtPtr ctxt, const char *html, gsize len, gboolean at_end)
{
	gsize done = 0;

	while (done < len && !ctxt->disableSAX) {
		gsize piece = MIN(len - done, PARSE_CHUNK);
		gsize cut = before_unfinished_tag(html + done, piece);

		if (cut == 0 && done + piece == len && !at_end)
			return done;
		if (cut == 0)
			cut = piece;
		htmlParseChunk(ctxt, html + done, (int)cut, 0);
		done += cut;
	}
	return len; /* all of it, or the parser stopped and needs no more */
}

/* FALSE when the page had bytes its encoding does not define (libxml2
 * then stops converting: the rest of the page is lost). */
static gboolean end_page(PageReader *reader, htmlParserCtxtPtr ctxt)
{
	gboolean ok = TRUE;

	if (ctxt) {
		htmlParseChunk(ctxt, NULL, 0, 1);
		ok = ctxt->errNo != XML_ERR_INVALID_ENCODING;
		htmlFreeParserCtxt(ctxt);
	}
	finish_table_rows(reader);
	pending_finish(reader, &reader->line);
	return ok;
}

static gboolean read_page(PageReader *reader, const char *html, gsize len, const char *page_url,
			  const char *encoding)
{
	htmlParserCtxtPtr ctxt = start_page(reader, page_url, encoding);

	if (ctxt)
		feed_page(ctxt, html, len, TRUE);
	return end_page(reader, ctxt);
}

static gboolean is_utf8(const char *encoding)
{
	return !g_ascii_strcasecmp(encoding, "utf-8") || !g_ascii_strcasecmp(encoding, "utf8");
}

/* Where a page's own charset declaration (<meta>) is looked for. */
#define ENCODING_SNIFF 2048

/* Pages without a declared charset are read as UTF-8 (what every server
 * above writes), not as HTML's historical Latin-1. */
static const char *page_encoding(const char *html, gsize len, const char *charset)
{
	if (charset && *charset)
		return charset;
	if (g_strstr_len(html, MIN(len, ENCODING_SNIFF), "charset"))
		return NULL;
	return "UTF-8";
}

struct HsmListingParser {
	HsmListing *listing;
	PageLocation page;
	PageReader reader;
	char *page_url;
	char *charset;
	gboolean located;        /* page_url could be read: else no entries */
	gboolean started;        /* the encoding is chosen */
	const char *encoding;
	htmlParserCtxtPtr ctxt;  /* NULL before start, or if libxml2 failed */
	GByteArray *page_bytes;  /* all fed so far, for a re-read */
	GByteArray *unfed;       /* an unfinished tag, for the next piece */
};

HsmListingParser *hsm_listing_parser_new(const char *page_url, const char *charset)
{
	HsmListingParser *parser = g_new0(HsmListingParser, 1);

	parser->listing = g_new0(HsmListing, 1);
	parser->listing->entries = g_ptr_array_new_with_free_func(free_entry);
	parser->reader = (PageReader){ .page = &parser->page, .links = parser->listing->entries,
				       .refused = &parser->listing->refused,
				       .open = g_array_new(FALSE, FALSE, sizeof(ElementKind)) };
	parser->page_url = g_strdup(page_url);
	parser->charset = g_strdup(charset);
	parser->located = page_location_init(&parser->page, page_url);
	parser->page_bytes = g_byte_array_new();
	parser->unfed = g_byte_array_new();
	return parser;
}

static void feed_parser(HsmListingParser *parser, const char *html, gsize len, gboolean at_end)
{
	GByteArray *unfed = parser->unfed;
	gsize used;

	if (!parser->ctxt)
		return;
	if (!unfed->len) {
		used = feed_page(parser->ctxt, html, len, at_end);
		g_byte_array_append(unfed, (const guint8 *)html + used, len - used);
		return;
	}
	g_byte_array_append(unfed, (const guint8 *)html, len);
	used = feed_page(parser->ctxt, (const char *)unfed->data, unfed->len, at_end);
	g_byte_array_remove_range(unfed, 0, used);
}

/* Only a page read as UTF-8 is parsed as it arrives; see read_whole(). */
static void start(HsmListingParser *parser)
{
	GByteArray *bytes = parser->page_bytes;
	const char *html = bytes->len ? (const char *)bytes->data : "";

	parser->started = TRUE;
	parser->encoding = page_encoding(html, bytes->len, parser->charset);
	if (parser->encoding && is_utf8(parser->encoding)) {
		parser->ctxt = start_page(&parser->reader, parser->page_url, parser->encoding);
		feed_parser(parser, html, bytes->len, FALSE);
	}
}

void hsm_listing_parser_feed(HsmListingParser *parser, const char *html, gsize len)
{
	if (!parser->located)
		return;
	g_byte_array_append(parser->page_bytes, (const guint8 *)html, len);
	if (!parser->started) {
		if (parser->page_bytes->len >= ENCODING_SNIFF)
			start(parser);
	} else {
		feed_parser(parser, html, len, FALSE);
	}
}

static void parser_free(HsmListingParser *parser)
{
	g_array_unref(parser->reader.open);
	page_location_clear(&parser->page);
	g_byte_array_unref(parser->page_bytes);
	g_byte_array_unref(parser->unfed);
	g_free(parser->page_url);
	g_free(parser->charset);
	g_free(parser);
}

/* The page parsed in one go.  libxml2's recovery from bytes its encoding
 * does not define depends on where the pieces were cut (names could change
 * from one reading to the next), so pages other than valid UTF-8 are read
 * only whole.  An encoding other than UTF-8 stops at such a byte, losing the
 * rest of the page: the page is read again as Latin-1, which defines every
 * byte (names come from percent-encoded links anyway). */
static void read_whole(HsmListingParser *parser)
{
	GByteArray *bytes = parser->page_bytes;
	const char *html = bytes->len ? (const char *)bytes->data : "";
	const char *encoding = parser->encoding;

	for (int round = 0; round < 2; round++) {
		g_ptr_array_set_size(parser->listing->entries, 0);
		parser->listing->refused = 0;
		g_array_set_size(parser->reader.open, 0);
		if (read_page(&parser->reader, html, bytes->len, parser->page_url, encoding) ||
		    !encoding || is_utf8(encoding))
			return;
		g_warning("listing %s: bytes that are not %s; read as ISO-8859-1",
			  parser->page_url, encoding);
		encoding = "ISO-8859-1";
	}
}

HsmListing *hsm_listing_parser_finish(HsmListingParser *parser)
{
	HsmListing *listing = parser->listing;

	if (parser->located) {
		GByteArray *bytes = parser->page_bytes;
		gboolean streamed = FALSE;

		if (!parser->started)
			start(parser);
		if (parser->ctxt) {
			feed_parser(parser, "", 0, TRUE);
			streamed = end_page(&parser->reader, g_steal_pointer(&parser->ctxt)) &&
				   (!bytes->len ||
				    g_utf8_validate((const char *)bytes->data, bytes->len, NULL));
		}
		if (!streamed)
			read_whole(parser);
	}
	merge_links(listing->entries);
	parser_free(parser);
	return listing;
}

void hsm_listing_parser_abandon(HsmListingParser *parser)
{
	if (!parser)
		return;
	if (parser->ctxt)
		htmlFreeParserCtxt(parser->ctxt);
	hsm_listing_free(parser->listing);
	parser_free(parser);
}

HsmListing *hsm_listing_parse(const char *html, gsize len, const char *page_url,
			      const char *charset)
{
	HsmListingParser *parser = hsm_listing_parser_new(page_url, charset);

	hsm_listing_parser_feed(parser, html, len);
	return hsm_listing_parser_finish(parser);
}
