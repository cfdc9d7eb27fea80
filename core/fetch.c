/* HTTP transfers with libcurl; see fetch.h.
 *
 * Every request gets its own easy handle; the handles share one connection
 * cache, DNS cache and TLS session cache through a CURLSH, so requests from
 * any thread reuse keep-alive connections.  Range transfers and HEADs run on
 * a GThreadPool whose size bounds the number of parallel connections.
 */
#include "fetch.h"
#include "error.h"
#include "headers.h"

#include <curl/curl.h>
#include <errno.h>
#include <string.h>

#define RANGE_BUFFER_SIZE (512L * 1024)
/* A transfer running this long lends its pool slot to queued work. */
#define LEND_SLOT_AFTER_USEC (3 * G_USEC_PER_SEC)

struct HsmFetcher {
	HsmFetchOptions options;
	CURLSH *share;
	GMutex share_locks[CURL_LOCK_DATA_LAST];
	GThreadPool *pool;
	gint aborting;           /* atomic: set by hsm_fetcher_free() */
	GMutex lent_lock;
	guint lent;              /* slots lent by long transfers; protected by lent_lock */
};

typedef struct RangeTransfer RangeTransfer;

/* One request in flight, as its progress callback sees it. */
typedef struct {
	HsmFetcher *fetcher;
	RangeTransfer *range;    /* NULL for pages and HEADs */
	gboolean pooled;         /* runs on a pool thread */
	gint64 started;          /* monotonic usec */
	gboolean lent;           /* its slot was lent */
} Running;

/* The headers of the final response (redirects and 1xx reset them). */
typedef struct {
	char *etag;
	char *content_range;
	gint64 retry_after;      /* seconds, -1 when absent */
	char error[CURL_ERROR_SIZE]; /* libcurl's detailed message */
} ResponseHeaders;

typedef enum {
	TASK_HEAD,
	TASK_RANGE,
} TaskKind;

typedef struct {
	TaskKind kind;
	gpointer data;
} Task;

/* Completion of a batch of HEADs. */
typedef struct {
	GMutex lock;
	GCond cond;
	guint pending;           /* protected by lock */
} Batch;

typedef struct {
	HsmHeadJob *job;
	Batch *batch;
} HeadTask;

