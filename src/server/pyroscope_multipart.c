/*
 * pyroscope_multipart.c — multipart/form-data (RFC 7578 over RFC 2046) as
 * Pyroscope's SDKs send format=pprof: parts "profile", "prev_profile",
 * "sample_type_config". Parts point into the body; nothing is copied.
 *
 * Body shape: [preamble] "--B" CRLF headers CRLF CRLF data CRLF "--B" ...
 * CRLF "--B--" [epilogue]. A part's data ends at the first CRLF "--B",
 * which RFC 2046 requires the sender to keep out of the data.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "server/pyroscope.h"

int pyro_multipart_boundary(const char *content_type, char *out, size_t size,
			    struct kiln_error *err)
{
	const char *p, *end;
	size_t n;

	if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) != 0)
		return kiln_error_set(err, EINVAL,
				      "Content-Type \"%.80s\" is not multipart/form-data",
				      content_type ? content_type : "");
	p = strcasestr(content_type, "boundary=");
	if (!p)
		return kiln_error_set(err, EINVAL, "Content-Type has no boundary parameter");
	p += 9;
	if (*p == '"') {
		p++;
		end = strchr(p, '"');
		if (!end)
			return kiln_error_set(err, EINVAL,
					      "Content-Type: boundary quote not closed");
	} else {
		end = p + strcspn(p, "; \t");
	}
	n = (size_t)(end - p);
	if (n == 0 || n > 70 || n >= size)
		return kiln_error_set(err, EINVAL, "Content-Type: boundary of %zu bytes (1 to 70)",
				      n);
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* The value of name="..." in a Content-Disposition header line. */
static int disposition_name(const char *h, size_t hlen, char *out, size_t size)
{
	const char *end = h + hlen;
	for (const char *p = h; p + 6 <= end; p++) {
		if (strncasecmp(p, "name=\"", 6) != 0 || (p > h && p[-1] != ' ' && p[-1] != ';'))
			continue;
		const char *v = p + 6, *q = memchr(v, '"', (size_t)(end - v));
		if (!q || (size_t)(q - v) >= size)
			return -EINVAL;
		memcpy(out, v, (size_t)(q - v));
		out[q - v] = '\0';
		return 0;
	}
	return -EINVAL;
}

/* Reads the header block of the part starting at body[pos]; on success
 * *data_pos is where its data begins and the part's name is set. */
static int parse_part_headers(const uint8_t *body, size_t len, size_t pos, struct pyro_part *part,
			      size_t *data_pos, struct kiln_error *err)
{
	bool named = false;

	for (;;) {
		const uint8_t *eol = memmem(body + pos, len - pos, "\r\n", 2);
		size_t hlen;
		if (!eol)
			return kiln_error_set(
			    err, EINVAL, "multipart: part header at byte %zu not ended by CRLF",
			    pos);
		hlen = (size_t)(eol - (body + pos));
		if (hlen == 0) {
			*data_pos = pos + 2;
			break;
		}
		if (hlen > 20 &&
		    strncasecmp((const char *)body + pos, "Content-Disposition:", 20) == 0) {
			char line[1024];
			if (hlen >= sizeof(line))
				return kiln_error_set(
				    err, EINVAL, "multipart: header at byte %zu too long", pos);
			memcpy(line, body + pos, hlen);
			line[hlen] = '\0';
			if (!strcasestr(line, "form-data") ||
			    disposition_name(line, hlen, part->name, sizeof(part->name)))
				return kiln_error_set(
				    err, EINVAL,
				    "multipart: Content-Disposition at byte %zu is not form-data "
				    "with a name=\"...\" of at most %zu bytes",
				    pos, sizeof(part->name) - 1);
			named = true;
		}
		pos += hlen + 2;
	}
	if (!named)
		return kiln_error_set(err, EINVAL,
				      "multipart: part at byte %zu has no Content-Disposition name",
				      pos);
	return 0;
}

int pyro_multipart_parse(const uint8_t *body, size_t len, const char *boundary,
			 struct pyro_part *parts, size_t *n_parts, struct kiln_error *err)
{
	char delim[80]; /* CRLF "--" boundary */
	size_t dlen, pos;
	const uint8_t *p;

	*n_parts = 0;
	dlen = strlen(boundary);
	if (dlen == 0 || dlen > 70)
		return kiln_error_set(err, EINVAL, "multipart: boundary of %zu bytes (1 to 70)",
				      dlen);
	delim[0] = '\r';
	delim[1] = '\n';
	delim[2] = delim[3] = '-';
	memcpy(delim + 4, boundary, dlen);
	dlen += 4;
	/* The first delimiter may open the body (no CRLF before it). */
	if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0) {
		pos = dlen - 2;
	} else {
		p = memmem(body, len, delim, dlen);
		if (!p)
			return kiln_error_set(err, EINVAL,
					      "multipart: no \"--%s\" delimiter in %zu bytes",
					      boundary, len);
		pos = (size_t)(p - body) + dlen;
	}
	for (;;) {
		size_t data_pos;
		int rc;

		/* After a delimiter: "--" closes the body, CRLF opens a part. */
		if (len - pos >= 2 && body[pos] == '-' && body[pos + 1] == '-')
			return 0;
		while (pos < len && (body[pos] == ' ' || body[pos] == '\t'))
			pos++;
		if (len - pos < 2 || body[pos] != '\r' || body[pos + 1] != '\n')
			return kiln_error_set(
			    err, EINVAL,
			    "multipart: byte %zu: expected CRLF or \"--\" after the "
			    "delimiter",
			    pos);
		pos += 2;
		if (*n_parts == PYRO_MAX_PARTS)
			return kiln_error_set(err, EINVAL, "multipart: more than %d parts",
					      PYRO_MAX_PARTS);
		struct pyro_part *part = &parts[*n_parts];
		memset(part, 0, sizeof(*part));
		rc = parse_part_headers(body, len, pos, part, &data_pos, err);
		if (rc)
			return rc;
		p = memmem(body + data_pos, len - data_pos, delim, dlen);
		if (!p)
			return kiln_error_set(err, EINVAL,
					      "multipart: part \"%s\" at byte %zu is not closed by "
					      "\"--%s\" (truncated body?)",
					      part->name, data_pos, boundary);
		part->data = body + data_pos;
		part->len = (size_t)(p - part->data);
		(*n_parts)++;
		pos = (size_t)(p - body) + dlen;
	}
}

const struct pyro_part *pyro_multipart_find(const struct pyro_part *parts, size_t n,
					    const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(parts[i].name, name) == 0)
			return &parts[i];
	return NULL;
}
