/* One event loop over libcurl's multi interface; see engine.h.
 *
 * Other threads only append to `submitted` and wake the loop
 * (curl_multi_wakeup); everything else, every curl call included, happens
 * on the loop's thread, so the queues and counters below need no lock.
 */
#include "engine.h"
#include "error.h"
#include "headers.h"
#include "linkstats.h"

#include <errno.h>
#include <string.h>

/* A transfer running this long lends its slot to queued work. */
#define LEND_SLOT_AFTER_USEC (3 * G_USEC_PER_SEC)
/* Streams per HTTP/2 connection, as libcurl's default and under nginx's
 * (128): more would only queue inside libcurl. */
#define STREAMS_PER_CONNECTION 100
/* The loop looks at stalled transfers, backoffs and shutdown this often. */
#define IDLE_POLL_MS 1000

typedef struct {
	HsmEngine *engine;
	const HsmTransferOps *ops;
	gpointer data;
	char *url;
	gboolean bulk;
	guint failures;          /* failed attempts so far */
	gint64 resume_at;        /* monotonic usec, while backing off */
	gint64 started;          /* monotonic usec, while running */
	gboolean lent;           /* its slot was lent to queued work */
	gboolean unwanted;       /* the progress callback found nobody wants it */
	CURL *curl;              /* the running attempt */
	GList running_link;      /* in HsmEngine.running, while curl runs */
	HsmResponse response;
} Transfer;

struct HsmEngine {
	HsmFetchOptions options; /* immutable */
	GThread *thread;         /* immutable */
	CURLM *multi;            /* immutable */
	CURLSH *share;           /* TLS sessions, for new connections; immutable */
	gint stopping;           /* atomic */
	GMutex lock;
	GQueue submitted;        /* protected by lock */
	/* The loop's own: */
	GQueue urgent, bulk;     /* waiting for a slot */
	GQueue backing_off;      /* sorted by resume_at */
	GQueue running;          /* of Transfer, through running_link */
	guint lent;
	gboolean multiplexing;   /* the origin answered over HTTP/2 or later */
	HsmLinkStats link;       /* thread-safe */
	guint64 logged_bandwidth_delay;
};

void hsm_fetch_options_init(HsmFetchOptions *options)
{
	*options = (HsmFetchOptions){
		.max_connections = 8,
		.retries = 5,
		.connect_timeout = 15,
		.stall_timeout = 30,
		.min_rate = 1024,
		.retry_delay_ms = 250,
	};
}

void hsm_fetch_options_copy(HsmFetchOptions *to, const HsmFetchOptions *from)
{
	*to = *from;
	to->user_agent = g_strdup(from->user_agent);
	to->credentials = g_strdup(from->credentials);
	to->proxy = g_strdup(from->proxy);
	to->proxy_credentials = g_strdup(from->proxy_credentials);
	to->cacert = g_strdup(from->cacert);
}

void hsm_fetch_options_clear(HsmFetchOptions *options)
{
	g_free(options->user_agent);
	g_free(options->credentials);
	g_free(options->proxy);
	g_free(options->proxy_credentials);
	g_free(options->cacert);
	memset(options, 0, sizeof(*options));
}

static gboolean stopping(HsmEngine *engine)
{
	return g_atomic_int_get(&engine->stopping);
}

static void response_clear(HsmResponse *response)
{
	g_free(response->etag);
	g_free(response->last_modified);
	g_free(response->cache_control);
	g_free(response->content_range);
	response->etag = response->last_modified = response->cache_control = NULL;
	response->content_range = NULL;
	response->retry_after = -1;
	response->age = 0;
}

/* ---- Callbacks from libcurl ---- */

static char *strip_header_value(const char *line, gsize len, gsize name_len)
{
	return g_strstrip(g_strndup(line + name_len, len - name_len));
}

