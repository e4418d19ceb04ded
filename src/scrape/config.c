/*
 * config.c — loads a Parca-style YAML scrape config with libyaml.
 *
 * libyaml's document API gives a node tree where each node keeps its start
 * mark, so every error can name FILE:LINE:COLUMN of the offending node. The
 * walk is strict like Parca's decoder (unknown keys are errors), fills in
 * Parca's defaults (interval 10s, timeout interval + 3s, scheme http, the
 * five standard pprof endpoints) and validates what a scrape needs.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "scrape/config_walk.h"
#include "scrape/scrape.h"

/* ---- object_storage ------------------------------------------------------ */

static int walk_object_storage(struct walker *w, yaml_node_t *n, struct scrape_config *c)
{
	yaml_node_t *k, *v, *k2, *v2, *k3, *v3;
	int rc = want(w, n, YAML_MAPPING_NODE, "object_storage");
	if (rc)
		return rc;
	FOR_EACH_PAIR(w, n, "object_storage", k, v, rc)
	{
		if (strcmp(scalar(k), "bucket") != 0)
			return unknown_key(w, k, "object_storage");
		if ((rc = want(w, v, YAML_MAPPING_NODE, "object_storage.bucket")))
			return rc;
		FOR_EACH_PAIR(w, v, "object_storage.bucket", k2, v2, rc)
		{
			const char *key = scalar(k2);
			if (strcmp(key, "type") == 0) {
				if ((rc = get_string(w, v2, "bucket.type", &c->bucket_type)))
					return rc;
				if (strcasecmp(c->bucket_type, "FILESYSTEM") != 0)
					return fail_at(w, v2,
						       "bucket.type: \"%s\" is not supported (only "
						       "FILESYSTEM)",
						       c->bucket_type);
			} else if (strcmp(key, "config") == 0) {
				if (is_null(v2))
					continue;
				if ((rc = want(w, v2, YAML_MAPPING_NODE, "bucket.config")))
					return rc;
				FOR_EACH_PAIR(w, v2, "bucket.config", k3, v3, rc)
				{
					if (strcmp(scalar(k3), "directory") != 0)
						return unknown_key(w, k3, "bucket.config");
					if ((rc = get_string(w, v3, "bucket.config.directory",
							     &c->bucket_directory)))
						return rc;
				}
			} else if (strcmp(key, "prefix") != 0) {
				return unknown_key(w, k2, "object_storage.bucket");
			}
		}
	}
	return 0;
}

/* ---- relabel_configs ----------------------------------------------------- */

static const char *const action_names[] = {
    [RELABEL_REPLACE] = "replace",     [RELABEL_KEEP] = "keep",
    [RELABEL_DROP] = "drop",	       [RELABEL_HASHMOD] = "hashmod",
    [RELABEL_LABELMAP] = "labelmap",   [RELABEL_LABELDROP] = "labeldrop",
    [RELABEL_LABELKEEP] = "labelkeep", [RELABEL_LOWERCASE] = "lowercase",
    [RELABEL_UPPERCASE] = "uppercase",
};

const char *relabel_action_name(enum relabel_action a)
{
	return action_names[a];
}

