/*
 * config_dump.c — writes a scrape config back as YAML, every field explicit
 * (defaults filled in), in the same shape scrape_config_parse reads. Used by
 * the round-trip test and by `kiln` at debug level to show what it runs.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "scrape/scrape.h"

/* A double-quoted YAML scalar: always safe, whatever the content. */
/* Length and code point of the UTF-8 sequence at u (1 and the byte when it
 * is not a complete multi-byte sequence). */
static size_t utf8_at(const unsigned char *u, uint32_t *cp)
{
	size_t n = u[0] >= 0xf0 ? 4 : u[0] >= 0xe0 ? 3 : u[0] >= 0xc0 ? 2 : 1;
	uint32_t v = n == 4 ? u[0] & 0x07u : n == 3 ? u[0] & 0x0fu : n == 2 ? u[0] & 0x1fu : u[0];
	for (size_t i = 1; i < n; i++) {
		if ((u[i] & 0xc0) != 0x80) { /* also stops at the NUL */
			*cp = u[0];
			return 1;
		}
		v = v << 6 | (u[i] & 0x3fu);
	}
	*cp = v;
	return n;
}

/* A YAML double-quoted scalar that reads back as s. Escaped: quote and
 * backslash, C0 and C1 controls, DEL, YAML's own line breaks (NEL, LS, PS,
 * which a reader folds) and the code points YAML does not allow raw (BOM,
 * U+FFFE, U+FFFF). */
static int quote(struct buf *o, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	int rc = buf_append_str(o, "\"");
	while (rc == 0 && *u) {
		uint32_t cp;
		size_t n = utf8_at(u, &cp);
		if (cp == '"' || cp == '\\')
			rc = buf_printf(o, "\\%c", (char)cp);
		else if (cp < 0x20 || cp == 0x7f)
			rc = buf_printf(o, "\\x%02x", (unsigned)cp);
		else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
			 cp == 0xfeff || cp == 0xfffe || cp == 0xffff)
			rc = buf_printf(o, "\\u%04x", (unsigned)cp);
		else
			rc = buf_append(o, u, n);
		u += n;
	}
	return rc ? rc : buf_append_str(o, "\"");
}

/* A mapping key: plain when it is an identifier, else quoted. */
static int key(struct buf *o, const char *k)
{
	bool plain = *k && !isdigit((unsigned char)*k);
	for (const char *c = k; *c && plain; c++)
		plain = isalnum((unsigned char)*c) || *c == '_';
	return plain ? buf_append_str(o, k) : quote(o, k);
}

static int duration(struct buf *o, int64_t ms)
{
	if (ms % 1000)
		return buf_printf(o, "%" PRId64 "ms", ms);
	return buf_printf(o, "%" PRId64 "s", ms / 1000);
}

#define TRY(x)                                                                                     \
	do {                                                                                       \
		if ((rc = (x)) < 0)                                                                \
			return rc;                                                                 \
	} while (0)

static int dump_labels(struct buf *o, const struct scrape_labels *l, const char *indent)
{
	int rc;
	struct scrape_labels s;
	if (l->n == 0)
		return buf_append_str(o, " {}\n");
	TRY(scrape_labels_copy(&s, l));
	scrape_labels_sort(&s);
	rc = buf_append_str(o, "\n");
	for (size_t i = 0; i < s.n && rc == 0; i++) {
		rc = buf_append_str(o, indent);
		rc = rc ? rc : key(o, s.v[i].name);
		rc = rc ? rc : buf_append_str(o, ": ");
		if (rc == 0)
			rc = quote(o, s.v[i].value);
		if (rc == 0)
			rc = buf_append_str(o, "\n");
	}
	scrape_labels_free(&s);
	return rc;
}

