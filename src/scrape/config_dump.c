/*
 * config_dump.c — writes a scrape config back as YAML, every field explicit
 * (defaults filled in), in the same shape scrape_config_parse reads. Used by
 * the round-trip test and by `kiln` at debug level to show what it runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "scrape/scrape.h"

/* A double-quoted YAML scalar: always safe, whatever the content. */
static int quote(struct buf *o, const char *s)
{
	int rc = buf_append_str(o, "\"");
	for (; rc == 0 && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			rc = buf_printf(o, "\\%c", c);
		else if (c < 0x20)
			rc = buf_printf(o, "\\x%02x", c);
		else
			rc = buf_append(o, s, 1);
	}
	return rc ? rc : buf_append_str(o, "\"");
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
		rc = buf_printf(o, "%s%s: ", indent, s.v[i].name);
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
			TRY(buf_printf(o, "      %s: [", j->params.v[i].name));
			TRY(quote(o, j->params.v[i].value));
			TRY(buf_append_str(o, "]\n"));
		}
	}
	TRY(buf_append_str(o, "    profiling_config:\n      path_prefix: "));
	TRY(quote(o, j->path_prefix ? j->path_prefix : ""));
	TRY(buf_append_str(o, "\n      pprof_config:\n"));
	for (size_t i = 0; i < j->n_endpoints; i++) {
		const struct pprof_endpoint_config *e = &j->endpoints[i];
		TRY(buf_printf(o, "        %s:\n          enabled: %s\n          path: ", e->name,
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