static int walk_relabel(struct walker *w, yaml_node_t *n, struct relabel_config *rc_out)
{
	yaml_node_t *k, *v, *action_node = n, *regex_node = n;
	int rc = want(w, n, YAML_MAPPING_NODE, "relabel_configs[]");
	bool has_modulus = false;
	if (rc)
		return rc;
	FOR_EACH_PAIR(w, n, "relabel_configs[]", k, v, rc)
	{
		const char *key = scalar(k);
		if (strcmp(key, "source_labels") == 0) {
			if (is_null(v))
				continue;
			rc = get_string_list(w, v, "source_labels", &rc_out->source_labels,
					     &rc_out->n_source_labels);
		} else if (strcmp(key, "separator") == 0) {
			rc = get_string(w, v, "separator", &rc_out->separator);
		} else if (strcmp(key, "regex") == 0) {
			rc = get_string(w, v, "regex", &rc_out->regex);
			regex_node = v;
		} else if (strcmp(key, "target_label") == 0) {
			rc = get_string(w, v, "target_label", &rc_out->target_label);
		} else if (strcmp(key, "replacement") == 0) {
			rc = get_string(w, v, "replacement", &rc_out->replacement);
		} else if (strcmp(key, "modulus") == 0) {
			rc = get_uint(w, v, "modulus", &rc_out->modulus);
			has_modulus = true;
		} else if (strcmp(key, "action") == 0) {
			char *a = NULL;
			if ((rc = get_string(w, v, "action", &a)))
				return rc;
			size_t i;
			for (i = 0; i < sizeof(action_names) / sizeof(action_names[0]); i++)
				if (strcasecmp(a, action_names[i]) == 0)
					break;
			if (i == sizeof(action_names) / sizeof(action_names[0])) {
				rc =
				    fail_at(w, v,
					    "action: unknown relabel action \"%s\" (replace, keep, "
					    "drop, hashmod, labelmap, labeldrop, labelkeep, "
					    "lowercase, uppercase)",
					    a);
				free(a);
				return rc;
			}
			free(a);
			rc_out->action = i;
			action_node = v;
		} else {
			return unknown_key(w, k, "relabel_configs[]");
		}
		if (rc)
			return rc;
	}
	if (!rc_out->separator && !(rc_out->separator = strdup(";")))
		return -ENOMEM;
	if (!rc_out->regex && !(rc_out->regex = strdup("(.*)")))
		return -ENOMEM;
	if (!rc_out->replacement && !(rc_out->replacement = strdup("$1")))
		return -ENOMEM;
	struct kiln_error re_err = {0};
	if (relabel_compile(rc_out, &re_err) < 0)
		return fail_at(w, regex_node, "%s", re_err.msg);
	const char *act = action_names[rc_out->action];
	switch (rc_out->action) {
	case RELABEL_REPLACE:
	case RELABEL_HASHMOD:
	case RELABEL_LOWERCASE:
	case RELABEL_UPPERCASE:
		if (!rc_out->target_label || !*rc_out->target_label)
			return fail_at(w, action_node, "relabel action %s requires target_label",
				       act);
		if (rc_out->action != RELABEL_REPLACE && !label_name_valid(rc_out->target_label))
			return fail_at(w, action_node,
				       "target_label \"%s\" is not a valid label name",
				       rc_out->target_label);
		break;
	case RELABEL_KEEP:
	case RELABEL_DROP:
		if (rc_out->n_source_labels == 0)
			return fail_at(w, action_node, "relabel action %s requires source_labels",
				       act);
		break;
	case RELABEL_LABELMAP:
	case RELABEL_LABELDROP:
	case RELABEL_LABELKEEP:
		if (rc_out->n_source_labels || rc_out->target_label)
			return fail_at(w, action_node,
				       "relabel action %s takes only regex (and replacement for "
				       "labelmap), not source_labels or target_label",
				       act);
		break;
	}
	if (rc_out->action == RELABEL_HASHMOD && rc_out->modulus == 0)
		return fail_at(w, action_node, "relabel action hashmod requires modulus > 0");
	if (has_modulus && rc_out->action != RELABEL_HASHMOD && rc_out->modulus)
		return fail_at(w, action_node, "modulus is only meaningful with action hashmod");
	return 0;
}

/* ---- profiling_config ---------------------------------------------------- */

static const struct {
	const char *name;
	const char *path;
	bool delta;
} default_endpoints[] = {
    {"memory", "/debug/pprof/allocs", false},	    {"block", "/debug/pprof/block", false},
    {"goroutine", "/debug/pprof/goroutine", false}, {"mutex", "/debug/pprof/mutex", false},
    {"process_cpu", "/debug/pprof/profile", true},
};
#define N_DEFAULT_ENDPOINTS (sizeof(default_endpoints) / sizeof(default_endpoints[0]))

static struct pprof_endpoint_config *find_endpoint(struct scrape_job_config *j, const char *name)
{
	for (size_t i = 0; i < j->n_endpoints; i++)
		if (strcmp(j->endpoints[i].name, name) == 0)
			return &j->endpoints[i];
	return NULL;
}

static struct pprof_endpoint_config *add_endpoint(struct scrape_job_config *j, const char *name)
{
	struct pprof_endpoint_config *v = realloc(j->endpoints, (j->n_endpoints + 1) * sizeof(*v));
	if (!v)
		return NULL;
	j->endpoints = v;
	struct pprof_endpoint_config *e = &v[j->n_endpoints];
	memset(e, 0, sizeof(*e));
	if (!(e->name = strdup(name)))
		return NULL;
	e->enabled = true;
	j->n_endpoints++;
	return e;
}

