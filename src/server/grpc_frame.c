/*
 * grpc_frame.c — the gRPC length-prefixed message framing and the
 * grpc-timeout header, as pure functions (h2.c uses them; the fuzz target
 * fuzz/fuzz_grpc_frame.c drives them directly).
 *
 * A unary request body is exactly one message: a flag byte (0 plain, 1
 * compressed with the stream's grpc-encoding), a 4-byte big-endian length,
 * then that many bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/gzip.h"
#include "server/internal.h"

int grpc_frame_unwrap(const uint8_t *body, size_t len, bool gzip_encoding, size_t max_msg,
		      struct grpc_frame *out, struct kiln_error *err)
{
	memset(out, 0, sizeof(*out));
	if (len < 5)
		return kiln_error_set(err, EBADMSG,
				      "malformed gRPC frame: %zu bytes, need a 5-byte prefix", len);
	uint32_t mlen =
	    (uint32_t)body[1] << 24 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 8 | body[4];
	if (body[0] > 1)
		return kiln_error_set(err, EBADMSG,
				      "malformed gRPC frame: compressed-flag byte is %u", body[0]);
	if ((size_t)mlen != len - 5)
		return kiln_error_set(
		    err, EBADMSG,
		    "malformed gRPC frame: prefix says %u bytes, stream carried %zu "
		    "(unary calls take exactly one message)",
		    mlen, len - 5);
	if (mlen > max_msg)
		return kiln_error_set(
		    err, EFBIG, "request message larger than --grpc-max-message-size=%zu bytes",
		    max_msg);
	if (body[0] == 0) {
		out->msg = body + 5;
		out->len = mlen;
		return 0;
	}
	if (!gzip_encoding)
		return kiln_error_set(err, ENOSYS,
				      "compressed message without grpc-encoding gzip (the only one "
				      "supported)");
	struct buf plain = {0};
	int rc = gzip_inflate(body + 5, mlen, max_msg, &plain, err);
	if (rc) {
		buf_free(&plain);
		if (rc == -EFBIG)
			kiln_error_set(err, EFBIG,
				       "gzip message inflates past --grpc-max-message-size=%zu",
				       max_msg);
		return rc == -EFBIG ? -EFBIG : -EBADMSG;
	}
	out->owned = buf_steal(&plain, &out->len);
	out->msg = out->owned ? out->owned : (const uint8_t *)"";
	return 0;
}

int64_t grpc_timeout_parse(const char *v, size_t len)
{
	/* The spec: 1 to 8 ASCII digits and one unit letter. */
	if (len < 2 || len > 9)
		return -1;
	int64_t n = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (v[i] - '0');
	}
	int64_t unit_ns;
	switch (v[len - 1]) {
	case 'H':
		unit_ns = 3600 * 1000000000LL;
		break;
	case 'M':
		unit_ns = 60 * 1000000000LL;
		break;
	case 'S':
		unit_ns = 1000000000LL;
		break;
	case 'm':
		unit_ns = 1000000LL;
		break;
	case 'u':
		unit_ns = 1000LL;
		break;
	case 'n':
		unit_ns = 1;
		break;
	default:
		return -1;
	}
	/* 99999999H does not fit in int64 nanoseconds; anything past ~70 years
	 * is "no deadline" in practice, and the cap leaves room for now + t. */
	const int64_t cap = INT64_MAX / 4;
	return n > cap / unit_ns ? cap : n * unit_ns;
}
