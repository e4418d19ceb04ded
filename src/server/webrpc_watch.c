/*
 * webrpc_watch.c — the framing of grpc.health.v1.Health/Watch's stream over
 * gRPC-Web and Connect (webrpc.h, webrpc_watch_*): the transports
 * (h2_watch.c for HTTP/2, http1_watch.c for HTTP/1.1) hold the response
 * open and append what these give as the status changes.
 *
 * gRPC-Web-text is base64 of the binary stream; each piece is encoded on
 * its own, padding included, which gRPC-Web-text allows (a reader decodes
 * 4-character groups, and '=' may end any of them).
 */
#include <errno.h>
#include <string.h>

#include "server/health.h"
#include "server/pbjson.h"
#include "server/webrpc.h"

bool webrpc_is_streaming(enum webrpc_protocol p)
{
	return p == WEBRPC_GRPC_WEB || p == WEBRPC_GRPC_WEB_TEXT ||
	       p == WEBRPC_CONNECT_STREAM_PROTO || p == WEBRPC_CONNECT_STREAM_JSON;
}

/* Appends piece to out, in base64 for gRPC-Web-text. */
static int append_piece(enum webrpc_protocol p, const struct buf *piece, struct buf *out)
{
	if (p == WEBRPC_GRPC_WEB_TEXT)
		return webrpc_base64_encode(piece->data, piece->len, out);
	return buf_append(out, piece->data, piece->len);
}

int webrpc_watch_message(enum webrpc_protocol p, int status, struct buf *out)
{
	struct buf framed = {0}, piece = {0};
	int rc = health_append_framed(&framed, (enum health_status)status);

	if (rc == 0 && p == WEBRPC_CONNECT_STREAM_JSON) {
		const ProtobufCMessageDescriptor *req_type = NULL, *resp_type = NULL;
		struct buf json = {0};
		struct kiln_error err = {0};

		pbjson_method_types("/grpc.health.v1.Health/Watch", &req_type, &resp_type);
		rc = resp_type ? pbjson_from_proto(resp_type, framed.data + 5, framed.len - 5,
						   &json, &err)
			       : -ENOMEM;
		rc = rc ?: webrpc_append_envelope(&piece, 0, json.data, json.len);
		buf_free(&json);
	} else if (rc == 0) {
		rc = buf_append(&piece, framed.data, framed.len);
	}
	rc = rc ?: append_piece(p, &piece, out);
	buf_free(&framed);
	buf_free(&piece);
	return rc ? -ENOMEM : 0;
}

int webrpc_watch_end(enum webrpc_protocol p, struct buf *out)
{
	struct buf piece = {0};
	int rc;

	if (webrpc_is_grpc_web(p))
		rc = webrpc_append_trailer(&piece, 0, NULL);
	else
		rc = webrpc_append_envelope(&piece, 0x02, (const uint8_t *)"{}", 2);
	rc = rc ?: append_piece(p, &piece, out);
	buf_free(&piece);
	return rc ? -ENOMEM : 0;
}
