/* The registry of running daemons; see registry.h. */
#include "registry.h"
#include "url.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define GROUP "daemon"

static char *registry_dir(void)
{
	const char *base = geteuid() == 0 ? "/run" : g_get_user_runtime_dir();

	return g_build_filename(base, "httphsm", "mounts", NULL);
}

static char *entry_file(const char *mountpoint)
{
	g_autofree char *dir = registry_dir();
	g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, mountpoint, -1);

	return g_build_filename(dir, hash, NULL);
}

void hsm_registry_entry_clear(HsmRegistryEntry *entry)
{
	g_free(entry->mountpoint);
	g_free(entry->cache_dir);
	g_free(entry->mode);
	memset(entry, 0, sizeof(*entry));
}

gboolean hsm_registry_add(const char *mountpoint, const char *cache_dir, const char *mode,
			  GError **err)
{
	g_autofree char *dir = registry_dir();
	g_autofree char *path = entry_file(mountpoint);
	g_autoptr(GKeyFile) file = g_key_file_new();

	if (g_mkdir_with_parents(dir, 0755) < 0) {
		g_set_error(err, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot create %s: %s",
			    dir, g_strerror(errno));
		return FALSE;
	}
	g_key_file_set_int64(file, GROUP, "pid", getpid());
	g_key_file_set_string(file, GROUP, "mountpoint", mountpoint);
	g_key_file_set_string(file, GROUP, "cache", cache_dir);
	g_key_file_set_string(file, GROUP, "mode", mode);
	return g_key_file_save_to_file(file, path, err);
}

void hsm_registry_remove(const char *mountpoint)
{
	g_autofree char *path = entry_file(mountpoint);

	unlink(path);
}

static gboolean load(const char *path, HsmRegistryEntry *entry)
{
	g_autoptr(GKeyFile) file = g_key_file_new();

	memset(entry, 0, sizeof(*entry));
	if (!g_key_file_load_from_file(file, path, G_KEY_FILE_NONE, NULL))
		return FALSE;
	entry->pid = (pid_t)g_key_file_get_int64(file, GROUP, "pid", NULL);
	entry->mountpoint = g_key_file_get_string(file, GROUP, "mountpoint", NULL);
	entry->cache_dir = g_key_file_get_string(file, GROUP, "cache", NULL);
	entry->mode = g_key_file_get_string(file, GROUP, "mode", NULL);
	if (entry->pid > 0 && entry->mountpoint && entry->cache_dir && entry->mode &&
	    (kill(entry->pid, 0) == 0 || errno == EPERM))
		return TRUE;
	hsm_registry_entry_clear(entry);
	return FALSE;
}

gboolean hsm_registry_find(const char *mountpoint, HsmRegistryEntry *entry)
{
	g_autofree char *path = entry_file(mountpoint);

	return load(path, entry);
}

gboolean hsm_registry_find_path(const char *path, HsmRegistryEntry *entry, char **relpath)
{
	g_autofree char *dir = registry_dir();
	g_autoptr(GDir) listing = g_dir_open(dir, 0, NULL);
	const char *name;
	gsize best = 0;

	memset(entry, 0, sizeof(*entry));
	while (listing && (name = g_dir_read_name(listing))) {
		g_autofree char *file = g_build_filename(dir, name, NULL);
		HsmRegistryEntry candidate;
		gsize len;

		if (!load(file, &candidate))
			continue;
		len = strlen(candidate.mountpoint);
		if (hsm_path_below(path, candidate.mountpoint) && len >= best) {
			hsm_registry_entry_clear(entry);
			*entry = candidate;
			best = len;
		} else {
			hsm_registry_entry_clear(&candidate);
		}
	}
	if (!entry->mountpoint)
		return FALSE;
	*relpath = g_strdup(hsm_path_below(path, entry->mountpoint));
	return TRUE;
}