static int walk_keep_types(struct walker *w, yaml_node_t *n, struct pprof_endpoint_config *e)
{
	yaml_node_t *k, *v;
	int rc = want(w, n, YAML_SEQUENCE_NODE, "keep_sample_type");
	if (rc)
		return rc;
	size_t len = n->data.sequence.items.top - n->data.sequence.items.start;
	e->keep_types = calloc(len + 1, sizeof(char *));
	e->keep_units = calloc(len + 1, sizeof(char *));
	if (!e->keep_types || !e->keep_units)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		yaml_node_t *item = node(w, n->data.sequence.items.start[i]);
		if ((rc = want(w, item, YAML_MAPPING_NODE, "keep_sample_type[]")))
			return rc;
		e->n_keep++;
		FOR_EACH_PAIR(w, item, "keep_sample_type[]", k, v, rc)
		{
			if (strcmp(scalar(k), "type") == 0)
				rc = get_string(w, v, "type", &e->keep_types[i]);
			else if (strcmp(scalar(k), "unit") == 0)
				rc = get_string(w, v, "unit", &e->keep_units[i]);
			else
				return unknown_key(w, k, "keep_sample_type[]");
			if (rc)
				return rc;
		}
		if (!e->keep_types[i])
			return fail_at(w, item, "keep_sample_type[]: type is required");
	}
	return 0;
}

static int walk_endpoint(struct walker *w, yaml_node_t *k, yaml_node_t *n,
			 struct scrape_job_config *j)
{
	yaml_node_t *k2, *v2;
	const char *name = scalar(k);
	int rc;
	bool has_path = false, has_delta = false;

	if (strcmp(name, "memory_allocs") == 0)
		name = "memory"; /* older Parca name for the same endpoint */
	if (!label_name_valid(name))
		return fail_at(w, k, "pprof_config: \"%s\" is not a valid profile name", name);
	if (find_endpoint(j, name))
		return fail_at(w, k, "pprof_config: profile \"%s\" given twice", name);
	struct pprof_endpoint_config *e = add_endpoint(j, name);
	if (!e)
		return -ENOMEM;
	if (is_null(n))
		goto defaults;
	if ((rc = want(w, n, YAML_MAPPING_NODE, "pprof_config entry")))
		return rc;
	FOR_EACH_PAIR(w, n, "pprof_config entry", k2, v2, rc)
	{
		const char *key = scalar(k2);
		if (strcmp(key, "enabled") == 0) {
			rc = get_bool(w, v2, "enabled", &e->enabled);
		} else if (strcmp(key, "path") == 0) {
			rc = get_string(w, v2, "path", &e->path);
			has_path = true;
			if (!rc && e->path[0] != '/')
				return fail_at(w, v2, "path: \"%s\" must start with /", e->path);
		} else if (strcmp(key, "delta") == 0) {
			rc = get_bool(w, v2, "delta", &e->delta);
			has_delta = true;
		} else if (strcmp(key, "seconds") == 0) {
			uint64_t s = 0;
			rc = get_uint(w, v2, "seconds", &s);
			if (!rc && (s < 1 || s > 3600))
				return fail_at(w, v2,
					       "seconds: %" PRIu64 " is out of range 1..3600", s);
			e->seconds = (int64_t)s;
		} else if (strcmp(key, "keep_sample_type") == 0) {
			rc = walk_keep_types(w, v2, e);
		} else {
			return unknown_key(w, k2, "pprof_config entry");
		}
		if (rc)
			return rc;
	}
defaults:
	/* Unlike Parca, an entry that does not say `delta` keeps the standard
	 * endpoint's default, so `process_cpu: {enabled: true}` still asks for
	 * ?seconds=N instead of Go's 30 s default. */
	for (size_t i = 0; !has_delta && i < N_DEFAULT_ENDPOINTS; i++)
		if (strcmp(default_endpoints[i].name, name) == 0)
			e->delta = default_endpoints[i].delta;
	if (!has_path) {
		for (size_t i = 0; i < N_DEFAULT_ENDPOINTS; i++)
			if (strcmp(default_endpoints[i].name, name) == 0 &&
			    !(e->path = strdup(default_endpoints[i].path)))
				return -ENOMEM;
		if (!e->path)
			return fail_at(w, k, "pprof_config: custom profile \"%s\" needs a path",
				       name);
	}
	return 0;
}

