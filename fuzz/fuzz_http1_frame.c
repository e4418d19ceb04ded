/*
 * fuzz_http1_frame.c — request framing on a kept-alive HTTP/1.1 connection
 * (http1_frame.c), which the relay runs on everything a client sends. Byte
 * 0 picks the head size limit (16 bytes to 4 KiB), byte 1 how many bytes
 * arrive at a time (1..256); the rest is the stream. Each decision must
 * cover 1..held bytes, a refusal must carry a known status and a reason,
 * and the framer must never read past the bytes it holds (an exact-size
 * copy each step, so ASan sees any overread).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http1_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	struct http1_framer f;
	http1_framer_init(&f, ((size_t)data[0] + 1) * 16);
	size_t step = (size_t)data[1] + 1;
	data += 2;
	size -= 2;

	size_t pos = 0, held = 0;
	for (;;) {
		uint8_t *b = malloc(held ? held : 1);
		if (!b)
			return 0;
		memcpy(b, data + pos, held);
		size_t n = 0;
		enum http1_frame_action a = http1_frame_step(&f, b, held, &n);
		free(b);
		if (a == HTTP1_REFUSE) {
			if (!f.why[0] || (f.status != 400 && f.status != 414 && f.status != 431 &&
					  f.status != 501))
				abort();
			break;
		}
		if (a == HTTP1_FORWARD || a == HTTP1_DROP) {
			if (n == 0 || n > held)
				abort();
			pos += n;
			held -= n;
			continue;
		}
		if (a != HTTP1_NEED_MORE)
			abort();
		if (pos + held == size)
			break;
		held += size - pos - held < step ? size - pos - held : step;
	}
	return 0;
}
