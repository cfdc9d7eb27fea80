/* The scripted HTTP server of the unit tests: see testserver.h. */
#include "testserver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LAST_MODIFIED "Wed, 02 Dec 2026 10:20:33 GMT"

typedef struct {
	char *content_type;
	char *body;
} TestPage;

static void page_free(gpointer data)
{
	TestPage *page = data;

	g_free(page->content_type);
	g_free(page->body);
	g_free(page);
}

static gboolean send_all(int fd, const void *data, gsize len)
{
	const guint8 *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			return FALSE;
		p += n, len -= n;
	}
	return TRUE;
}

/* Sends the file's bytes [first, first + len), as they are now:
 * test_server_change() may rewrite them at any time. */
static gboolean send_file(TestServer *server, int fd, guint64 first, gsize len)
{
	g_autofree guint8 *copy = NULL;

	g_mutex_lock(&server->lock);
	copy = g_memdup2(server->file + first, len);
	g_mutex_unlock(&server->lock);
	return send_all(fd, copy, len);
}

/* The index page of /: the one file, its size (exact or rounded) and a
 * date. */
static void serve_listing(TestServer *server, int fd)
{
	char page[256], header[256], size[32];

	if (g_atomic_int_get(&server->rounded))
		g_snprintf(size, sizeof(size), "%dK", TEST_FILE_SIZE / 1024);
	else
		g_snprintf(size, sizeof(size), "%d", TEST_FILE_SIZE);
	g_snprintf(page, sizeof(page),
		   "<html><body><pre><a href=\"../\">../</a>\n"
		   "<a href=\"f\">f</a>  02-Dec-2026 10:20  %s\n</pre></body></html>\n",
		   size);
	g_snprintf(header, sizeof(header),
		   "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %zu\r\n"
		   "Connection: close\r\n\r\n",
		   strlen(page));
	send_all(fd, header, strlen(header));
	send_all(fd, page, strlen(page));
}

static void send_response(int fd, const char *status, const char *content_type,
			  const char *body)
{
	g_autofree char *header = g_strdup_printf(
		"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		"Last-Modified: " LAST_MODIFIED "\r\nConnection: close\r\n\r\n",
		status, content_type, strlen(body));

	send_all(fd, header, strlen(header));
	send_all(fd, body, strlen(body));
}

/* A page set by the test: 304 when the request names its ETag. */
static void send_page(TestServer *server, int fd, const char *request, const char *content_type,
		      const char *body)
{
	g_autofree char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA1, body, -1);
	g_autofree char *etag = g_strdup_printf("\"%.16s\"", digest);
	g_autofree char *condition = g_strdup_printf("If-None-Match: %s\r\n", etag);
	g_autofree char *header = NULL;
	gboolean validators = !g_atomic_int_get(&server->no_validators);
	gboolean not_modified = validators && strstr(request, condition);

	if (not_modified)
		g_atomic_int_inc(&server->page_304s);
	header = g_strdup_printf("HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
				 "%s%s%sConnection: close\r\n\r\n",
				 not_modified ? "304 Not Modified" : "200 OK", content_type,
				 not_modified ? 0 : strlen(body), validators ? "ETag: " : "",
				 validators ? etag : "", validators ? "\r\n" : "");
	send_all(fd, header, strlen(header));
	if (!not_modified)
		send_all(fd, body, strlen(body));
}

/* Answers from the pages (after delay_ms) and HEAD sizes the test set, or
 * 404 for any path but / and /f.  FALSE: the request is for / or /f. */
