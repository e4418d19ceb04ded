/*
 * http1_frame.h — where each HTTP/1.1 request on a connection begins and
 * ends, as the relay in front of libmicrohttpd (http1_relay.c) sees the
 * client's bytes. Every request head is checked (http1_head.c) and its
 * framing read (Content-Length, chunked Transfer-Encoding, Connection,
 * Host), and a chunked body is followed chunk by chunk, so that whatever a
 * client sends on a kept-alive connection — a second request, garbage, a
 * bad chunk — is judged here and refused with Kiln's JSON error, never by
 * libmicrohttpd's HTML page or a silent close. Nothing is buffered here:
 * the caller keeps the bytes and forwards the prefix it is told to.
 *
 * Contract: http1_frame_step looks at the bytes the caller holds, b[0,len)
 * (which start where the previous step's forwarded or dropped bytes ended),
 * and says what to do with a prefix of them. It never reads past len, and
 * a refusal is final (the framer stays refused).
 */
#ifndef KILN_SERVER_HTTP1_FRAME_H
#define KILN_SERVER_HTTP1_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum http1_frame_state {
	HTTP1_AT_HEAD = 0, /* waiting for (the rest of) a request head */
	HTTP1_IN_BODY,	   /* Content-Length bytes to go */
	HTTP1_CHUNK_SIZE,  /* a chunk-size line */
	HTTP1_CHUNK_DATA,  /* chunk bytes to go */
	HTTP1_CHUNK_END,   /* the CRLF after a chunk's data */
	HTTP1_TRAILERS,	   /* trailer lines until the empty one */
	HTTP1_AFTER_LAST,  /* after a "Connection: close" request: drop the rest */
	HTTP1_REFUSED,	   /* status and why say what */
};

enum http1_frame_action {
	HTTP1_NEED_MORE = 0, /* nothing to do until more bytes come */
	HTTP1_FORWARD,	     /* pass the first *n bytes to libmicrohttpd */
	HTTP1_DROP,	     /* discard the first *n bytes */
	HTTP1_REFUSE,	     /* answer f->status with f->why, then close */
};

struct http1_framer {
	enum http1_frame_state state;
	size_t max_head;    /* --max-request-header-size: heads, and trailers */
	uint64_t remaining; /* IN_BODY, CHUNK_DATA */
	size_t trailer_bytes;
	bool last;	   /* the current request ends the connection */
	uint64_t requests; /* heads forwarded so far */
	int status;	   /* REFUSED: 400, 414, 431 or 501 */
	char why[200];
};

void http1_framer_init(struct http1_framer *f, size_t max_head);

/* Decides on a prefix of b[0,len) (see the contract above); *n is set for
 * FORWARD and DROP, and is never 0 for them. NEED_MORE when len is 0. */
enum http1_frame_action http1_frame_step(struct http1_framer *f, const uint8_t *b, size_t len,
					 size_t *n);

/* Whether the framer is between requests with nothing of the next one seen
 * (the idle state a keep-alive connection may be closed in). */
static inline bool http1_framer_between_requests(const struct http1_framer *f, size_t held)
{
	return f->state == HTTP1_AT_HEAD && held == 0;
}

#endif