struct RangeTransfer {
	char *url;
	guint64 start, end;
	guint64 size;            /* the file's known size: no byte at or past it is written */
	guint64 next;            /* first byte of [start, end) not yet written */
	HsmRangeSink sink;
	gpointer user_data;
	/* State of the current attempt. */
	CURL *curl;
	ResponseHeaders headers;
	gboolean began;          /* the response status was looked at */
	gboolean unwanted;       /* not a 200/206: the body is not file data */
	guint64 stream_offset;   /* file offset of the next body byte */
	guint64 stream_limit;    /* bytes past this are not written */
	gboolean overran;        /* the response sent bytes past stream_limit */
	GError *fatal;           /* a non-retryable error from a callback */
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

void hsm_fetch_options_clear(HsmFetchOptions *options)
{
	g_free(options->user_agent);
	g_free(options->credentials);
	g_free(options->proxy);
	g_free(options->cacert);
	memset(options, 0, sizeof(*options));
}

void hsm_remote_info_clear(HsmRemoteInfo *info)
{
	g_free(info->etag);
	info->etag = NULL;
}

void hsm_page_clear(HsmPage *page)
{
	if (page->body)
		g_byte_array_unref(page->body);
	g_free(page->url);
	g_free(page->charset);
	memset(page, 0, sizeof(*page));
}

static void response_headers_clear(ResponseHeaders *headers)
{
	g_free(headers->etag);
	g_free(headers->content_range);
	headers->etag = headers->content_range = NULL;
	headers->retry_after = -1;
}

static void share_lock(CURL *curl, curl_lock_data data, curl_lock_access access, void *user)
{
	HsmFetcher *fetcher = user;

	(void)curl;
	(void)access;
	g_mutex_lock(&fetcher->share_locks[data]);
}

static void share_unlock(CURL *curl, curl_lock_data data, void *user)
{
	HsmFetcher *fetcher = user;

	(void)curl;
	g_mutex_unlock(&fetcher->share_locks[data]);
}

static gboolean aborting(HsmFetcher *fetcher)
{
	return g_atomic_int_get(&fetcher->aborting);
}

/* The pool may run one more thread per lent slot. */
static void set_lent(HsmFetcher *fetcher, int delta)
{
	guint max = fetcher->options.max_connections;

	g_mutex_lock(&fetcher->lent_lock);
	fetcher->lent += delta;
	/* A pool being freed takes no new limit. */
	if (!aborting(fetcher))
		g_thread_pool_set_max_threads(fetcher->pool, (gint)(max + MIN(fetcher->lent, max)),
					      NULL);
	g_mutex_unlock(&fetcher->lent_lock);
}

static void running_end(Running *running)
{
	if (running->lent)
		set_lent(running->fetcher, -1);
	running->lent = FALSE;
}

static gboolean range_wanted(RangeTransfer *t);

/* libcurl's progress callback, called about once a second even when no
 * byte moves: non-zero aborts the transfer. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	Running *running = user;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (aborting(running->fetcher))
		return 1;
	if (running->pooled && !running->lent &&
	    g_get_monotonic_time() - running->started > LEND_SLOT_AFTER_USEC) {
		running->lent = TRUE;
		set_lent(running->fetcher, 1);
	}
	return running->range && !range_wanted(running->range);
}

static char *strip_header_value(const char *line, gsize len, gsize name_len)
{
	return g_strstrip(g_strndup(line + name_len, len - name_len));
}

static size_t on_header(char *line, size_t size, size_t count, void *user)
{
	ResponseHeaders *headers = user;
	gsize len = size * count;

	if (len >= 5 && !strncmp(line, "HTTP/", 5)) {
		response_headers_clear(headers);
	} else if (len > 5 && !g_ascii_strncasecmp(line, "ETag:", 5)) {
		g_free(headers->etag);
		headers->etag = strip_header_value(line, len, 5);
	} else if (len > 14 && !g_ascii_strncasecmp(line, "Content-Range:", 14)) {
		g_free(headers->content_range);
		headers->content_range = strip_header_value(line, len, 14);
	} else if (len > 12 && !g_ascii_strncasecmp(line, "Retry-After:", 12)) {
		g_autofree char *value = strip_header_value(line, len, 12);

		headers->retry_after = hsm_retry_after_parse(value);
	}
	return len;
}

/* A handle with everything common to all requests set. */
static CURL *new_handle(Running *running, const char *url, ResponseHeaders *headers)
{
	HsmFetcher *fetcher = running->fetcher;
	const HsmFetchOptions *o = &fetcher->options;
	CURL *curl = curl_easy_init();

	if (!curl)
		g_error("curl_easy_init failed: out of memory");
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_SHARE, fetcher->share);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(curl, CURLOPT_FILETIME, 1L); /* Last-Modified, parsed */
	/* The shared pool keeps one idle connection per transfer thread;
	 * libcurl's default (4) would close most of them on return. */
	curl_easy_setopt(curl, CURLOPT_MAXCONNECTS, (long)o->max_connections * 2);
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
	if (o->cacert)
		curl_easy_setopt(curl, CURLOPT_CAINFO, o->cacert);
	if (o->insecure) {
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(curl, CURLOPT_XFERINFODATA, running);
	response_headers_clear(headers);
	headers->error[0] = '\0';
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, headers->error);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, headers);
	return curl;
}

static CURLcode perform(CURL *curl, long *status)
{
	CURLcode rc;

	rc = curl_easy_perform(curl);
	*status = 0;
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	return rc;
}

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

