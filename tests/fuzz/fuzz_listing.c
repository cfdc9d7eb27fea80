/* fuzz_listing: hsm_listing_parse() on hostile index pages.
 *
 * The listing is the one input a remote server fully controls: every byte
 * of the HTML, its declared charset and (through redirects) the URL the page
 * is resolved against.  The first input byte picks the URL, the second the
 * charset, the rest is the page.  Beyond memory errors, the result must keep
 * listing.h's promises: safe names, sorted and unique, exact sizes an off_t
 * can hold; and the page parsed in pieces gives the same listing.
 */
#include "fuzz.h"
#include "listing.h"
#include "url.h"

#include <libxml/xmlerror.h>

static const char *const page_urls[] = {
	"http://h/",
	"http://h/a/b/",
	"https://h:8443/pub/%20x/",
	"http://h/a%2fb/c",     /* no trailing '/': redirects are not always tidy */
};

static const char *const charsets[] = {
	NULL, "utf-8", "iso-8859-1", "windows-1252", "x-no-such-charset\x01\xff",
	"", "UTF-16",
};

/* libxml2 prints some errors (bytes invalid in the declared charset) even
 * with HTML_PARSE_NOERROR: thousands of lines a minute otherwise. */
static void quiet_xml_error(void *data, const char *format, ...)
{
	(void)data, (void)format;
}

static void quiet_xml_structured_error(void *data, xmlErrorPtr error)
{
	(void)data, (void)error;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_silence_glib();
	xmlSetGenericErrorFunc(NULL, quiet_xml_error);
	xmlSetStructuredErrorFunc(NULL, quiet_xml_structured_error);
	return 0;
}

/* Listings are parsed as their pages arrive, cut wherever the network cut
 * them: a page cut in pieces (their size derived from the input) must give
 * the listing the whole page gives. */
static HsmListing *parse_in_pieces(const char *html, size_t size, const char *page_url,
				   const char *charset)
{
	HsmListingParser *parser = hsm_listing_parser_new(page_url, charset);
	size_t piece = 1 + (size * 2654435761u >> 5) % 3000;

	for (size_t done = 0; done < size; done += MIN(piece, size - done))
		hsm_listing_parser_feed(parser, html + done, MIN(piece, size - done));
	return hsm_listing_parser_finish(parser);
}

static void check_same(const HsmListing *a, const HsmListing *b)
{
	FUZZ_CHECK(a->entries->len == b->entries->len && a->refused == b->refused);
	for (guint i = 0; i < a->entries->len; i++) {
		const HsmListingEntry *x = a->entries->pdata[i], *y = b->entries->pdata[i];

		FUZZ_CHECK(!strcmp(x->name, y->name) && x->type == y->type);
		FUZZ_CHECK(x->size == y->size && x->size_exact == y->size_exact);
		FUZZ_CHECK(x->mtime == y->mtime && x->mtime_precision == y->mtime_precision);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *page_url = page_urls[fuzz_byte(&data, &size) % G_N_ELEMENTS(page_urls)];
	const char *charset = charsets[fuzz_byte(&data, &size) % G_N_ELEMENTS(charsets)];
	HsmListing *listing = hsm_listing_parse((const char *)data, size, page_url, charset);
	HsmListing *in_pieces = parse_in_pieces((const char *)data, size, page_url, charset);
	const HsmListingEntry *previous = NULL;

	FUZZ_CHECK(listing && listing->entries);
	for (guint i = 0; i < listing->entries->len; i++) {
		const HsmListingEntry *entry = listing->entries->pdata[i];

		FUZZ_CHECK(entry->name && hsm_name_is_safe(entry->name, strlen(entry->name)));
		FUZZ_CHECK(entry->type == HSM_ENTRY_FILE || entry->type == HSM_ENTRY_DIR);
		FUZZ_CHECK(!previous || strcmp(previous->name, entry->name) < 0);
		FUZZ_CHECK(!entry->size_exact || entry->size <= G_MAXINT64);
		FUZZ_CHECK(entry->mtime_precision == 1 || entry->mtime_precision == 60);
		previous = entry;
	}
	check_same(listing, in_pieces);
	hsm_listing_free(listing);
	hsm_listing_free(in_pieces);
	return 0;
}
