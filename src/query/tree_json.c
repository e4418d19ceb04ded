/*
 * tree_json.c — the columnar flame graph JSON (query_tree_write_json).
 *
 * Columns instead of one object per node: a 500k-node tree is a few
 * integers per node and each distinct string once, instead of repeating
 * every key and name per node. Strings are renumbered in order of first use
 * so that strings only the trimmed nodes used are not written. Integers are
 * formatted straight into reserved buffer space; no printf per value.
 * (Named tree_json.c, not json.c: the archive holds src/common/json.o
 * already and ar members are named by basename.)
 */
#include "query/query_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum column {
	COL_NAME,
	COL_BINARY,
	COL_FILE,
	COL_LINE,
	COL_DEPTH,
	COL_PARENT,
	COL_CUM,
	COL_SELF,
	COL_DIFF,
};

static int64_t column_value(const struct query_tree *t, const uint32_t *remap, size_t i,
			    enum column col)
{
	const struct qnode *n = &t->nodes[i];
	const struct qframe *f = n->frame == QNONE ? NULL : &t->frames[n->frame];

	switch (col) {
	case COL_NAME:
		return remap[f ? f->name : t->str_total];
	case COL_BINARY:
		return remap[f ? f->binary : 0];
	case COL_FILE:
		return remap[f ? f->file : 0];
	case COL_LINE:
		return f ? f->line : 0;
	case COL_DEPTH:
		return n->depth;
	case COL_PARENT:
		return n->parent;
	case COL_CUM:
		return n->cum;
	case COL_SELF:
		return n->self;
	case COL_DIFF:
		return n->cum - n->base_cum;
	}
	return 0;
}

static int write_column(const struct query_tree *t, const uint32_t *remap, const char *key,
			enum column col, struct buf *out)
{
	size_t n = t->n_nodes;
	int rc;

	rc = json_append_string(out, key);
	if (rc)
		return rc;
	/* 20 digits + sign + comma per value, plus ":[]," */
	rc = buf_reserve(out, n * 22 + 4);
	if (rc)
		return rc;
	out->data[out->len++] = ':';
	out->data[out->len++] = '[';
	for (size_t i = 0; i < n; i++) {
		if (i)
			out->data[out->len++] = ',';
		out->len +=
		    json_format_int((char *)out->data + out->len, column_value(t, remap, i, col));
	}
	out->data[out->len++] = ']';
	return 0;
}

static void use_string(uint32_t *remap, uint32_t *order, size_t *n_used, uint32_t id)
{
	if (remap[id] == QNONE) {
		remap[id] = (uint32_t)*n_used;
		order[(*n_used)++] = id;
	}
}

int query_tree_write_json(const struct query_tree *t, struct buf *out)
{
	static const struct {
		const char *key;
		enum column col;
	} cols[] = {
	    {"name", COL_NAME}, {"binary", COL_BINARY}, {"file", COL_FILE},
	    {"line", COL_LINE}, {"depth", COL_DEPTH},	{"parent", COL_PARENT},
	    {"cum", COL_CUM},	{"self", COL_SELF},	{"diff", COL_DIFF},
	};
	uint32_t *remap = NULL, *order = NULL;
	size_t n_used = 0;
	int rc = -ENOMEM;

	if (!t->finished)
		return -EINVAL;
	remap = malloc(t->n_strs * sizeof(*remap));
	order = malloc(t->n_strs * sizeof(*order));
	if (!remap || !order)
		goto out;
	memset(remap, 0xff, t->n_strs * sizeof(*remap));
	use_string(remap, order, &n_used, 0);
	for (size_t i = 0; i < t->n_nodes; i++) {
		const struct qnode *n = &t->nodes[i];

		if (n->frame == QNONE) {
			use_string(remap, order, &n_used, t->str_total);
			continue;
		}
		use_string(remap, order, &n_used, t->frames[n->frame].name);
		use_string(remap, order, &n_used, t->frames[n->frame].binary);
		use_string(remap, order, &n_used, t->frames[n->frame].file);
	}

	/* one reservation for the likely size: growing a buffer of tens of
	 * megabytes by doubling copies it several times */
	{
		size_t guess = t->n_nodes * 48 + 256;

		for (size_t i = 0; i < n_used; i++)
			guess += strlen(t->strs[order[i]]) + 3;
		if (buf_reserve(out, guess))
			goto out;
	}
	rc = buf_append_str(out, "{\"unit\":");
	if (!rc)
		rc = json_append_string(out, t->strs[t->unit]);
	if (!rc)
		rc = buf_append_str(out, ",\"total\":");
	if (!rc)
		rc = json_append_int(out, t->total);
	if (!rc)
		rc = buf_append_str(out, ",\"filtered\":");
	if (!rc)
		rc = json_append_int(out, t->filtered);
	if (!rc && t->diff)
		rc = buf_append_str(out, ",\"base_scale\":");
	if (!rc && t->diff)
		rc = json_append_double(out, query_tree_base_scale(t));
	if (!rc)
		rc = buf_append_str(out, ",\"height\":");
	if (!rc)
		rc = json_append_int(out, t->height);
	if (!rc)
		rc = buf_append_str(out, ",\"strings\":[");
	for (size_t i = 0; !rc && i < n_used; i++) {
		if (i)
			rc = buf_append(out, ",", 1);
		if (!rc)
			rc = json_append_string(out, t->strs[order[i]]);
	}
	if (!rc)
		rc = buf_append_str(out, "],\"nodes\":{");
	for (size_t c = 0; !rc && c < sizeof(cols) / sizeof(cols[0]); c++) {
		if (cols[c].col == COL_DIFF && !t->diff)
			continue;
		if (c)
			rc = buf_append(out, ",", 1);
		if (!rc)
			rc = write_column(t, remap, cols[c].key, cols[c].col, out);
	}
	if (!rc)
		rc = buf_append_str(out, "}}");
out:
	free(remap);
	free(order);
	return rc;
}