static size_t on_header(char *line, size_t size, size_t count, void *user)
{
	HsmResponse *response = user;
	gsize len = size * count;

	if (len >= 5 && !strncmp(line, "HTTP/", 5)) {
		response_clear(response);
	} else if (len > 5 && !g_ascii_strncasecmp(line, "ETag:", 5)) {
		g_free(response->etag);
		response->etag = strip_header_value(line, len, 5);
	} else if (len > 14 && !g_ascii_strncasecmp(line, "Last-Modified:", 14)) {
		g_free(response->last_modified);
		response->last_modified = strip_header_value(line, len, 14);
	} else if (len > 14 && !g_ascii_strncasecmp(line, "Cache-Control:", 14)) {
		g_free(response->cache_control);
		response->cache_control = strip_header_value(line, len, 14);
	} else if (len > 14 && !g_ascii_strncasecmp(line, "Content-Range:", 14)) {
		g_free(response->content_range);
		response->content_range = strip_header_value(line, len, 14);
	} else if (len > 12 && !g_ascii_strncasecmp(line, "Retry-After:", 12)) {
		g_autofree char *value = strip_header_value(line, len, 12);

		response->retry_after = hsm_retry_after_parse(value);
	} else if (len > 4 && !g_ascii_strncasecmp(line, "Age:", 4)) {
		g_autofree char *value = strip_header_value(line, len, 4);

		response->age = hsm_age_parse(value);
	}
	return len;
}

static void release_lent_slot(Transfer *t)
{
	if (t->lent)
		t->engine->lent--;
	t->lent = FALSE;
}

/* Called about once a second even when no byte moves: non-zero aborts. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	Transfer *t = user;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (stopping(t->engine))
		return 1;
	if (!t->lent && g_get_monotonic_time() - t->started > LEND_SLOT_AFTER_USEC) {
		t->lent = TRUE;
		t->engine->lent++;
	}
	if (t->ops->wanted && !t->ops->wanted(t->data)) {
		t->unwanted = TRUE;
		return 1;
	}
	return 0;
}

/* ---- Attempts ---- */

static void set_common_options(Transfer *t, CURL *curl)
{
	const HsmFetchOptions *o = &t->engine->options;

	curl_easy_setopt(curl, CURLOPT_URL, t->url);
	curl_easy_setopt(curl, CURLOPT_PRIVATE, t);
	curl_easy_setopt(curl, CURLOPT_SHARE, t->engine->share);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
	/* Wait for a connection that may turn out to multiplex rather than
	 * open another one: over HTTP/2, one connection carries them all. */
	curl_easy_setopt(curl, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(curl, CURLOPT_FILETIME, 1L); /* Last-Modified, parsed */
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, (long)o->connect_timeout);
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, (long)MAX(o->min_rate, 1u));
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, (long)o->stall_timeout);
	curl_easy_setopt(curl, CURLOPT_USERAGENT,
			 o->user_agent ? o->user_agent : "httphsm/" HTTPHSM_VERSION);
	if (o->credentials)
		curl_easy_setopt(curl, CURLOPT_USERPWD, o->credentials);
	if (o->netrc)
		curl_easy_setopt(curl, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
	if (o->proxy)
		curl_easy_setopt(curl, CURLOPT_PROXY, o->proxy);
	if (o->proxy_credentials) {
		curl_easy_setopt(curl, CURLOPT_PROXYUSERPWD, o->proxy_credentials);
		curl_easy_setopt(curl, CURLOPT_PROXYAUTH, (long)CURLAUTH_ANY);
	}
	if (o->cacert)
		curl_easy_setopt(curl, CURLOPT_CAINFO, o->cacert);
	if (o->insecure) {
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(curl, CURLOPT_XFERINFODATA, t);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, t->response.error);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t->response);
}

static void start_attempt(HsmEngine *engine, Transfer *t)
{
	CURL *curl = curl_easy_init();

	if (!curl)
		g_error("curl_easy_init failed: out of memory");
	response_clear(&t->response);
	t->response.error[0] = '\0';
	t->unwanted = FALSE;
	t->started = g_get_monotonic_time();
	t->curl = curl;
	set_common_options(t, curl);
	t->ops->prepare(t->data, curl, &t->response);
	curl_multi_add_handle(engine->multi, curl);
	t->running_link.data = t;
	g_queue_push_tail_link(&engine->running, &t->running_link);
}

