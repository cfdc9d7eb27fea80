/* httphsm: dispatch to the verbs. */
#include "commands.h"
#include "guardian.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *synopsis;
} Command;

static const Command commands[] = {
	{ "mount", hsm_command_mount, "[OPTIONS] URL MOUNTPOINT  serve an HTTP tree" },
	{ "umount", hsm_command_umount, "MOUNTPOINT                stop serving it" },
	{ "status", hsm_command_status, "[--bytes] PATH...         what is in the local cache" },
	{ "prefetch", hsm_command_prefetch, "[--pin] [-r] PATH...      fetch whole files now" },
	{ "evict", hsm_command_evict, "[--bytes] PATH...         free their local copy" },
	{ "unpin", hsm_command_unpin, "PATH...                   let pinned files be evicted" },
	{ "refresh", hsm_command_refresh, "[-r] DIRECTORY...         revalidate listings now" },
};

static int usage(FILE *out, int status)
{
	fprintf(out, "Usage: httphsm COMMAND [ARGS...]\n"
		     "       httphsm URL MOUNTPOINT [-o OPTIONS]   (as mount.fuse3 runs it)\n"
		     "       mount.httphsm URL MOUNTPOINT [-sfnv] [-o OPTIONS]   (mount -t httphsm)\n\n"
		     "Makes a remote HTTP directory tree (nginx/Apache/lighttpd/Caddy autoindex)\n"
		     "look like a local directory, fetching only what is touched.\n\n"
		     "Commands:\n");
	for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].synopsis);
	fprintf(out, "\nOptions:\n"
		     "  -h, --help     this text\n"
		     "  -V, --version  the version\n"
		     "\nRun 'httphsm COMMAND --help' for the options of a command.\n");
	return status;
}

/* mount(8) runs /sbin/mount.httphsm SOURCE DIR [-sfnv] [-N NS] [-o OPTIONS]
 * for file system type httphsm: fanotify mode unless -o mode=fuse. */
static int mount_helper(int argc, char **argv)
{
	g_autoptr(GPtrArray) args = g_ptr_array_new();
	gboolean fake = FALSE;
	int opt;

	g_ptr_array_add(args, "mount");
	g_ptr_array_add(args, "--mode=fanotify");
	opterr = 0;
	while ((opt = getopt(argc, argv, "sfnvo:t:N:")) != -1) {
		switch (opt) {
		case 's':
			g_ptr_array_add(args, "--sloppy");
			break;
		case 'f':
			fake = TRUE;
			break;
		case 'v':
			g_ptr_array_add(args, "--verbose");
			break;
		case 'o':
			g_ptr_array_add(args, "-o");
			g_ptr_array_add(args, optarg);
			break;
		case 'n': /* no /etc/mtab to write */
		case 't': /* always httphsm */
		case 'N':
			break;
		default:
			fprintf(stderr, "mount.httphsm: unknown option '-%c'\n", optopt);
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "Usage: mount.httphsm URL MOUNTPOINT [-sfnv] [-o OPTIONS]\n");
		return 2;
	}
	if (fake)
		return 0;
	g_ptr_array_add(args, argv[optind]);
	g_ptr_array_add(args, argv[optind + 1]);
	g_set_prgname("mount.httphsm");
	return hsm_command_mount((int)args->len, (char **)args->pdata);
}

int main(int argc, char **argv)
{
	g_autofree char *name = g_path_get_basename(argv[0]);

	if (!strcmp(name, "mount.httphsm"))
		return mount_helper(argc, argv);
	if (argc < 2)
		return usage(stderr, 2);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
		return usage(stdout, 0);
	/* mount.fuse3 runs "httphsm SOURCE MOUNTPOINT -o OPTIONS". */
	if (strstr(argv[1], "://")) {
		g_set_prgname("httphsm mount");
		return hsm_command_mount(argc, argv);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("httphsm %s\n", HTTPHSM_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "__guardian"))
		return hsm_guardian_main(argc - 1, argv + 1);
	for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
		if (!strcmp(argv[1], commands[i].name)) {
			g_autofree char *prgname = g_strconcat("httphsm ", argv[1], NULL);

			g_set_prgname(prgname);
			return commands[i].run(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "httphsm: unknown command '%s'\n", argv[1]);
	return usage(stderr, 2);
}
