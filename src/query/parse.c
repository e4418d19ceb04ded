/*
 * parse.c — the query language: TYPE{name="v", name!="v", name=~"re", ...}.
 *
 * A hand-written recursive-descent parser over the bytes of the query; every
 * error records the byte offset where the parser stood, so that the UI can
 * underline it and the message can draw a caret under it. String literals
 * follow Prometheus (which follows Go): "..." and '...' with escapes, `...`
 * raw. Regex values are compiled once here with pcre2 only to report a
 * syntax error at the right place; the matching form is compiled by the
 * store (query_selector_compile), which owns the match limits.
 */
#include "query/query_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *s;
	size_t len;
	size_t pos;
	struct kiln_error *err;
	long *error_position;
};

/* Records a parse error at byte offset pos: "1:COL: message" followed by
 * the query (or a window of it) and a caret under the offending byte. */
static int __attribute__((format(printf, 3, 4)))
parse_fail(struct parser *p, size_t pos, const char *fmt, ...)
{
	char what[256], excerpt[96], caret[96];
	size_t from = 0, to = p->len, n = 0;
	bool cut_left, cut_right;
	va_list ap;

	if (pos > p->len)
		pos = p->len;
	*p->error_position = (long)pos;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* A window of at most 60 bytes around pos keeps the caret aligned and
	 * the message within struct kiln_error. */
	if (to - from > 60) {
		from = pos > 30 ? pos - 30 : 0;
		to = from + 60 < p->len ? from + 60 : p->len;
	}
	cut_left = from > 0;
	cut_right = to < p->len;
	if (cut_left) {
		memcpy(excerpt, "...", 3);
		n = 3;
	}
	for (size_t i = from; i < to; i++) {
		unsigned char c = (unsigned char)p->s[i];

		excerpt[n++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	if (cut_right) {
		memcpy(excerpt + n, "...", 3);
		n += 3;
	}
	excerpt[n] = '\0';
	n = (cut_left ? 3 : 0) + (pos - from);
	memset(caret, ' ', n);
	caret[n] = '^';
	caret[n + 1] = '\0';
	return kiln_error_set(p->err, EINVAL, "1:%zu: %s\n  %s\n  %s", pos + 1, what, excerpt,
			      caret);
}

static void skip_space(struct parser *p)
{
	while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos])
		p->pos++;
}

static bool at_end(const struct parser *p)
{
	return p->pos >= p->len;
}

static bool label_start_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool label_char(char c)
{
	return label_start_char(c) || (c >= '0' && c <= '9');
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int put_utf8(struct buf *b, uint32_t cp)
{
	unsigned char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return buf_append(b, u, n);
}

/* Parses an escape after the backslash at p->pos - 1; appends the result. */
static int parse_escape(struct parser *p, char quote, struct buf *out)
{
	size_t at = p->pos - 1;
	char c, one;
	int digits = 0;
	uint32_t v = 0;

	if (at_end(p))
		return parse_fail(p, at, "unterminated string");
	c = p->s[p->pos++];
	switch (c) {
	case 'a':
		one = '\a';
		break;
	case 'b':
		one = '\b';
		break;
	case 'f':
		one = '\f';
		break;
	case 'n':
		one = '\n';
		break;
	case 'r':
		one = '\r';
		break;
	case 't':
		one = '\t';
		break;
	case 'v':
		one = '\v';
		break;
	case '\\':
		one = '\\';
		break;
	case '\'':
	case '"':
		if (c != quote)
			return parse_fail(p, at, "invalid escape \\%c in %c-quoted string", c,
					  quote);
		one = c;
		break;
	case 'x':
		digits = 2;
		break;
	case 'u':
		digits = 4;
		break;
	case 'U':
		digits = 8;
		break;
	default:
		if (c >= '0' && c <= '7') {
			/* \OOO: exactly three octal digits, at most 255 */
			v = (uint32_t)(c - '0');
			for (int i = 0; i < 2; i++) {
				if (at_end(p) || p->s[p->pos] < '0' || p->s[p->pos] > '7')
					return parse_fail(
					    p, at, "octal escape needs three digits (\\OOO)");
				v = v * 8 + (uint32_t)(p->s[p->pos++] - '0');
			}
			if (v > 255)
				return parse_fail(p, at, "octal escape above \\377");
			if (v == 0)
				return parse_fail(p, at, "NUL is not allowed in a string");
			one = (char)v;
			break;
		}
		if ((unsigned char)c < 0x20 || c == 0x7f)
			return parse_fail(p, at, "invalid escape in string");
		return parse_fail(p, at, "invalid escape \\%c in string", c);
	}
	if (!digits)
		return buf_append(out, &one, 1) ? kiln_error_set(p->err, ENOMEM, "out of memory")
						: 0;
	for (int i = 0; i < digits; i++) {
		int h = at_end(p) ? -1 : hex_value(p->s[p->pos]);

		if (h < 0)
			return parse_fail(p, at, "escape \\%c needs %d hex digits", c, digits);
		v = v * 16 + (uint32_t)h;
		p->pos++;
	}
	if (v == 0)
		return parse_fail(p, at, "NUL is not allowed in a string");
	if (c == 'x') {
		one = (char)v;
		if (buf_append(out, &one, 1))
			return kiln_error_set(p->err, ENOMEM, "out of memory");
		return 0;
	}
	if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return parse_fail(p, at, "escape is not a valid Unicode code point");
	if (put_utf8(out, v))
		return kiln_error_set(p->err, ENOMEM, "out of memory");
	return 0;
}

/* Is s[0..n) valid UTF-8? */
static bool utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		len = c >= 0xc2 && c < 0xe0    ? 2
		      : c >= 0xe0 && c < 0xf0  ? 3
		      : c >= 0xf0 && c <= 0xf4 ? 4
					       : 0;
		if (!len || i + len > n)
			goto bad;
		for (size_t k = 1; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				goto bad;
		cp = len == 2 ? 0x80 : 0;
		if (len == 3) {
			cp = ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[i + 1] & 0x3f) << 6) |
			     (s[i + 2] & 0x3f);
			if (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))
				goto bad;
		} else if (len == 4) {
			cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3f) << 12) |
			     ((uint32_t)(s[i + 2] & 0x3f) << 6) | (s[i + 3] & 0x3f);
			if (cp < 0x10000 || cp > 0x10ffff)
				goto bad;
		}
		i += len;
		continue;
