/* Running daemons by mount point, so that umount, status, prefetch and
 * evict can find the daemon and the cache behind a path.  One small key
 * file per mount under /run/httphsm/mounts (root) or
 * $XDG_RUNTIME_DIR/httphsm/mounts. */
#ifndef HSM_REGISTRY_H
#define HSM_REGISTRY_H

#include <glib.h>
#include <sys/types.h>

typedef struct {
	pid_t pid;
	char *mountpoint;
	char *cache_dir;
	char *mode;
} HsmRegistryEntry;

void hsm_registry_entry_clear(HsmRegistryEntry *entry);

gboolean hsm_registry_add(const char *mountpoint, const char *cache_dir, const char *mode,
			  GError **err);
void hsm_registry_remove(const char *mountpoint);
/* The live daemon serving mountpoint (exactly); FALSE if none. */
gboolean hsm_registry_find(const char *mountpoint, HsmRegistryEntry *entry);
/* The live daemon whose mount point contains path, and path's place in the
 * tree (relpath); FALSE if none. */
gboolean hsm_registry_find_path(const char *path, HsmRegistryEntry *entry, char **relpath);

#endif