static int walk_profiling(struct walker *w, yaml_node_t *n, struct scrape_job_config *j)
{
	yaml_node_t *k, *v, *k2, *v2;
	int rc;
	if (is_null(n))
		return 0;
	if ((rc = want(w, n, YAML_MAPPING_NODE, "profiling_config")))
		return rc;
	FOR_EACH_PAIR(w, n, "profiling_config", k, v, rc)
	{
		if (strcmp(scalar(k), "path_prefix") == 0) {
			if ((rc = get_string(w, v, "path_prefix", &j->path_prefix)))
				return rc;
		} else if (strcmp(scalar(k), "pprof_config") == 0) {
			if (is_null(v))
				continue;
			if ((rc = want(w, v, YAML_MAPPING_NODE, "pprof_config")))
				return rc;
			FOR_EACH_PAIR(w, v, "pprof_config", k2, v2, rc)
			{
				if ((rc = walk_endpoint(w, k2, v2, j)))
					return rc;
			}
		} else {
			return unknown_key(w, k, "profiling_config");
		}
	}
	return 0;
}

/* ---- scrape_configs ------------------------------------------------------ */

int scrape_walk_static(struct walker *w, yaml_node_t *n, struct static_config *s)
{
	yaml_node_t *k, *v;
	int rc = want(w, n, YAML_MAPPING_NODE, "static_configs[]");
	if (rc)
		return rc;
	FOR_EACH_PAIR(w, n, "static_configs[]", k, v, rc)
	{
		if (strcmp(scalar(k), "targets") == 0) {
			if (is_null(v))
				continue;
			if ((rc = get_string_list(w, v, "targets", &s->targets, &s->n_targets)))
				return rc;
			for (size_t i = 0; i < s->n_targets; i++) {
				yaml_node_t *item = node(w, v->data.sequence.items.start[i]);
				if (strchr(s->targets[i], '/') || !*s->targets[i])
					return fail_at(w, item,
						       "targets: \"%s\" is not a valid host:port "
						       "(no scheme or path here)",
						       s->targets[i]);
			}
		} else if (strcmp(scalar(k), "labels") == 0) {
			if (is_null(v))
				continue;
			if ((rc = get_label_map(w, v, "labels", &s->labels)))
				return rc;
		} else {
			return unknown_key(w, k, "static_configs[]");
		}
	}
	return 0;
}

/* A relative file_sd pattern is taken relative to the config file's
 * directory, as Parca and Prometheus do. */
static int resolve_relative(struct walker *w, char **path)
{
	const char *slash = strrchr(w->name, '/');
	char *abs;

	if ((*path)[0] == '/' || !slash)
		return 0;
	if (asprintf(&abs, "%.*s/%s", (int)(slash - w->name), w->name, *path) < 0)
		return -ENOMEM;
	free(*path);
	*path = abs;
	return 0;
}

static int walk_file_sd(struct walker *w, yaml_node_t *n, struct file_sd_config *f)
{
	yaml_node_t *k, *v;
	int rc = want(w, n, YAML_MAPPING_NODE, "file_sd_configs[]");

	if (rc)
		return rc;
	f->refresh_ms = 5 * 60000;
	FOR_EACH_PAIR(w, n, "file_sd_configs[]", k, v, rc)
	{
		if (strcmp(scalar(k), "files") == 0) {
			if ((rc = get_string_list(w, v, "files", &f->files, &f->n_files)))
				return rc;
			for (size_t i = 0; i < f->n_files; i++) {
				const char *p = f->files[i], *base = strrchr(p, '/');
				const char *ext = strrchr(p, '.');
				yaml_node_t *item = node(w, v->data.sequence.items.start[i]);

				if (!ext || (strcmp(ext, ".json") && strcmp(ext, ".yml") &&
					     strcmp(ext, ".yaml")))
					return fail_at(
					    w, item,
					    "files: \"%s\" must end in .json, .yml or .yaml", p);
				if (base && strpbrk(p, "*?[") && strpbrk(p, "*?[") < base)
					return fail_at(
					    w, item,
					    "files: \"%s\": a pattern may only be in the "
					    "last path element",
					    p);
				if ((rc = resolve_relative(w, &f->files[i])))
					return rc;
			}
		} else if (strcmp(scalar(k), "refresh_interval") == 0) {
			if ((rc = get_duration(w, v, "refresh_interval", &f->refresh_ms)))
				return rc;
			if (f->refresh_ms < 1000)
				return fail_at(w, v, "refresh_interval must be at least 1s");
		} else {
			return unknown_key(w, k, "file_sd_configs[]");
		}
	}
	if (!f->n_files)
		return fail_at(w, n, "file_sd_configs[]: files is required");
	return 0;
}

