/* A scripted HTTP/1.1 server on 127.0.0.1 for unit tests: one file, /f,
 * of TEST_FILE_SIZE bytes, listed by an nginx-style index page at /, and
 * served as the mode says (HEAD: its headers); besides, pages and HEAD
 * answers a test sets (a page's ETag is a digest of its body, and a GET
 * with that If-None-Match gets 304); 404 for anything else.  One connection at a time,
 * closed after each response. */
#ifndef HSM_TEST_SERVER_H
#define HSM_TEST_SERVER_H

#include <glib.h>

#define TEST_FILE_SIZE 100000

typedef enum {
	SERVE_RANGES,        /* 206 with exactly the bytes asked for; 200 and the
			      * whole file when If-Range names another version */
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
	guint8 file[TEST_FILE_SIZE];
	guint version;       /* atomic: part of the ETag; test_server_change() bumps it */
	gint requests;       /* atomic: requests for /f */
	gint delay_ms;       /* atomic: before each response to /f */
	gint rounded;        /* atomic: the index shows "98K", as kernel.org's does */
	gint heads;          /* atomic: HEAD requests for /f */
	gint page_gets;      /* atomic: GETs of pages set by test_server_set_page() */
	gint page_304s;      /* atomic: of which answered 304 Not Modified */
	gint no_validators;  /* atomic: pages carry no ETag, no Last-Modified */
	char *if_range;      /* of the last GET of /f, or NULL; protected by lock */
	gint stop;           /* atomic */
	GThread *thread;
	GMutex lock;
	GHashTable *pages;   /* path -> TestPage *; protected by lock */
	GHashTable *sizes;   /* path -> size answered to HEAD, as a gint64 *; protected by lock */
} TestServer;

TestServer *test_server_start(ServeMode mode);
void test_server_stop(TestServer *server);
/* http://127.0.0.1:PORT/path */
char *test_server_url(TestServer *server, const char *path);
/* GET path answers 200 with body from now on (NULL: 404 again). */
void test_server_set_page(TestServer *server, const char *path, const char *content_type,
			  const char *body);
/* HEAD path answers 200 with this Content-Length (negative: 404 again). */
void test_server_set_head(TestServer *server, const char *path, gint64 size);
/* The If-Range of the last GET of /f (NULL when it had none); free it. */
char *test_server_last_if_range(TestServer *server);
/* New content (same size) and a new ETag. */
void test_server_change(TestServer *server);

#endif
