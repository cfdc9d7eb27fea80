/* `httphsm umount`: stops the daemon serving a mountpoint, whatever its mode. */
#include "commands.h"
#include "mountinfo.h"
#include "registry.h"

#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The file system type of the (last) mount at path. */
static char *mount_type(const char *path)
{
	g_autoptr(GPtrArray) mounts = hsm_mountinfo_read();
	const char *type = NULL;

	for (guint i = 0; mounts && i < mounts->len; i++) {
		const HsmMount *mount = mounts->pdata[i];

		if (!strcmp(mount->mount_point, path))
			type = mount->fs_type;
	}
	return g_strdup(type);
}

/* fanotify mode: unmount (refused while busy, as umount(8) does), then
 * tell the daemon, which then exits. */
static int stop_fanotify_daemon(const char *path, const char *type)
{
	HsmRegistryEntry entry;

	if (!hsm_registry_find(path, &entry)) {
		fprintf(stderr, "httphsm umount: %s is a %s mount, not an httphsm one\n", path,
			type);
		return 1;
	}
	if (umount2(path, UMOUNT_NOFOLLOW) < 0) {
		fprintf(stderr, "httphsm umount: %s: %s\n", path, g_strerror(errno));
		hsm_registry_entry_clear(&entry);
		return 1;
	}
	kill(entry.pid, SIGTERM);
	for (int i = 0; i < 600 && kill(entry.pid, 0) == 0; i++)
		g_usleep(50 * 1000);
	if (kill(entry.pid, 0) == 0)
		fprintf(stderr, "httphsm umount: the daemon (pid %d) did not exit\n", (int)entry.pid);
	hsm_registry_entry_clear(&entry);
	return 0;
}

int hsm_command_umount(int argc, char **argv)
{
	g_autofree char *path = NULL;
	g_autofree char *type = NULL;

	if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc == 2 ? stdout : stderr,
			"Usage: httphsm umount MOUNTPOINT\n\n"
			"Stops serving MOUNTPOINT: unmounts it and ends its daemon, which saves\n"
			"the cache state first.  FUSE mounts can also be unmounted with\n"
			"fusermount3 -u MOUNTPOINT.\n");
		return argc == 2 ? 0 : 2;
	}
	path = g_canonicalize_filename(argv[1], NULL);
	type = mount_type(path);
	if (!type) {
		fprintf(stderr, "httphsm umount: %s is not a mount point\n", path);
		return 1;
	}
	if (!strcmp(type, "fuse.httphsm")) {
		char *args[] = { "fusermount3", "-u", path, NULL };

		execvp(args[0], args);
		perror("httphsm umount: cannot run fusermount3");
		return 1;
	}
	return stop_fanotify_daemon(path, type);
}