static int walk_http_sd(struct walker *w, yaml_node_t *n, struct http_sd_config *h)
{
	yaml_node_t *k, *v;
	int rc = want(w, n, YAML_MAPPING_NODE, "http_sd_configs[]");

	if (rc)
		return rc;
	h->refresh_ms = 60000;
	FOR_EACH_PAIR(w, n, "http_sd_configs[]", k, v, rc)
	{
		if (strcmp(scalar(k), "url") == 0) {
			if ((rc = get_string(w, v, "url", &h->url)))
				return rc;
			if (strncmp(h->url, "http://", 7) && strncmp(h->url, "https://", 8))
				return fail_at(w, v, "url: \"%s\" is not an http or https URL",
					       h->url);
		} else if (strcmp(scalar(k), "refresh_interval") == 0) {
			if ((rc = get_duration(w, v, "refresh_interval", &h->refresh_ms)))
				return rc;
			if (h->refresh_ms < 1000)
				return fail_at(w, v, "refresh_interval must be at least 1s");
		} else if (strcmp(scalar(k), "basic_auth") == 0 ||
			   strcmp(scalar(k), "authorization") == 0 ||
			   strcmp(scalar(k), "tls_config") == 0 ||
			   strcmp(scalar(k), "proxy_url") == 0) {
			return fail_at(w, k, "http_sd_configs[]: \"%s\" is not supported by Kiln",
				       scalar(k));
		} else {
			return unknown_key(w, k, "http_sd_configs[]");
		}
	}
	if (!h->url)
		return fail_at(w, n, "http_sd_configs[]: url is required");
	return 0;
}

/* Walks a list node into a new array of n items of size sz with fn. */
typedef int (*walk_item_fn)(struct walker *w, yaml_node_t *n, void *item);
static int walk_list(struct walker *w, yaml_node_t *v, const char *what, size_t sz, void **out,
		     size_t *n, walk_item_fn fn)
{
	size_t len;
	int rc;

	if (is_null(v))
		return 0;
	if ((rc = want(w, v, YAML_SEQUENCE_NODE, what)))
		return rc;
	len = v->data.sequence.items.top - v->data.sequence.items.start;
	*out = calloc(len + 1, sz);
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		(*n)++;
		rc = fn(w, node(w, v->data.sequence.items.start[i]), (char *)*out + i * sz);
		if (rc)
			return rc;
	}
	return 0;
}

static int walk_file_sd_item(struct walker *w, yaml_node_t *n, void *item)
{
	return walk_file_sd(w, n, item);
}

static int walk_http_sd_item(struct walker *w, yaml_node_t *n, void *item)
{
	return walk_http_sd(w, n, item);
}

