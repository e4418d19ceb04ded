/*
 * http1_head.h — the check an HTTP/1.1 request header passes before
 * libmicrohttpd sees it: a well-formed request line and header lines, all
 * within --max-request-header-size. The HTTP/1.x relay's framer
 * (http1_frame.c) runs it on every request head of a connection before
 * libmicrohttpd sees it, so that a refusal is Kiln's JSON error (400, 414,
 * 431) rather than libmicrohttpd's HTML page or a silent close.
 */
#ifndef KILN_SERVER_HTTP1_HEAD_H
#define KILN_SERVER_HTTP1_HEAD_H

#include <stddef.h>
#include <stdint.h>

enum http1_head_verdict {
	HTTP1_HEAD_MORE = 0,	       /* well-formed so far; wait for more bytes */
	HTTP1_HEAD_OK = 1,	       /* complete and well-formed */
	HTTP1_HEAD_BAD = 400,	       /* malformed request line or header line */
	HTTP1_HEAD_URI_TOO_LONG = 414, /* no end of the request line within max */
	HTTP1_HEAD_TOO_LARGE = 431,    /* no end of the header within max */
};

/* Checks the first len bytes a client sent (len may exceed max: only max
 * count). Returns a verdict; for OK *head_len is the header's length with
 * its final empty line; for BAD, 414 and 431 why says what and where. */
enum http1_head_verdict http1_head_check(const uint8_t *b, size_t len, size_t max, size_t *head_len,
					 char *why, size_t whycap);

#endif
