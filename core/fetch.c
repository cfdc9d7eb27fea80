/* Listing pages, HEADs and ranges as engine transfers; see fetch.h.
 *
 * Each request kind is a set of HsmTransferOps: what to ask on a handle,
 * and what a finished attempt means.  Callers of the blocking kinds (pages,
 * HEADs) wait on a Waiter that the last finish() signals.
 */
#include "fetch.h"
#include "error.h"
#include "headers.h"

#include <errno.h>
#include <string.h>

#define RANGE_BUFFER_SIZE (512L * 1024)

struct HsmFetcher {
	HsmEngine *engine;
};

/* Where a blocked caller waits for its requests to finish. */
typedef struct {
	GMutex lock;
	GCond cond;
	guint pending;           /* protected by lock */
} Waiter;

static void waiter_init(Waiter *waiter, guint pending)
{
	g_mutex_init(&waiter->lock);
	g_cond_init(&waiter->cond);
	waiter->pending = pending;
}

static void waiter_done(Waiter *waiter)
{
	g_mutex_lock(&waiter->lock);
	if (--waiter->pending == 0)
		g_cond_signal(&waiter->cond);
	g_mutex_unlock(&waiter->lock);
}

static void waiter_clear(Waiter *waiter)
{
	g_mutex_clear(&waiter->lock);
	g_cond_clear(&waiter->cond);
}

static void waiter_wait(Waiter *waiter)
{
	g_mutex_lock(&waiter->lock);
	while (waiter->pending)
		g_cond_wait(&waiter->cond, &waiter->lock);
	g_mutex_unlock(&waiter->lock);
	waiter_clear(waiter);
}

void hsm_remote_info_clear(HsmRemoteInfo *info)
{
	g_free(info->etag);
	info->etag = NULL;
}

void hsm_validators_clear(HsmValidators *validators)
{
	g_free(validators->etag);
	g_free(validators->last_modified);
	validators->etag = validators->last_modified = NULL;
}

void hsm_page_clear(HsmPage *page)
{
	if (page->body)
		g_byte_array_unref(page->body);
	g_free(page->url);
	g_free(page->charset);
	hsm_validators_clear(&page->validators);
	memset(page, 0, sizeof(*page));
}

static void fill_remote_info(CURL *curl, const HsmResponse *response, HsmRemoteInfo *info)
{
	curl_off_t length = -1, filetime = -1;

	curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
	curl_easy_getinfo(curl, CURLINFO_FILETIME_T, &filetime);
	info->size = response->content_range ? hsm_content_range_total(response->content_range)
		     : length >= 0		 ? (guint64)length
						 : G_MAXUINT64;
	info->mtime = filetime;
	g_free(info->etag);
	info->etag = g_strdup(response->etag);
}

static long response_status(CURL *curl)
{
	long status = 0;

	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

/* ---- Listing pages ---- */

typedef struct {
	const char *url;
	gsize max_size;
	struct curl_slist *conditions; /* If-None-Match, If-Modified-Since */
	CURL *curl;              /* of the current attempt */
	gboolean too_big;
	HsmPage *page;
	GError *error;
	Waiter waiter;           /* its lock also guards what follows */
	GByteArray *body;        /* of the current attempt */
	guint attempt;
	gboolean is_page;        /* the body is a 200's HTML: what a stream gets */
	char *page_url;          /* when is_page: after redirects */
	char *charset;           /* when is_page: from Content-Type, or NULL */
} PageRequest;

/* Whether a Content-Type is a page's. */
static gboolean type_is_html(const char *type)
{
	return type && (g_str_has_prefix(type, "text/html") ||
			g_str_has_prefix(type, "application/xhtml"));
}

/* At the first byte of an attempt's body, under the waiter's lock. */
static void describe_body(PageRequest *request)
{
	char *url = NULL, *type = NULL;

	curl_easy_getinfo(request->curl, CURLINFO_EFFECTIVE_URL, &url);
	curl_easy_getinfo(request->curl, CURLINFO_CONTENT_TYPE, &type);
	request->is_page = response_status(request->curl) == 200 && type_is_html(type);
	g_free(request->page_url);
	g_free(request->charset);
	request->page_url = g_strdup(url);
	request->charset = hsm_content_type_charset(type);
}

static size_t on_page_body(char *data, size_t size, size_t count, void *user)
{
	PageRequest *request = user;
	gsize len = size * count;

	if (request->body->len + len > request->max_size) {
		request->too_big = TRUE;
		return 0;
	}
	g_mutex_lock(&request->waiter.lock);
	if (!request->body->len)
		describe_body(request);
	g_byte_array_append(request->body, (const guint8 *)data, len);
	g_cond_signal(&request->waiter.cond);
	g_mutex_unlock(&request->waiter.lock);
	return len;
}

static void page_prepare(gpointer data, CURL *curl, const HsmResponse *response)
{
	PageRequest *request = data;

	(void)response;
	g_mutex_lock(&request->waiter.lock);
	g_byte_array_set_size(request->body, 0);
	request->attempt++;
	request->is_page = FALSE;
	g_mutex_unlock(&request->waiter.lock);
	request->curl = curl;
	request->too_big = FALSE;
	curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_page_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, request);
	if (request->conditions)
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, request->conditions);
}