static int walk_params(struct walker *w, yaml_node_t *n, struct scrape_job_config *j)
{
	yaml_node_t *k, *v;
	int rc = want(w, n, YAML_MAPPING_NODE, "params");
	if (rc)
		return rc;
	FOR_EACH_PAIR(w, n, "params", k, v, rc)
	{
		if ((rc = want(w, v, YAML_SEQUENCE_NODE, "params value")))
			return rc;
		if (v->data.sequence.items.top == v->data.sequence.items.start)
			continue;
		yaml_node_t *first = node(w, v->data.sequence.items.start[0]);
		if ((rc = want(w, first, YAML_SCALAR_NODE, "params value")))
			return rc;
		if (scrape_labels_set(&j->params, scalar(k), scalar(first)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int walk_job(struct walker *w, yaml_node_t *n, struct scrape_job_config *j)
{
	yaml_node_t *k, *v, *interval_node = n, *timeout_node = NULL;
	int rc = want(w, n, YAML_MAPPING_NODE, "scrape_configs[]");
	bool has_timeout = false;
	if (rc)
		return rc;
	j->interval_ms = 10000;
	FOR_EACH_PAIR(w, n, "scrape_configs[]", k, v, rc)
	{
		const char *key = scalar(k);
		if (strcmp(key, "job_name") == 0) {
			rc = get_string(w, v, "job_name", &j->job_name);
		} else if (strcmp(key, "scrape_interval") == 0) {
			rc = get_duration(w, v, "scrape_interval", &j->interval_ms);
			interval_node = v;
			if (!rc && j->interval_ms < 1000)
				return fail_at(w, v, "scrape_interval must be at least 1s");
		} else if (strcmp(key, "scrape_timeout") == 0) {
			rc = get_duration(w, v, "scrape_timeout", &j->timeout_ms);
			has_timeout = j->timeout_ms != 0;
			timeout_node = v;
		} else if (strcmp(key, "scheme") == 0) {
			rc = get_string(w, v, "scheme", &j->scheme);
			if (!rc && strcmp(j->scheme, "http") != 0 &&
			    strcmp(j->scheme, "https") != 0)
				return fail_at(w, v, "scheme: \"%s\" is not http or https",
					       j->scheme);
		} else if (strcmp(key, "params") == 0) {
			rc = is_null(v) ? 0 : walk_params(w, v, j);
		} else if (strcmp(key, "normalized_addresses") == 0) {
			rc = get_bool(w, v, "normalized_addresses", &j->normalized_addresses);
		} else if (strcmp(key, "profiling_config") == 0) {
			rc = walk_profiling(w, v, j);
		} else if (strcmp(key, "static_configs") == 0) {
			if (is_null(v))
				continue;
			if ((rc = want(w, v, YAML_SEQUENCE_NODE, "static_configs")))
				return rc;
			size_t len = v->data.sequence.items.top - v->data.sequence.items.start;
			j->static_configs = calloc(len + 1, sizeof(*j->static_configs));
			if (!j->static_configs)
				return -ENOMEM;
			for (size_t i = 0; i < len && !rc; i++) {
				j->n_static_configs++;
				rc = scrape_walk_static(w, node(w, v->data.sequence.items.start[i]),
							&j->static_configs[i]);
			}
		} else if (strcmp(key, "file_sd_configs") == 0) {
			rc = walk_list(w, v, "file_sd_configs", sizeof(*j->file_sd),
				       (void **)&j->file_sd, &j->n_file_sd, walk_file_sd_item);
		} else if (strcmp(key, "http_sd_configs") == 0) {
			rc = walk_list(w, v, "http_sd_configs", sizeof(*j->http_sd),
				       (void **)&j->http_sd, &j->n_http_sd, walk_http_sd_item);
		} else if (strcmp(key, "relabel_configs") == 0) {
			if (is_null(v))
				continue;
			if ((rc = want(w, v, YAML_SEQUENCE_NODE, "relabel_configs")))
				return rc;
			size_t len = v->data.sequence.items.top - v->data.sequence.items.start;
			j->relabel = calloc(len + 1, sizeof(*j->relabel));
			if (!j->relabel)
				return -ENOMEM;
			for (size_t i = 0; i < len && !rc; i++) {
				j->n_relabel++;
				rc = walk_relabel(w, node(w, v->data.sequence.items.start[i]),
						  &j->relabel[i]);
			}
		} else if (strcmp(key, "basic_auth") == 0 || strcmp(key, "authorization") == 0 ||
			   strcmp(key, "tls_config") == 0 || strcmp(key, "oauth2") == 0 ||
			   strcmp(key, "proxy_url") == 0 || strcmp(key, "bearer_token") == 0 ||
			   strcmp(key, "follow_redirects") == 0) {
			return fail_at(w, k, "scrape_configs[]: \"%s\" is not supported by Kiln",
				       key);
		} else {
			return unknown_key(w, k, "scrape_configs[]");
		}
		if (rc)
			return rc;
	}
	if (!j->job_name || !*j->job_name)
		return fail_at(w, n, "scrape_configs[]: job_name is required");
	if (!j->scheme && !(j->scheme = strdup("http")))
		return -ENOMEM;
	/* Parca's defaults: the five standard endpoints, merged with what the
	 * file lists (listed ones keep their settings). */
	for (size_t i = 0; i < N_DEFAULT_ENDPOINTS; i++) {
		if (find_endpoint(j, default_endpoints[i].name))
			continue;
		struct pprof_endpoint_config *e = add_endpoint(j, default_endpoints[i].name);
		if (!e || !(e->path = strdup(default_endpoints[i].path)))
			return -ENOMEM;
		e->delta = default_endpoints[i].delta;
	}
	if (!has_timeout)
		j->timeout_ms = j->interval_ms + 3000;
	if (j->timeout_ms <= 0)
		return fail_at(w, timeout_node ? timeout_node : n, "scrape_timeout must be > 0");
	for (size_t i = 0; i < j->n_endpoints; i++) {
		struct pprof_endpoint_config *e = &j->endpoints[i];
		int64_t secs = e->seconds ? e->seconds : j->interval_ms / 1000;
		if (!e->enabled || !e->delta)
			continue;
		if (j->timeout_ms <= secs * 1000)
			return fail_at(w, timeout_node ? timeout_node : interval_node,
				       "scrape_timeout (%" PRId64
				       "ms) must be longer than the %" PRId64
				       "s that profile \"%s\" samples for (its seconds, default "
				       "scrape_interval), as Parca requires; leave it out for "
				       "Parca's default, scrape_interval + 3s",
				       j->timeout_ms, secs, e->name);
	}
	return 0;
}

static int walk_root(struct walker *w, struct scrape_config *c)
{
	yaml_node_t *root = yaml_document_get_root_node(&w->doc), *k, *v;
	int rc;
	if (!root || is_null(root))
		return 0; /* an empty file: no targets */
	if ((rc = want(w, root, YAML_MAPPING_NODE, "config")))
		return rc;
	FOR_EACH_PAIR(w, root, "config", k, v, rc)
	{
		if (strcmp(scalar(k), "object_storage") == 0) {
			if (is_null(v))
				continue;
			rc = walk_object_storage(w, v, c);
		} else if (strcmp(scalar(k), "scrape_configs") == 0) {
			if (is_null(v))
				continue;
			if ((rc = want(w, v, YAML_SEQUENCE_NODE, "scrape_configs")))
				return rc;
			size_t len = v->data.sequence.items.top - v->data.sequence.items.start;
			c->jobs = calloc(len + 1, sizeof(*c->jobs));
			if (!c->jobs)
				return -ENOMEM;
			for (size_t i = 0; i < len && !rc; i++) {
				yaml_node_t *jn = node(w, v->data.sequence.items.start[i]);
				c->n_jobs++;
				rc = walk_job(w, jn, &c->jobs[i]);
				for (size_t p = 0; !rc && p < i; p++)
					if (strcmp(c->jobs[p].job_name, c->jobs[i].job_name) == 0)
						rc = fail_at(w, jn, "job_name \"%s\" is used twice",
							     c->jobs[i].job_name);
			}
		} else {
			return unknown_key(w, k, "config");
		}
		if (rc)
			return rc;
	}
	return 0;
}

int scrape_config_parse(const char *text, size_t len, const char *name, struct scrape_config **out,
			struct kiln_error *err)
{
	yaml_parser_t parser;
	struct walker w = {.name = name, .err = err};
	struct scrape_config *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (!c || !(c->path = strdup(name))) {
		free(c);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	if (!yaml_parser_initialize(&parser)) {
		scrape_config_free(c);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &w.doc)) {
		rc = kiln_error_set(
		    err, EINVAL, "%s:%zu:%zu: %s%s%s", name, parser.problem_mark.line + 1,
		    parser.problem_mark.column + 1, parser.context ? parser.context : "",
		    parser.context ? ": " : "", parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		scrape_config_free(c);
		return rc;
	}
	rc = walk_root(&w, c);
	/* A second document would be ignored silently; refuse it instead. */
	if (rc == 0) {
		yaml_document_t extra;
		if (yaml_parser_load(&parser, &extra)) {
			if (yaml_document_get_root_node(&extra))
				rc = kiln_error_set(
				    err, EINVAL, "%s:%zu:%zu: more than one YAML document", name,
				    extra.start_mark.line + 1, extra.start_mark.column + 1);
			yaml_document_delete(&extra);
		}
	}
	yaml_document_delete(&w.doc);
	yaml_parser_delete(&parser);
	if (rc < 0) {
		if (rc == -ENOMEM)
			kiln_error_set(err, ENOMEM, "%s: out of memory", name);
		scrape_config_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int scrape_config_load_file(const char *path, struct scrape_config **out, struct kiln_error *err)
{
	struct buf b;
	buf_init(&b);
	int rc = buf_read_file(&b, path, 16 << 20);
	if (rc < 0) {
		buf_free(&b);
		return kiln_error_set(err, -rc, "%s: cannot read config: %s", path, strerror(-rc));
	}
	rc = scrape_config_parse(b.len ? (const char *)b.data : "", b.len, path, out, err);
	buf_free(&b);
	return rc;
}

void scrape_static_config_release(struct static_config *s)
{
	free_list(s->targets, s->n_targets);
	scrape_labels_free(&s->labels);
	memset(s, 0, sizeof(*s));
}

static void free_job(struct scrape_job_config *j)
{
	free(j->job_name);
	free(j->scheme);
	free(j->path_prefix);
	scrape_labels_free(&j->params);
	for (size_t i = 0; i < j->n_endpoints; i++) {
		struct pprof_endpoint_config *e = &j->endpoints[i];
		free(e->name);
		free(e->path);
		for (size_t k = 0; k < e->n_keep; k++) {
			free(e->keep_types[k]);
			free(e->keep_units[k]);
		}
		free(e->keep_types);
		free(e->keep_units);
	}
	free(j->endpoints);
	for (size_t i = 0; i < j->n_static_configs; i++)
		scrape_static_config_release(&j->static_configs[i]);
	free(j->static_configs);
	for (size_t i = 0; i < j->n_file_sd; i++)
		free_list(j->file_sd[i].files, j->file_sd[i].n_files);
	free(j->file_sd);
	for (size_t i = 0; i < j->n_http_sd; i++)
		free(j->http_sd[i].url);
	free(j->http_sd);
	for (size_t i = 0; i < j->n_relabel; i++) {
		struct relabel_config *r = &j->relabel[i];
		relabel_release(r);
		free_list(r->source_labels, r->n_source_labels);
		free(r->separator);
		free(r->regex);
		free(r->target_label);
		free(r->replacement);
	}
	free(j->relabel);
}

void scrape_config_free(struct scrape_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_jobs; i++)
		free_job(&c->jobs[i]);
	free(c->jobs);
	free(c->path);
	free(c->bucket_type);
	free(c->bucket_directory);
	free(c);
}

/* Replaces every "${name}" in s; *out is NULL when s has none. */
static int substitute_one(const char *s, const char *pattern, const char *value, char **out)
{
	struct buf b = {0};
	const char *p = s, *hit;
	*out = NULL;
	if (!strstr(s, pattern))
		return 0;
	while ((hit = strstr(p, pattern))) {
		if (buf_append(&b, p, (size_t)(hit - p)) || buf_append_str(&b, value))
			goto nomem;
		p = hit + strlen(pattern);
	}
	if (buf_append_str(&b, p) || buf_terminate(&b))
		goto nomem;
	*out = (char *)buf_steal(&b, NULL);
	return 0;
nomem:
	buf_free(&b);
	return -ENOMEM;
}

int scrape_config_substitute(struct scrape_config *c, const char *name, const char *value,
			     struct kiln_error *err)
{
	char pattern[128];
	if (snprintf(pattern, sizeof(pattern), "${%s}", name) >= (int)sizeof(pattern))
		return kiln_error_set(err, EINVAL, "variable name too long");
	for (size_t j = 0; j < c->n_jobs; j++) {
		struct scrape_job_config *job = &c->jobs[j];
		for (size_t s = 0; s < job->n_static_configs; s++) {
			struct static_config *sc = &job->static_configs[s];
			for (size_t t = 0; t < sc->n_targets; t++) {
				char *n;
				if (substitute_one(sc->targets[t], pattern, value, &n) < 0)
					return kiln_error_set(err, ENOMEM, "out of memory");
				if (n) {
					free(sc->targets[t]);
					sc->targets[t] = n;
				}
				if (strstr(sc->targets[t], "${"))
					return kiln_error_set(err, EINVAL,
							      "%s: job \"%s\": target \"%s\" uses "
							      "an unknown variable "
							      "(only %s is defined)",
							      c->path ? c->path : "config",
							      job->job_name, sc->targets[t],
							      pattern);
			}
		}
	}
	return 0;
}
