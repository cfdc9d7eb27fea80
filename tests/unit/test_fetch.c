/* The fetcher against a scripted HTTP/1.1 server on 127.0.0.1: ranges,
 * servers that ignore Range or send more than asked, 5xx, trickles, and
 * transfers nobody wants any more.  No FUSE, no fanotify, no root. */
#include "error.h"
#include "fetch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FILE_SIZE 100000

typedef enum {
	SERVE_RANGES,        /* 206 with exactly the bytes asked for */
	SERVE_WHOLE,         /* ignore Range: 200 and the whole file */
	SERVE_OVERRUN,       /* 206 claiming and sending 5000 bytes past the end */
	SERVE_SURPLUS,       /* 200, no length, the file and then junk until hung up on */
	SERVE_503_TWICE,     /* 503 to the first two requests */
	SERVE_TRICKLE,       /* 206 headers, then a byte every 100 ms */
} ServeMode;

typedef struct {
	int listener;
	int port;
	ServeMode mode;
	guint8 file[FILE_SIZE];
	gint requests;       /* atomic */
	gint stop;           /* atomic */
	GThread *thread;
} Server;

static void send_all(int fd, const void *data, gsize len)
{
	const guint8 *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			return;
		p += n, len -= n;
	}
}

static void serve_one(Server *server, int fd)
{
	char request[4096], header[512];
	ssize_t n = recv(fd, request, sizeof(request) - 1, 0);
	guint64 first = 0, last = FILE_SIZE - 1;
	const char *range;
	int count = g_atomic_int_add(&server->requests, 1);

	if (n <= 0)
		return;
	request[n] = '\0';
	range = strstr(request, "Range: bytes=");
	if (range)
		sscanf(range, "Range: bytes=%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, &first, &last);
	last = MIN(last, FILE_SIZE - 1);
	switch (server->mode) {
	case SERVE_503_TWICE:
		if (count < 2) {
			send_all(fd, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", 40);
			return;
		}
		/* fall through */
	case SERVE_RANGES:
	case SERVE_TRICKLE:
		g_snprintf(header, sizeof(header),
			   "HTTP/1.1 206 Partial\r\nContent-Range: bytes %" G_GUINT64_FORMAT
			   "-%" G_GUINT64_FORMAT "/%d\r\nContent-Length: %" G_GUINT64_FORMAT
			   "\r\nConnection: close\r\n\r\n",
			   first, last, FILE_SIZE, last - first + 1);
		send_all(fd, header, strlen(header));
		if (server->mode != SERVE_TRICKLE) {
			send_all(fd, server->file + first, last - first + 1);
			return;
		}
		for (guint64 i = first; i <= last && !g_atomic_int_get(&server->stop); i++) {
			if (send(fd, server->file + i, 1, MSG_NOSIGNAL) != 1)
				return;
			g_usleep(100 * 1000);
		}
		return;
	case SERVE_WHOLE:
		g_snprintf(header, sizeof(header),
			   "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
			   FILE_SIZE);
		send_all(fd, header, strlen(header));
		send_all(fd, server->file, FILE_SIZE);
		return;
	case SERVE_OVERRUN: {
		static guint8 junk[5000];

		memset(junk, 0xee, sizeof(junk));
		g_snprintf(header, sizeof(header),
			   "HTTP/1.1 206 Partial\r\nContent-Range: bytes %" G_GUINT64_FORMAT
			   "-%d/%d\r\nContent-Length: %" G_GUINT64_FORMAT
			   "\r\nConnection: close\r\n\r\n",
			   first, FILE_SIZE + 4999, FILE_SIZE, FILE_SIZE + 5000 - first);
		send_all(fd, header, strlen(header));
		send_all(fd, server->file + first, FILE_SIZE - first);
		send_all(fd, junk, sizeof(junk));
		return;
	}
	case SERVE_SURPLUS: {
		static guint8 junk[16384];

		memset(junk, 0xee, sizeof(junk));
		send_all(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", 38);
		send_all(fd, server->file, FILE_SIZE);
		for (int i = 0; i < 100000 && !g_atomic_int_get(&server->stop); i++)
			if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) <= 0)
				return;
		return;
	}
	}
}

static gpointer server_main(gpointer data)
{
	Server *server = data;

	while (!g_atomic_int_get(&server->stop)) {
		int fd = accept(server->listener, NULL, NULL);

		if (fd < 0)
			continue;
		serve_one(server, fd);
		shutdown(fd, SHUT_RDWR);
		close(fd);
	}
	return NULL;
}

static Server *server_start(ServeMode mode)
{
	Server *server = g_new0(Server, 1);
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);

	for (int i = 0; i < FILE_SIZE; i++)
		server->file[i] = (guint8)(i * 7 + i / 251);
	server->mode = mode;
	server->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	g_assert_cmpint(bind(server->listener, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
	g_assert_cmpint(listen(server->listener, 16), ==, 0);
	getsockname(server->listener, (struct sockaddr *)&addr, &len);
	server->port = ntohs(addr.sin_port);
	server->thread = g_thread_new("server", server_main, server);
	return server;
}

static void server_stop(Server *server)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(server->port) };

	g_atomic_int_set(&server->stop, 1);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	connect(fd, (struct sockaddr *)&addr, sizeof(addr)); /* wakes accept() */
	close(fd);
	g_thread_join(server->thread);
	close(server->listener);
	g_free(server);
}