static void end_attempt(HsmEngine *engine, Transfer *t)
{
	curl_multi_remove_handle(engine->multi, t->curl);
	curl_easy_cleanup(t->curl);
	t->curl = NULL;
	release_lent_slot(t);
	g_queue_unlink(&engine->running, &t->running_link);
}

static void finish(Transfer *t, GError *err)
{
	t->ops->finish(t->data, err);
	response_clear(&t->response);
	g_free(t->url);
	g_free(t);
}

static void finish_cancelled(Transfer *t, const char *why)
{
	GError *err = g_error_new(HSM_ERROR, ECANCELED, "%s: %s", t->url, why);

	finish(t, err);
}

/* ---- Retries ---- */

static int errno_for_status(long status)
{
	switch (status) {
	case 404:
	case 410:
		return ENOENT;
	case 401:
	case 403:
	case 407:
		return EACCES;
	default:
		return EIO;
	}
}

static gboolean status_is_transient(long status)
{
	return status == 408 || status == 429 || status >= 500;
}

static gboolean curl_error_is_transient(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_BAD_CONTENT_ENCODING:
		return TRUE;
	default:
		return FALSE;
	}
}

/* Backoff before the attempt after `failures` failed ones: doubling, at
 * least what Retry-After asks, at most 30 s. */
static gint64 backoff_usec(HsmEngine *engine, guint failures, gint64 retry_after)
{
	guint64 delay_ms = (guint64)engine->options.retry_delay_ms << MIN(failures - 1, 5u);

	if (retry_after >= 0)
		delay_ms = MAX(delay_ms, (guint64)MIN(retry_after, 30) * 1000);
	return (gint64)MIN(delay_ms, 30000u) * 1000;
}

static gint by_resume_time(gconstpointer a, gconstpointer b, gpointer user)
{
	const Transfer *x = a, *y = b;

	(void)user;
	return (x->resume_at > y->resume_at) - (x->resume_at < y->resume_at);
}

/* A failed attempt: back off and try again, or finish with its error. */
static void failed(HsmEngine *engine, Transfer *t, CURLcode rc, long status, const char *method)
{
	gboolean transient = status ? status_is_transient(status) : curl_error_is_transient(rc);
	g_autofree char *tries = NULL;

	t->failures++;
	if (transient && t->failures <= engine->options.retries) {
		g_debug("%s %s: %s, retrying", method, t->url,
			status ? "server error" : curl_easy_strerror(rc));
		t->resume_at = g_get_monotonic_time() +
			       backoff_usec(engine, t->failures, t->response.retry_after);
		g_queue_insert_sorted(&engine->backing_off, t, by_resume_time, NULL);
		return;
	}
	tries = t->failures > 1 ? g_strdup_printf(" (after %u attempts)", t->failures) : g_strdup("");
	if (status)
		finish(t, g_error_new(HSM_ERROR, errno_for_status(status), "%s %s: HTTP %ld%s", method,
				      t->url, status, tries));
	else
		finish(t, g_error_new(HSM_ERROR, EIO, "%s %s: %s%s", method, t->url,
				      t->response.error[0] ? t->response.error : curl_easy_strerror(rc),
				      tries));
}

/* Over HTTP/2, requests share connections: many may run at once. */
static void learn_protocol(HsmEngine *engine, CURL *curl)
{
	long version = 0;

	curl_easy_getinfo(curl, CURLINFO_HTTP_VERSION, &version);
	if (version >= CURL_HTTP_VERSION_2_0 && !engine->multiplexing) {
		g_debug("the server speaks HTTP/2: requests are multiplexed");
		engine->multiplexing = TRUE;
	}
}

/* Says what read-ahead is sized by, when it moved by a quarter or more. */
static void log_link_change(HsmEngine *engine)
{
	guint64 bytes = hsm_link_stats_bandwidth_delay(&engine->link);
	gint64 rtt_usec;
	double bytes_per_usec;

	if (bytes * 4 >= engine->logged_bandwidth_delay * 3 &&
	    bytes * 4 <= engine->logged_bandwidth_delay * 5)
		return;
	engine->logged_bandwidth_delay = bytes;
	hsm_link_stats_read(&engine->link, &rtt_usec, &bytes_per_usec);
	g_debug("link: %.2f ms round trip, %.1f MB/s, %" G_GUINT64_FORMAT " bytes in flight",
		(double)rtt_usec / 1000, bytes_per_usec, bytes);
}