bad:
		*bad = i;
		return false;
	}
	return true;
}

/* Parses a string literal at p->pos into out (NUL-terminated). */
static int parse_string(struct parser *p, struct buf *out, const char *after)
{
	size_t start = p->pos, bad;
	char quote;

	buf_reset(out);
	if (at_end(p) || !strchr("\"'`", p->s[p->pos]) || !p->s[p->pos]) {
		if (at_end(p))
			return parse_fail(p, p->pos,
					  "expected a quoted string after %s, found end of query",
					  after);
		return parse_fail(p, p->pos, "expected a quoted string after %s", after);
	}
	quote = p->s[p->pos++];
	for (;;) {
		char c;

		if (at_end(p))
			return parse_fail(p, start, "unterminated string");
		c = p->s[p->pos++];
		if (c == quote)
			break;
		if (quote != '`' && c == '\\') {
			int rc = parse_escape(p, quote, out);

			if (rc)
				return rc;
			continue;
		}
		if (quote != '`' && c == '\n')
			return parse_fail(p, p->pos - 1, "newline in string");
		if (c == '\0')
			return parse_fail(p, p->pos - 1, "NUL is not allowed in a string");
		if (buf_append(out, &c, 1))
			return kiln_error_set(p->err, ENOMEM, "out of memory");
	}
	if (buf_terminate(out))
		return kiln_error_set(p->err, ENOMEM, "out of memory");
	if (!utf8_valid(out->data, out->len, &bad))
		return parse_fail(p, start, "string is not valid UTF-8 (byte %zu of its value)",
				  bad);
	return 0;
}

/* Checks regex syntax; on an error points into the literal when it had no
 * escapes (so offsets agree), else at the literal's start. */
static int check_regex(struct parser *p, const char *re, size_t literal_start, size_t literal_len)
{
	PCRE2_SIZE erroff = 0;
	int errcode = 0;
	pcre2_code *code;
	PCRE2_UCHAR msg[160];
	size_t at = literal_start;

	/* the store's flags (store/series.c), so that exactly the patterns it
	 * would refuse are refused here, with a position */
	code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
			     PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_DOTALL, &errcode, &erroff,
			     NULL);
	if (code) {
		pcre2_code_free(code);
		return 0;
	}
	if (pcre2_get_error_message(errcode, msg, sizeof(msg)) < 0)
		snprintf((char *)msg, sizeof(msg), "error %d", errcode);
	if (literal_len == strlen(re) + 2 && erroff <= strlen(re))
		at = literal_start + 1 + erroff;
	return parse_fail(p, at, "invalid regular expression: %s", (const char *)msg);
}

