/* A set of half-open byte ranges [start, end), kept sorted and merged.
 *
 * It records which bytes of a cache file hold fetched data.  It has no lock
 * of its own: the owner (HsmFile) serialises access.
 */
#ifndef HSM_RANGEMAP_H
#define HSM_RANGEMAP_H

#include <glib.h>

typedef struct {
	guint64 start;
	guint64 end;
} HsmRange;

typedef struct {
	GArray *ranges; /* of HsmRange, sorted, disjoint, non-adjacent */
} HsmRangeMap;

void hsm_range_map_init(HsmRangeMap *map);
void hsm_range_map_clear(HsmRangeMap *map);
void hsm_range_map_copy(HsmRangeMap *to, const HsmRangeMap *from);
void hsm_range_map_add(HsmRangeMap *map, guint64 start, guint64 end);
void hsm_range_map_remove(HsmRangeMap *map, guint64 start, guint64 end);
gboolean hsm_range_map_contains(const HsmRangeMap *map, guint64 start, guint64 end);
/* The first byte in [start, end) that is not in the map, or end. */
guint64 hsm_range_map_first_missing(const HsmRangeMap *map, guint64 start, guint64 end);
/* The first byte >= start that is in the map, or G_MAXUINT64. */
guint64 hsm_range_map_next_present(const HsmRangeMap *map, guint64 start);
/* Bytes in the map; number of disjoint ranges. */
guint64 hsm_range_map_total(const HsmRangeMap *map);
guint hsm_range_map_count(const HsmRangeMap *map);

/* "0-4096,8192-12288" (start-end, end exclusive); "" when empty. */
char *hsm_range_map_to_string(const HsmRangeMap *map);
/* Replaces the content of map; FALSE (map unchanged) on malformed text. */
gboolean hsm_range_map_parse(HsmRangeMap *map, const char *text);

#endif
