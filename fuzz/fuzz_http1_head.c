/*
 * fuzz_http1_head.c — the check of each HTTP/1.1 request header
 * (http1_head.c), which runs on whatever a client sends before anything
 * else sees it. Byte 0 picks the size limit (1..256 KiB, small ones to reach
 * the 414/431 paths); the rest is what the client sent. The verdict must be
 * one of the enumerated ones, an OK header must end inside the input with
 * its empty line, and a refusal must say why.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http1_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t max = ((size_t)data[0] + 1) * 16;
	data++;
	size--;
	/* An exact-size copy, so that a read past the end is caught. */
	uint8_t *b = malloc(size ? size : 1);
	if (!b)
		return 0;
	memcpy(b, data, size);
	char why[200];
	size_t head_len = 0;
	enum http1_head_verdict v = http1_head_check(b, size, max, &head_len, why, sizeof(why));
	switch (v) {
	case HTTP1_HEAD_MORE:
		if (size >= max)
			abort(); /* at the limit there must be a verdict */
		break;
	case HTTP1_HEAD_OK:
		if (head_len < 2 || head_len > size || head_len > max || b[head_len - 1] != '\n')
			abort();
		break;
	case HTTP1_HEAD_BAD:
	case HTTP1_HEAD_URI_TOO_LONG:
	case HTTP1_HEAD_TOO_LARGE:
		if (!why[0])
			abort();
		break;
	default:
		abort();
	}
	free(b);
	return 0;
}
