/*
 * pyroscope_parse.c — the application name, times and folded stacks of
 * Pyroscope's POST /ingest (contracts in pyroscope.h).
 *
 * The type table is Pyroscope's own mapping for pushed trees (what its
 * ingest adapter does with an "app.SUFFIX" name): the suffix picks the
 * series' __name__ and sample type; no suffix means CPU. Kiln's profile
 * types name a period type too: the one Go's runtime gives each kind.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/pyroscope.h"

static const struct pyro_type pyro_types[] = {
    {"cpu", "process_cpu", "samples", "count", "cpu", "nanoseconds"},
    {"itimer", "process_cpu", "samples", "count", "cpu", "nanoseconds"},
    {"wall", "wall", "samples", "count", "cpu", "nanoseconds"},
    {"inuse_objects", "memory", "inuse_objects", "count", "space", "bytes"},
    {"inuse_space", "memory", "inuse_space", "bytes", "space", "bytes"},
    {"alloc_objects", "memory", "alloc_objects", "count", "space", "bytes"},
    {"alloc_space", "memory", "alloc_space", "bytes", "space", "bytes"},
    {"goroutines", "goroutine", "goroutines", "count", "goroutine", "count"},
    {"mutex_count", "mutex", "contentions", "count", "contentions", "count"},
    {"mutex_duration", "mutex", "delay", "nanoseconds", "contentions", "count"},
    {"block_count", "block", "contentions", "count", "contentions", "count"},
    {"block_duration", "block", "delay", "nanoseconds", "contentions", "count"},
    {"lock_count", "block", "contentions", "count", "contentions", "count"},
    {"lock_duration", "block", "delay", "nanoseconds", "contentions", "count"},
    {"alloc_in_new_tlab_objects", "memory", "alloc_in_new_tlab_objects", "count", "space", "bytes"},
    {"alloc_in_new_tlab_bytes", "memory", "alloc_in_new_tlab_bytes", "bytes", "space", "bytes"},
    {"alloc_outside_tlab_objects", "memory", "alloc_outside_tlab_objects", "count", "space",
     "bytes"},
    {"alloc_outside_tlab_bytes", "memory", "alloc_outside_tlab_bytes", "bytes", "space", "bytes"},
    {"live", "memory", "live", "count", "space", "bytes"},
    {"exceptions", "exceptions", "samples", "count", "exceptions", "count"},
    {"bytes", "memory", "samples", "bytes", "space", "bytes"},
};

const struct pyro_type *pyro_type_for_suffix(const char *suffix)
{
	for (size_t i = 0; i < sizeof(pyro_types) / sizeof(pyro_types[0]); i++)
		if (strcmp(pyro_types[i].suffix, suffix) == 0)
			return &pyro_types[i];
	return NULL;
}

void pyro_split_app(const char *name, char *app, const char **suffix)
{
	const char *dot = strrchr(name, '.');
	const struct pyro_type *t = dot ? pyro_type_for_suffix(dot + 1) : NULL;

	*suffix = NULL;
	if (t && dot > name) {
		memcpy(app, name, (size_t)(dot - name));
		app[dot - name] = '\0';
		*suffix = t->suffix;
		return;
	}
	strcpy(app, name);
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
	return s;
}

int pyro_parse_name(const char *s, struct pyro_name *out, struct kiln_error *err)
{
	size_t len;
	char *brace, *app, *p;

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return kiln_error_set(err, EINVAL, "name: missing (name=APP{k=v,...})");
	len = strlen(s);
	if (len >= sizeof(out->buf))
		return kiln_error_set(err, EINVAL, "name: %zu bytes, at most %zu", len,
				      sizeof(out->buf) - 1);
	memcpy(out->buf, s, len + 1);
	brace = strchr(out->buf, '{');
	if (brace) {
		if (out->buf[len - 1] != '}')
			return kiln_error_set(
			    err, EINVAL, "name: labels at byte %zu not closed by '}' at the end",
			    (size_t)(brace - out->buf));
		out->buf[len - 1] = '\0';
		*brace = '\0';
	}
	app = trim(out->buf);
	if (!*app)
		return kiln_error_set(err, EINVAL, "name: empty application name");
	if (strpbrk(app, "{},="))
		return kiln_error_set(err, EINVAL,
				      "name: application name \"%s\" holds one of {},=", app);
	strcpy(out->app, app);
	if (!brace)
		return 0;
	p = brace + 1;
	while (*p) {
		char *comma = strchr(p, ','), *eq;
		size_t at = (size_t)(p - out->buf);
		if (comma)
			*comma = '\0';
		eq = strchr(p, '=');
		if (!eq)
			return kiln_error_set(err, EINVAL, "name: label at byte %zu has no '='",
					      at);
		*eq = '\0';
		char *k = trim(p), *v = trim(eq + 1);
		if (!*k)
			return kiln_error_set(err, EINVAL, "name: label at byte %zu has no name",
					      at);
		if (strpbrk(k, "{}") || strpbrk(v, "{}="))
			return kiln_error_set(
			    err, EINVAL, "name: label \"%s\" at byte %zu holds one of {}=", k, at);
		/* SDKs send OpenTelemetry-style names ("otel.scope.name"):
		 * made Prometheus label names as Prometheus does for OTel. */
		for (char *q = k; *q; q++)
			if (!isalnum((unsigned char)*q) && *q != '_')
				*q = '_';
		if (isdigit((unsigned char)*k))
			*k = '_';
		if (out->n_labels == PYRO_MAX_NAME_LABELS)
			return kiln_error_set(err, EINVAL, "name: more than %d labels",
					      PYRO_MAX_NAME_LABELS);
		out->names[out->n_labels] = k;
		out->values[out->n_labels] = v;
		out->n_labels++;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