/* Sleeps before attempt number `attempt` (1-based), unless shutting down. */
static void backoff(HsmFetcher *fetcher, guint attempt, gint64 retry_after)
{
	guint64 delay_ms = (guint64)fetcher->options.retry_delay_ms << MIN(attempt - 1, 5u);

	if (retry_after >= 0)
		delay_ms = MAX(delay_ms, (guint64)MIN(retry_after, 30) * 1000);
	delay_ms = MIN(delay_ms, 30000u);
	for (guint64 slept = 0; slept < delay_ms && !aborting(fetcher); slept += 50)
		g_usleep(50 * 1000);
}

/* Decides what a failed attempt means.  Returns TRUE (after the backoff)
 * when the request should be sent again, else sets err. */
static gboolean should_retry(HsmFetcher *fetcher, const char *method, const char *url,
			     guint attempt, CURLcode rc, long status,
			     const ResponseHeaders *headers, GError **err)
{
	gboolean transient = status ? status_is_transient(status) : curl_error_is_transient(rc);
	guint attempts = attempt + 1;
	g_autofree char *tries = attempts > 1 ? g_strdup_printf(" (after %u attempts)", attempts)
					      : g_strdup("");

	if (aborting(fetcher)) {
		g_set_error(err, HSM_ERROR, ECANCELED, "%s %s: cancelled", method, url);
		return FALSE;
	}
	if (transient && attempt < fetcher->options.retries) {
		g_debug("%s %s: %s, retrying", method, url,
			status ? "server error" : curl_easy_strerror(rc));
		backoff(fetcher, attempt + 1, headers->retry_after);
		return !aborting(fetcher);
	}
	if (status)
		g_set_error(err, HSM_ERROR, errno_for_status(status), "%s %s: HTTP %ld%s", method,
			    url, status, tries);
	else
		g_set_error(err, HSM_ERROR, EIO, "%s %s: %s%s", method, url,
			    headers->error[0] ? headers->error : curl_easy_strerror(rc), tries);
	return FALSE;
}

/* ---- Listing pages ---- */

typedef struct {
	GByteArray *body;
	gsize max_size;
	gboolean too_big;
} PageSink;

static size_t on_page_body(char *data, size_t size, size_t count, void *user)
{
	PageSink *sink = user;
	gsize len = size * count;

	if (sink->body->len + len > sink->max_size) {
		sink->too_big = TRUE;
		return 0;
	}
	g_byte_array_append(sink->body, (const guint8 *)data, len);
	return len;
}

static void fill_page(CURL *curl, HsmPage *page, GByteArray *body)
{
	char *url = NULL, *type = NULL;

	curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &url);
	curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
	page->body = g_byte_array_ref(body);
	page->url = g_strdup(url);
	page->is_html = type && (g_str_has_prefix(type, "text/html") ||
				 g_str_has_prefix(type, "application/xhtml"));
	page->charset = hsm_content_type_charset(type);
}

gboolean hsm_fetch_page(HsmFetcher *fetcher, const char *url, gsize max_size, HsmPage *page,
			GError **err)
{
	ResponseHeaders headers = { 0 };
	Running running = { .fetcher = fetcher, .started = g_get_monotonic_time() };
	gboolean ok = FALSE;

	memset(page, 0, sizeof(*page));
	for (guint attempt = 0;; attempt++) {
		PageSink sink = { g_byte_array_new(), max_size, FALSE };
		CURL *curl = new_handle(&running, url, &headers);
		CURLcode rc;
		long status;

		curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_page_body);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
		rc = perform(curl, &status);
		if (rc == CURLE_OK && status == 200) {
			fill_page(curl, page, sink.body);
			ok = TRUE;
		} else if (sink.too_big) {
			g_set_error(err, HSM_ERROR, EFBIG, "GET %s: page larger than %zu bytes",
				    url, max_size);
		} else if (should_retry(fetcher, "GET", url, attempt, rc,
					rc == CURLE_OK ? status : 0, &headers, err)) {
			curl_easy_cleanup(curl);
			g_byte_array_unref(sink.body);
			continue;
		}
		curl_easy_cleanup(curl);
		g_byte_array_unref(sink.body);
		break;
	}
	response_headers_clear(&headers);
	return ok;
}