/* A sink that collects the bytes into a file-sized buffer. */
typedef struct {
	GMutex lock;
	GCond cond;
	guint8 data[FILE_SIZE];
	guint64 written;          /* bytes handed to write() */
	gboolean past_size;       /* a write reached past FILE_SIZE */
	gboolean done;
	gboolean wanted;
	GError *error;
} Sink;

static gboolean sink_check(gpointer user, const HsmRemoteInfo *info, GError **err)
{
	(void)user, (void)info, (void)err;
	return TRUE;
}

static gboolean sink_write(gpointer user, guint64 offset, const void *data, gsize len,
			   GError **err)
{
	Sink *sink = user;

	(void)err;
	g_mutex_lock(&sink->lock);
	if (offset + len > FILE_SIZE)
		sink->past_size = TRUE;
	else
		memcpy(sink->data + offset, data, len);
	sink->written += len;
	g_mutex_unlock(&sink->lock);
	return TRUE;
}

static void sink_done(gpointer user, GError *err)
{
	Sink *sink = user;

	g_mutex_lock(&sink->lock);
	sink->error = err;
	sink->done = TRUE;
	g_cond_signal(&sink->cond);
	g_mutex_unlock(&sink->lock);
}

static gboolean sink_wanted(gpointer user)
{
	return g_atomic_int_get(&((Sink *)user)->wanted);
}

static const HsmRangeSink sink_ops = { sink_check, sink_write, sink_done, sink_wanted };

/* Fetches [start, end) of the server's file and waits for the outcome. */
static Sink *fetch(Server *server, HsmFetchOptions *options, guint64 start, guint64 end)
{
	g_autofree char *url = g_strdup_printf("http://127.0.0.1:%d/f", server->port);
	HsmFetcher *fetcher = hsm_fetcher_new(options);
	Sink *sink = g_new0(Sink, 1);

	sink->wanted = TRUE;
	g_mutex_init(&sink->lock);
	g_cond_init(&sink->cond);
	hsm_fetch_range(fetcher, url, start, end, FILE_SIZE, &sink_ops, sink);
	g_mutex_lock(&sink->lock);
	while (!sink->done)
		g_cond_wait(&sink->cond, &sink->lock);
	g_mutex_unlock(&sink->lock);
	hsm_fetcher_free(fetcher);
	return sink;
}

static void sink_free(Sink *sink)
{
	g_clear_error(&sink->error);
	g_mutex_clear(&sink->lock);
	g_cond_clear(&sink->cond);
	g_free(sink);
}

static HsmFetchOptions quick_options(void)
{
	HsmFetchOptions options;

	hsm_fetch_options_init(&options);
	options.retry_delay_ms = 10;
	return options;
}

static void assert_bytes(Server *server, Sink *sink, guint64 start, guint64 end)
{
	g_assert_no_error(sink->error);
	g_assert_false(sink->past_size);
	g_assert_cmpmem(sink->data + start, end - start, server->file + start, end - start);
}

static void test_range(void)
{
	Server *server = server_start(SERVE_RANGES);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 4096, 20000);

	assert_bytes(server, sink, 4096, 20000);
	g_assert_cmpuint(sink->written, ==, 20000 - 4096);
	sink_free(sink);
	server_stop(server);
}