static void fill_page(CURL *curl, const HsmResponse *response, HsmPage *page, GByteArray *body)
{
	char *url = NULL, *type = NULL;

	curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &url);
	curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
	page->body = body ? g_byte_array_ref(body) : NULL;
	page->url = g_strdup(url);
	page->is_html = type_is_html(type);
	page->charset = hsm_content_type_charset(type);
	page->validators.etag = g_strdup(response->etag);
	page->validators.last_modified = g_strdup(response->last_modified);
	page->max_age = hsm_cache_control_max_age(response->cache_control);
	/* A cache in between has already used up part of that. */
	if (page->max_age > 0)
		page->max_age = MAX(page->max_age - response->age, 0);
}

static HsmAttempt page_ended(gpointer data, CURL *curl, CURLcode *rc, const HsmResponse *response,
			     GError **err)
{
	PageRequest *request = data;
	long status = *rc == CURLE_OK ? response_status(curl) : 0;

	if (status == 200) {
		fill_page(curl, response, request->page, request->body);
		return HSM_ATTEMPT_DONE;
	}
	/* Only a conditional request may be answered "not modified". */
	if (status == 304 && request->conditions) {
		fill_page(curl, response, request->page, NULL);
		request->page->not_modified = TRUE;
		return HSM_ATTEMPT_DONE;
	}
	if (request->too_big) {
		g_set_error(err, HSM_ERROR, EFBIG, "GET %s: page larger than %zu bytes",
			    request->url, request->max_size);
		return HSM_ATTEMPT_DONE;
	}
	return HSM_ATTEMPT_FAILED;
}

static void page_finish(gpointer data, GError *err)
{
	PageRequest *request = data;

	request->error = err;
	waiter_done(&request->waiter);
}

static const HsmTransferOps page_ops = {
	.prepare = page_prepare,
	.ended = page_ended,
	.finish = page_finish,
};

/* The headers of a conditional GET, or NULL.  Validators come from the
 * server: a value that could end the header line is not sent. */
static struct curl_slist *conditions(const HsmValidators *if_changed)
{
	struct curl_slist *list = NULL;

	if (!if_changed)
		return NULL;
	if (if_changed->etag && !strpbrk(if_changed->etag, "\r\n")) {
		g_autofree char *line = g_strdup_printf("If-None-Match: %s", if_changed->etag);

		list = curl_slist_append(list, line);
	}
	if (if_changed->last_modified && !strpbrk(if_changed->last_modified, "\r\n")) {
		g_autofree char *line = g_strdup_printf("If-Modified-Since: %s",
							if_changed->last_modified);

		list = curl_slist_append(list, line);
	}
	return list;
}

/* Waits for the page like waiter_wait(), handing each new piece of a
 * page's body to stream meanwhile (outside the lock: the transfer goes on). */