/* ---- HEAD ---- */

static size_t discard_body(char *data, size_t size, size_t count, void *user)
{
	(void)data, (void)user;
	(void)size, (void)count;
	return 0; /* the headers are all we wanted */
}

static void fill_remote_info(CURL *curl, const ResponseHeaders *headers, HsmRemoteInfo *info)
{
	curl_off_t length = -1, filetime = -1;

	curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
	curl_easy_getinfo(curl, CURLINFO_FILETIME_T, &filetime);
	info->size = headers->content_range ? hsm_content_range_total(headers->content_range)
		     : length >= 0	      ? (guint64)length
					      : G_MAXUINT64;
	info->mtime = filetime;
	g_free(info->etag);
	info->etag = g_strdup(headers->etag);
}

/* One HEAD; servers that refuse HEAD (405, 501) or omit the length get a
 * one-byte ranged GET instead. */
static void run_head(HsmFetcher *fetcher, HsmHeadJob *job)
{
	ResponseHeaders headers = { 0 };
	Running running = { fetcher, NULL, TRUE, g_get_monotonic_time(), FALSE };
	gboolean use_get = FALSE;
	guint attempt = 0;

	for (;;) {
		CURL *curl = new_handle(&running, job->url, &headers);
		gboolean again = FALSE;
		CURLcode rc;
		long status;

		if (use_get) {
			curl_easy_setopt(curl, CURLOPT_RANGE, "0-0");
			curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
		} else {
			curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
		}
		rc = perform(curl, &status);
		if (rc == CURLE_WRITE_ERROR && use_get)
			rc = CURLE_OK;
		if (rc == CURLE_OK && (status == 200 || status == 206)) {
			fill_remote_info(curl, &headers, &job->info);
			again = job->info.size == G_MAXUINT64 && !use_get;
			use_get = TRUE;
		} else if (rc == CURLE_OK && (status == 405 || status == 501) && !use_get) {
			again = use_get = TRUE;
		} else {
			again = should_retry(fetcher, use_get ? "GET" : "HEAD", job->url, attempt++, rc,
					     rc == CURLE_OK ? status : 0, &headers, &job->error);
		}
		curl_easy_cleanup(curl);
		if (!again)
			break;
	}
	running_end(&running);
	response_headers_clear(&headers);
}

static void push_task(HsmFetcher *fetcher, TaskKind kind, gpointer data)
{
	Task *task = g_new(Task, 1);

	task->kind = kind;
	task->data = data;
	g_thread_pool_push(fetcher->pool, task, NULL);
}

void hsm_fetch_heads(HsmFetcher *fetcher, HsmHeadJob *jobs, guint count)
{
	Batch batch = { .pending = count };

	g_mutex_init(&batch.lock);
	g_cond_init(&batch.cond);
	for (guint i = 0; i < count; i++) {
		HeadTask *head = g_new(HeadTask, 1);

		head->job = &jobs[i];
		head->batch = &batch;
		push_task(fetcher, TASK_HEAD, head);
	}
	g_mutex_lock(&batch.lock);
	while (batch.pending)
		g_cond_wait(&batch.cond, &batch.lock);
	g_mutex_unlock(&batch.lock);
	g_mutex_clear(&batch.lock);
	g_cond_clear(&batch.cond);
}

static void run_head_task(HsmFetcher *fetcher, HeadTask *head)
{
	Batch *batch = head->batch;

	run_head(fetcher, head->job);
	g_free(head);
	g_mutex_lock(&batch->lock);
	if (--batch->pending == 0)
		g_cond_signal(&batch->cond);
	g_mutex_unlock(&batch->lock);
}

