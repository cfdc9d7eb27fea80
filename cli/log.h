/* Where the daemon's messages go: stderr, a log file, or both. */
#ifndef HSM_LOG_H
#define HSM_LOG_H

#include <glib.h>

/* Routes GLib logging to stderr (in the background: warnings only); debug
 * messages only when verbose. */
void hsm_log_init(gboolean verbose, gboolean foreground);
/* Also appends every message to path (with a timestamp). */
gboolean hsm_log_to_file(const char *path, GError **err);
/* Stops writing to stderr (the daemon detached from its terminal). */
void hsm_log_detach_stderr(void);

#endif
