/* Runs HTTP transfers on one thread with libcurl's multi interface.
 *
 * Every transfer of a mount goes through one HsmEngine: one event loop, one
 * connection cache, so connections (and their TLS sessions) are opened once
 * and reused.  Over HTTP/2, requests are multiplexed as streams on a few
 * connections, hundreds at a time; over HTTP/1.1 at most max_connections run
 * at once, and a transfer that has run for a few seconds lends its slot
 * (up to twice max_connections), so long transfers never keep a new read
 * waiting for long.  Transfers that fail transiently (5xx, 429, resets,
 * stalls) are sent again after a backoff; the loop never sleeps for them.
 *
 * What a request means (a listing, a HEAD, a range) is the caller's: it gets
 * callbacks, all of them on the engine's thread, which must not block on
 * anything that waits for the engine.
 */
#ifndef HSM_ENGINE_H
#define HSM_ENGINE_H

#include <curl/curl.h>
#include <glib.h>

typedef struct {
	char *user_agent;      /* NULL: "httphsm/<version>" */
	char *credentials;     /* "user:password" for HTTP auth, or NULL */
	gboolean netrc;        /* read credentials from ~/.netrc */
	char *proxy;           /* NULL: libcurl's environment variables */
	char *proxy_credentials; /* "user:password" for the proxy, or NULL */
	char *cacert;          /* CA bundle, NULL: the system's */
	gboolean insecure;     /* skip TLS verification */
	guint max_connections; /* HTTP/1.1 transfers at once (HTTP/2 multiplexes) */
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

/* The headers of an attempt's final response (redirects and 1xx reset them). */
typedef struct {
	char *etag;
	char *last_modified;         /* as sent, for If-Modified-Since */
	char *cache_control;
	char *content_range;
	gint64 retry_after;          /* seconds, -1 when absent */
	gint64 age;                  /* seconds a cache has held it (Age), 0 when absent */
	char error[CURL_ERROR_SIZE]; /* libcurl's detailed message */
} HsmResponse;

typedef enum {
	HSM_ATTEMPT_DONE,   /* finished, with or without an error */
	HSM_ATTEMPT_AGAIN,  /* send another request now (not a failure) */
	HSM_ATTEMPT_FAILED, /* retried after a backoff if transient, else an error */
} HsmAttempt;

typedef struct {
	/* Sets what this request needs on a handle that has the common
	 * options.  response stays valid until ended() returns. */
	void (*prepare)(gpointer data, CURL *curl, const HsmResponse *response);
	/* The attempt is over.  On HSM_ATTEMPT_FAILED, *rc (which the callee
	 * may set to CURLE_OK to have the status judged instead) and the
	 * response status decide on a retry.  On DONE, *err may be set. */
	HsmAttempt (*ended)(gpointer data, CURL *curl, CURLcode *rc, const HsmResponse *response,
			    GError **err);
	/* Polled while the request runs and before it is sent again; FALSE
	 * ends it with ECANCELED.  NULL: always wanted. */
	gboolean (*wanted)(gpointer data);
	/* Called once, last: err (the callee's) is NULL on success. */
	void (*finish)(gpointer data, GError *err);
} HsmTransferOps;

typedef struct HsmEngine HsmEngine;

HsmEngine *hsm_engine_new(const HsmFetchOptions *options);
/* Stops the loop; unfinished transfers finish with ECANCELED. */
void hsm_engine_free(HsmEngine *engine);

/* Queues a request for url; returns at once, from any thread.  Bulk
 * requests (HEADs) wait while urgent ones (reads, listings) are queued. */
void hsm_engine_submit(HsmEngine *engine, const char *url, gboolean bulk,
		       const HsmTransferOps *ops, gpointer data);

/* Bytes the link to the origin holds in one round trip, as measured from
 * complete responses (linkstats.h); 0 while unknown.  Any thread. */
guint64 hsm_engine_bandwidth_delay(HsmEngine *engine);

/* TRUE on the engine's own thread, where waiting for a transfer would
 * deadlock. */
gboolean hsm_engine_is_own_thread(HsmEngine *engine);

#endif
