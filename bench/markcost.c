/* markcost: what a warm 4 KiB read costs under each way of placing
 * fanotify pre-content marks, on this kernel.
 *
 *   markcost DIR [ROUNDS]
 *
 * DIR must be on a file system with pre-content events (ext4, xfs, btrfs).
 * markcost creates DIR/markcost/{cache,mnt}, bind-mounts cache on mnt (as
 * fanotify mode does), writes a 64 MiB file and times warm 4 KiB reads of it
 * at random aligned offsets (readbench, from the same build directory) in
 * four set-ups:
 *
 *   native        no fanotify group at all
 *   inode-other   a FAN_PRE_ACCESS mark on another inode only: what a
 *                 complete file costs if only incomplete files carry marks
 *   mount+ignore  a FAN_PRE_ACCESS mark on the bind mount and an ignore mark
 *                 on the file, read through the mount: httphsm's fanotify mode
 *   cache+ignore  the same marks, read through the cache path: the reference
 *                 bench/run.py compares fanotify mode with
 *
 * Every set-up is complete (ignored or unmarked), so no event is ever
 * raised and no listener is needed.  Prints a Markdown table of the median
 * over ROUNDS (default 5) of each round's p50, and each set-up / native.
 * Root only; the bind mount is removed before exiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef FAN_PRE_ACCESS
#define FAN_PRE_ACCESS 0x00100000
#endif
#ifndef FAN_MARK_IGNORE_SURV
#define FAN_MARK_IGNORE_SURV 0x00000500
#endif

#define FILE_SIZE (64 << 20)
#define READS 200000
#define MAX_ROUNDS 99

enum { NATIVE, INODE_OTHER, MOUNT_IGNORE, CACHE_IGNORE, SETUPS };

static const char *const setup_names[SETUPS] = {
	"native", "inode-other", "mount+ignore", "cache+ignore",
};

static char cache_dir[4200], mount_dir[4200], readbench[4200];

static void die(const char *what)
{
	fprintf(stderr, "markcost: %s: %s\n", what, strerror(errno));
	umount2(mount_dir, MNT_DETACH);
	exit(1);
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The p50 (ns) of READS warm 4 KiB random preads of dir/name, as measured by
 * `readbench random`; the marks of this process stay in place meanwhile. */
static uint64_t read_p50(const char *dir, const char *name)
{
	char path[8500], reads[16], line[256] = "";
	char *argv[] = { readbench, "random", path, reads, "1", NULL };
	posix_spawn_file_actions_t actions;
	unsigned long long p50;
	int pipe_fds[2], status, matched;
	pid_t pid;
	FILE *out;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(reads, sizeof(reads), "%d", READS);
	if (pipe(pipe_fds) < 0)
		die("pipe");
	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
	errno = posix_spawn(&pid, readbench, &actions, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&actions);
	if (errno)
		die(readbench);
	close(pipe_fds[1]);
	out = fdopen(pipe_fds[0], "r");
	if (!out || !fgets(line, sizeof(line), out))
		line[0] = '\0';
	if (out)
		fclose(out);
	matched = sscanf(line, "{\"ops\": %*d, \"p50_ns\": %llu", &p50);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
	    matched != 1) {
		fprintf(stderr, "markcost: readbench failed on %s: %s", path, line);
		errno = EIO;
		die("readbench");
	}
	return p50;
}

static void write_file(const char *name)
{
	static char buf[1 << 20];
	char path[8500];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", cache_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die(path);
	for (int i = 0; i < FILE_SIZE / (int)sizeof(buf); i++) {
		memset(buf, i, sizeof(buf));
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			die("write");
	}
	close(fd);
}

static void mark(int group, unsigned int flags, const char *dir, const char *name)
{
	char path[8500];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (fanotify_mark(group, FAN_MARK_ADD | flags, FAN_PRE_ACCESS, AT_FDCWD, path) < 0)
		die(path);
}

static void run_round(uint64_t p50[SETUPS])
{
	int group;

	p50[NATIVE] = read_p50(mount_dir, "data");
	group = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC, O_RDONLY);
	if (group < 0)
		die("fanotify_init");
	mark(group, 0, cache_dir, "other");
	p50[INODE_OTHER] = read_p50(mount_dir, "data");
	mark(group, FAN_MARK_IGNORE_SURV, cache_dir, "data");
	mark(group, FAN_MARK_MOUNT, mount_dir, "");
	p50[MOUNT_IGNORE] = read_p50(mount_dir, "data");
	p50[CACHE_IGNORE] = read_p50(cache_dir, "data");
	close(group);
}

/* readbench is built beside markcost. */
static void find_readbench(void)
{
	ssize_t n = readlink("/proc/self/exe", readbench, sizeof(readbench) - sizeof("readbench"));
	char *slash;

	if (n < 0)
		die("/proc/self/exe");
	readbench[n] = '\0';
	slash = strrchr(readbench, '/');
	strcpy(slash ? slash + 1 : readbench, "readbench");
}

static void set_up(const char *dir)
{
	char top[4096];

	snprintf(top, sizeof(top), "%s/markcost", dir);
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", top);
	snprintf(mount_dir, sizeof(mount_dir), "%s/mnt", top);
	if ((mkdir(top, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(cache_dir, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(mount_dir, 0755) < 0 && errno != EEXIST))
		die(top);
	write_file("data");
	write_file("other");
	if (mount(cache_dir, mount_dir, NULL, MS_BIND, NULL) < 0)
		die("bind mount");
}

int main(int argc, char **argv)
{
	static uint64_t rounds[SETUPS][MAX_ROUNDS];
	int n_rounds = argc > 2 ? atoi(argv[2]) : 5;
	uint64_t median[SETUPS];

	if (argc < 2 || argc > 3 || n_rounds < 1 || n_rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: markcost DIR [ROUNDS (1-%d)]\n", MAX_ROUNDS);
		return 2;
	}
	find_readbench();
	set_up(argv[1]);
	for (int r = 0; r < n_rounds; r++) {
		uint64_t p50[SETUPS];

		run_round(p50);
		for (int s = 0; s < SETUPS; s++)
			rounds[s][r] = p50[s];
	}
	umount2(mount_dir, 0);
	printf("| set-up | 4 KiB warm pread p50 (ns) | / native |\n|---|---:|---:|\n");
	for (int s = 0; s < SETUPS; s++) {
		qsort(rounds[s], (size_t)n_rounds, sizeof(rounds[s][0]), compare_u64);
		median[s] = rounds[s][n_rounds / 2];
		printf("| %s | %llu | %.3f |\n", setup_names[s], (unsigned long long)median[s],
		       (double)median[s] / (double)median[NATIVE]);
	}
	return 0;
}