static int add_matcher(struct query_selector *out, enum store_match_op op, const char *name,
		       size_t name_len, const struct buf *value, struct kiln_error *err)
{
	struct store_matcher *m, *grown;

	grown = realloc(out->matchers, (out->n_matchers + 1) * sizeof(*grown));
	if (!grown)
		return kiln_error_set(err, ENOMEM, "out of memory");
	out->matchers = grown;
	m = &out->matchers[out->n_matchers];
	memset(m, 0, sizeof(*m));
	m->op = op;
	m->name = strndup(name, name_len);
	m->value = strndup(value->len ? (const char *)value->data : "", value->len);
	if (!m->name || !m->value) {
		free(m->name);
		free(m->value);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	out->n_matchers++;
	return 0;
}

static int parse_matchers(struct parser *p, struct query_selector *out)
{
	struct buf value;
	int rc = 0;

	buf_init(&value);
	/* p->pos is just after '{' */
	for (;;) {
		size_t name_start, name_len, op_pos, lit_start;
		enum store_match_op op;
		const char *opname;

		skip_space(p);
		if (at_end(p)) {
			rc = parse_fail(p, p->pos,
					"unexpected end of query: expected a label name or '}'");
			goto out;
		}
		if (p->s[p->pos] == '}') {
			p->pos++;
			break;
		}
		name_start = p->pos;
		if (!label_start_char(p->s[p->pos])) {
			if (p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
				rc =
				    parse_fail(p, p->pos, "label name must not start with a digit");
			else
				rc = parse_fail(p, p->pos, "expected a label name or '}'");
			goto out;
		}
		while (!at_end(p) && label_char(p->s[p->pos]))
			p->pos++;
		name_len = p->pos - name_start;
		skip_space(p);
		op_pos = p->pos;
		if (p->len - p->pos >= 2 && p->s[p->pos] == '=' && p->s[p->pos + 1] == '~') {
			op = STORE_MATCH_REGEX;
			opname = "'=~'";
			p->pos += 2;
		} else if (p->len - p->pos >= 2 && p->s[p->pos] == '!' && p->s[p->pos + 1] == '~') {
			op = STORE_MATCH_NOT_REGEX;
			opname = "'!~'";
			p->pos += 2;
		} else if (p->len - p->pos >= 2 && p->s[p->pos] == '!' && p->s[p->pos + 1] == '=') {
			op = STORE_MATCH_NEQ;
			opname = "'!='";
			p->pos += 2;
		} else if (!at_end(p) && p->s[p->pos] == '=') {
			op = STORE_MATCH_EQ;
			opname = "'='";
			p->pos += 1;
		} else {
			rc = parse_fail(
			    p, op_pos, "expected '=', '!=', '=~' or '!~' after label name \"%.*s\"",
			    (int)name_len, p->s + name_start);
			goto out;
		}
		skip_space(p);
		lit_start = p->pos;
		rc = parse_string(p, &value, opname);
		if (rc)
			goto out;
		if (op == STORE_MATCH_REGEX || op == STORE_MATCH_NOT_REGEX) {
			rc =
			    check_regex(p, (const char *)value.data, lit_start, p->pos - lit_start);
			if (rc)
				goto out;
		}
		if (out->n_matchers == QUERY_MAX_MATCHERS) {
			rc = parse_fail(p, name_start, "too many matchers (at most %d)",
					QUERY_MAX_MATCHERS);
			goto out;
		}
		rc = add_matcher(out, op, p->s + name_start, name_len, &value, p->err);
		if (rc)
			goto out;
		skip_space(p);
		if (at_end(p)) {
			rc = parse_fail(p, p->pos, "unexpected end of query: expected ',' or '}'");
			goto out;
		}
		if (p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->s[p->pos] == '}') {
			p->pos++;
			break;
		}
		rc = parse_fail(p, p->pos, "expected ',' or '}' after a matcher");
		goto out;
	}
out:
	buf_free(&value);
	return rc;
}

int query_parse(const char *text, unsigned flags, struct query_selector *out,
		struct kiln_error *err)
{
	struct parser p = {.s = text ? text : "", .err = err};
	struct query_profile_type type;
	size_t type_start, type_len, bad;
	int rc;

	memset(out, 0, sizeof(*out));
	out->error_position = -1;
	p.error_position = &out->error_position;
	p.len = strlen(p.s);
	if (p.len > QUERY_MAX_LEN) {
		p.len = QUERY_MAX_LEN;
		return parse_fail(&p, QUERY_MAX_LEN, "query longer than %d bytes", QUERY_MAX_LEN);
	}

	skip_space(&p);
	type_start = p.pos;
	while (!at_end(&p) && p.s[p.pos] != '{' && !strchr(" \t\r\n", p.s[p.pos])) {
		if (!query_type_char_ok((unsigned char)p.s[p.pos]) && p.s[p.pos] != ':') {
			rc = parse_fail(&p, p.pos, "unexpected character '%c' in profile type",
					p.s[p.pos]);
			goto fail;
		}
		p.pos++;
	}
	type_len = p.pos - type_start;
	if (type_len) {
		rc = query_profile_type_parse_at(p.s + type_start, type_len, &type, &bad, NULL);
		if (rc) {
			struct kiln_error why = {0};

			query_profile_type_parse_at(p.s + type_start, type_len, &type, &bad, &why);
			/* the message starts with "profile type: " already */
			rc = parse_fail(&p, type_start + bad, "%s", why.msg);
			goto fail;
		}
		out->profile_type = strndup(p.s + type_start, type_len);
		query_profile_type_release(&type);
		if (!out->profile_type) {
			rc = kiln_error_set(err, ENOMEM, "out of memory");
			goto fail;
		}
	} else if (!(flags & QUERY_PARSE_TYPE_OPTIONAL)) {
		rc = parse_fail(&p, p.pos,
				"missing profile type (NAME:SAMPLE_TYPE:SAMPLE_UNIT:PERIOD_TYPE:"
				"PERIOD_UNIT[:delta]) before the matchers");
		goto fail;
	}
	skip_space(&p);
	if (!at_end(&p) && p.s[p.pos] == '{') {
		p.pos++;
		rc = parse_matchers(&p, out);
		if (rc)
			goto fail;
		skip_space(&p);
	}
	if (!at_end(&p)) {
		rc = parse_fail(&p, p.pos, "unexpected '%c' after the %s", p.s[p.pos],
				out->n_matchers || p.s[p.pos - 1] == '}' || !type_len
				    ? "matchers"
				    : "profile type");
		goto fail;
	}
	return 0;
fail : {
	long pos = out->error_position;

	query_selector_release(out);
	out->error_position = pos;
	return rc;
}
}

void query_selector_release(struct query_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n_matchers; i++) {
		if (sel->matchers[i].compiled)
			store_matcher_release(&sel->matchers[i]);
		free(sel->matchers[i].name);
		free(sel->matchers[i].value);
	}
	free(sel->matchers);
	free(sel->profile_type);
	memset(sel, 0, sizeof(*sel));
	sel->error_position = -1;
}

void query_selector_to_store(const struct query_selector *sel, int64_t start_ms, int64_t end_ms,
			     struct store_selector *out)
{
	memset(out, 0, sizeof(*out));
	out->profile_type = sel->profile_type;
	out->matchers = sel->matchers;
	out->n_matchers = sel->n_matchers;
	out->start_ms = start_ms;
	out->end_ms = end_ms;
}

static int append_quoted(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	int rc = buf_append(b, "\"", 1);

	for (; !rc && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};

			rc = buf_append(b, e, 2);
		} else if (c < 0x20 || c == 0x7f) {
			char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};

			rc = buf_append(b, e, 4);
		} else {
			rc = buf_append(b, s, 1);
		}
	}
	return rc ? rc : buf_append(b, "\"", 1);
}

int query_selector_format(const struct query_selector *sel, struct buf *out)
{
	static const char *const ops[] = {"=", "!=", "=~", "!~"};
	int rc = 0;

	if (sel->profile_type)
		rc = buf_append_str(out, sel->profile_type);
	if (!rc)
		rc = buf_append(out, "{", 1);
	for (size_t i = 0; !rc && i < sel->n_matchers; i++) {
		const struct store_matcher *m = &sel->matchers[i];

		if (i)
			rc = buf_append(out, ", ", 2);
		if (!rc)
			rc = buf_append_str(out, m->name);
		if (!rc)
			rc = buf_append_str(out, ops[m->op]);
		if (!rc)
			rc = append_quoted(out, m->value);
	}
	return rc ? rc : buf_append(out, "}", 1);
}
