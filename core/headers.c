/* Response header values: see headers.h.  Every number is checked to be
 * digits that fit, since a hostile server chooses them. */
#include "headers.h"

#include <string.h>

/* Parses the decimal number at *p (digits only, no sign, no overflow). */
static gboolean parse_number(const char **p, guint64 *value)
{
	guint64 n = 0;

	if (!g_ascii_isdigit(**p))
		return FALSE;
	for (; g_ascii_isdigit(**p); (*p)++) {
		guint digit = **p - '0';

		if (n > (G_MAXUINT64 - digit) / 10)
			return FALSE;
		n = n * 10 + digit;
	}
	*value = n;
	return TRUE;
}

gboolean hsm_content_range_parse(const char *value, guint64 *first, guint64 *last)
{
	const char *p = value;

	if (!p || g_ascii_strncasecmp(p, "bytes ", 6))
		return FALSE;
	p += 6;
	if (!parse_number(&p, first) || *p++ != '-' || !parse_number(&p, last) || *p != '/')
		return FALSE;
	return *first <= *last && *last < G_MAXUINT64;
}

guint64 hsm_content_range_total(const char *value)
{
	const char *slash = value ? strrchr(value, '/') : NULL;
	guint64 total;

	if (!slash)
		return G_MAXUINT64;
	slash++;
	if (!parse_number(&slash, &total) || *slash)
		return G_MAXUINT64;
	return total;
}

gint64 hsm_retry_after_parse(const char *value)
{
	guint64 seconds;

	if (!value || !parse_number(&value, &seconds) || *value)
		return -1;
	return (gint64)MIN(seconds, 86400u);
}

gint64 hsm_age_parse(const char *value)
{
	guint64 seconds;
	const char *p = value;

	if (!p)
		return 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!parse_number(&p, &seconds))
		return 0;
	return (gint64)MIN(seconds, (guint64)HSM_MAX_AGE_LIMIT);
}

char *hsm_http_date_format(gint64 unix_time)
{
	static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	g_autoptr(GDateTime) time = g_date_time_new_from_unix_utc(unix_time);

	if (!time || g_date_time_get_year(time) > 9999)
		return NULL;
	return g_strdup_printf("%s, %02d %s %04d %02d:%02d:%02d GMT",
			       days[g_date_time_get_day_of_week(time) % 7],
			       g_date_time_get_day_of_month(time),
			       months[g_date_time_get_month(time) - 1], g_date_time_get_year(time),
			       g_date_time_get_hour(time), g_date_time_get_minute(time),
			       g_date_time_get_second(time));
}

/* Whether directive (up to its end, exclusive) is name, any case. */
static gboolean directive_is(const char *directive, const char *end, const char *name)
{
	gsize len = strlen(name);

	return (gsize)(end - directive) >= len && !g_ascii_strncasecmp(directive, name, len) &&
	       (directive + len == end || directive[len] == '=' || directive[len] == ' ');
}

static gint64 directive_seconds(const char *directive, const char *end)
{
	const char *p = memchr(directive, '=', (gsize)(end - directive));
	guint64 seconds;

	if (!p)
		return -1;
	p++;
	if (*p == '"')
		p++;
	if (!parse_number(&p, &seconds) || p > end)
		return -1;
	return (gint64)MIN(seconds, (guint64)HSM_MAX_AGE_LIMIT);
}

gint64 hsm_cache_control_max_age(const char *value)
{
	gint64 max_age = -1;

	for (const char *p = value; p && *p;) {
		const char *end;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		end = p + strcspn(p, ",");
		if (directive_is(p, end, "no-cache") || directive_is(p, end, "no-store"))
			return 0;
		if (directive_is(p, end, "max-age"))
			max_age = directive_seconds(p, end);
		p = end;
	}
	return max_age;
}

char *hsm_content_type_charset(const char *value)
{
	const char *param = value ? strstr(value, "charset=") : NULL;
	char *charset;

	if (!param)
		return NULL;
	param += 8;
	if (*param == '"')
		param++;
	charset = g_strdup(param);
	g_strdelimit(charset, "; \"", '\0');
	if (!*charset) {
		g_free(charset);
		return NULL;
	}
	return charset;
}
