/* Directory index pages: from HTML to a list of entries.
 *
 * Understands the pages of nginx autoindex (exact and rounded sizes), Apache
 * mod_autoindex (plain, FancyIndexing, HTMLTable), lighttpd mod_dirlisting,
 * Caddy browse and python3 -m http.server, and degrades to "names only" for
 * anything else that links to its children.  The name always comes from the
 * link target, never from the (possibly truncated) link text.
 */
#ifndef HSM_LISTING_H
#define HSM_LISTING_H

#include <glib.h>

typedef enum {
	HSM_ENTRY_FILE,
	HSM_ENTRY_DIR,
} HsmEntryType;

typedef struct {
	char *name;             /* decoded, checked by hsm_name_is_safe() */
	HsmEntryType type;
	guint64 size;           /* bytes; only an estimate unless size_exact */
	gboolean size_exact;
	gint64 mtime;           /* Unix time (pages show GMT); -1 if not shown */
	guint mtime_precision;  /* 1 or 60 seconds */
} HsmListingEntry;

typedef struct {
	GPtrArray *entries;     /* of HsmListingEntry *, sorted by name */
	guint refused;          /* links to hostile names that were skipped */
} HsmListing;

/* Parses the index page found at page_url (the URL after redirects).
 * charset is the one the HTTP response declared, or NULL.  Never fails:
 * a page without child links gives an empty listing. */
HsmListing *hsm_listing_parse(const char *html, gsize len, const char *page_url,
			      const char *charset);
void hsm_listing_free(HsmListing *listing);

/* The same, a piece at a time, as the page arrives: the listing is the one
 * hsm_listing_parse() gives for the concatenated pieces.  finish() frees
 * the parser and returns the listing; abandon() frees it (NULL is fine). */
typedef struct HsmListingParser HsmListingParser;

HsmListingParser *hsm_listing_parser_new(const char *page_url, const char *charset);
void hsm_listing_parser_feed(HsmListingParser *parser, const char *html, gsize len);
HsmListing *hsm_listing_parser_finish(HsmListingParser *parser);
void hsm_listing_parser_abandon(HsmListingParser *parser);

/* TRUE when the entry needs a HEAD request for an exact size or mtime. */
gboolean hsm_listing_entry_needs_head(const HsmListingEntry *entry);

#endif
