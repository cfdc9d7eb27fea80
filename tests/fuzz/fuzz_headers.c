/* fuzz_headers: the response header values of core/headers.h.
 *
 * A hostile or broken server chooses every byte of Content-Range,
 * Retry-After, Cache-Control, Age and Content-Type; a range accepted with first > last, or a
 * total that overflowed, would make the fetcher write outside the range it
 * asked for.  Input: the header value (curl hands over NUL-free strings, so
 * the value ends at the first NUL).
 */
#include "fuzz.h"
#include "headers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_silence_glib();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *value = fuzz_string(&data, &size);
	guint64 first = G_MAXUINT64, last = 0;
	gint64 seconds;
	char *charset;

	if (hsm_content_range_parse(value, &first, &last))
		FUZZ_CHECK(first <= last && last < G_MAXUINT64);
	(void)hsm_content_range_total(value);
	seconds = hsm_retry_after_parse(value);
	FUZZ_CHECK(seconds >= -1 && seconds <= 86400);
	seconds = hsm_cache_control_max_age(value);
	FUZZ_CHECK(seconds >= -1 && seconds <= HSM_MAX_AGE_LIMIT);
	seconds = hsm_age_parse(value);
	FUZZ_CHECK(seconds >= 0 && seconds <= HSM_MAX_AGE_LIMIT);
	charset = hsm_content_type_charset(value);
	if (charset)
		FUZZ_CHECK(*charset && !strpbrk(charset, "; \""));
	g_free(charset);
	g_free(value);
	return 0;
}