static void stream_page(PageRequest *request, const HsmPageStream *stream)
{
	Waiter *waiter = &request->waiter;
	guint attempt = 0;
	gsize given = 0;

	g_mutex_lock(&waiter->lock);
	for (;;) {
		GByteArray *body = request->body;

		while (waiter->pending && request->attempt == attempt && body->len == given)
			g_cond_wait(&waiter->cond, &waiter->lock);
		if (request->attempt != attempt) {
			attempt = request->attempt;
			given = 0;
		}
		if (body->len > given && request->is_page) {
			gboolean first = given == 0;
			gsize len = body->len - given;
			g_autofree guint8 *piece = g_memdup2(body->data + given, len);
			g_autofree char *page_url = first ? g_strdup(request->page_url) : NULL;
			g_autofree char *charset = first ? g_strdup(request->charset) : NULL;

			given = body->len;
			g_mutex_unlock(&waiter->lock);
			if (first)
				stream->begin(stream->data, page_url, charset);
			stream->piece(stream->data, piece, len);
			g_mutex_lock(&waiter->lock);
		} else if (body->len > given) {
			given = body->len; /* not a page: nothing to hand over */
		} else if (!waiter->pending) {
			break;
		}
	}
	g_mutex_unlock(&waiter->lock);
	waiter_clear(waiter);
}

gboolean hsm_fetch_page(HsmFetcher *fetcher, const char *url, gsize max_size,
			const HsmValidators *if_changed, const HsmPageStream *stream,
			HsmPage *page, GError **err)
{
	PageRequest request = { .url = url, .max_size = max_size, .page = page };

	g_assert(!hsm_engine_is_own_thread(fetcher->engine));
	memset(page, 0, sizeof(*page));
	page->max_age = -1;
	request.body = g_byte_array_new();
	request.conditions = conditions(if_changed);
	waiter_init(&request.waiter, 1);
	hsm_engine_submit(fetcher->engine, url, FALSE, &page_ops, &request);
	if (stream)
		stream_page(&request, stream);
	else
		waiter_wait(&request.waiter);
	g_byte_array_unref(request.body);
	g_free(request.page_url);
	g_free(request.charset);
	curl_slist_free_all(request.conditions);
	if (request.error) {
		hsm_page_clear(page);
		g_propagate_error(err, request.error);
		return FALSE;
	}
	return TRUE;
}

/* ---- HEAD ---- */

typedef struct {
	HsmHeadJob *job;
	gboolean use_get;        /* a one-byte GET instead of HEAD */
	Waiter *waiter;
} HeadRequest;

static size_t discard_body(char *data, size_t size, size_t count, void *user)
{
	(void)data, (void)user;
	(void)size, (void)count;
	return 0; /* the headers are all we wanted */
}

static void head_prepare(gpointer data, CURL *curl, const HsmResponse *response)
{
	HeadRequest *request = data;

	(void)response;
	if (request->use_get) {
		curl_easy_setopt(curl, CURLOPT_RANGE, "0-0");
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
	} else {
		curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
	}
}

/* Servers that refuse HEAD (405, 501) or omit the length get a one-byte
 * ranged GET instead. */
static HsmAttempt head_ended(gpointer data, CURL *curl, CURLcode *rc, const HsmResponse *response,
			     GError **err)
{
	HeadRequest *request = data;
	long status = response_status(curl);

	(void)err;
	if (*rc == CURLE_WRITE_ERROR && request->use_get)
		*rc = CURLE_OK;
	if (*rc == CURLE_OK && (status == 200 || status == 206)) {
		fill_remote_info(curl, response, &request->job->info);
		if (request->job->info.size != G_MAXUINT64 || request->use_get)
			return HSM_ATTEMPT_DONE;
		request->use_get = TRUE;
		return HSM_ATTEMPT_AGAIN;
	}
	if (*rc == CURLE_OK && (status == 405 || status == 501) && !request->use_get) {
		request->use_get = TRUE;
		return HSM_ATTEMPT_AGAIN;
	}
	return HSM_ATTEMPT_FAILED;
}

static void head_finish(gpointer data, GError *err)
{
	HeadRequest *request = data;

	request->job->error = err;
	waiter_done(request->waiter);
	g_free(request);
}

static const HsmTransferOps head_ops = {
	.prepare = head_prepare,
	.ended = head_ended,
	.finish = head_finish,
};

void hsm_fetch_heads(HsmFetcher *fetcher, HsmHeadJob *jobs, guint count)
{
	Waiter waiter;

	g_assert(!hsm_engine_is_own_thread(fetcher->engine));
	waiter_init(&waiter, count);
	for (guint i = 0; i < count; i++) {
		HeadRequest *request = g_new0(HeadRequest, 1);

		request->job = &jobs[i];
		request->waiter = &waiter;
		hsm_engine_submit(fetcher->engine, jobs[i].url, TRUE, &head_ops, request);
	}
	waiter_wait(&waiter);
}