static gboolean serve_scripted(TestServer *server, int fd, const char *request)
{
	gboolean head = g_str_has_prefix(request, "HEAD ");
	const char *path = strchr(request, ' ') + 1;
	g_autofree char *key = g_strndup(path, strcspn(path, " "));
	g_autofree char *content_type = NULL, *body = NULL;
	gint64 length = -1;
	TestPage *page;
	gint64 *size;

	g_mutex_lock(&server->lock);
	page = head ? NULL : g_hash_table_lookup(server->pages, key);
	if (page) {
		content_type = g_strdup(page->content_type);
		body = g_strdup(page->body);
	}
	size = head ? g_hash_table_lookup(server->sizes, key) : NULL;
	if (size)
		length = *size;
	g_mutex_unlock(&server->lock);
	if (body) {
		g_atomic_int_inc(&server->page_gets);
		g_usleep(g_atomic_int_get(&server->delay_ms) * 1000);
		send_page(server, fd, request, content_type, body);
	} else if (length >= 0) {
		g_autofree char *header = g_strdup_printf(
			"HTTP/1.1 200 OK\r\nContent-Length: %" G_GINT64_FORMAT
			"\r\nLast-Modified: " LAST_MODIFIED "\r\n"
			"Connection: close\r\n\r\n",
			length);

		send_all(fd, header, strlen(header));
	} else if (strcmp(key, "/") && strcmp(key, "/f")) {
		send_response(fd, "404 Not Found", "text/html", "<html>not found</html>");
	} else {
		return FALSE;
	}
	return TRUE;
}

/* Records the request's If-Range; FALSE when it names another version
 * than etag, or a date other than the file's (SERVE_RANGES only). */
static gboolean range_is_current(TestServer *server, const char *request, const char *etag)
{
	const char *field = strstr(request, "\r\nIf-Range: ");
	g_autofree char *value = NULL;
	gboolean current;

	if (field) {
		field += strlen("\r\nIf-Range: ");
		value = g_strndup(field, strcspn(field, "\r\n"));
	}
	current = !value || server->mode != SERVE_RANGES || !strcmp(value, etag) ||
		  !strcmp(value, LAST_MODIFIED);
	g_mutex_lock(&server->lock);
	g_free(server->if_range);
	server->if_range = g_steal_pointer(&value);
	g_mutex_unlock(&server->lock);
	return current;
}

static void send_whole_file(TestServer *server, int fd, const char *etag)
{
	char header[512];

	g_snprintf(header, sizeof(header),
		   "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: %s\r\nConnection: close\r\n\r\n",
		   TEST_FILE_SIZE, etag);
	send_all(fd, header, strlen(header));
	send_file(server, fd, 0, TEST_FILE_SIZE);
}

static void serve_one(TestServer *server, int fd)
{
	char request[4096], header[512], etag[32];
	ssize_t n = recv(fd, request, sizeof(request) - 1, 0);
	guint64 first = 0, last = TEST_FILE_SIZE - 1;
	const char *range;
	int count;

	if (n <= 0)
		return;
	request[n] = '\0';
	if (!strchr(request, ' ') || serve_scripted(server, fd, request))
		return;
	if (g_str_has_prefix(request, "GET / ")) {
		serve_listing(server, fd);
		return;
	}
	if (g_str_has_prefix(request, "HEAD ")) {
		g_atomic_int_inc(&server->heads);
		g_snprintf(header, sizeof(header),
			   "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"v%u\"\r\n"
			   "Last-Modified: " LAST_MODIFIED "\r\nConnection: close\r\n\r\n",
			   TEST_FILE_SIZE, g_atomic_int_get(&server->version));
		send_all(fd, header, strlen(header));
		return;
	}
	count = g_atomic_int_add(&server->requests, 1);
	if (g_atomic_int_get(&server->delay_ms))
		g_usleep(g_atomic_int_get(&server->delay_ms) * 1000);
	g_snprintf(etag, sizeof(etag), "\"v%u\"", g_atomic_int_get(&server->version));
	if (!range_is_current(server, request, etag)) {
		send_whole_file(server, fd, etag);
		return;
	}
	range = strstr(request, "Range: bytes=");
	if (range)
		sscanf(range, "Range: bytes=%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, &first, &last);
	last = MIN(last, TEST_FILE_SIZE - 1);
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
			   "\r\nETag: %s\r\nConnection: close\r\n\r\n",
			   first, last, TEST_FILE_SIZE, last - first + 1, etag);
		send_all(fd, header, strlen(header));
		if (server->mode != SERVE_TRICKLE) {
			send_file(server, fd, first, last - first + 1);
			return;
		}
		for (guint64 i = first; i <= last && !g_atomic_int_get(&server->stop); i++) {
			if (!send_file(server, fd, i, 1))
				return;
			g_usleep(100 * 1000);
		}
		return;
	case SERVE_WHOLE:
		g_snprintf(header, sizeof(header),
			   "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
			   TEST_FILE_SIZE);
		send_all(fd, header, strlen(header));
		send_file(server, fd, 0, TEST_FILE_SIZE);
		return;
	case SERVE_OVERRUN: {
		static guint8 junk[5000];

		memset(junk, 0xee, sizeof(junk));
		g_snprintf(header, sizeof(header),
			   "HTTP/1.1 206 Partial\r\nContent-Range: bytes %" G_GUINT64_FORMAT
			   "-%d/%d\r\nContent-Length: %" G_GUINT64_FORMAT
			   "\r\nConnection: close\r\n\r\n",
			   first, TEST_FILE_SIZE + 4999, TEST_FILE_SIZE, TEST_FILE_SIZE + 5000 - first);
		send_all(fd, header, strlen(header));
		send_file(server, fd, first, TEST_FILE_SIZE - first);
		send_all(fd, junk, sizeof(junk));
		return;
	}
	case SERVE_SURPLUS: {
		static guint8 junk[16384];

		memset(junk, 0xee, sizeof(junk));
		send_all(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", 38);
		send_file(server, fd, 0, TEST_FILE_SIZE);
		for (int i = 0; i < 100000 && !g_atomic_int_get(&server->stop); i++)
			if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) <= 0)
				return;
		return;
	}
	}
}