/* ---- Ranges ---- */

/* Looks at the status of a response, once, before its body. */
static gboolean range_begin_response(RangeTransfer *t)
{
	HsmRemoteInfo info = { .size = G_MAXUINT64, .mtime = -1 };
	long status = 0;
	guint64 first, last;

	t->began = TRUE;
	curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status == 206) {
		if (!hsm_content_range_parse(t->headers.content_range, &first, &last) || first > t->next) {
			g_set_error(&t->fatal, HSM_ERROR, EIO,
				    "GET %s: bad Content-Range '%s' for bytes %" G_GUINT64_FORMAT "-",
				    t->url, t->headers.content_range ? t->headers.content_range : "",
				    t->next);
			return FALSE;
		}
		t->stream_offset = first;
		t->stream_limit = MIN(last + 1, t->end);
	} else if (status == 200) {
		t->stream_offset = 0;
		t->stream_limit = G_MAXUINT64;
		info.whole_body = TRUE;
	} else {
		t->unwanted = TRUE;
		return FALSE;
	}
	fill_remote_info(t->curl, &t->headers, &info);
	/* Nothing at or past the end of the file, as we or the server know it. */
	t->stream_limit = MIN(t->stream_limit, MIN(info.size, t->size));
	if (!t->sink.check(t->user_data, &info, &t->fatal)) {
		hsm_remote_info_clear(&info);
		return FALSE;
	}
	hsm_remote_info_clear(&info);
	return TRUE;
}

static size_t on_range_body(char *data, size_t size, size_t count, void *user)
{
	RangeTransfer *t = user;
	gsize len = size * count;
	guint64 offset;

	if (!t->began && !range_begin_response(t))
		return 0;
	offset = t->stream_offset;
	t->stream_offset += len;
	if (offset + len > t->stream_limit && !t->overran) {
		t->overran = TRUE;
		g_warning("GET %s: the server sent bytes past %" G_GUINT64_FORMAT
			  " (the range asked for, or the end of the file); they were cut",
			  t->url, t->stream_limit);
	}
	if (offset >= t->stream_limit) {
		if (t->next >= t->end)
			return 0; /* all asked for is written: stop the surplus */
		g_set_error(&t->fatal, HSM_ERROR, EIO,
			    "GET %s: response runs past the range it announced", t->url);
		return 0;
	}
	len = MIN(len, t->stream_limit - offset);
	if (!t->sink.write(t->user_data, offset, data, len, &t->fatal))
		return 0;
	if (offset <= t->next && offset + len > t->next)
		t->next = offset + len;
	return size * count;
}

static void finish_range(RangeTransfer *t, GError *err)
{
	t->sink.done(t->user_data, err);
	g_free(t->url);
	g_free(t);
}

static gboolean range_wanted(RangeTransfer *t)
{
	if (!t->sink.wanted || t->sink.wanted(t->user_data))
		return TRUE;
	if (!t->fatal)
		g_set_error(&t->fatal, HSM_ERROR, ECANCELED,
			    "GET %s: bytes %" G_GUINT64_FORMAT "-: nobody waits for them any more",
			    t->url, t->next);
	return FALSE;
}

