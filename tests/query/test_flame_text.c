/*
 * test_flame_text.c — the terminal flame graph (flame_text.c): box
 * positions and widths against the fixture's values worked out by hand
 * (fixtures.h: 150 in all; 0xdead 50, main 100 = rec 40 + work 60, work →
 * inl 60 → [app] 20 + memcpy 10), cut names, min-share and depth cuts,
 * package and diff colours, and names that try to reach the terminal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

#include "fixtures.h"

/* A box the test expects: row, first and past-last column, its text. */
struct want_box {
	unsigned row, c0, c1;
	const char *text;
};

/* The rows the boxes make, each padded with blanks to its last box. */
static char *rows_of(const struct want_box *boxes, size_t n, unsigned n_rows)
{
	struct buf b;

	buf_init(&b);
	for (unsigned r = 0; r < n_rows; r++) {
		unsigned col = 0;
		for (size_t i = 0; i < n; i++) {
			if (boxes[i].row != r)
				continue;
			assert_true(boxes[i].c0 >= col);
			assert_true(strlen(boxes[i].text) <= boxes[i].c1 - boxes[i].c0);
			assert_int_equal(buf_printf(&b, "%*s%-*s", (int)(boxes[i].c0 - col), "",
						    (int)(boxes[i].c1 - boxes[i].c0),
						    boxes[i].text),
					 0);
			col = boxes[i].c1;
		}
		assert_int_equal(buf_append(&b, "\n", 1), 0);
	}
	assert_int_equal(buf_terminate(&b), 0);
	return (char *)b.data;
}

