/* Sorted interval set over byte offsets; see rangemap.h. */
#include "rangemap.h"

#include <errno.h>
#include <stdlib.h>

#define RANGE(map, i) g_array_index((map)->ranges, HsmRange, (i))

void hsm_range_map_init(HsmRangeMap *map)
{
	map->ranges = g_array_new(FALSE, FALSE, sizeof(HsmRange));
}

void hsm_range_map_clear(HsmRangeMap *map)
{
	if (map->ranges)
		g_array_free(map->ranges, TRUE);
	map->ranges = NULL;
}

void hsm_range_map_copy(HsmRangeMap *to, const HsmRangeMap *from)
{
	hsm_range_map_init(to);
	g_array_append_vals(to->ranges, from->ranges->data, from->ranges->len);
}

/* Index of the first range whose end is >= offset (ranges touching offset). */
static guint first_ending_at_or_after(const HsmRangeMap *map, guint64 offset)
{
	guint lo = 0, hi = map->ranges->len;

	while (lo < hi) {
		guint mid = lo + (hi - lo) / 2;

		if (RANGE(map, mid).end < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void hsm_range_map_add(HsmRangeMap *map, guint64 start, guint64 end)
{
	guint first, last;
	HsmRange merged = { start, end };

	if (start >= end)
		return;
	first = first_ending_at_or_after(map, start);
	last = first;
	while (last < map->ranges->len && RANGE(map, last).start <= end) {
		merged.start = MIN(merged.start, RANGE(map, last).start);
		merged.end = MAX(merged.end, RANGE(map, last).end);
		last++;
	}
	if (last > first)
		g_array_remove_range(map->ranges, first, last - first);
	g_array_insert_val(map->ranges, first, merged);
}

void hsm_range_map_remove(HsmRangeMap *map, guint64 start, guint64 end)
{
	guint i;

	if (start >= end)
		return;
	i = first_ending_at_or_after(map, start + 1);
	while (i < map->ranges->len && RANGE(map, i).start < end) {
		HsmRange r = RANGE(map, i);

		g_array_remove_index(map->ranges, i);
		if (r.end > end) {
			HsmRange tail = { end, r.end };

			g_array_insert_val(map->ranges, i, tail);
		}
		if (r.start < start) {
			HsmRange head = { r.start, start };

			g_array_insert_val(map->ranges, i, head);
			i++;
		}
		if (r.end > end)
			break;
	}
}

guint64 hsm_range_map_first_missing(const HsmRangeMap *map, guint64 start, guint64 end)
{
	guint i = first_ending_at_or_after(map, start + 1);

	if (start >= end)
		return end;
	if (i < map->ranges->len && RANGE(map, i).start <= start)
		return MIN(RANGE(map, i).end, end);
	return start;
}

gboolean hsm_range_map_contains(const HsmRangeMap *map, guint64 start, guint64 end)
{
	return hsm_range_map_first_missing(map, start, end) >= end;
}

guint64 hsm_range_map_next_present(const HsmRangeMap *map, guint64 start)
{
	guint i = first_ending_at_or_after(map, start + 1);

	if (i >= map->ranges->len)
		return G_MAXUINT64;
	return MAX(RANGE(map, i).start, start);
}

guint64 hsm_range_map_total(const HsmRangeMap *map)
{
	guint64 total = 0;

	for (guint i = 0; i < map->ranges->len; i++)
		total += RANGE(map, i).end - RANGE(map, i).start;
	return total;
}

guint hsm_range_map_count(const HsmRangeMap *map)
{
	return map->ranges->len;
}

char *hsm_range_map_to_string(const HsmRangeMap *map)
{
	GString *text = g_string_new(NULL);

	for (guint i = 0; i < map->ranges->len; i++)
		g_string_append_printf(text, "%s%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
				       i ? "," : "", RANGE(map, i).start, RANGE(map, i).end);
	return g_string_free(text, FALSE);
}

static gboolean parse_offset(const char *text, char **rest, guint64 *out)
{
	if (!g_ascii_isdigit(*text))
		return FALSE;
	errno = 0;
	*out = g_ascii_strtoull(text, rest, 10);
	return errno == 0;
}

gboolean hsm_range_map_parse(HsmRangeMap *map, const char *text)
{
	HsmRangeMap parsed;
	const char *p = text;

	hsm_range_map_init(&parsed);
	while (*p) {
		guint64 start, end;
		char *rest;

		if (!parse_offset(p, &rest, &start) || *rest != '-' ||
		    !parse_offset(rest + 1, &rest, &end) || start >= end ||
		    (*rest != ',' && *rest != '\0') || (*rest == ',' && rest[1] == '\0'))
			goto bad;
		hsm_range_map_add(&parsed, start, end);
		p = *rest ? rest + 1 : rest;
	}
	hsm_range_map_clear(map);
	*map = parsed;
	return TRUE;
bad:
	hsm_range_map_clear(&parsed);
	return FALSE;
}
