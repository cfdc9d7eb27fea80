/* readbench: the read workloads of bench/run.py, timed without interpreter
 * overhead (a warm 4 KiB read takes about a microsecond).
 *
 *   readbench random FILE OPS THREADS [SECONDS [LENGTH]]
 *                                       4 KiB preads at random aligned offsets,
 *                                       OPS in all, or fewer if SECONDS pass
 *   readbench seq FILE THREADS [LENGTH] 1 MiB reads; each thread reads its
 *                                       own contiguous share of the file
 *
 * LENGTH (bytes, 0: all) limits either to the first LENGTH bytes of FILE:
 * through a slow link, reading all of a large file would take too long.
 * Prints one JSON object: latencies (ns) of random reads, or throughput.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096
#define SEQ_CHUNK (1 << 20)

typedef struct {
	const char *path;
	off_t size;
	long ops;
	long index;
	uint64_t *latencies;  /* ops entries for random */
	uint64_t deadline;    /* random: stop then (monotonic ns), 0: never */
	long done;            /* random: reads done */
	uint64_t bytes;
	int failed;
} Worker;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *random_reads(void *arg)
{
	Worker *w = arg;
	char buf[BLOCK];
	unsigned int seed = 12345u + (unsigned int)w->index;
	off_t blocks = w->size / BLOCK;
	int fd = open(w->path, O_RDONLY);

	if (fd < 0 || blocks == 0) {
		w->failed = errno ? errno : EINVAL;
		return NULL;
	}
	for (long i = 0; i < w->ops; i++) {
		off_t block = (off_t)(((uint64_t)rand_r(&seed) << 31 | (uint64_t)rand_r(&seed)) %
				      (uint64_t)blocks);
		uint64_t start = now_ns();

		if (pread(fd, buf, BLOCK, block * BLOCK) != BLOCK) {
			w->failed = errno ? errno : EIO;
			break;
		}
		w->latencies[i] = now_ns() - start;
		w->done = i + 1;
		if (w->deadline && start > w->deadline)
			break;
	}
	close(fd);
	return NULL;
}

static void *sequential_reads(void *arg)
{
	Worker *w = arg;
	char *buf = malloc(SEQ_CHUNK);
	off_t share = w->size / w->ops;
	off_t pos = share * w->index, end = w->index == w->ops - 1 ? w->size : pos + share;
	int fd = open(w->path, O_RDONLY);

	if (fd < 0 || !buf) {
		w->failed = errno ? errno : ENOMEM;
		free(buf);
		return NULL;
	}
	while (pos < end) {
		ssize_t n = pread(fd, buf, (size_t)(end - pos < SEQ_CHUNK ? end - pos : SEQ_CHUNK), pos);

		if (n <= 0) {
			w->failed = n < 0 ? errno : EIO;
			break;
		}
		pos += n;
		w->bytes += (uint64_t)n;
	}
	close(fd);
	free(buf);
	return NULL;
}

static int compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int random_mode = argc >= 5 && argc <= 7 && !strcmp(argv[1], "random");
	int seq_mode = (argc == 4 || argc == 5) && !strcmp(argv[1], "seq");
	uint64_t deadline = random_mode && argc >= 6 && atof(argv[5]) > 0 ?
			    now_ns() + (uint64_t)(atof(argv[5]) * 1e9) : 0;
	long long length = random_mode && argc == 7 ? atoll(argv[6]) :
			   seq_mode && argc == 5 ? atoll(argv[4]) : 0;
	long threads, ops_per_thread = 0;
	pthread_t *ids;
	Worker *workers;
	struct stat st;
	uint64_t start, elapsed, total_bytes = 0;
	int failed = 0;

	if (!random_mode && !seq_mode) {
		fprintf(stderr, "usage: readbench random FILE OPS THREADS [SECONDS [LENGTH]] | "
			"seq FILE THREADS [LENGTH]\n");
		return 2;
	}
	if (stat(argv[2], &st) < 0) {
		printf("{\"error\": \"%s\"}\n", strerror(errno));
		return 1;
	}
	if (length > 0 && length < st.st_size)
		st.st_size = (off_t)length;
	threads = atol(argv[random_mode ? 4 : 3]);
	if (random_mode)
		ops_per_thread = atol(argv[3]) / threads;
	ids = calloc((size_t)threads, sizeof(*ids));
	workers = calloc((size_t)threads, sizeof(*workers));
	for (long t = 0; t < threads; t++) {
		workers[t] = (Worker){ .path = argv[2], .size = st.st_size, .index = t,
				       .ops = random_mode ? ops_per_thread : threads,
				       .deadline = deadline };
		if (random_mode)
			workers[t].latencies = calloc((size_t)ops_per_thread, sizeof(uint64_t));
	}
	start = now_ns();
	for (long t = 0; t < threads; t++)
		pthread_create(&ids[t], NULL, random_mode ? random_reads : sequential_reads,
			       &workers[t]);
	for (long t = 0; t < threads; t++) {
		pthread_join(ids[t], NULL);
		failed = failed ? failed : workers[t].failed;
		total_bytes += workers[t].bytes;
	}
	elapsed = now_ns() - start;
	if (failed) {
		printf("{\"error\": \"%s\"}\n", strerror(failed));
		return 1;
	}
	if (seq_mode) {
		printf("{\"bytes\": %llu, \"seconds\": %.6f, \"mib_per_s\": %.1f}\n",
		       (unsigned long long)total_bytes, elapsed / 1e9,
		       total_bytes / 1048576.0 / (elapsed / 1e9));
		return 0;
	}
	long n = 0;
	uint64_t *all = malloc((size_t)(ops_per_thread * threads) * sizeof(uint64_t));

	for (long t = 0; t < threads; t++) {
		memcpy(all + n, workers[t].latencies, (size_t)workers[t].done * sizeof(uint64_t));
		n += workers[t].done;
	}
	if (n == 0) {
		printf("{\"error\": \"no read completed\"}\n");
		return 1;
	}
	qsort(all, (size_t)n, sizeof(uint64_t), compare);
	printf("{\"ops\": %ld, \"p50_ns\": %llu, \"p99_ns\": %llu, \"seconds\": %.6f}\n", n,
	       (unsigned long long)all[n / 2], (unsigned long long)all[n * 99 / 100],
	       elapsed / 1e9);
	return 0;
}
