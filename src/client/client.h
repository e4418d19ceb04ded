/*
 * client.h — a small gRPC client on libcurl (HTTP/2).
 *
 * Used by the agent's push and by kilnctl. Names carry a GRPC_STATUS_ prefix so
 * that this header and server/server.h (which has its own enum) can meet in
 * one file. Messages are opaque bytes: the
 * caller packs and unpacks them with protobuf-c. On the wire each message is
 * framed as gRPC defines it: a 1-byte compressed flag (always 0 here: we
 * neither send compressed messages nor accept them, and say so with
 * grpc-accept-encoding: identity) and a 4-byte big-endian length.
 *
 * Transport: cleartext HTTP/2 with prior knowledge when insecure, TLS (ALPN
 * h2) otherwise, certificate checks optional. A bearer token goes out as the
 * `authorization` metadata, the deadline as `grpc-timeout`. The status comes
 * from the trailers (grpc-status, percent-encoded grpc-message), which
 * libcurl hands to the header callback after the body; a "trailers-only"
 * response carries them in the headers and takes the same path.
 *
 * A client holds one curl handle and opens a connection per call (see
 * grpc_client.c for the libcurl bug that forbids reuse). Not
 * thread-safe: one client per thread.
 *
 * Return convention: 0 when the call completed (its gRPC status, OK or not,
 * is in *status), a negative errno when there was no gRPC answer at all
 * (connection refused, timeout before headers, malformed framing) — then
 * status->code is UNAVAILABLE or DEADLINE_EXCEEDED/INTERNAL and message
 * says why, so callers may treat both alike.
 */
#ifndef KILN_CLIENT_CLIENT_H
#define KILN_CLIENT_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/grpc_status.h"

struct grpc_status {
	int code;	   /* enum grpc_status_code */
	char message[512]; /* decoded grpc-message, "" if none */
};

/* Files for TLS to the server (PEM); NULL = not used: the server's
 * certificate is checked against ca_file instead of the system's CAs, and
 * cert_file + key_file are this client's certificate for servers that
 * require one (kiln --tls-client-ca-file). */
struct tls_client_files {
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
};

/* Sets those files on a libcurl easy handle (a CURL *). */
void tls_client_files_apply(void *curl, const struct tls_client_files *f);

struct grpc_client_config {
	const char *address; /* "host:port", or a URL "http://host:port" / "https://..." */
	bool insecure;	     /* cleartext HTTP/2 (prior knowledge) for host:port */
	bool skip_verify;    /* TLS without certificate checks */
	struct tls_client_files tls;
	const char *bearer_token; /* sent as "authorization: Bearer TOKEN"; NULL: none */
	int timeout_ms;		  /* per call, sent as grpc-timeout; 0: 30000 */
	size_t max_response;	  /* largest response message accepted; 0: 64 MiB */
	/* When non-NULL and set (from any thread), a call in flight is aborted
	 * within about a second (status CANCELLED): lets an owner stop a
	 * client thread without waiting for the timeout. */
	const atomic_bool *cancel;
};

struct grpc_client;

struct grpc_client *grpc_client_new(const struct grpc_client_config *config, struct kiln_error *e);
void grpc_client_free(struct grpc_client *c);

/* Unary call: method is "/package.Service/Method" (leading slash). The single response
 * message replaces resp's contents (empty if the server sent none). */
int grpc_client_unary(struct grpc_client *c, const char *method, const void *req, size_t req_len,
		      struct buf *resp, struct grpc_status *status);

/* Client-streaming call: next() is asked for each request message in turn;
 * it returns 1 with *msg and *len set (valid until the next call), 0 at the end,
 * or a negative errno to abort the call. */
typedef int (*grpc_next_fn)(void *arg, const void **msg, size_t *len);
int grpc_client_stream(struct grpc_client *c, const char *method, grpc_next_fn next, void *arg,
		       struct buf *resp, struct grpc_status *status);

/* --- debuginfo upload (debuginfo_upload.c) -------------------------------- */

/* One debug file to a server with Parca's DebuginfoService protocol
 * (ShouldInitiateUpload, InitiateUpload, streamed Upload,
 * MarkUploadFinished). Nothing is read or extracted unless the server
 * wants the build ID. What is sent: a local debug file with that build ID
 * if there is one (<debug_dir>/.build-id/xx/yyyy.debug, or the
 * .gnu_debuglink target beside the binary, in its .debug/ or under
 * <debug_dir>/<its directory>), else the debug parts of
 * path (symbols_extract_debuginfo), streamed from a temporary file in
 * chunks. */
struct debuginfo_upload_opts {
	bool force;		       /* upload even if the server has it */
	size_t chunk_bytes;	       /* per Upload message; 0: 512 KiB */
	uint64_t max_bytes_per_second; /* pacing; 0: unlimited */
	const char *temp_dir;	       /* for the extract; NULL: /tmp */
	const char *debug_dir;	       /* local debug files; NULL: /usr/lib/debug */
	bool no_extract;	       /* send the whole file, not its debug parts */
	bool require_symbols;	       /* -ENODATA (before any call) when the file has
				 neither .symtab nor .debug_info and there is
				 no local debug file */
};

enum debuginfo_upload_outcome {
	DEBUGINFO_UPLOADED = 0,
	DEBUGINFO_NOT_WANTED, /* ShouldInitiateUpload said no (reason set) */
};

struct debuginfo_upload_result {
	enum debuginfo_upload_outcome outcome;
	char build_id[72];
	char reason[256];  /* the server's, when not wanted */
	char source[4096]; /* the file sent */
	uint64_t bytes;	   /* bytes the server stored */
	int grpc_code;	   /* status of the last call (on failure: why) */
};

/* build_id: NULL or "" reads it from path. Returns 0 (uploaded or not
 * wanted: see r->outcome) or a negative errno with e filled and
 * r->grpc_code telling whether a retry may help. */
int debuginfo_upload_file(struct grpc_client *c, const char *path, const char *build_id,
			  const struct debuginfo_upload_opts *o, struct debuginfo_upload_result *r,
			  struct kiln_error *e);

/* --- bearer tokens (bearer.c) ---------------------------------------------- */

/* Reads the token from path: its first line, blanks trimmed, into out (cap
 * bytes with the NUL). Returns 0, or a negative errno with err set (cannot
 * read, empty, longer than cap - 1). */
int bearer_token_read_file(const char *path, char *out, size_t cap, struct kiln_error *err);

/* --- framing (exposed for tests and the server) -------------------------- */

#define GRPC_FRAME_HEADER 5

/* Appends one framed, uncompressed message to b. 0 or -ENOMEM. */
int grpc_frame_append(struct buf *b, const void *msg, size_t len);

/* Parses one message from data[0..len). Returns 1 with *msg, *msg_len,
 * *compressed and *consumed set; 0 when more bytes are needed; -EMSGSIZE
 * when the declared length exceeds max. */
int grpc_frame_parse(const uint8_t *data, size_t len, size_t max, const uint8_t **msg,
		     size_t *msg_len, bool *compressed, size_t *consumed);

/* Decodes a percent-encoded grpc-message in place. */
void grpc_percent_decode(char *s);

#endif
