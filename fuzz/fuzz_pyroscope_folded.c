/*
 * fuzz_pyroscope_folded.c — libFuzzer target for POST /ingest's text
 * parsers (src/server/pyroscope_parse.c): folded and lines stacks, the
 * name=APP{labels} parameter and from/until times.
 *
 * The first byte picks the format (folded or lines); the input is parsed
 * whole. Every stack handed out has 1..PYRO_MAX_FRAMES non-empty frames
 * without ';' or NUL, a value >= 0 (1 for lines); a failure sets a message.
 * The input's first line is also tried as a name and as a time.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/pyroscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	bool lines;
	size_t stacks;
};

static int check_stack(void *ctx, const char *const *frames, size_t n, int64_t value)
{
	struct seen *s = ctx;

	if (n == 0 || n > PYRO_MAX_FRAMES || value < 0 || (s->lines && value != 1))
		abort();
	for (size_t i = 0; i < n; i++)
		if (!frames[i][0] || strchr(frames[i], ';'))
			abort();
	s->stacks++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kiln_error err = {0};
	struct seen s = {0};
	struct pyro_name *nm;
	char line[2048];
	int64_t t;

	if (size == 0)
		return 0;
	s.lines = data[0] & 1;
	if (pyro_folded_parse(data + 1, size - 1, s.lines, check_stack, &s, &err) && !err.msg[0])
		abort();

	const uint8_t *nl = memchr(data + 1, '\n', size - 1);
	size_t n = nl ? (size_t)(nl - data - 1) : size - 1;
	if (n >= sizeof(line) || memchr(data + 1, '\0', n))
		return 0;
	memcpy(line, data + 1, n);
	line[n] = '\0';
	nm = malloc(sizeof(*nm));
	if (!nm)
		return 0;
	memset(&err, 0, sizeof(err));
	if (pyro_parse_name(line, nm, &err) == 0) {
		char app[PYRO_MAX_NAME_BYTES];
		const char *suffix;
		if (!nm->app[0] || nm->n_labels > PYRO_MAX_NAME_LABELS)
			abort();
		for (size_t i = 0; i < nm->n_labels; i++)
			if (!nm->names[i][0])
				abort();
		pyro_split_app(nm->app, app, &suffix);
		if (suffix && !pyro_type_for_suffix(suffix))
			abort();
	} else if (!err.msg[0]) {
		abort();
	}
	free(nm);
	memset(&err, 0, sizeof(err));
	if (pyro_parse_time(line, 1700000000, &t, &err) && !err.msg[0])
		abort();
	return 0;
}