static char *flame_of(const struct query_tree *t, const struct query_flame_text_options *o)
{
	struct buf b;

	buf_init(&b);
	assert_int_equal(query_tree_write_flame_text(t, o, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	return (char *)b.data;
}

/* The text after the header line. */
static const char *body_of(const char *flame)
{
	const char *nl = strchr(flame, '\n');
	assert_non_null(nl);
	return nl + 1;
}

static struct query_tree *fixture_tree(void)
{
	struct pprof_profile *p = fixture_profile();
	struct query_tree *t = NULL;

	assert_int_equal(query_tree_build(p, 1, NULL, &t, NULL), 0);
	pprof_profile_free(p);
	return t;
}

static void assert_rows(const char *flame, const struct want_box *boxes, size_t n, unsigned n_rows)
{
	char *want = rows_of(boxes, n, n_rows);
	if (strcmp(body_of(flame), want))
		fail_msg("got:\n%s\nwant:\n%s", body_of(flame), want);
	free(want);
}

static void test_one_column_per_unit(void **state)
{
	struct query_tree *t = fixture_tree();
	struct query_flame_text_options o = {.width = 150};
	static const struct want_box boxes[] = {
	    {0, 0, 150, "|total 100%"},	    {1, 0, 50, "|0xdead 33.33%"},
	    {1, 50, 150, "|main 66.67%"},   {2, 50, 90, "|rec 26.67%"},
	    {2, 90, 150, "|work 40.00%"},   {3, 50, 90, "|rec 26.67%"},
	    {3, 90, 150, "|inl 40.00%"},    {4, 50, 90, "|rec 26.67%"},
	    {4, 90, 110, "|[app] +0x4abc"}, {4, 110, 120, "|memcpy"},
	};
	char *flame;

	(void)state;
	flame = flame_of(t, &o);
	if (strncmp(flame, "cpu 150ns total, 9 of 9 frames shown (150 columns)\n", 51))
		fail_msg("header: %s", flame);
	assert_rows(flame, boxes, sizeof(boxes) / sizeof(boxes[0]), 5);
	free(flame);
	query_tree_free(t);
}

static void test_narrow_cuts_names(void **state)
{
	struct query_tree *t = fixture_tree();
	struct query_flame_text_options o = {.width = 15};
	/* Ten units a column: memcpy gets one column, [app] two. */
	static const struct want_box boxes[] = {
	    {0, 0, 15, "|total 100%"}, {1, 0, 5, "|0x.."}, {1, 5, 15, "|main"}, {2, 5, 9, "|rec"},
	    {2, 9, 15, "|work"},       {3, 5, 9, "|rec"},  {3, 9, 15, "|inl"},	{4, 5, 9, "|rec"},
	    {4, 9, 11, "|["},	       {4, 11, 12, "|"},
	};
	char *flame;

	(void)state;
	flame = flame_of(t, &o);
	assert_rows(flame, boxes, sizeof(boxes) / sizeof(boxes[0]), 5);
	free(flame);
	query_tree_free(t);
}

static void test_share_and_depth_cuts(void **state)
{
	struct query_tree *t = fixture_tree();
	struct query_flame_text_options o = {.width = 150, .min_share = 0.2};
	static const struct want_box shared[] = {
	    {0, 0, 150, "|total 100%"},	 {1, 0, 50, "|0xdead 33.33%"}, {1, 50, 150, "|main 66.67%"},
	    {2, 50, 90, "|rec 26.67%"},	 {2, 90, 150, "|work 40.00%"}, {3, 50, 90, "|rec 26.67%"},
	    {3, 90, 150, "|inl 40.00%"}, {4, 50, 90, "|rec 26.67%"},
	};
	char *flame;

	(void)state;
	/* [app] (13%) and memcpy (7%) are under 20%. */
	flame = flame_of(t, &o);
	assert_non_null(strstr(flame, "7 of 9 frames shown"));
	assert_non_null(strstr(flame, "frames under 20.00% left out"));
	assert_rows(flame, shared, sizeof(shared) / sizeof(shared[0]), 5);
	free(flame);

	o.min_share = 0;
	o.max_depth = 2;
	flame = flame_of(t, &o);
	assert_rows(flame, shared, 5, 3);
	assert_non_null(strstr(flame, "depth <= 2"));
	free(flame);
	query_tree_free(t);
}

static void test_colours_and_hostile_names(void **state)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_line_desc l[2] = {{0}};
	struct query_flame_text_options o = {.width = 80, .colour = QUERY_FLAME_COLOUR_PACKAGE};
	struct pprof_profile *p;
	struct query_tree *t;
	uint64_t loc[2];
	int64_t v = 5;
	char *flame;

	(void)state;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	l[0].function_id = pprof_builder_function(b, "evil\x1b]0;pwned\x07\x1b[2J", NULL, NULL, 0);
	l[1].function_id = pprof_builder_function(b, "caf\xc3\xa9::m\xff", NULL, NULL, 0);
	loc[0] = pprof_builder_location(b, 0, 0x10, &l[0], 1);
	loc[1] = pprof_builder_location(b, 0, 0x20, &l[1], 1);
	assert_int_equal(pprof_builder_add_sample(b, loc, 2, &v, NULL, 0), 0);
	p = fixture_to_profile(b);
	assert_int_equal(query_tree_build(p, 0, NULL, &t, NULL), 0);
	flame = flame_of(t, &o);
	/* Only our own SGR sequences: every ESC starts "\x1b[38;5;16;48;5;" or
	 * "\x1b[0m". */
	for (const char *e = strchr(flame, 0x1b); e; e = strchr(e + 1, 0x1b))
		if (strncmp(e, "\x1b[38;5;16;48;5;", 15) && strncmp(e, "\x1b[0m", 4))
			fail_msg("stray escape at %s", e);
	assert_null(strchr(flame, 0x07));
	assert_non_null(strstr(flame, "|evil?]0;pwned??[2J"));
	/* UTF-8 kept, the invalid byte shown as '?', one column each. */
	assert_non_null(strstr(flame, "|caf\xc3\xa9::m? 100%"));
	free(flame);
	query_tree_free(t);
	pprof_profile_free(p);
}

static void test_diff_colours(void **state)
{
	struct pprof_profile *a = fixture_base_profile(), *b = fixture_profile();
	struct query_flame_text_options o = {.width = 150, .colour = QUERY_FLAME_COLOUR_DIFF};
	struct query_tree *t;
	char *flame;

	(void)state;
	assert_int_equal(query_tree_build_diff(a, 1, b, 1, NULL, &t, NULL), 0);
	flame = flame_of(t, &o);
	assert_non_null(strstr(flame, "red: grew, green: shrank"));
	/* 0xdead is new (+50 of 150): the deepest red. main grew by 63. */
	assert_non_null(strstr(flame, "\x1b[38;5;16;48;5;196m|0xdead"));
	assert_non_null(strstr(flame, "\x1b[38;5;16;48;5;196m|main"));
	/* "other" is only in the base: no width, no box. */
	assert_null(strstr(flame, "|other"));
	free(flame);
	query_tree_free(t);
	pprof_profile_free(a);
	pprof_profile_free(b);
}

static void test_empty(void **state)
{
	struct query_tree *t = query_tree_new(NULL);
	char *flame;

	(void)state;
	assert_non_null(t);
	assert_int_equal(query_tree_finish(t, NULL), 0);
	flame = flame_of(t, NULL);
	assert_string_equal(flame, "no samples\n");
	free(flame);
	query_tree_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_column_per_unit),
	    cmocka_unit_test(test_narrow_cuts_names),
	    cmocka_unit_test(test_share_and_depth_cuts),
	    cmocka_unit_test(test_colours_and_hostile_names),
	    cmocka_unit_test(test_diff_colours),
	    cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
