/* httphsm: dispatch to the verbs. */
#include "commands.h"
#include "guardian.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>

typedef struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *synopsis;
} Command;

static const Command commands[] = {
	{ "mount", hsm_command_mount, "[OPTIONS] URL MOUNTPOINT  serve an HTTP tree" },
	{ "umount", hsm_command_umount, "MOUNTPOINT                stop serving it" },
	{ "status", hsm_command_status, "[--bytes] PATH...         what is in the local cache" },
	{ "prefetch", hsm_command_prefetch, "[--pin] PATH...           fetch whole files now" },
	{ "evict", hsm_command_evict, "[--bytes] PATH...         free their local copy" },
	{ "unpin", hsm_command_unpin, "PATH...                   let pinned files be evicted" },
	{ "refresh", hsm_command_refresh, "[-r] DIRECTORY...         revalidate listings now" },
};

static int usage(FILE *out, int status)
{
	fprintf(out, "Usage: httphsm COMMAND [ARGS...]\n\n"
		     "Makes a remote HTTP directory tree (nginx/Apache/lighttpd/Caddy autoindex)\n"
		     "look like a local directory, fetching only what is touched.\n\n"
		     "Commands:\n");
	for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].synopsis);
	fprintf(out, "\nRun 'httphsm COMMAND --help' for the options of a command.\n");
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr, 2);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
		return usage(stdout, 0);
	if (!strcmp(argv[1], "--version")) {
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
