/*
 * folded.c — folded stacks ("main;work;leaf 42") from a finished tree.
 *
 * One pre-order pass keeps the current path as byte offsets into a prefix
 * buffer: entering a node truncates the prefix to its parent's length and
 * appends the node's (sanitized) name, so each output line is one memcpy of
 * the prefix plus its value.
 */
#include "query/query_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Appends name with ';' -> ':' and line breaks -> ' ' so that the line
 * still splits into frames and values. */
static int append_frame_name(struct buf *b, const char *name)
{
	size_t start = b->len, n = strlen(name);
	int rc = buf_append(b, name, n);

	if (rc)
		return rc;
	for (size_t i = start; i < b->len; i++) {
		if (b->data[i] == ';')
			b->data[i] = ':';
		else if (b->data[i] == '\n' || b->data[i] == '\r')
			b->data[i] = ' ';
	}
	return 0;
}

int query_tree_write_folded(const struct query_tree *t, struct buf *out)
{
	struct buf prefix;
	size_t *ends = NULL; /* ends[d]: prefix length through the node at depth d */
	char num[24];
	int rc = 0;

	if (!t->finished)
		return -EINVAL;
	buf_init(&prefix);
	ends = calloc(t->height + 2, sizeof(*ends));
	if (!ends)
		return -ENOMEM;
	for (size_t i = 1; !rc && i < t->n_nodes; i++) {
		const struct qnode *n = &t->nodes[i];

		prefix.len = n->depth > 1 ? ends[n->depth - 1] : 0;
		if (n->depth > 1)
			rc = buf_append(&prefix, ";", 1);
		if (!rc)
			rc = append_frame_name(&prefix, t->strs[t->frames[n->frame].name]);
		if (rc)
			break;
		ends[n->depth] = prefix.len;
		if (n->self == 0 && (!t->diff || n->base_self == 0))
			continue;
		rc = buf_append(out, prefix.data, prefix.len);
		if (!rc && t->diff) {
			num[0] = ' ';
			rc = buf_append(out, num, 1 + json_format_int(num + 1, n->base_self));
		}
		if (!rc) {
			num[0] = ' ';
			rc = buf_append(out, num, 1 + json_format_int(num + 1, n->self));
		}
		if (!rc)
			rc = buf_append(out, "\n", 1);
	}
	/* samples with no frames left (empty stacks, or every frame hidden)
	 * sit on the root */
	if (!rc && (t->nodes[0].self || (t->diff && t->nodes[0].base_self))) {
		rc = buf_append_str(out, "[unknown]");
		if (!rc && t->diff) {
			num[0] = ' ';
			rc = buf_append(out, num,
					1 + json_format_int(num + 1, t->nodes[0].base_self));
		}
		if (!rc) {
			num[0] = ' ';
			rc = buf_append(out, num, 1 + json_format_int(num + 1, t->nodes[0].self));
		}
		if (!rc)
			rc = buf_append(out, "\n", 1);
	}
	buf_free(&prefix);
	free(ends);
	return rc;
}
