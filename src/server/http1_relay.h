/*
 * http1_relay.h — every HTTP/1.x connection, plaintext or TLS, reaches
 * libmicrohttpd through this relay: a socketpair whose one end
 * libmicrohttpd serves, and the connection's thread in between, which
 * follows the client's requests (http1_frame.h) and passes on only
 * well-formed ones. What it refuses — a malformed head, an oversized one,
 * a bad chunk, a framing two parsers could read differently, a head that
 * trickles past --request-header-timeout — is answered with Kiln's JSON
 * error (400, 408, 414, 431, 501) after the responses to the requests
 * before it, on the first request of a connection as on any later one.
 */
#ifndef KILN_SERVER_HTTP1_RELAY_H
#define KILN_SERVER_HTTP1_RELAY_H

struct server;
struct conn_io;

/* Serves one HTTP/1.x connection until it ends; owns and closes io (a
 * plaintext socket after the protocol sniff, or a TLS connection after
 * ALPN chose http/1.1). libmicrohttpd's side is opened with the first
 * well-formed request, so a connection that never sends one costs it
 * nothing. Deadlines: each request head within --request-header-timeout of
 * the accept or of the previous response's end (an idle keep-alive
 * connection is closed then; one with part of a head gets 408). */
void http1_relay(struct server *s, struct conn_io *io);

#endif
