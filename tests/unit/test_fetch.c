/* The fetcher against a scripted HTTP/1.1 server on 127.0.0.1: ranges,
 * servers that ignore Range or send more than asked, 5xx, trickles, and
 * transfers nobody wants any more.  No FUSE, no fanotify, no root. */
#include "error.h"
#include "fetch.h"
#include "testcache.h"

#include <errno.h>
#include <string.h>

#define FILE_SIZE TEST_FILE_SIZE

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
	gboolean whole_body;    /* what check() was told */
	char *etag;
} Sink;

static gboolean sink_check(gpointer user, const HsmRemoteInfo *info, GError **err)
{
	Sink *sink = user;

	(void)err;
	g_mutex_lock(&sink->lock);
	sink->whole_body = info->whole_body;
	g_free(sink->etag);
	sink->etag = g_strdup(info->etag);
	g_mutex_unlock(&sink->lock);
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

/* Fetches [start, end) of the server's file, held in the version that
 * etag and mtime name, and waits for the outcome. */
static Sink *fetch_version(TestServer *server, HsmFetchOptions *options, guint64 start,
			   guint64 end, const char *etag, gint64 mtime)
{
	HsmHeldVersion held = { .size = FILE_SIZE, .etag = etag, .mtime = mtime };
	g_autofree char *url = test_server_url(server, "/f");
	HsmFetcher *fetcher = hsm_fetcher_new(options);
	Sink *sink = g_new0(Sink, 1);

	sink->wanted = TRUE;
	g_mutex_init(&sink->lock);
	g_cond_init(&sink->cond);
	hsm_fetch_range(fetcher, url, start, end, &held, &sink_ops, sink);
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
	g_free(sink->etag);
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

static Sink *fetch(TestServer *server, HsmFetchOptions *options, guint64 start, guint64 end)
{
	return fetch_version(server, options, start, end, NULL, -1);
}

static void assert_bytes(TestServer *server, Sink *sink, guint64 start, guint64 end)
{
	g_assert_no_error(sink->error);
	g_assert_false(sink->past_size);
	g_assert_cmpmem(sink->data + start, end - start, server->file + start, end - start);
}

static void test_range(void)
{
	TestServer *server = test_server_start(SERVE_RANGES);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 4096, 20000);

	assert_bytes(server, sink, 4096, 20000);
	g_assert_cmpuint(sink->written, ==, 20000 - 4096);
	sink_free(sink);
	test_server_stop(server);
}

static void test_whole_body_for_a_range(void)
{
	TestServer *server = test_server_start(SERVE_WHOLE);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 50000, 60000);

	/* The server sent everything: all of it is file data, kept. */
	assert_bytes(server, sink, 0, FILE_SIZE);
	sink_free(sink);
	test_server_stop(server);
}

/* The version held travels as If-Range; when it is not the server's any
 * more, the whole new version comes (200), which check() is told. */
static void test_if_range(void)
{
	TestServer *server = test_server_start(SERVE_RANGES);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch_version(server, &options, 4096, 8192, "\"v0\"", 1e9);
	g_autofree char *sent = test_server_last_if_range(server);

	g_assert_cmpstr(sent, ==, "\"v0\"");
	g_assert_false(sink->whole_body);
	g_assert_cmpuint(sink->written, ==, 4096);
	sink_free(sink);

	test_server_change(server);
	sink = fetch_version(server, &options, 4096, 8192, "\"v0\"", -1);
	g_assert_true(sink->whole_body);
	g_assert_cmpstr(sink->etag, ==, "\"v1\"");
	sink_free(sink);
	test_server_stop(server);
}

/* Without an ETag, the Last-Modified date; a weak ETag is never sent, nor
 * a date beside it. */
static void test_if_range_validator_choice(void)
{
	TestServer *server = test_server_start(SERVE_RANGES);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch_version(server, &options, 0, 4096, NULL, 1796206833);
	g_autofree char *date = test_server_last_if_range(server);
	g_autofree char *none = NULL;

	g_assert_cmpstr(date, ==, "Wed, 02 Dec 2026 10:20:33 GMT");
	g_assert_false(sink->whole_body);
	sink_free(sink);
	sink = fetch_version(server, &options, 0, 4096, "W/\"v0\"", 1796206833);
	none = test_server_last_if_range(server);
	g_assert_null(none);
	sink_free(sink);
	test_server_stop(server);
}

static void test_overrun_is_cut(void)
{
	TestServer *server = test_server_start(SERVE_OVERRUN);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 90000, FILE_SIZE);

	assert_bytes(server, sink, 90000, FILE_SIZE);
	g_assert_cmpuint(sink->written, ==, FILE_SIZE - 90000);
	sink_free(sink);
	test_server_stop(server);
}

static void test_endless_surplus_is_hung_up_on(void)
{
	TestServer *server = test_server_start(SERVE_SURPLUS);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 0, FILE_SIZE);

	assert_bytes(server, sink, 0, FILE_SIZE);
	g_assert_cmpuint(sink->written, ==, FILE_SIZE);
	sink_free(sink);
	test_server_stop(server);
}

static void test_5xx_is_retried(void)
{
	TestServer *server = test_server_start(SERVE_503_TWICE);
	HsmFetchOptions options = quick_options();
	Sink *sink = fetch(server, &options, 0, 1000);

	assert_bytes(server, sink, 0, 1000);
	g_assert_cmpint(g_atomic_int_get(&server->requests), ==, 3);
	sink_free(sink);
	test_server_stop(server);
}

