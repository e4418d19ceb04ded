/*
 * profile_type.c — Parca profile type strings <-> struct query_profile_type.
 *
 * "NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:PERIOD_UNIT[:delta]". The parts
 * come from pprof string tables and the __name__ label, so almost any
 * printable text is allowed in them; only what would break the string (':')
 * or the query language around it (whitespace, braces, quotes, commas,
 * operators' characters) is refused.
 */
#include "query/query_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool query_type_char_ok(unsigned char c)
{
	if (c <= 0x20 || c == 0x7f)
		return false;
	return !strchr("{}\"'`,=!~:", c);
}

static const char *const part_names[] = {"name",	"sample type", "sample unit",
					 "period type", "period unit", "suffix"};

int query_profile_type_parse_at(const char *s, size_t len, struct query_profile_type *out,
				size_t *bad_offset, struct kiln_error *err)
{
	const char *parts[6];
	size_t n = 0, start = 0;
	char *copy;

	memset(out, 0, sizeof(*out));
	*bad_offset = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != ':') {
			if (!query_type_char_ok((unsigned char)s[i])) {
				*bad_offset = i;
				return kiln_error_set(
				    err, EINVAL, "profile type: invalid character 0x%02x in %s",
				    (unsigned char)s[i], part_names[n < 6 ? n : 5]);
			}
			continue;
		}
		if (n == 6) {
			*bad_offset = start;
			return kiln_error_set(
			    err, EINVAL,
			    "profile type: too many ':'-separated parts (want "
			    "NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:PERIOD_UNIT[:delta])");
		}
		if (i == start) {
			*bad_offset = start;
			return kiln_error_set(err, EINVAL, "profile type: empty %s", part_names[n]);
		}
		parts[n++] = s + start;
		start = i + 1;
	}
	if (n < 5) {
		*bad_offset = len;
		return kiln_error_set(
		    err, EINVAL,
		    "profile type: %zu part%s, want 5 or 6 "
		    "(NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:PERIOD_UNIT[:delta])",
		    n, n == 1 ? "" : "s");
	}
	if (n == 6) {
		size_t l = (size_t)(s + len - parts[5]);

		if (l != 5 || memcmp(parts[5], "delta", 5) != 0) {
			*bad_offset = (size_t)(parts[5] - s);
			return kiln_error_set(
			    err, EINVAL,
			    "profile type: the sixth part must be \"delta\", not \"%.*s\"", (int)l,
			    parts[5]);
		}
	}
	copy = malloc(len + 1);
	if (!copy)
		return kiln_error_set(err, ENOMEM, "profile type: out of memory");
	memcpy(copy, s, len);
	copy[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (copy[i] == ':')
			copy[i] = '\0';
	out->storage = copy;
	out->name = copy;
	out->sample_type = copy + (parts[1] - s);
	out->sample_unit = copy + (parts[2] - s);
	out->period_type = copy + (parts[3] - s);
	out->period_unit = copy + (parts[4] - s);
	out->delta = n == 6;
	return 0;
}

int query_profile_type_parse(const char *s, struct query_profile_type *out, struct kiln_error *err)
{
	size_t bad;
	int rc;

	if (!s) {
		memset(out, 0, sizeof(*out));
		return kiln_error_set(err, EINVAL, "profile type: missing");
	}
	rc = query_profile_type_parse_at(s, strlen(s), out, &bad, err);
	if (rc)
		kiln_error_prefix(err, "\"%s\" (offset %zu): ", s, bad);
	return rc;
}

void query_profile_type_release(struct query_profile_type *t)
{
	if (!t)
		return;
	free(t->storage);
	memset(t, 0, sizeof(*t));
}

int query_profile_type_format(const struct query_profile_type *t, struct buf *out)
{
	return query_profile_type_format_parts(t->name, t->sample_type, t->sample_unit,
					       t->period_type, t->period_unit, t->delta, out);
}

int query_profile_type_format_parts(const char *name, const char *sample_type,
				    const char *sample_unit, const char *period_type,
				    const char *period_unit, bool delta, struct buf *out)
{
	const char *parts[5] = {name, sample_type, sample_unit, period_type, period_unit};
	int rc;

	for (int i = 0; i < 5; i++) {
		if (!parts[i] || !parts[i][0])
			return -EINVAL;
		for (const char *c = parts[i]; *c; c++)
			if (!query_type_char_ok((unsigned char)*c))
				return -EINVAL;
	}
	for (int i = 0; i < 5; i++) {
		if (i && (rc = buf_append(out, ":", 1)))
			return rc;
		if ((rc = buf_append_str(out, parts[i])))
			return rc;
	}
	return delta ? buf_append(out, ":delta", 6) : 0;
}

int query_profile_type_write_json(const char *key, struct json_writer *w, struct kiln_error *err)
{
	struct query_profile_type t;
	int rc;

	rc = query_profile_type_parse(key, &t, err);
	if (rc)
		return rc;
	json_begin_object(w);
	json_key(w, "key");
	json_string(w, key);
	json_key(w, "name");
	json_string(w, t.name);
	json_key(w, "sample_type");
	json_string(w, t.sample_type);
	json_key(w, "sample_unit");
	json_string(w, t.sample_unit);
	json_key(w, "period_type");
	json_string(w, t.period_type);
	json_key(w, "period_unit");
	json_string(w, t.period_unit);
	json_key(w, "delta");
	json_bool(w, t.delta);
	json_end_object(w);
	query_profile_type_release(&t);
	return w->err;
}
