/*
 * fuzz_pyroscope_multipart.c — libFuzzer target for POST /ingest's
 * multipart/form-data parser (src/server/pyroscope_multipart.c).
 *
 * The input's first line is a Content-Type header value, the rest the body.
 * Every part found must lie inside the body, its name must be one of the
 * names the body holds, and the parser must either succeed or set an error
 * message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/pyroscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t ct_len = nl ? (size_t)(nl - data) : size;
	char ct[256], boundary[80];
	struct pyro_part parts[PYRO_MAX_PARTS];
	struct kiln_error err = {0};
	size_t n = 0;

	if (ct_len >= sizeof(ct))
		return 0;
	memcpy(ct, data, ct_len);
	ct[ct_len] = '\0';
	const uint8_t *body = nl ? nl + 1 : data + size;
	size_t body_len = (size_t)(data + size - body);
	/* A private copy, so ASan sees reads past the body's end. */
	uint8_t *copy = malloc(body_len ? body_len : 1);
	if (!copy)
		return 0;
	memcpy(copy, body, body_len);
	if (pyro_multipart_boundary(ct, boundary, sizeof(boundary), &err)) {
		if (!err.msg[0])
			abort();
		free(copy);
		return 0;
	}
	int rc = pyro_multipart_parse(copy, body_len, boundary, parts, &n, &err);
	if (rc && !err.msg[0])
		abort();
	if (n > PYRO_MAX_PARTS)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (parts[i].data < copy || parts[i].data + parts[i].len > copy + body_len)
			abort();
		if (strlen(parts[i].name) >= sizeof(parts[i].name))
			abort();
		if (pyro_multipart_find(parts, n, parts[i].name) == NULL)
			abort();
	}
	free(copy);
	return 0;
}
