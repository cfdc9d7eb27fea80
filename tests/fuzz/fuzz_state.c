/* fuzz_state: hsm_file_state_parse(), the loader of per-file cache state.
 *
 * State files are ours, but a cache directory outlives crashes, disk
 * errors, other versions and hand edits; a state that claims bytes past the
 * file's end would make reads serve sparse zeros as data.  The first input
 * byte picks the relpath the state should belong to, the rest is the file.
 */
#include "fuzz.h"
#include "store.h"

static const char *const relpaths[] = {
	"f", "a dir/f", "x/y/z.tar.xz", "a dir/\xc3\xbcn\xc3\xaf\ncode%41 name",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_silence_glib();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *relpath = relpaths[fuzz_byte(&data, &size) % G_N_ELEMENTS(relpaths)];
	HsmFileState state;

	hsm_file_state_init(&state);
	if (hsm_file_state_parse((const char *)data, size, relpath, &state)) {
		const GArray *ranges = state.present.ranges;
		guint64 previous_end = 0;

		for (guint i = 0; i < ranges->len; i++) {
			const HsmRange *r = &g_array_index(ranges, HsmRange, i);

			/* Sorted, disjoint, not adjacent, not empty, within size. */
			FUZZ_CHECK(r->start < r->end && r->end <= state.size);
			FUZZ_CHECK(i == 0 || r->start > previous_end);
			previous_end = r->end;
		}
		FUZZ_CHECK(hsm_range_map_total(&state.present) <= state.size);
	} else {
		/* A refused state leaves the one passed in as it was. */
		FUZZ_CHECK(state.size == 0 && !state.etag && state.last_modified == -1 &&
			   hsm_range_map_count(&state.present) == 0);
	}
	hsm_file_state_clear(&state);
	return 0;
}
