/*
 * flame_text.c — a flame graph for the terminal: `kilnctl query
 * --output=flame`.
 *
 * An icicle graph (the root on top, callees below, as the web UI draws it):
 * one text row per depth, each frame a box whose width in columns is its
 * share of the root, boxes of one row in the tree's sibling order. A box
 * starts with '|' and holds as much of the function name as fits, then its
 * share when that fits too. Frames narrower than one column, below
 * min_share or deeper than max_depth are left out with their subtrees, and
 * the header says how many frames are shown.
 *
 * The nodes are in depth-first pre-order (query.h), so within one depth
 * they come left to right: each row is written once, front to back, with a
 * cursor per depth, and no grid of cells is ever held.
 *
 * Names come from profiles, so anything outside printable ASCII and UTF-8
 * is written as '?': a function name must not be able to send escape
 * sequences to the user's terminal.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "query/query_internal.h"

/* Background colours from xterm's 256-colour cube: warm hues for packages
 * (as flame graphs are drawn), reds and greens for diffs, grey for frames
 * that did not change. */
static const uint8_t package_palette[] = {203, 209, 215, 221, 227, 166,
					  172, 178, 184, 130, 136, 142};
static const uint8_t grew_palette[] = {217, 210, 203, 196};
static const uint8_t shrank_palette[] = {157, 120, 83, 46};
#define NEUTRAL_COLOUR 252

/* One output row: its text and the column its cursor is at. */
struct flame_row {
	struct buf text;
	unsigned col;
};

/* Bytes of the UTF-8 sequence starting at s (at most left), or 0 when it
 * is not one (then the byte is shown as '?'). */
static size_t utf8_seq_len(const unsigned char *s, size_t left)
{
	size_t n;
	if (s[0] < 0x80)
		return s[0] >= 0x20 && s[0] != 0x7f ? 1 : 0;
	if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2)
		n = 2;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3;
	else if ((s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* Display columns of s, one per character. */
static size_t text_cols(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s), cols = 0;
	while (left) {
		size_t n = utf8_seq_len(p, left);
		n = n ? n : 1;
		p += n, left -= n, cols++;
	}
	return cols;
}

/* Appends at most cols characters of s, unprintable ones as '?'. Returns
 * the columns written through *written. */
static int append_text(struct buf *b, const char *s, size_t cols, size_t *written)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s), w = 0;
	int rc = 0;
	while (!rc && left && w < cols) {
		size_t n = utf8_seq_len(p, left);
		rc = n ? buf_append(b, p, n) : buf_append(b, "?", 1);
		n = n ? n : 1;
		p += n, left -= n, w++;
	}
	*written = w;
	return rc;
}

static int append_spaces(struct buf *b, size_t n)
{
	static const char spaces[] = "                                ";
	int rc = 0;
	while (!rc && n) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
		rc = buf_append(b, spaces, k);
		n -= k;
	}
	return rc;
}

/* The package a frame belongs to, for colouring: C++'s "ns::Class" of
 * "ns::Class::method", Go's "net/http" of "net/http.(*conn).serve", else
 * the binary (C functions have no package), else the name itself. */