int pyro_parse_time(const char *s, int64_t now_s, int64_t *out_s, struct kiln_error *err)
{
	const char *p = s;
	size_t digits = 0;
	int64_t v = 0;

	if (strcmp(s, "now") == 0) {
		*out_s = now_s;
		return 0;
	}
	if (strncmp(s, "now-", 4) == 0)
		p = s + 4;
	while (isdigit((unsigned char)p[digits])) {
		if (v > (INT64_MAX - 9) / 10)
			return kiln_error_set(err, EINVAL, "time \"%.40s\": too large", s);
		v = v * 10 + (p[digits] - '0');
		digits++;
	}
	if (digits == 0)
		goto bad;
	if (p != s) { /* now-N[smhd] */
		int64_t mult;
		switch (p[digits]) {
		case 's':
			mult = 1;
			break;
		case 'm':
			mult = 60;
			break;
		case 'h':
			mult = 3600;
			break;
		case 'd':
			mult = 86400;
			break;
		default:
			goto bad;
		}
		if (p[digits + 1] || v > INT64_MAX / 86400)
			goto bad;
		*out_s = now_s - v * mult;
		return 0;
	}
	if (p[digits])
		goto bad;
	if (digits >= 19)
		v /= 1000000000;
	else if (digits >= 13)
		v /= 1000;
	*out_s = v;
	return 0;
bad:
	return kiln_error_set(err, EINVAL,
			      "time \"%.40s\": not unix seconds, \"now\" or \"now-N[smhd]\"", s);
}

/* Splits one line (NUL-terminated, in scratch) into frames and its value. */
static int parse_line(char *line, size_t lineno, size_t offset, bool lines_format,
		      const char **frames, size_t *n_frames, int64_t *value, struct kiln_error *err)
{
	char *stack = line;
	size_t n = 0;

	*value = 1;
	if (!lines_format) {
		char *sp = strrchr(line, ' ');
		char *num, *end;
		if (!sp)
			return kiln_error_set(
			    err, EINVAL, "line %zu (byte %zu): no value (expected \"a;b;c 42\")",
			    lineno, offset);
		*sp = '\0';
		num = sp + 1;
		if (!isdigit((unsigned char)*num))
			return kiln_error_set(
			    err, EINVAL,
			    "line %zu (byte %zu): value \"%.32s\" is not an integer "
			    ">= 0",
			    lineno, offset + (size_t)(num - line), num);
		errno = 0;
		long long v = strtoll(num, &end, 10);
		if (errno || *end)
			return kiln_error_set(
			    err, EINVAL,
			    "line %zu (byte %zu): value \"%.32s\" is not an integer "
			    ">= 0 that fits 64 bits",
			    lineno, offset + (size_t)(num - line), num);
		*value = v;
		while (sp > line && sp[-1] == ' ')
			*--sp = '\0';
	}
	if (!*stack)
		return kiln_error_set(err, EINVAL, "line %zu (byte %zu): empty stack", lineno,
				      offset);
	for (char *f = stack;;) {
		char *semi = strchr(f, ';');
		if (semi)
			*semi = '\0';
		if (!*f)
			return kiln_error_set(err, EINVAL, "line %zu (byte %zu): empty frame name",
					      lineno, offset + (size_t)(f - line));
		if (n == PYRO_MAX_FRAMES)
			return kiln_error_set(err, EINVAL,
					      "line %zu (byte %zu): more than %d frames", lineno,
					      offset, PYRO_MAX_FRAMES);
		frames[n++] = f;
		if (!semi)
			break;
		f = semi + 1;
	}
	*n_frames = n;
	return 0;
}

int pyro_folded_parse(const uint8_t *data, size_t len, bool lines_format, pyro_stack_fn emit,
		      void *ctx, struct kiln_error *err)
{
	const char **frames = calloc(PYRO_MAX_FRAMES, sizeof(*frames));
	char *line = NULL;
	size_t cap = 0, pos = 0, lineno = 0;
	int rc = 0;

	if (!frames)
		return kiln_error_set(err, ENOMEM, "out of memory");
	while (pos < len) {
		const uint8_t *nl = memchr(data + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - data) : len, n = end - pos;
		size_t n_frames = 0;
		int64_t value = 0;

		lineno++;
		if (n && data[pos + n - 1] == '\r')
			n--;
		if (memchr(data + pos, '\0', n)) {
			rc = kiln_error_set(err, EINVAL, "line %zu (byte %zu): NUL byte", lineno,
					    pos);
			goto out;
		}
		if (n + 1 > cap) {
			char *grown = realloc(line, n + 1);
			if (!grown) {
				rc = kiln_error_set(err, ENOMEM, "out of memory");
				goto out;
			}
			line = grown;
			cap = n + 1;
		}
		memcpy(line, data + pos, n);
		line[n] = '\0';
		if (n) {
			rc = parse_line(line, lineno, pos, lines_format, frames, &n_frames, &value,
					err);
			if (rc)
				goto out;
			rc = emit(ctx, frames, n_frames, value);
			if (rc)
				goto out;
		}
		pos = end + 1;
	}
out:
	free(line);
	free(frames);
	return rc;
}