static void run_range(HsmFetcher *fetcher, RangeTransfer *t)
{
	Running running = { fetcher, t, TRUE, g_get_monotonic_time(), FALSE };
	GError *err = NULL;

	for (guint attempt = 0;; attempt++) {
		char range[64];
		CURLcode rc;
		long status;

		t->curl = new_handle(&running, t->url, &t->headers);
		t->began = t->unwanted = FALSE;
		g_snprintf(range, sizeof(range), "%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, t->next,
			   t->end - 1);
		curl_easy_setopt(t->curl, CURLOPT_RANGE, range);
		/* Large pieces: each one is a pwrite() and a wake-up of readers. */
		curl_easy_setopt(t->curl, CURLOPT_BUFFERSIZE, RANGE_BUFFER_SIZE);
		curl_easy_setopt(t->curl, CURLOPT_WRITEFUNCTION, on_range_body);
		curl_easy_setopt(t->curl, CURLOPT_WRITEDATA, t);
		rc = perform(t->curl, &status);
		if (!t->began && rc == CURLE_OK && !range_begin_response(t) && !t->unwanted)
			rc = CURLE_WRITE_ERROR; /* check() refused an empty body */
		curl_easy_cleanup(t->curl);
		t->curl = NULL;
		if (t->fatal) {
			err = g_steal_pointer(&t->fatal);
			break;
		}
		if (t->next >= t->end)
			break;
		if (rc == CURLE_OK && !t->unwanted) {
			g_set_error(&err, HSM_ERROR, EIO,
				    "GET %s: response ended at byte %" G_GUINT64_FORMAT
				    " of %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT,
				    t->url, t->next, t->start, t->end);
			break;
		}
		if (!range_wanted(t)) {
			err = g_steal_pointer(&t->fatal);
			break;
		}
		if (!should_retry(fetcher, "GET", t->url, attempt, t->unwanted ? CURLE_OK : rc,
				  t->unwanted ? status : 0, &t->headers, &err))
			break;
	}
	running_end(&running);
	response_headers_clear(&t->headers);
	finish_range(t, err);
}

void hsm_fetch_range(HsmFetcher *fetcher, const char *url, guint64 start, guint64 end,
		     guint64 size, const HsmRangeSink *sink, gpointer user_data)
{
	RangeTransfer *t = g_new0(RangeTransfer, 1);

	t->url = g_strdup(url);
	t->start = t->next = start;
	t->end = MIN(end, size);
	t->size = size;
	t->sink = *sink;
	t->user_data = user_data;
	push_task(fetcher, TASK_RANGE, t);
}

/* ---- The pool ---- */

static void run_task(gpointer data, gpointer user)
{
	Task *task = data;

	if (task->kind == TASK_HEAD)
		run_head_task(user, task->data);
	else
		run_range(user, task->data);
	g_free(task);
}

void hsm_fetch_options_copy(HsmFetchOptions *to, const HsmFetchOptions *from)
{
	*to = *from;
	to->user_agent = g_strdup(from->user_agent);
	to->credentials = g_strdup(from->credentials);
	to->proxy = g_strdup(from->proxy);
	to->cacert = g_strdup(from->cacert);
}

HsmFetcher *hsm_fetcher_new(const HsmFetchOptions *options)
{
	static gsize curl_ready;
	HsmFetcher *fetcher = g_new0(HsmFetcher, 1);

	if (g_once_init_enter(&curl_ready)) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		g_once_init_leave(&curl_ready, 1);
	}
	hsm_fetch_options_copy(&fetcher->options, options);
	fetcher->options.max_connections = MAX(options->max_connections, 1u);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		g_mutex_init(&fetcher->share_locks[i]);
	g_mutex_init(&fetcher->lent_lock);
	fetcher->share = curl_share_init();
	curl_share_setopt(fetcher->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(fetcher->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(fetcher->share, CURLSHOPT_USERDATA, fetcher);
	curl_share_setopt(fetcher->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(fetcher->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(fetcher->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	fetcher->pool = g_thread_pool_new(run_task, fetcher, (gint)fetcher->options.max_connections,
					  FALSE, NULL);
	return fetcher;
}

void hsm_fetcher_free(HsmFetcher *fetcher)
{
	if (!fetcher)
		return;
	g_atomic_int_set(&fetcher->aborting, 1);
	g_thread_pool_free(fetcher->pool, FALSE, TRUE);
	curl_share_cleanup(fetcher->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		g_mutex_clear(&fetcher->share_locks[i]);
	g_mutex_clear(&fetcher->lent_lock);
	hsm_fetch_options_clear(&fetcher->options);
	g_free(fetcher);
}
