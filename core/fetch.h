/* HTTP requests of the remote tree: listing pages, HEADs and byte ranges.
 *
 * What responses mean: statuses, sizes, validators, servers that ignore
 * Range or send more than asked.  The transfers run on an HsmEngine
 * (engine.h): one event loop, HTTP/2 multiplexing, retries with backoff;
 * errors carry an errno as their code (see error.h).
 */
#ifndef HSM_FETCH_H
#define HSM_FETCH_H

#include "engine.h"

#include <glib.h>

typedef struct HsmFetcher HsmFetcher;

/* Nothing is sent until a request is made. */
HsmFetcher *hsm_fetcher_new(const HsmFetchOptions *options);
/* Aborts running transfers (their sinks see ECANCELED) and waits for them. */
void hsm_fetcher_free(HsmFetcher *fetcher);

/* Bytes the link holds in one round trip; 0 while unknown.  Any thread. */
guint64 hsm_fetcher_bandwidth_delay(HsmFetcher *fetcher);

/* What one response said about the remote file. */
typedef struct {
	guint64 size;          /* G_MAXUINT64 when unknown */
	gint64 mtime;          /* from Last-Modified; -1 when unknown */
	char *etag;            /* NULL when absent */
	gboolean whole_body;   /* the server ignored Range and sends the file */
} HsmRemoteInfo;

void hsm_remote_info_clear(HsmRemoteInfo *info);

/* What a server said to tell one version of a page from another. */
typedef struct {
	char *etag;            /* NULL when absent */
	char *last_modified;   /* the HTTP date as sent, or NULL */
} HsmValidators;

void hsm_validators_clear(HsmValidators *validators);

typedef struct {
	GByteArray *body;      /* NULL when not_modified */
	char *url;             /* after redirects */
	char *charset;         /* from Content-Type, or NULL */
	gboolean is_html;
	gboolean not_modified; /* a 304: the page is the one the validators name */
	HsmValidators validators;
	gint64 max_age;        /* seconds, from Cache-Control; -1 when it says none */
} HsmPage;

void hsm_page_clear(HsmPage *page);

/* What hsm_fetch_page() hands over while a page arrives, in its caller's
 * thread, so that the page can be parsed meanwhile: begin() when the body
 * of a 200 HTML response starts (url after redirects, charset from
 * Content-Type or NULL), then every piece of it in order.  begin() comes
 * again if that attempt failed and another one starts: what came before
 * is void.  The page that hsm_fetch_page() returns is the last body begun,
 * whole, unless it is a 304 or an error. */
typedef struct {
	void (*begin)(gpointer data, const char *url, const char *charset);
	void (*piece)(gpointer data, const void *bytes, gsize len);
	gpointer data;
} HsmPageStream;

/* GETs url (a listing) into memory, refusing bodies over max_size; with
 * if_changed (not NULL, holding a validator), a conditional GET that a
 * server may answer with 304 Not Modified.  stream may be NULL.  Blocks
 * the calling thread (never a sink's). */
gboolean hsm_fetch_page(HsmFetcher *fetcher, const char *url, gsize max_size,
			const HsmValidators *if_changed, const HsmPageStream *stream,
			HsmPage *page, GError **err);

typedef struct {
	char *url;             /* in */
	HsmRemoteInfo info;    /* out */
	GError *error;         /* out */
} HsmHeadJob;

/* Runs the HEAD requests of jobs at once (multiplexed where the server
 * speaks HTTP/2) and waits for all of them.  Not from a sink. */
void hsm_fetch_heads(HsmFetcher *fetcher, HsmHeadJob *jobs, guint count);

/* Receives the bytes of a range transfer, on the engine's thread: the
 * callbacks must not wait for other transfers. */
typedef struct {
	/* Called once per response, before its bytes.  Returning FALSE with
	 * err set ends the transfer without retry (e.g. the file changed). */
	gboolean (*check)(gpointer user_data, const HsmRemoteInfo *info, GError **err);
	/* File bytes at offset, below the file's size; may lie outside the
	 * requested range (a server that ignores Range sends the whole file).
	 * FALSE + err aborts. */
	gboolean (*write)(gpointer user_data, guint64 offset, const void *data, gsize len,
			  GError **err);
	/* Called once: err is NULL when all of [start, end) was written; the
	 * callee owns err. */
	void (*done)(gpointer user_data, GError *err);
	/* Polled while the transfer runs and before each retry: FALSE when
	 * nobody wants its bytes any more, which ends it with ECANCELED. */
	gboolean (*wanted)(gpointer user_data);
} HsmRangeSink;

/* The version of a file a range request adds bytes to. */
typedef struct {
	guint64 size;          /* G_MAXUINT64 when unknown */
	const char *etag;      /* NULL when unknown */
	gint64 mtime;          /* Last-Modified; -1 when unknown */
	gboolean revalidate;   /* it changed lately: caches on the way must ask the origin */
} HsmHeldVersion;

/* Queues a GET of [start, end) of url, bytes of the version held; returns
 * at once.  With a validator the request carries If-Range, so that a
 * server (or cache) whose file changed answers 200 with the new version,
 * which check() sees, rather than a 206 of new bytes that would be
 * spliced onto old ones.  Bytes the server sends past the range of a 206
 * or past the size are cut, never written. */
void hsm_fetch_range(HsmFetcher *fetcher, const char *url, guint64 start, guint64 end,
		     const HsmHeldVersion *held, const HsmRangeSink *sink, gpointer user_data);

#endif