/* ---- Ranges ---- */

typedef struct {
	char *url;
	guint64 start, end;
	guint64 size;            /* the file's known size: no byte at or past it is written */
	char *if_range;          /* the If-Range line for the version held, or NULL */
	gboolean revalidate;     /* caches must ask the origin */
	struct curl_slist *headers; /* of the current attempt */
	guint64 next;            /* first byte of [start, end) not yet written */
	HsmRangeSink sink;
	gpointer user_data;
	/* State of the current attempt. */
	CURL *curl;
	const HsmResponse *response;
	gboolean began;          /* the response status was looked at */
	gboolean unwanted;       /* not a 200/206: the body is not file data */
	guint64 stream_offset;   /* file offset of the next body byte */
	guint64 stream_limit;    /* bytes past this are not written */
	gboolean overran;        /* the response sent bytes past stream_limit */
	GError *fatal;           /* a non-retryable error from a callback */
} RangeRequest;

/* Looks at the status of a response, once, before its body. */
static gboolean range_begin_response(RangeRequest *r)
{
	HsmRemoteInfo info = { .size = G_MAXUINT64, .mtime = -1 };
	long status = response_status(r->curl);
	const char *content_range = r->response->content_range;
	guint64 first, last;

	r->began = TRUE;
	if (status == 206) {
		if (!hsm_content_range_parse(content_range, &first, &last) || first > r->next) {
			g_set_error(&r->fatal, HSM_ERROR, EIO,
				    "GET %s: bad Content-Range '%s' for bytes %" G_GUINT64_FORMAT "-",
				    r->url, content_range ? content_range : "", r->next);
			return FALSE;
		}
		r->stream_offset = first;
		r->stream_limit = MIN(last + 1, r->end);
	} else if (status == 200) {
		r->stream_offset = 0;
		r->stream_limit = G_MAXUINT64;
		info.whole_body = TRUE;
	} else {
		r->unwanted = TRUE;
		return FALSE;
	}
	fill_remote_info(r->curl, r->response, &info);
	/* Nothing at or past the end of the file, as we or the server know it. */
	r->stream_limit = MIN(r->stream_limit, MIN(info.size, r->size));
	if (!r->sink.check(r->user_data, &info, &r->fatal)) {
		hsm_remote_info_clear(&info);
		return FALSE;
	}
	hsm_remote_info_clear(&info);
	return TRUE;
}

static size_t on_range_body(char *data, size_t size, size_t count, void *user)
{
	RangeRequest *r = user;
	gsize len = size * count;
	guint64 offset;

	if (!r->began && !range_begin_response(r))
		return 0;
	offset = r->stream_offset;
	r->stream_offset += len;
	if (offset + len > r->stream_limit && !r->overran) {
		r->overran = TRUE;
		g_warning("GET %s: the server sent bytes past %" G_GUINT64_FORMAT
			  " (the range asked for, or the end of the file); they were cut",
			  r->url, r->stream_limit);
	}
	if (offset >= r->stream_limit) {
		if (r->next >= r->end)
			return 0; /* all asked for is written: stop the surplus */
		g_set_error(&r->fatal, HSM_ERROR, EIO,
			    "GET %s: response runs past the range it announced", r->url);
		return 0;
	}
	len = MIN(len, r->stream_limit - offset);
	if (!r->sink.write(r->user_data, offset, data, len, &r->fatal))
		return 0;
	if (offset <= r->next && offset + len > r->next)
		r->next = offset + len;
	return size * count;
}

/* If-Range, and after a change or a failed attempt, no-cache: a cache may
 * still hold parts of an old version (nginx's slice module then hangs up
 * on a request that would mix them), and only the origin can say which
 * is current.  (nginx needs proxy_cache_bypass for that: docs/fleet.md.) */
static void set_range_headers(RangeRequest *r, CURL *curl)
{
	curl_slist_free_all(g_steal_pointer(&r->headers));
	if (r->if_range)
		r->headers = curl_slist_append(r->headers, r->if_range);
	if (r->revalidate)
		r->headers = curl_slist_append(r->headers, "Cache-Control: no-cache");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, r->headers);
	r->revalidate = TRUE; /* for the next attempt, if any */
}

