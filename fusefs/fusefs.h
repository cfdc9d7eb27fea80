/* FUSE mode: the cache tree of an HsmTree served read-only through libfuse3. */
#ifndef HSM_FUSEFS_H
#define HSM_FUSEFS_H

#include "tree.h"

#include <glib.h>

typedef struct HsmFuse HsmFuse;

/* Creates the session and mounts it.  fuse_options are extra "-o" mount
 * options (comma separated, may be NULL); debug logs every FUSE request. */
HsmFuse *hsm_fuse_mount(HsmTree *tree, const char *mountpoint, const char *fuse_options,
			gboolean debug, GError **err);
/* Serves requests until unmounted or signalled (SIGINT, SIGTERM, SIGHUP). */
int hsm_fuse_serve(HsmFuse *fuse);
/* Unmounts (if still mounted) and frees. */
void hsm_fuse_free(HsmFuse *fuse);

#endif