static gpointer server_main(gpointer data)
{
	TestServer *server = data;

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

static void fill_file(TestServer *server)
{
	guint version = g_atomic_int_get(&server->version);

	for (int i = 0; i < TEST_FILE_SIZE; i++)
		server->file[i] = (guint8)(i * 7 + i / 251 + version * 13);
}

void test_server_set_page(TestServer *server, const char *path, const char *content_type,
			  const char *body)
{
	g_mutex_lock(&server->lock);
	if (body) {
		TestPage *page = g_new0(TestPage, 1);

		page->content_type = g_strdup(content_type);
		page->body = g_strdup(body);
		g_hash_table_insert(server->pages, g_strdup(path), page);
	} else {
		g_hash_table_remove(server->pages, path);
	}
	g_mutex_unlock(&server->lock);
}

void test_server_set_head(TestServer *server, const char *path, gint64 size)
{
	g_mutex_lock(&server->lock);
	if (size >= 0)
		g_hash_table_insert(server->sizes, g_strdup(path), g_memdup2(&size, sizeof(size)));
	else
		g_hash_table_remove(server->sizes, path);
	g_mutex_unlock(&server->lock);
}

void test_server_change(TestServer *server)
{
	g_mutex_lock(&server->lock);
	g_atomic_int_inc(&server->version);
	fill_file(server);
	g_mutex_unlock(&server->lock);
}

char *test_server_url(TestServer *server, const char *path)
{
	return g_strdup_printf("http://127.0.0.1:%d%s", server->port, path);
}

TestServer *test_server_start(ServeMode mode)
{
	TestServer *server = g_new0(TestServer, 1);
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);

	fill_file(server);
	server->mode = mode;
	g_mutex_init(&server->lock);
	server->pages = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, page_free);
	server->sizes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	server->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	g_assert_cmpint(bind(server->listener, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
	g_assert_cmpint(listen(server->listener, 16), ==, 0);
	getsockname(server->listener, (struct sockaddr *)&addr, &len);
	server->port = ntohs(addr.sin_port);
	server->thread = g_thread_new("server", server_main, server);
	return server;
}

void test_server_stop(TestServer *server)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(server->port) };

	g_atomic_int_set(&server->stop, 1);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	connect(fd, (struct sockaddr *)&addr, sizeof(addr)); /* wakes accept() */
	close(fd);
	g_thread_join(server->thread);
	close(server->listener);
	g_hash_table_unref(server->pages);
	g_hash_table_unref(server->sizes);
	g_mutex_clear(&server->lock);
	g_free(server->if_range);
	g_free(server);
}

char *test_server_last_if_range(TestServer *server)
{
	char *value;

	g_mutex_lock(&server->lock);
	value = g_strdup(server->if_range);
	g_mutex_unlock(&server->lock);
	return value;
}