static int dump_job(struct buf *o, const struct scrape_job_config *j)
{
	int rc;
	TRY(buf_append_str(o, "  - job_name: "));
	TRY(quote(o, j->job_name));
	TRY(buf_append_str(o, "\n    scrape_interval: "));
	TRY(duration(o, j->interval_ms));
	TRY(buf_append_str(o, "\n    scrape_timeout: "));
	TRY(duration(o, j->timeout_ms));
	TRY(buf_append_str(o, "\n    scheme: "));
	TRY(quote(o, j->scheme));
	TRY(buf_printf(o, "\n    normalized_addresses: %s\n",
		       j->normalized_addresses ? "true" : "false"));
	TRY(buf_append_str(o, "    params:"));
	if (j->params.n == 0) {
		TRY(buf_append_str(o, " {}\n"));
	} else {
		TRY(buf_append_str(o, "\n"));
		for (size_t i = 0; i < j->params.n; i++) {
			TRY(buf_append_str(o, "      "));
			TRY(key(o, j->params.v[i].name));
			TRY(buf_append_str(o, ": ["));
			TRY(quote(o, j->params.v[i].value));
			TRY(buf_append_str(o, "]\n"));
		}
	}
	TRY(buf_append_str(o, "    profiling_config:\n      path_prefix: "));
	TRY(quote(o, j->path_prefix ? j->path_prefix : ""));
	TRY(buf_append_str(o, "\n      pprof_config:\n"));
	for (size_t i = 0; i < j->n_endpoints; i++) {
		const struct pprof_endpoint_config *e = &j->endpoints[i];
		TRY(buf_append_str(o, "        "));
		TRY(key(o, e->name));
		TRY(buf_printf(o, ":\n          enabled: %s\n          path: ",
			       e->enabled ? "true" : "false"));
		TRY(quote(o, e->path));
		TRY(buf_printf(o, "\n          delta: %s\n", e->delta ? "true" : "false"));
		if (e->seconds)
			TRY(buf_printf(o, "          seconds: %" PRId64 "\n", e->seconds));
		if (e->n_keep) {
			TRY(buf_append_str(o, "          keep_sample_type:\n"));
			for (size_t k = 0; k < e->n_keep; k++) {
				TRY(buf_append_str(o, "            - type: "));
				TRY(quote(o, e->keep_types[k]));
				if (e->keep_units[k]) {
					TRY(buf_append_str(o, "\n              unit: "));
					TRY(quote(o, e->keep_units[k]));
				}
				TRY(buf_append_str(o, "\n"));
			}
		}
	}
	TRY(buf_append_str(o, "    static_configs:"));
	if (j->n_static_configs == 0)
		TRY(buf_append_str(o, " []"));
	TRY(buf_append_str(o, "\n"));
	for (size_t i = 0; i < j->n_static_configs; i++) {
		const struct static_config *s = &j->static_configs[i];
		TRY(buf_append_str(o, "      - targets: ["));
		for (size_t t = 0; t < s->n_targets; t++) {
			if (t)
				TRY(buf_append_str(o, ", "));
			TRY(quote(o, s->targets[t]));
		}
		TRY(buf_append_str(o, "]\n        labels:"));
		TRY(dump_labels(o, &s->labels, "          "));
	}
	for (size_t i = 0; i < j->n_file_sd; i++) {
		const struct file_sd_config *f = &j->file_sd[i];
		TRY(buf_append_str(o, i ? "      - files: ["
					: "    file_sd_configs:\n      - files: ["));
		for (size_t k = 0; k < f->n_files; k++) {
			if (k)
				TRY(buf_append_str(o, ", "));
			TRY(quote(o, f->files[k]));
		}
		TRY(buf_printf(o, "]\n        refresh_interval: %" PRId64 "ms\n", f->refresh_ms));
	}
	for (size_t i = 0; i < j->n_http_sd; i++) {
		TRY(buf_append_str(o, i ? "      - url: " : "    http_sd_configs:\n      - url: "));
		TRY(quote(o, j->http_sd[i].url));
		TRY(buf_printf(o, "\n        refresh_interval: %" PRId64 "ms\n",
			       j->http_sd[i].refresh_ms));
	}
	TRY(buf_append_str(o, "    relabel_configs:"));
	if (j->n_relabel == 0)
		TRY(buf_append_str(o, " []"));
	TRY(buf_append_str(o, "\n"));
	for (size_t i = 0; i < j->n_relabel; i++) {
		const struct relabel_config *r = &j->relabel[i];
		TRY(buf_printf(o, "      - action: %s\n        source_labels: [",
			       relabel_action_name(r->action)));
		for (size_t s = 0; s < r->n_source_labels; s++) {
			if (s)
				TRY(buf_append_str(o, ", "));
			TRY(quote(o, r->source_labels[s]));
		}
		TRY(buf_append_str(o, "]\n        separator: "));
		TRY(quote(o, r->separator));
		TRY(buf_append_str(o, "\n        regex: "));
		TRY(quote(o, r->regex));
		if (r->target_label) {
			TRY(buf_append_str(o, "\n        target_label: "));
			TRY(quote(o, r->target_label));
		}
		TRY(buf_append_str(o, "\n        replacement: "));
		TRY(quote(o, r->replacement));
		if (r->action == RELABEL_HASHMOD)
			TRY(buf_printf(o, "\n        modulus: %" PRIu64, r->modulus));
		TRY(buf_append_str(o, "\n"));
	}
	return 0;
}

int scrape_config_dump(const struct scrape_config *c, struct buf *o)
{
	int rc;
	if (c->bucket_type || c->bucket_directory) {
		TRY(buf_append_str(o, "object_storage:\n  bucket:\n    type: "));
		TRY(quote(o, c->bucket_type ? c->bucket_type : "FILESYSTEM"));
		TRY(buf_append_str(o, "\n    config:\n      directory: "));
		TRY(quote(o, c->bucket_directory ? c->bucket_directory : ""));
		TRY(buf_append_str(o, "\n"));
	}
	TRY(buf_append_str(o, "scrape_configs:"));
	if (c->n_jobs == 0)
		TRY(buf_append_str(o, " []"));
	TRY(buf_append_str(o, "\n"));
	for (size_t i = 0; i < c->n_jobs; i++)
		TRY(dump_job(o, &c->jobs[i]));
	return 0;
}
