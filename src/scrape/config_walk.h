/*
 * config_walk.h — walking a libyaml document tree with errors that name
 * FILE:LINE:COLUMN: the primitives shared by config.c (the scrape config)
 * and discovery.c (file_sd and http_sd target groups). Not for use outside
 * src/scrape. Small static functions: each includer gets its own copy.
 */
#ifndef KILN_SCRAPE_CONFIG_WALK_H
#define KILN_SCRAPE_CONFIG_WALK_H

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "common/duration.h"
#include "common/labels.h"
#include "scrape/scrape.h"

struct walker {
	yaml_document_t doc;
	const char *name;
	struct kiln_error *err;
};

static inline int fail_at(struct walker *w, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int fail_at(struct walker *w, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kiln_error_set(w->err, EINVAL, "%s:%zu:%zu: %s", w->name,
			      n ? n->start_mark.line + 1 : 0, n ? n->start_mark.column + 1 : 0,
			      msg);
}

static yaml_node_t *node(struct walker *w, int idx)
{
	return yaml_document_get_node(&w->doc, idx);
}

static const char *scalar(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A plain "", "~" or "null" scalar: the key is present but empty. */
static inline bool is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *s = scalar(n);
	return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
	       strcmp(s, "NULL") == 0;
}

static inline int want(struct walker *w, const yaml_node_t *n, yaml_node_type_t t, const char *what)
{
	static const char *names[] = {"nothing", "a scalar", "a list", "a mapping"};
	if (n->type == t)
		return 0;
	return fail_at(w, n, "%s: expected %s, found %s", what, names[t], names[n->type]);
}

static inline int get_string(struct walker *w, const yaml_node_t *n, const char *what, char **out)
{
	int rc = want(w, n, YAML_SCALAR_NODE, what);
	if (rc)
		return rc;
	char *s = strdup(scalar(n));
	if (!s)
		return -ENOMEM;
	free(*out);
	*out = s;
	return 0;
}

static inline int get_bool(struct walker *w, const yaml_node_t *n, const char *what, bool *out)
{
	int rc = want(w, n, YAML_SCALAR_NODE, what);
	if (rc)
		return rc;
	const char *s = scalar(n);
	if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on"))
		*out = true;
	else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off"))
		*out = false;
	else
		return fail_at(w, n, "%s: \"%s\" is not a boolean (true or false)", what, s);
	return 0;
}

static inline int get_uint(struct walker *w, const yaml_node_t *n, const char *what, uint64_t *out)
{
	int rc = want(w, n, YAML_SCALAR_NODE, what);
	if (rc)
		return rc;
	const char *s = scalar(n);
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-')
		return fail_at(w, n, "%s: \"%s\" is not a non-negative integer", what, s);
	*out = v;
	return 0;
}

static inline int get_duration(struct walker *w, const yaml_node_t *n, const char *what,
			       int64_t *out)
{
	int rc = want(w, n, YAML_SCALAR_NODE, what);
	if (rc)
		return rc;
	if (duration_parse_ms(scalar(n), 0, out) < 0)
		return fail_at(w, n, "%s: \"%s\" is not a duration (e.g. 10s, 1m30s, 500ms)", what,
			       scalar(n));
	return 0;
}

static inline int get_string_list(struct walker *w, const yaml_node_t *n, const char *what,
				  char ***out, size_t *count)
{
	int rc = want(w, n, YAML_SEQUENCE_NODE, what);
	if (rc)
		return rc;
	size_t len = n->data.sequence.items.top - n->data.sequence.items.start;
	char **v = calloc(len + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	*out = v;
	*count = 0;
	for (size_t i = 0; i < len; i++) {
		yaml_node_t *item = node(w, n->data.sequence.items.start[i]);
		rc = get_string(w, item, what, &v[i]);
		if (rc)
			return rc;
		(*count)++;
	}
	return 0;
}

static inline void free_list(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static inline int get_label_map(struct walker *w, const yaml_node_t *n, const char *what,
				struct scrape_labels *out)
{
	int rc = want(w, n, YAML_MAPPING_NODE, what);
	if (rc)
		return rc;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
		if ((rc = want(w, k, YAML_SCALAR_NODE, what)) ||
		    (rc = want(w, v, YAML_SCALAR_NODE, what)))
			return rc;
		if (!label_name_valid(scalar(k)))
			return fail_at(w, k, "%s: \"%s\" is not a valid label name", what,
				       scalar(k));
		if (scrape_labels_get(out, scalar(k)))
			return fail_at(w, k, "%s: label \"%s\" given twice", what, scalar(k));
		if (scrape_labels_set(out, scalar(k), scalar(v)) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Iterates the pairs of a mapping node, checking that keys are scalars and
 * unique; `key` and `val` are set for the body. */
#define PAIR_CAT2(a, b) a##b
#define PAIR_CAT(a, b)	PAIR_CAT2(a, b)
#define PAIR_VAR	PAIR_CAT(pair_, __LINE__)
#define FOR_EACH_PAIR(w_, n_, what_, key_, val_, rc_)                                              \
	for (yaml_node_pair_t *PAIR_VAR = (n_)->data.mapping.pairs.start;                          \
	     PAIR_VAR < (n_)->data.mapping.pairs.top &&                                            \
	     ((key_) = node(w_, PAIR_VAR->key), (val_) = node(w_, PAIR_VAR->value), 1);            \
	     PAIR_VAR++)                                                                           \
		if (((rc_) = check_key(w_, n_, PAIR_VAR, what_)) != 0)                             \
			return rc_;                                                                \
		else

static inline int check_key(struct walker *w, const yaml_node_t *map, const yaml_node_pair_t *pair,
			    const char *what)
{
	yaml_node_t *k = node(w, pair->key);
	int rc = want(w, k, YAML_SCALAR_NODE, what);
	if (rc)
		return rc;
	for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair; q++) {
		yaml_node_t *k2 = node(w, q->key);
		if (k2->type == YAML_SCALAR_NODE && strcmp(scalar(k2), scalar(k)) == 0)
			return fail_at(w, k, "%s: key \"%s\" given twice", what, scalar(k));
	}
	return 0;
}

static inline int unknown_key(struct walker *w, const yaml_node_t *k, const char *what)
{
	return fail_at(w, k, "%s: unknown field \"%s\"", what, scalar(k));
}

/* One static_configs[] entry (targets and labels), checked as config.c
 * checks it; also the shape of each file_sd / http_sd target group. */
int scrape_walk_static(struct walker *w, yaml_node_t *n, struct static_config *s);

#endif