/* A complete response tells how long a request takes and how fast a
 * body comes (connection set-up excluded: it is paid once). */
static void learn_link(HsmEngine *engine, CURL *curl)
{
	curl_off_t pretransfer = 0, first_byte = 0, total = 0, bytes = 0;

	curl_easy_getinfo(curl, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
	curl_easy_getinfo(curl, CURLINFO_STARTTRANSFER_TIME_T, &first_byte);
	curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME_T, &total);
	curl_easy_getinfo(curl, CURLINFO_SIZE_DOWNLOAD_T, &bytes);
	if (first_byte <= pretransfer)
		return;
	hsm_link_stats_add(&engine->link, first_byte - pretransfer, (guint64)bytes,
			   total - first_byte);
	log_link_change(engine);
}

static void attempt_ended(HsmEngine *engine, Transfer *t, CURLcode rc)
{
	g_autofree char *method = NULL;
	const char *effective = NULL;
	GError *err = NULL;
	HsmAttempt next;
	long status = 0;

	learn_protocol(engine, t->curl);
	if (rc == CURLE_OK)
		learn_link(engine, t->curl);
	if (t->unwanted) {
		end_attempt(engine, t);
		finish_cancelled(t, "nobody waits for it any more");
		return;
	}
	next = t->ops->ended(t->data, t->curl, &rc, &t->response, &err);
	curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(t->curl, CURLINFO_EFFECTIVE_METHOD, &effective);
	method = g_strdup(effective ? effective : "GET");
	end_attempt(engine, t);
	if (next == HSM_ATTEMPT_DONE)
		finish(t, err);
	else if (next == HSM_ATTEMPT_AGAIN)
		g_queue_push_head(t->bulk ? &engine->bulk : &engine->urgent, t);
	else
		failed(engine, t, rc, rc == CURLE_OK ? status : 0, method);
}

/* ---- The loop ---- */

static guint slots(HsmEngine *engine)
{
	guint max = engine->options.max_connections;

	if (engine->multiplexing)
		return max * STREAMS_PER_CONNECTION;
	return max + MIN(engine->lent, max);
}

static gboolean can_start(HsmEngine *engine)
{
	return engine->running.length < slots(engine) &&
	       (engine->urgent.length || engine->bulk.length);
}

static void start_queued(HsmEngine *engine)
{
	while (can_start(engine)) {
		Transfer *t = g_queue_pop_head(&engine->urgent);

		start_attempt(engine, t ? t : g_queue_pop_head(&engine->bulk));
	}
}

/* Moves what other threads submitted to the queues; FALSE once stopping. */
static gboolean take_submitted(HsmEngine *engine)
{
	Transfer *t;

	g_mutex_lock(&engine->lock);
	while ((t = g_queue_pop_head(&engine->submitted)))
		g_queue_push_tail(t->bulk ? &engine->bulk : &engine->urgent, t);
	g_mutex_unlock(&engine->lock);
	return !stopping(engine);
}

static void resume_backed_off(HsmEngine *engine)
{
	gint64 now = g_get_monotonic_time();
	Transfer *t;

	while ((t = g_queue_peek_head(&engine->backing_off)) && t->resume_at <= now) {
		g_queue_pop_head(&engine->backing_off);
		if (t->ops->wanted && !t->ops->wanted(t->data))
			finish_cancelled(t, "nobody waits for it any more");
		else
			g_queue_push_tail(t->bulk ? &engine->bulk : &engine->urgent, t);
	}
}

static void collect_ended(HsmEngine *engine)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(engine->multi, &left))) {
		Transfer *t = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
		attempt_ended(engine, t, msg->data.result);
	}
}

