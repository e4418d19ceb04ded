/*
 * test_frame_filter.c — pprof's frame filters (focus, ignore, hide,
 * prune_from) and the sandwich halves on the fixture of fixtures.h, whose
 * cpu stacks fold to
 *	0xdead 50
 *	main;rec;rec;rec 40
 *	main;work;inl 30
 *	main;work;inl;[app] +0x4abc 20
 *	main;work;inl;memcpy 10
 * Every expected text below follows from those lines by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

#include "fixtures.h"

static void assert_folded_with(const struct query_tree_options *o, const char *want,
			       int64_t want_filtered)
{
	struct pprof_profile *p = fixture_profile();
	struct query_tree *t = NULL;
	struct kiln_error err = {0};
	struct buf b;

	if (query_tree_build(p, 1, o, &t, &err))
		fail_msg("build: %s", err.msg);
	buf_init(&b);
	assert_int_equal(query_tree_write_folded(t, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	if (strcmp((char *)b.data, want))
		fail_msg("folded:\n%s\nwant:\n%s", (char *)b.data, want);
	assert_int_equal(query_tree_total(t), 150);
	assert_int_equal(query_tree_filtered(t), want_filtered);
	buf_free(&b);
	query_tree_free(t);
	pprof_profile_free(p);
}

static void test_focus(void **state)
{
	struct query_tree_options o = {.focus = "^w"};

	(void)state;
	assert_folded_with(&o,
			   "main;work;inl 30\n"
			   "main;work;inl;[app] +0x4abc 20\n"
			   "main;work;inl;memcpy 10\n",
			   60);
	/* Unanchored, like pprof's: "ec" finds rec. */
	o.focus = "ec";
	assert_folded_with(&o, "main;rec;rec;rec 40\n", 40);
}

static void test_ignore(void **state)
{
	struct query_tree_options o = {.ignore = "memcpy|dead"};

	(void)state;
	assert_folded_with(&o,
			   "main;rec;rec;rec 40\n"
			   "main;work;inl 30\n"
			   "main;work;inl;[app] +0x4abc 20\n",
			   90);
	/* focus and ignore together: through work, but not memcpy. */
	o.focus = "work";
	o.ignore = "memcpy";
	assert_folded_with(&o,
			   "main;work;inl 30\n"
			   "main;work;inl;[app] +0x4abc 20\n",
			   50);
}

static void test_hide(void **state)
{
	struct query_tree_options o = {.hide = "^inl$"};

	(void)state;
	assert_folded_with(&o,
			   "0xdead 50\n"
			   "main;rec;rec;rec 40\n"
			   "main;work 30\n"
			   "main;work;[app] +0x4abc 20\n"
			   "main;work;memcpy 10\n",
			   150);
}

static void test_prune_from(void **state)
{
	struct query_tree_options o = {.prune_from = "^work$"};

	(void)state;
	assert_folded_with(&o,
			   "0xdead 50\n"
			   "main;rec;rec;rec 40\n"
			   "main;work 60\n",
			   150);
	/* The matching frame nearest the leaf stays: rec's stack is whole. */
	o.prune_from = "^rec$";
	assert_folded_with(&o,
			   "0xdead 50\n"
			   "main;rec;rec;rec 40\n"
			   "main;work;inl 30\n"
			   "main;work;inl;[app] +0x4abc 20\n"
			   "main;work;inl;memcpy 10\n",
			   150);
	o.prune_from = "^main$";
	assert_folded_with(&o, "0xdead 50\nmain 100\n", 150);
}

static void test_sandwich(void **state)
{
	struct query_tree_options o = {.sandwich = "work"};

	(void)state;
	assert_folded_with(&o,
			   "work;inl 30\n"
			   "work;inl;[app] +0x4abc 20\n"
			   "work;inl;memcpy 10\n",
			   60);
	o.sandwich_side = QUERY_SANDWICH_CALLERS;
	assert_folded_with(&o, "work;main 60\n", 60);
	/* Recursion: callees from the outermost call, callers from the
	 * innermost, so each sample counts once in each half. */
	o.sandwich = "rec";
	assert_folded_with(&o, "rec;rec;rec;main 40\n", 40);
	o.sandwich_side = QUERY_SANDWICH_CALLEES;
	assert_folded_with(&o, "rec;rec;rec 40\n", 40);
	/* An exact name: "re" is no function. */
	o.sandwich = "re";
	assert_folded_with(&o, "", 0);
}

static void test_bad_patterns(void **state)
{
	struct query_tree_options o = {.focus = "work("};
	struct query_tree *t = NULL;
	struct kiln_error err = {0};
	char big[2048];

	(void)state;
	assert_int_equal(query_tree_create(&o, &t, &err), -EINVAL);
	assert_null(t);
	if (!strstr(err.msg, "focus: invalid regular expression at byte 5"))
		fail_msg("%s", err.msg);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	o.focus = NULL;
	o.prune_from = big;
	memset(&err, 0, sizeof(err));
	assert_int_equal(query_tree_create(&o, &t, &err), -EINVAL);
	if (!strstr(err.msg, "prune_from: pattern longer than 1024 bytes"))
		fail_msg("%s", err.msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_focus),    cmocka_unit_test(test_ignore),
	    cmocka_unit_test(test_hide),     cmocka_unit_test(test_prune_from),
	    cmocka_unit_test(test_sandwich), cmocka_unit_test(test_bad_patterns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