static void test_whole_body_for_a_range(void)
{
	Server *server = server_start(SERVE_WHOLE);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 50000, 60000);

	/* The server sent everything: all of it is file data, kept. */
	assert_bytes(server, sink, 0, FILE_SIZE);
	sink_free(sink);
	server_stop(server);
}

static void test_overrun_is_cut(void)
{
	Server *server = server_start(SERVE_OVERRUN);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 90000, FILE_SIZE);

	assert_bytes(server, sink, 90000, FILE_SIZE);
	g_assert_cmpuint(sink->written, ==, FILE_SIZE - 90000);
	sink_free(sink);
	server_stop(server);
}

static void test_endless_surplus_is_hung_up_on(void)
{
	Server *server = server_start(SERVE_SURPLUS);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 0, FILE_SIZE);

	assert_bytes(server, sink, 0, FILE_SIZE);
	g_assert_cmpuint(sink->written, ==, FILE_SIZE);
	sink_free(sink);
	server_stop(server);
}

static void test_5xx_is_retried(void)
{
	Server *server = server_start(SERVE_503_TWICE);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 0, 1000);

	assert_bytes(server, sink, 0, 1000);
	g_assert_cmpint(g_atomic_int_get(&server->requests), ==, 3);
	sink_free(sink);
	server_stop(server);
}

static void test_trickle_below_min_rate_fails(void)
{
	Server *server = server_start(SERVE_TRICKLE);
	HsmFetchOptions options = quick_options();
	Sink *sink;

	options.stall_timeout = 1;
	options.retries = 1;
	sink = fetch(server, &options, 0, FILE_SIZE);
	g_assert_error(sink->error, HSM_ERROR, EIO);
	g_assert_nonnull(strstr(sink->error->message, "too slow"));
	g_assert_cmpint(g_atomic_int_get(&server->requests), ==, 2);
	sink_free(sink);
	server_stop(server);
}

static gboolean unwant(gpointer data)
{
	g_atomic_int_set(&((Sink *)data)->wanted, 0);
	return G_SOURCE_REMOVE;
}

static void test_unwanted_transfer_is_cancelled(void)
{
	Server *server = server_start(SERVE_TRICKLE);
	g_autofree char *url = g_strdup_printf("http://127.0.0.1:%d/f", server->port);
	HsmFetchOptions options = quick_options();
	HsmFetcher *fetcher = hsm_fetcher_new(&options);
	Sink *sink = g_new0(Sink, 1);
	gint64 start = g_get_monotonic_time();

	sink->wanted = TRUE;
	g_mutex_init(&sink->lock);
	g_cond_init(&sink->cond);
	hsm_fetch_range(fetcher, url, 0, FILE_SIZE, FILE_SIZE, &sink_ops, sink);
	g_usleep(300 * 1000);
	unwant(sink);
	g_mutex_lock(&sink->lock);
	while (!sink->done)
		g_cond_wait(&sink->cond, &sink->lock);
	g_mutex_unlock(&sink->lock);
	/* Ended by the progress callback (about once a second), not by the
	 * server, which would trickle for hours. */
	g_assert_error(sink->error, HSM_ERROR, ECANCELED);
	g_assert_cmpint(g_get_monotonic_time() - start, <, 20 * G_USEC_PER_SEC);
	g_assert_cmpint(g_atomic_int_get(&server->requests), ==, 1);
	hsm_fetcher_free(fetcher);
	sink_free(sink);
	server_stop(server);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL);
	g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  g_log_default_handler, NULL);
	g_test_add_func("/fetch/range", test_range);
	g_test_add_func("/fetch/whole-body-for-a-range", test_whole_body_for_a_range);
	g_test_add_func("/fetch/overrun-is-cut", test_overrun_is_cut);
	g_test_add_func("/fetch/endless-surplus", test_endless_surplus_is_hung_up_on);
	g_test_add_func("/fetch/5xx-retried", test_5xx_is_retried);
	g_test_add_func("/fetch/trickle-below-min-rate", test_trickle_below_min_rate_fails);
	g_test_add_func("/fetch/unwanted-is-cancelled", test_unwanted_transfer_is_cancelled);
	return g_test_run();
}
