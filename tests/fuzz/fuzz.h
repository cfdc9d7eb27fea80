/* What every fuzz target shares: glib logging silenced, input split into
 * strings, invariant checks that abort() so that libFuzzer keeps the input. */
#ifndef HSM_FUZZ_H
#define HSM_FUZZ_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Hostile input makes the parsers warn; printing that would cost more than
 * the parsing and bury libFuzzer's output.  A critical is a bug, though (a
 * GLib function called against its contract): it aborts. */
static inline void fuzz_log(const gchar *domain, GLogLevelFlags level, const gchar *message,
			    gpointer data)
{
	(void)data;
	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL)) {
		fprintf(stderr, "%s: %s\n", domain ? domain : "", message);
		abort();
	}
}

static inline void fuzz_silence_glib(void)
{
	g_log_set_default_handler(fuzz_log, NULL);
}

#define FUZZ_CHECK(cond)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,    \
				__LINE__, #cond);                                     \
			abort();                                                      \
		}                                                                     \
	} while (0)

/* The next input byte (0 once the input is used up). */
static inline guint8 fuzz_byte(const uint8_t **data, size_t *size)
{
	guint8 b = 0;

	if (*size) {
		b = **data;
		(*data)++, (*size)--;
	}
	return b;
}

/* The bytes up to the next NUL (or the end) as a string; the NUL is used up. */
static inline char *fuzz_string(const uint8_t **data, size_t *size)
{
	const uint8_t *nul = memchr(*data, '\0', *size);
	size_t len = nul ? (size_t)(nul - *data) : *size;
	char *text = g_strndup((const char *)*data, len);

	*data += nul ? len + 1 : len;
	*size -= nul ? len + 1 : len;
	return text;
}

#endif