static void test_trickle_below_min_rate_fails(void)
{
	TestServer *server = test_server_start(SERVE_TRICKLE);
	HsmFetchOptions options = quick_options();
	Sink *sink;

	options.stall_timeout = 1;
	options.retries = 1;
	sink = fetch(server, &options, 0, FILE_SIZE);
	g_assert_error(sink->error, HSM_ERROR, EIO);
	g_assert_nonnull(strstr(sink->error->message, "too slow"));
	g_assert_cmpint(g_atomic_int_get(&server->requests), ==, 2);
	sink_free(sink);
	test_server_stop(server);
}

static gboolean unwant(gpointer data)
{
	g_atomic_int_set(&((Sink *)data)->wanted, 0);
	return G_SOURCE_REMOVE;
}

static void test_unwanted_transfer_is_cancelled(void)
{
	TestServer *server = test_server_start(SERVE_TRICKLE);
	g_autofree char *url = test_server_url(server, "/f");
	HsmFetchOptions options = quick_options();
	HsmFetcher *fetcher = hsm_fetcher_new(&options);
	HsmHeldVersion held = { .size = FILE_SIZE, .mtime = -1 };
	Sink *sink = g_new0(Sink, 1);
	gint64 start = g_get_monotonic_time();

	sink->wanted = TRUE;
	g_mutex_init(&sink->lock);
	g_cond_init(&sink->cond);
	hsm_fetch_range(fetcher, url, 0, FILE_SIZE, &held, &sink_ops, sink);
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
	test_server_stop(server);
}

typedef struct {
	guint begins;
	char *url;
	char *charset;
	GString *body;
} Streamed;

static void streamed_begin(gpointer data, const char *url, const char *charset)
{
	Streamed *streamed = data;

	streamed->begins++;
	g_free(streamed->url);
	g_free(streamed->charset);
	streamed->url = g_strdup(url);
	streamed->charset = g_strdup(charset);
	g_string_truncate(streamed->body, 0);
}

static void streamed_piece(gpointer data, const void *bytes, gsize len)
{
	Streamed *streamed = data;

	g_string_append_len(streamed->body, bytes, (gssize)len);
}

/* Fetches path with a stream into streamed (its body string made here). */
static gboolean fetch_streamed(TestServer *server, const char *path, Streamed *streamed,
			       HsmPage *page, GError **err)
{
	g_autofree char *url = test_server_url(server, path);
	HsmFetchOptions options = quick_options();
	HsmFetcher *fetcher = hsm_fetcher_new(&options);
	HsmPageStream stream = { streamed_begin, streamed_piece, streamed };
	gboolean ok;

	streamed->body = g_string_new(NULL);
	ok = hsm_fetch_page(fetcher, url, 4 << 20, NULL, &stream, page, err);
	hsm_fetcher_free(fetcher);
	return ok;
}

static void streamed_clear(Streamed *streamed)
{
	g_free(streamed->url);
	g_free(streamed->charset);
	g_string_free(streamed->body, TRUE);
}

/* A page is handed over as it arrives: once begun (its URL and charset),
 * then all of its bytes in order; what is not a 200 HTML page is not. */
static void test_page_stream(void)
{
	TestServer *server = test_server_start(SERVE_RANGES);
	g_autofree char *url = test_server_url(server, "/big/");
	GString *html = g_string_new("<pre>");
	g_autoptr(GError) err = NULL;
	Streamed streamed = { 0 };
	HsmPage page;

	for (int i = 0; i < 5000; i++)
		g_string_append_printf(html, "<a href=\"f%05d\">f%05d</a> 02-Dec-2026 10:20 %d\n", i,
				       i, i);
	test_server_set_page(server, "/big/", "text/html; charset=iso-8859-1", html->str);
	g_assert_true(fetch_streamed(server, "/big/", &streamed, &page, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(streamed.begins, ==, 1);
	g_assert_cmpstr(streamed.url, ==, url);
	g_assert_cmpstr(streamed.charset, ==, "iso-8859-1");
	g_assert_cmpmem(streamed.body->str, streamed.body->len, page.body->data, page.body->len);
	g_assert_cmpmem(page.body->data, page.body->len, html->str, html->len);
	hsm_page_clear(&page);
	streamed_clear(&streamed);

	test_server_set_page(server, "/plain", "text/plain", "<a href=\"x\">x</a>");
	memset(&streamed, 0, sizeof(streamed));
	g_assert_true(fetch_streamed(server, "/plain", &streamed, &page, &err));
	g_assert_false(page.is_html);
	g_assert_cmpuint(streamed.begins, ==, 0);
	hsm_page_clear(&page);
	streamed_clear(&streamed);

	memset(&streamed, 0, sizeof(streamed));
	g_assert_false(fetch_streamed(server, "/missing/", &streamed, &page, &err));
	g_assert_nonnull(err);
	g_assert_cmpuint(streamed.begins, ==, 0);
	streamed_clear(&streamed);
	g_string_free(html, TRUE);
	test_server_stop(server);
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv);
	g_test_add_func("/fetch/range", test_range);
	g_test_add_func("/fetch/whole-body-for-a-range", test_whole_body_for_a_range);
	g_test_add_func("/fetch/if-range", test_if_range);
	g_test_add_func("/fetch/if-range-validator-choice", test_if_range_validator_choice);
	g_test_add_func("/fetch/overrun-is-cut", test_overrun_is_cut);
	g_test_add_func("/fetch/endless-surplus", test_endless_surplus_is_hung_up_on);
	g_test_add_func("/fetch/5xx-retried", test_5xx_is_retried);
	g_test_add_func("/fetch/trickle-below-min-rate", test_trickle_below_min_rate_fails);
	g_test_add_func("/fetch/unwanted-is-cancelled", test_unwanted_transfer_is_cancelled);
	g_test_add_func("/fetch/page-stream", test_page_stream);
	return g_test_run();
}
