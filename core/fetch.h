/* HTTP transfers of the remote tree: listing pages, HEADs and byte ranges.
 *
 * One HsmFetcher owns a bounded pool of transfer threads that share one
 * connection cache (so HEADs and ranges reuse keep-alive connections), and
 * retries transient failures (5xx, 429, resets, stalls) with backoff before
 * reporting an error whose code is an errno (see error.h).
 *
 * A transfer slower than min_rate over stall_timeout fails (and is
 * retried).  A transfer that has held its slot for a few seconds lends it:
 * the pool grows by one thread, up to twice max_connections, so slow or
 * long transfers never keep a new read waiting for long.
 */
#ifndef HSM_FETCH_H
#define HSM_FETCH_H

#include <glib.h>

typedef struct {
	char *user_agent;      /* NULL: "httphsm/<version>" */
	char *credentials;     /* "user:password" for HTTP auth, or NULL */
	gboolean netrc;        /* read credentials from ~/.netrc */
	char *proxy;           /* NULL: libcurl's environment variables */
	char *cacert;          /* CA bundle, NULL: the system's */
	gboolean insecure;     /* skip TLS verification */
	guint max_connections; /* parallel transfers */
	guint retries;         /* attempts after the first one */
	guint connect_timeout; /* seconds */
	guint stall_timeout;   /* seconds over which a transfer must average... */
	guint min_rate;        /* ...at least this many bytes per second */
	guint retry_delay_ms;  /* first backoff delay; doubles each attempt */
} HsmFetchOptions;

void hsm_fetch_options_init(HsmFetchOptions *options);
/* Deep copy (the strings are duplicated); free with hsm_fetch_options_clear(). */
void hsm_fetch_options_copy(HsmFetchOptions *to, const HsmFetchOptions *from);
void hsm_fetch_options_clear(HsmFetchOptions *options);

typedef struct HsmFetcher HsmFetcher;

/* Transfers on up to options->max_connections connections; nothing is
 * sent until a request is made. */
HsmFetcher *hsm_fetcher_new(const HsmFetchOptions *options);
/* Aborts running transfers (their sinks see ECANCELED) and waits for them. */
void hsm_fetcher_free(HsmFetcher *fetcher);

/* What one response said about the remote file. */
typedef struct {
	guint64 size;          /* G_MAXUINT64 when unknown */
	gint64 mtime;          /* from Last-Modified; -1 when unknown */
	char *etag;            /* NULL when absent */
	gboolean whole_body;   /* the server ignored Range and sends the file */
} HsmRemoteInfo;

void hsm_remote_info_clear(HsmRemoteInfo *info);

typedef struct {
	GByteArray *body;
	char *url;             /* after redirects */
	char *charset;         /* from Content-Type, or NULL */
	gboolean is_html;
} HsmPage;

void hsm_page_clear(HsmPage *page);

/* GETs url (a listing) into memory, refusing bodies over max_size.
 * Blocks the calling thread. */
gboolean hsm_fetch_page(HsmFetcher *fetcher, const char *url, gsize max_size, HsmPage *page,
			GError **err);

typedef struct {
	char *url;             /* in */
	HsmRemoteInfo info;    /* out */
	GError *error;         /* out */
} HsmHeadJob;

/* Runs the HEAD requests of jobs in parallel and waits for all of them. */
void hsm_fetch_heads(HsmFetcher *fetcher, HsmHeadJob *jobs, guint count);

/* Receives the bytes of a range transfer, on a transfer thread. */
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

/* Queues a GET of [start, end) of url, a file of size bytes (G_MAXUINT64:
 * unknown); returns at once.  Bytes the server sends past the range of a
 * 206 or past size are cut, never written. */
void hsm_fetch_range(HsmFetcher *fetcher, const char *url, guint64 start, guint64 end,
		     guint64 size, const HsmRangeSink *sink, gpointer user_data);

#endif
