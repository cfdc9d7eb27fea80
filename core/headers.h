/* Values of HTTP response headers, as servers send them (untrusted). */
#ifndef HSM_HEADERS_H
#define HSM_HEADERS_H

#include <glib.h>

/* "bytes first-last/total" (total may be "*") of a 206.  FALSE unless both
 * numbers are there and first <= last < G_MAXUINT64. */
gboolean hsm_content_range_parse(const char *value, guint64 *first, guint64 *last);

/* The total of "bytes .../total"; G_MAXUINT64 when absent, "*" or not a
 * number. */
guint64 hsm_content_range_total(const char *value);

/* Seconds of a numeric Retry-After (at most a day), or -1 (dates are not
 * worth honouring: a retry waits 30 s at most). */
gint64 hsm_retry_after_parse(const char *value);

/* How long a response may be used without asking again, from a
 * Cache-Control value: max-age in seconds (at most a year), 0 for no-cache
 * or no-store, -1 when it says neither. */
#define HSM_MAX_AGE_LIMIT (365 * 86400)
gint64 hsm_cache_control_max_age(const char *value);

/* Seconds of an Age header (how long a cache has held the response), at
 * most HSM_MAX_AGE_LIMIT; 0 when absent or not a number. */
gint64 hsm_age_parse(const char *value);

/* unix_time as an HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"),
 * independent of the locale; NULL when out of range. */
char *hsm_http_date_format(gint64 unix_time);

/* The charset parameter of a Content-Type, or NULL. */
char *hsm_content_type_charset(const char *value);

#endif
