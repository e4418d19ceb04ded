/*
 * tls.c — optional TLS on the server port (OpenSSL).
 *
 * ALPN picks the protocol: "h2" goes to the nghttp2 loop over the SSL
 * object; "http/1.1" (or no ALPN) goes to the HTTP/1.x relay
 * (http1_relay.c), which feeds libmicrohttpd decrypted bytes through a
 * socketpair, as it does for plaintext (libmicrohttpd here is built
 * against GnuTLS rather than OpenSSL).
 *
 * Client certificates (--tls-client-ca-file): verified by OpenSSL during
 * the handshake against that bundle only (not the system's CAs: anyone can
 * get a certificate from a public CA), so a client without a valid one
 * never reaches HTTP or gRPC. They authenticate the connection, not a
 * role: bearer tokens still decide what a request may do.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/log.h"
#include "server/internal.h"

static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char prefs[][9] = {"\x02h2", "\x08http/1.1"};
	for (size_t p = 0; p < 2; p++) {
		for (unsigned i = 0; i < inlen; i += 1u + in[i]) {
			if (in[i] == prefs[p][0] && i + 1u + in[i] <= inlen &&
			    memcmp(in + i + 1, prefs[p] + 1, in[i]) == 0) {
				*out = in + i + 1;
				*outlen = in[i];
				return SSL_TLSEXT_ERR_OK;
			}
		}
	}
	return SSL_TLSEXT_ERR_NOACK;
}

int tls_init(struct server *s, struct kiln_error *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return kiln_error_set(err, ENOMEM, "TLS: cannot create a context");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
	if (SSL_CTX_use_certificate_chain_file(ctx, s->cfg.tls_cert_file) != 1) {
		SSL_CTX_free(ctx);
		return kiln_error_set(err, EINVAL, "--tls-cert-file=%s: %s", s->cfg.tls_cert_file,
				      ERR_reason_error_string(ERR_get_error()));
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, s->cfg.tls_key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		SSL_CTX_free(ctx);
		return kiln_error_set(err, EINVAL, "--tls-key-file=%s: %s", s->cfg.tls_key_file,
				      ERR_reason_error_string(ERR_get_error()));
	}
	if (s->cfg.tls_client_ca_file) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(s->cfg.tls_client_ca_file);

		if (!names ||
		    SSL_CTX_load_verify_locations(ctx, s->cfg.tls_client_ca_file, NULL) != 1) {
			if (names)
				sk_X509_NAME_pop_free(names, X509_NAME_free);
			SSL_CTX_free(ctx);
			return kiln_error_set(err, EINVAL,
					      "--tls-client-ca-file=%s: no CA certificate could "
					      "be read from it (PEM expected)",
					      s->cfg.tls_client_ca_file);
		}
		/* The CAs are sent in the CertificateRequest, so clients with
		 * several certificates pick the right one. */
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(
		    ctx,
		    SSL_VERIFY_PEER |
			(s->cfg.tls_client_auth_optional ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT),
		    NULL);
	}
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
	s->tls = ctx;
	return 0;
}

int tls_accept(struct server *s, int fd, int64_t deadline_ns, SSL **out, bool *h2)
{
	SSL *ssl = SSL_new(s->tls);
	if (!ssl)
		return -ENOMEM;
	/* Non-blocking, so that the deadline bounds the whole handshake and not
	 * each read: a client sending a byte every few seconds is cut off. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	SSL_set_fd(ssl, fd);
	for (;;) {
		int r = SSL_accept(ssl);
		if (r == 1)
			break;
		int e = SSL_get_error(ssl, r);
		int64_t left = (deadline_ns - mono_ns()) / 1000000;
		if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || left <= 0 ||
		    server_stopping(s)) {
			log_debug("TLS handshake failed: %s",
				  left <= 0 ? "not done within --handshake-timeout"
					    : ERR_reason_error_string(ERR_get_error()));
			SSL_free(ssl);
			return -EPROTO;
		}
		struct pollfd p = {.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
		if (poll(&p, 1, left > 250 ? 250 : (int)left) < 0 && errno != EINTR) {
			SSL_free(ssl);
			return -EPROTO;
		}
	}
	const unsigned char *proto = NULL;
	unsigned len = 0;
	SSL_get0_alpn_selected(ssl, &proto, &len);
	*h2 = len == 2 && memcmp(proto, "h2", 2) == 0;
	*out = ssl;
	return 0;
}