static int poll_timeout_ms(HsmEngine *engine)
{
	Transfer *next = g_queue_peek_head(&engine->backing_off);
	gint64 wait_ms;

	if (can_start(engine))
		return 0;
	if (!next)
		return IDLE_POLL_MS;
	wait_ms = (next->resume_at - g_get_monotonic_time() + 999) / 1000;
	return (int)CLAMP(wait_ms, 0, IDLE_POLL_MS);
}

static void cancel_queue(GQueue *queue)
{
	Transfer *t;

	while ((t = g_queue_pop_head(queue)))
		finish_cancelled(t, "cancelled");
}

static void cancel_everything(HsmEngine *engine)
{
	GList *link;

	while ((link = g_queue_peek_head_link(&engine->running))) {
		Transfer *t = link->data;

		end_attempt(engine, t);
		finish_cancelled(t, "cancelled");
	}
	take_submitted(engine);
	cancel_queue(&engine->urgent);
	cancel_queue(&engine->bulk);
	cancel_queue(&engine->backing_off);
}

static gpointer run_loop(gpointer data)
{
	HsmEngine *engine = data;
	int still_running;

	while (take_submitted(engine)) {
		resume_backed_off(engine);
		start_queued(engine);
		curl_multi_perform(engine->multi, &still_running);
		collect_ended(engine);
		curl_multi_poll(engine->multi, NULL, 0, poll_timeout_ms(engine), NULL);
	}
	cancel_everything(engine);
	return NULL;
}

/* ---- Public ---- */

void hsm_engine_submit(HsmEngine *engine, const char *url, gboolean bulk,
		       const HsmTransferOps *ops, gpointer data)
{
	Transfer *t = g_new0(Transfer, 1);

	t->engine = engine;
	t->ops = ops;
	t->data = data;
	t->url = g_strdup(url);
	t->bulk = bulk;
	t->response.retry_after = -1;
	g_mutex_lock(&engine->lock);
	g_queue_push_tail(&engine->submitted, t);
	g_mutex_unlock(&engine->lock);
	curl_multi_wakeup(engine->multi);
}

guint64 hsm_engine_bandwidth_delay(HsmEngine *engine)
{
	return hsm_link_stats_bandwidth_delay(&engine->link);
}

gboolean hsm_engine_is_own_thread(HsmEngine *engine)
{
	return g_thread_self() == engine->thread;
}

HsmEngine *hsm_engine_new(const HsmFetchOptions *options)
{
	static gsize curl_ready;
	HsmEngine *engine = g_new0(HsmEngine, 1);
	long max;

	if (g_once_init_enter(&curl_ready)) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		g_once_init_leave(&curl_ready, 1);
	}
	hsm_fetch_options_copy(&engine->options, options);
	engine->options.max_connections = MAX(options->max_connections, 1u);
	max = (long)engine->options.max_connections * 2; /* lent slots included */
	g_mutex_init(&engine->lock);
	hsm_link_stats_init(&engine->link);
	engine->share = curl_share_init();
	curl_share_setopt(engine->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	engine->multi = curl_multi_init();
	if (!engine->share || !engine->multi)
		g_error("libcurl: out of memory");
	curl_multi_setopt(engine->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
	curl_multi_setopt(engine->multi, CURLMOPT_MAX_HOST_CONNECTIONS, max);
	/* Keeps every idle connection for the next request (the default, 4,
	 * would close most of a burst's). */
	curl_multi_setopt(engine->multi, CURLMOPT_MAXCONNECTS, max);
	curl_multi_setopt(engine->multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
			  (long)STREAMS_PER_CONNECTION);
	engine->thread = g_thread_new("fetch", run_loop, engine);
	return engine;
}

void hsm_engine_free(HsmEngine *engine)
{
	if (!engine)
		return;
	g_atomic_int_set(&engine->stopping, 1);
	curl_multi_wakeup(engine->multi);
	g_thread_join(engine->thread);
	cancel_queue(&engine->submitted); /* a caller that raced the stop */
	curl_multi_cleanup(engine->multi);
	curl_share_cleanup(engine->share);
	g_mutex_clear(&engine->lock);
	hsm_link_stats_clear(&engine->link);
	hsm_fetch_options_clear(&engine->options);
	g_free(engine);
}