static uint32_t package_hash(const char *name, const char *binary)
{
	const char *end = NULL, *slash = strrchr(name, '/');
	const char *paren = strchr(name, '(');
	const char *colons = NULL;
	uint32_t h = 2166136261u;

	for (const char *p = name; (p = strstr(p, "::")) && (!paren || p < paren); p += 2)
		colons = p;
	if (colons)
		end = colons;
	else if (name[0] != '[') {
		const char *dot = strchr(slash ? slash : name, '.');
		if (dot && dot != name)
			end = dot;
	}
	if (!end) {
		const char *base = strrchr(binary, '/');
		name = binary[0] ? (base ? base + 1 : binary) : name;
		end = name + strlen(name);
	}
	for (const char *p = name; p < end; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h;
}

static uint8_t diff_colour(int64_t diff, int64_t total)
{
	double share = total ? (double)(diff < 0 ? -diff : diff) / (double)total : 0;
	static const double steps[] = {0.001, 0.01, 0.03, 0.10};
	int level = -1;
	for (int i = 0; i < 4; i++)
		if (share >= steps[i])
			level = i;
	if (level < 0 || diff == 0)
		return NEUTRAL_COLOUR;
	return diff > 0 ? grew_palette[level] : shrank_palette[level];
}

/* Writes node n's box of cols columns (>= 1) at the row's cursor. */
static int write_box(const struct query_tree *t, const struct query_node *n, int64_t total,
		     size_t cols, enum query_flame_colour colour, struct buf *b)
{
	const char *name = query_tree_string(t, n->name);
	char share[32];
	size_t room = cols - 1, name_cols = text_cols(name), written = 0;
	int rc = 0;

	if (colour != QUERY_FLAME_COLOUR_NONE) {
		uint8_t c =
		    colour == QUERY_FLAME_COLOUR_DIFF
			? diff_colour(n->diff, total)
			: package_palette[package_hash(name, query_tree_string(t, n->binary)) %
					  sizeof(package_palette)];
		rc = buf_printf(b, "\x1b[38;5;16;48;5;%um", c);
	}
	if (!rc)
		rc = buf_append(b, "|", 1);
	query_format_percent(share, sizeof(share), n->cum, total);
	if (!rc && name_cols <= room) {
		rc = append_text(b, name, room, &written);
		if (!rc && written + 1 + strlen(share) <= room)
			rc = buf_printf(b, " %s", share), written += 1 + strlen(share);
	} else if (!rc && room >= 3) {
		/* Cut names end in "..", so a cut is never mistaken for a name. */
		rc = append_text(b, name, room - 2, &written);
		if (!rc)
			rc = buf_append(b, "..", 2), written += 2;
	} else if (!rc) {
		rc = append_text(b, name, room, &written);
	}
	if (!rc)
		rc = append_spaces(b, room - written);
	if (!rc && colour != QUERY_FLAME_COLOUR_NONE)
		rc = buf_append(b, "\x1b[0m", 4);
	return rc;
}

int query_tree_write_flame_text(const struct query_tree *t,
				const struct query_flame_text_options *opts, struct buf *out)
{
	struct query_flame_text_options o = opts ? *opts : (struct query_flame_text_options){0};
	size_t n_nodes = query_tree_node_count(t), shown = 0;
	unsigned width = o.width ? o.width : 120;
	uint32_t rows_wanted = query_tree_height(t) + 1;
	struct flame_row *rows = NULL;
	int64_t *next = NULL, total;
	struct query_node root;
	char a[48];
	int rc = 0;

	if (!n_nodes)
		return buf_printf(out, "no samples\n");
	query_tree_node(t, 0, &root);
	total = root.cum;
	if (total <= 0)
		return buf_printf(out, "no samples\n");
	if (o.max_depth && o.max_depth + 1 < rows_wanted)
		rows_wanted = o.max_depth + 1;
	if (o.colour == QUERY_FLAME_COLOUR_DIFF && !query_tree_is_diff(t))
		o.colour = QUERY_FLAME_COLOUR_PACKAGE;
	rows = calloc(rows_wanted, sizeof(*rows));
	next = malloc(n_nodes * sizeof(*next)); /* each node's next child's start */
	if (!rows || !next) {
		rc = -ENOMEM;
		goto out;
	}

	next[0] = 0;
	for (size_t i = 0; !rc && i < n_nodes;) {
		struct query_node n;
		int64_t start = 0;
		query_tree_node(t, i, &n);
		if (n.parent >= 0) {
			start = next[n.parent];
			next[n.parent] += n.cum;
		}
		unsigned c0 = (unsigned)((__int128)start * width / total);
		unsigned c1 = (unsigned)((__int128)(start + n.cum) * width / total);
		bool visible = c1 > c0 && n.depth < rows_wanted &&
			       (double)n.cum >= o.min_share * (double)total;
		if (!visible) {
			i += n.subtree_size;
			continue;
		}
		struct flame_row *r = &rows[n.depth];
		rc = append_spaces(&r->text, c0 - r->col);
		if (!rc)
			rc = write_box(t, &n, total, c1 - c0, o.colour, &r->text);
		r->col = c1;
		next[i] = start;
		shown += n.depth > 0;
		i++;
	}

	query_format_value(a, sizeof(a), total, query_tree_unit(t));
	if (!rc)
		rc = buf_printf(out, "%s %s total, %zu of %zu frames shown (%u columns",
				query_tree_sample_type(t), a, shown, n_nodes - 1, width);
	if (!rc && o.min_share > 0)
		rc = buf_printf(out, ", frames under %.2f%% left out", o.min_share * 100);
	if (!rc && o.max_depth)
		rc = buf_printf(out, ", depth <= %u", o.max_depth);
	if (!rc)
		rc = buf_printf(out, ")\n");
	if (!rc && o.colour == QUERY_FLAME_COLOUR_DIFF)
		rc = buf_printf(out, "red: grew, green: shrank, against the base\n");
	for (uint32_t d = 0; !rc && d < rows_wanted; d++) {
		if (!rows[d].col)
			break;
		rc = buf_append(out, rows[d].text.data, rows[d].text.len);
		if (!rc)
			rc = buf_append(out, "\n", 1);
	}
out:
	for (uint32_t d = 0; rows && d < rows_wanted; d++)
		buf_free(&rows[d].text);
	free(rows);
	free(next);
	return rc;
}