static void range_prepare(gpointer data, CURL *curl, const HsmResponse *response)
{
	RangeRequest *r = data;
	char range[64];

	r->curl = curl;
	r->response = response;
	r->began = r->unwanted = FALSE;
	g_snprintf(range, sizeof(range), "%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, r->next,
		   r->end - 1);
	curl_easy_setopt(curl, CURLOPT_RANGE, range);
	set_range_headers(r, curl);
	/* Large pieces: each one is a pwrite() and a wake-up of readers. */
	curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, RANGE_BUFFER_SIZE);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_range_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
}

static HsmAttempt range_ended(gpointer data, CURL *curl, CURLcode *rc, const HsmResponse *response,
			      GError **err)
{
	RangeRequest *r = data;

	(void)curl, (void)response;
	if (!r->began && *rc == CURLE_OK)
		range_begin_response(r); /* an empty body: check() still decides */
	r->curl = NULL;
	r->response = NULL;
	if (r->fatal) {
		*err = g_steal_pointer(&r->fatal);
		return HSM_ATTEMPT_DONE;
	}
	if (r->next >= r->end)
		return HSM_ATTEMPT_DONE;
	if (r->unwanted) {
		*rc = CURLE_OK; /* the status says whether to retry */
		return HSM_ATTEMPT_FAILED;
	}
	if (*rc == CURLE_OK) {
		g_set_error(err, HSM_ERROR, EIO,
			    "GET %s: response ended at byte %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
			    "-%" G_GUINT64_FORMAT,
			    r->url, r->next, r->start, r->end);
		return HSM_ATTEMPT_DONE;
	}
	return HSM_ATTEMPT_FAILED;
}

static gboolean range_wanted(gpointer data)
{
	RangeRequest *r = data;

	return !r->sink.wanted || r->sink.wanted(r->user_data);
}

static void range_finish(gpointer data, GError *err)
{
	RangeRequest *r = data;

	g_clear_error(&r->fatal);
	r->sink.done(r->user_data, err);
	curl_slist_free_all(r->headers);
	g_free(r->if_range);
	g_free(r->url);
	g_free(r);
}

static const HsmTransferOps range_ops = {
	.prepare = range_prepare,
	.ended = range_ended,
	.wanted = range_wanted,
	.finish = range_finish,
};

/* If-Range naming the version held, or NULL.  A weak ETag may not be sent
 * there, nor a date when there is an ETag (RFC 9110 13.1.5); a
 * Last-Modified date is taken as strong, as nginx and Apache compare it
 * exactly.  Validators come from the server: a value that could end the
 * header line is not sent. */
static char *if_range_line(const HsmHeldVersion *held)
{
	g_autofree char *date = NULL;

	if (held->etag) {
		if (g_str_has_prefix(held->etag, "W/") || strpbrk(held->etag, "\r\n"))
			return NULL;
		return g_strdup_printf("If-Range: %s", held->etag);
	}
	date = held->mtime >= 0 ? hsm_http_date_format(held->mtime) : NULL;
	return date ? g_strdup_printf("If-Range: %s", date) : NULL;
}

void hsm_fetch_range(HsmFetcher *fetcher, const char *url, guint64 start, guint64 end,
		     const HsmHeldVersion *held, const HsmRangeSink *sink, gpointer user_data)
{
	RangeRequest *r = g_new0(RangeRequest, 1);

	r->url = g_strdup(url);
	r->start = r->next = start;
	r->end = MIN(end, held->size);
	r->size = held->size;
	r->if_range = if_range_line(held);
	r->revalidate = held->revalidate;
	r->sink = *sink;
	r->user_data = user_data;
	hsm_engine_submit(fetcher->engine, url, FALSE, &range_ops, r);
}

/* ---- The fetcher ---- */

HsmFetcher *hsm_fetcher_new(const HsmFetchOptions *options)
{
	HsmFetcher *fetcher = g_new0(HsmFetcher, 1);

	fetcher->engine = hsm_engine_new(options);
	return fetcher;
}

guint64 hsm_fetcher_bandwidth_delay(HsmFetcher *fetcher)
{
	return hsm_engine_bandwidth_delay(fetcher->engine);
}

void hsm_fetcher_free(HsmFetcher *fetcher)
{
	if (!fetcher)
		return;
	hsm_engine_free(fetcher->engine);
	g_free(fetcher);
}
