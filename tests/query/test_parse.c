/*
 * test_parse.c — the query language, profile type strings and the JSON
 * helpers in src/common/json.c.
 *
 * Parser tests check what is accepted (values after unescaping, operators,
 * canonical re-formatting that parses back to the same selector) and, for
 * what is refused, the exact byte position and the message. JSON output is
 * read back by Python's json module (a real, strict parser).
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
#include <time.h>

#include "common/json.h"
#include "query/query.h"

#include "json_check.h"

#define TYPE "parca_agent:samples:count:cpu:nanoseconds:delta"

static void test_profile_type_roundtrip(void **state)
{
	struct query_profile_type t;
	struct buf b;

	(void)state;
	buf_init(&b);
	assert_int_equal(query_profile_type_parse(TYPE, &t, NULL), 0);
	assert_string_equal(t.name, "parca_agent");
	assert_string_equal(t.sample_type, "samples");
	assert_string_equal(t.sample_unit, "count");
	assert_string_equal(t.period_type, "cpu");
	assert_string_equal(t.period_unit, "nanoseconds");
	assert_true(t.delta);
	assert_int_equal(query_profile_type_format(&t, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	assert_string_equal((char *)b.data, TYPE);
	query_profile_type_release(&t);

	assert_int_equal(query_profile_type_parse("memory:alloc_space:bytes:space:bytes", &t, NULL),
			 0);
	assert_false(t.delta);
	assert_string_equal(t.sample_type, "alloc_space");
	query_profile_type_release(&t);
	buf_free(&b);
}

static void test_profile_type_rejects(void **state)
{
	static const struct {
		const char *text;
		const char *msg;
	} bad[] = {
	    {"", "empty name"},
	    {"a:b:c:d", "4 parts"},
	    {"a:b:c:d:e:f", "\"delta\", not \"f\""},
	    {"a:b:c:d:e:delta:x", "too many"},
	    {"a::c:d:e", "empty sample type"},
	    {"a:b:c:d:", "empty period unit"},
	    {"a b:b:c:d:e", "invalid character 0x20 in name"},
	    {"a:b{:c:d:e", "invalid character 0x7b in sample type"},
	};
	struct query_profile_type t;
	struct buf b;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kiln_error err = {0};

		assert_int_equal(query_profile_type_parse(bad[i].text, &t, &err), -EINVAL);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].text, err.msg,
				 bad[i].msg);
		query_profile_type_release(&t);
	}
	buf_init(&b);
	assert_int_equal(query_profile_type_format_parts("a", "b:x", "c", "d", "e", false, &b),
			 -EINVAL);
	assert_int_equal(query_profile_type_format_parts("a", "b", "c", "d", "e", true, &b), 0);
	assert_int_equal(buf_terminate(&b), 0);
	assert_string_equal((char *)b.data, "a:b:c:d:e:delta");
	buf_free(&b);
}

static void test_profile_type_json(void **state)
{
	struct json_writer w;
	struct buf b;

	(void)state;
	buf_init(&b);
	json_writer_init(&w, &b);
	json_begin_object(&w);
	json_key(&w, "types");
	json_begin_array(&w);
	assert_int_equal(query_profile_type_write_json(TYPE, &w, NULL), 0);
	assert_int_equal(
	    query_profile_type_write_json("goroutine:goroutine:count:goroutine:count", &w, NULL),
	    0);
	json_end_array(&w);
	json_end_object(&w);
	assert_int_equal(json_writer_error(&w), 0);
	json_check(&b, "d = doc['types']\n"
		       "assert d[0] == {'key': '" TYPE "', 'name': 'parca_agent', "
		       "'sample_type': 'samples', 'sample_unit': 'count', 'period_type': 'cpu', "
		       "'period_unit': 'nanoseconds', 'delta': True}, d[0]\n"
		       "assert d[1]['delta'] is False and d[1]['name'] == 'goroutine'\n");
	buf_free(&b);
}

static void test_parse_accepts(void **state)
{
	static const struct {
		const char *text;
		const char *type;
		size_t n;
		enum store_match_op op0;
		const char *name0, *value0;
	} ok[] = {
	    {TYPE, TYPE, 0, 0, NULL, NULL},
	    {"  " TYPE "  ", TYPE, 0, 0, NULL, NULL},
	    {TYPE "{}", TYPE, 0, 0, NULL, NULL},
	    {TYPE " { } ", TYPE, 0, 0, NULL, NULL},
	    {TYPE "{comm=\"nginx\"}", TYPE, 1, STORE_MATCH_EQ, "comm", "nginx"},
	    {TYPE "{comm!=\"nginx\",}", TYPE, 1, STORE_MATCH_NEQ, "comm", "nginx"},
	    {TYPE "{ node =~ \"web-.*\" , pid!~'1|2' }", TYPE, 2, STORE_MATCH_REGEX, "node",
	     "web-.*"},
	    {TYPE "{_a1=``}", TYPE, 1, STORE_MATCH_EQ, "_a1", ""},
	    {TYPE "{a=`raw\\n\"`}", TYPE, 1, STORE_MATCH_EQ, "a", "raw\\n\""},
	    {TYPE "{a=\"q\\\"\\\\\\n\\t\"}", TYPE, 1, STORE_MATCH_EQ, "a", "q\"\\\n\t"},
	    {TYPE "{a='it\\'s'}", TYPE, 1, STORE_MATCH_EQ, "a", "it's"},
	    {TYPE "{a=\"\\x41\\101\\u00e9\\U0001F600\"}", TYPE, 1, STORE_MATCH_EQ, "a",
	     "AA\xc3\xa9\xf0\x9f\x98\x80"},
	    {TYPE "{a=\"h\xc3\xa9\"}", TYPE, 1, STORE_MATCH_EQ, "a", "h\xc3\xa9"},
	    {"a:b:c:d:e{x=\"1\",x!=\"2\"}", "a:b:c:d:e", 2, STORE_MATCH_EQ, "x", "1"},
	    {TYPE "\n{\ncomm=\"x\"\n}\n", TYPE, 1, STORE_MATCH_EQ, "comm", "x"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct query_selector sel, again;
		struct kiln_error err = {0};
		struct buf b;

		if (query_parse(ok[i].text, 0, &sel, &err))
			fail_msg("refused %s: %s", ok[i].text, err.msg);
		assert_int_equal(sel.error_position, -1);
		assert_string_equal(sel.profile_type, ok[i].type);
		assert_int_equal(sel.n_matchers, ok[i].n);
		if (ok[i].n) {
			assert_int_equal(sel.matchers[0].op, ok[i].op0);
			assert_string_equal(sel.matchers[0].name, ok[i].name0);
			assert_string_equal(sel.matchers[0].value, ok[i].value0);
			assert_null(sel.matchers[0].compiled);
		}
		/* the canonical form parses back to the same selector */
		buf_init(&b);
		assert_int_equal(query_selector_format(&sel, &b), 0);
		assert_int_equal(buf_terminate(&b), 0);
		if (query_parse((char *)b.data, 0, &again, &err))
			fail_msg("canonical form %s of %s refused: %s", (char *)b.data, ok[i].text,
				 err.msg);
		assert_string_equal(again.profile_type, sel.profile_type);
		assert_int_equal(again.n_matchers, sel.n_matchers);
		for (size_t k = 0; k < sel.n_matchers; k++) {
			assert_int_equal(again.matchers[k].op, sel.matchers[k].op);
			assert_string_equal(again.matchers[k].name, sel.matchers[k].name);
			assert_string_equal(again.matchers[k].value, sel.matchers[k].value);
		}
		query_selector_release(&again);
		query_selector_release(&sel);
		buf_free(&b);
	}
}

static void test_parse_type_optional(void **state)
{
	struct query_selector sel;

	(void)state;
	assert_int_equal(query_parse("", QUERY_PARSE_TYPE_OPTIONAL, &sel, NULL), 0);
	assert_null(sel.profile_type);
	assert_int_equal(sel.n_matchers, 0);
	query_selector_release(&sel);
	assert_int_equal(query_parse("{comm=\"x\"}", QUERY_PARSE_TYPE_OPTIONAL, &sel, NULL), 0);
	assert_null(sel.profile_type);
	assert_int_equal(sel.n_matchers, 1);
	query_selector_release(&sel);
	assert_int_equal(query_parse("{comm=\"x\"}", 0, &sel, NULL), -EINVAL);
	assert_int_equal(sel.error_position, 0);
	query_selector_release(&sel);
}

static void test_parse_rejects_with_position(void **state)
{
	static const struct {
		const char *text;
		long pos;
		const char *msg;
	} bad[] = {
	    /* 47 = strlen(TYPE): the '{' */
	    {TYPE "{comm}", 52, "1:53: expected '=', '!=', '=~' or '!~' after label name \"comm\""},
	    {TYPE "{comm=nginx}", 53, "expected a quoted string after '='"},
	    {TYPE "{comm=\"nginx}", 53, "unterminated string"},
	    {TYPE "{comm=\"nginx\"", 60, "expected ',' or '}'"},
	    {TYPE "{comm=\"a\" node=\"b\"}", 57, "expected ',' or '}' after a matcher"},
	    {TYPE "{1abc=\"x\"}", 48, "must not start with a digit"},
	    {TYPE "{a-b=\"x\"}", 49, "expected '='"},
	    {TYPE "{,}", 48, "expected a label name or '}'"},
	    {TYPE "{a=\"x\",,}", 54, "expected a label name or '}'"},
	    {TYPE "{a=\"\\q\"}", 51, "invalid escape \\q"},
	    {TYPE "{a=\"\\x4\"}", 51, "needs 2 hex digits"},
	    {TYPE "{a=\"\\x00\"}", 51, "NUL"},
	    {TYPE "{a=\"\\uD800\"}", 51, "not a valid Unicode"},
	    {TYPE "{a='\\\"'}", 51, "invalid escape \\\""},
	    {TYPE "{a=\"\xff\"}", 50, "not valid UTF-8"},
	    {TYPE "{a=\"x\"} extra", 55, "unexpected 'e' after the matchers"},
	    {TYPE " x", 48, "unexpected 'x' after the profile type"},
	    {TYPE "{a=~\"(\"}", 53, "invalid regular expression"},
	    {TYPE "{a=~\"x)\"}", 53, "invalid regular expression"},
	    {TYPE "{a!~\"[z-a]\"}", 55, "invalid regular expression"},
	    /* refused by PCRE2 without UTF mode, as the store compiles */
	    {TYPE "{a=~`\\x{100}`}", 58, "too large"},
	    {"{a=\"x\"}", 0, "missing profile type"},
	    {"", 0, "missing profile type"},
	    {"a:b:c:d", 7, "4 parts"},
	    {"a:b:c:d:e:live{}", 10, "must be \"delta\""},
	    {"a:b::d:e", 4, "empty sample unit"},
	    {"a:b:c:d:e\"x\"", 9, "unexpected character '\"' in profile type"},
	    {TYPE "{a=\"x\"", 53, "unexpected end of query: expected ',' or '}'"},
	    {TYPE "{", 48, "unexpected end of query"},
	    {TYPE "{a=", 50, "found end of query"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct query_selector sel;
		struct kiln_error err = {0};
		char col[32];

		assert_int_equal(query_parse(bad[i].text, 0, &sel, &err), -EINVAL);
		if (sel.error_position != bad[i].pos)
			fail_msg("%s: position %ld, want %ld (%s)", bad[i].text, sel.error_position,
				 bad[i].pos, err.msg);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].text, err.msg,
				 bad[i].msg);
		/* "1:COL:" with COL 1-based, then the excerpt and a caret line */
		snprintf(col, sizeof(col), "1:%ld: ", bad[i].pos + 1);
		assert_true(strncmp(err.msg, col, strlen(col)) == 0);
		assert_non_null(strchr(err.msg, '^'));
		assert_null(sel.matchers);
		assert_null(sel.profile_type);
		query_selector_release(&sel);
	}
}

/* The caret sits under the offending byte, also in a window of a long
 * query. */
static void test_parse_caret_alignment(void **state)
{
	char q[400];
	struct query_selector sel;
	struct kiln_error err = {0};
	const char *l2, *l3;
	size_t caret_col;

	(void)state;
	snprintf(q, sizeof(q), "%s{a=\"%0200d\", b ! \"x\"}", TYPE, 0);
	assert_int_equal(query_parse(q, 0, &sel, &err), -EINVAL);
	l2 = strchr(err.msg, '\n') + 1;
	l3 = strchr(l2, '\n') + 1;
	caret_col = (size_t)(strchr(l3, '^') - l3);
	assert_true(l2[caret_col] == '!');
	assert_true(strstr(l2, "...") != NULL);
	query_selector_release(&sel);
}

static void test_parse_limits(void **state)
{
	struct buf b;
	struct query_selector sel;
	struct kiln_error err = {0};

	(void)state;
	buf_init(&b);
	assert_int_equal(buf_append_str(&b, TYPE "{"), 0);
	for (int i = 0; i <= QUERY_MAX_MATCHERS; i++)
		assert_int_equal(buf_printf(&b, "l%d=\"v\",", i), 0);
	assert_int_equal(buf_append_str(&b, "}"), 0);
	assert_int_equal(buf_terminate(&b), 0);
	assert_int_equal(query_parse((char *)b.data, 0, &sel, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "too many matchers"));
	query_selector_release(&sel);

	buf_reset(&b);
	assert_int_equal(buf_append_str(&b, TYPE "{a=~\""), 0);
	for (int i = 0; i < QUERY_MAX_LEN; i++)
		assert_int_equal(buf_append(&b, "a", 1), 0);
	assert_int_equal(buf_append_str(&b, "\"}"), 0);
	assert_int_equal(buf_terminate(&b), 0);
	kiln_error_clear(&err);
	assert_int_equal(query_parse((char *)b.data, 0, &sel, &err), -EINVAL);
	assert_int_equal(sel.error_position, QUERY_MAX_LEN);
	assert_non_null(strstr(err.msg, "longer than"));
	query_selector_release(&sel);
	buf_free(&b);
}

/* Patterns known for exponential backtracking must parse (and be left to
 * the store's match-limited matcher) quickly; parsing never runs them. */
static void test_parse_nasty_regexes(void **state)
{
	static const char *const nasty[] = {
	    "(a+)+$",	"(a|aa)+b",  "(.*a){20}", "((((((((((a*)*)*)*)*)*)*)*)*)*)*",
	    "(x+x+)+y", "(?:a|a?)+",
	};
	struct timespec t0, t1;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; i < sizeof(nasty) / sizeof(nasty[0]); i++) {
		struct query_selector sel;
		struct kiln_error err = {0};
		char q[256];

		snprintf(q, sizeof(q), TYPE "{comm=~`%s`}", nasty[i]);
		if (query_parse(q, 0, &sel, &err))
			fail_msg("%s: %s", q, err.msg);
		assert_string_equal(sel.matchers[0].value, nasty[i]);
		query_selector_release(&sel);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	(void)t1; /* no timing assertion: a hang would hit the runner's timeout */
}

/* Compiled through the store: regexes are fully anchored, and patterns
 * known for exponential backtracking finish (the match limit stops them)
 * instead of hanging. */
static void test_compiled_matchers(void **state)
{
	static const struct {
		const char *query;
		const char *value;
		bool want;
	} cases[] = {
	    {TYPE "{node=~\"web-.*\"}", "web-1", true},
	    {TYPE "{node=~\"web-.*\"}", "xweb-1", false},
	    {TYPE "{node=~\"web\"}", "web-1", false},
	    {TYPE "{node!~\"web-.*\"}", "db-1", true},
	    {TYPE "{node!~\"web-.*\"}", "web-2", false},
	    {TYPE "{node=\"a\"}", "a", true},
	    {TYPE "{node!=\"a\"}", NULL, true},
	    {TYPE "{node=\"\"}", NULL, true},
	    {TYPE "{node=~\"a|b\"}", "b", true},
	    {TYPE "{node=~\"(a+)+$\"}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", false},
	    {TYPE "{node=~\"(a|aa)+b\"}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac",
	     false},
	    {TYPE "{node=~\"(.*a){20}\"}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
	     false},
	    {TYPE "{node=~\"(.*a){3}\"}", "xaxaxa", true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct query_selector sel;
		struct kiln_error err = {0};

		if (query_parse_compiled(cases[i].query, 0, &sel, &err))
			fail_msg("%s: %s", cases[i].query, err.msg);
		if (store_matcher_matches(&sel.matchers[0], cases[i].value) != cases[i].want)
			fail_msg("%s on \"%s\": want %d", cases[i].query,
				 cases[i].value ? cases[i].value : "(absent)", cases[i].want);
		query_selector_release(&sel);
		assert_null(sel.matchers);
	}
}

static void test_json_appenders(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b);
	assert_int_equal(buf_append_str(&b, "["), 0);
	assert_int_equal(json_append_string(&b, "plain"), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_string(&b, "q\"b\\n\n\t\r\x01\x1f\x7f"), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	/* valid 2/3/4-byte UTF-8 kept; invalid, overlong, surrogate, truncated replaced */
	assert_int_equal(json_append_string(&b, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xff|"
						"\xc0\xaf|\xed\xa0\x80|\xe2\x82"),
			 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_int(&b, INT64_MIN), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_int(&b, INT64_MAX), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_uint(&b, UINT64_MAX), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_double(&b, 0.1), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_double(&b, 1.0 / 3.0), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_double(&b, 1.0 / 0.0), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_bool(&b, false), 0);
	assert_int_equal(buf_append_str(&b, ","), 0);
	assert_int_equal(json_append_string(&b, NULL), 0);
	assert_int_equal(buf_append_str(&b, "]"), 0);
	json_check(&b, "assert doc[0] == 'plain'\n"
		       "assert doc[1] == 'q\"b\\\\n\\n\\t\\r\\x01\\x1f\\x7f', repr(doc[1])\n"
		       "assert doc[2] == '\\u00e9\\u20ac\\U0001F600|\\ufffd|\\ufffd\\ufffd|"
		       "\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd', repr(doc[2])\n"
		       "assert doc[3] == -9223372036854775808 and doc[4] == 9223372036854775807\n"
		       "assert doc[5] == 18446744073709551615\n"
		       "assert doc[6] == 0.1 and doc[7] == 1.0 / 3.0 and doc[8] is None\n"
		       "assert doc[9] is False and doc[10] == ''\n");
	buf_free(&b);
}

static void test_json_writer(void **state)
{
	struct json_writer w;
	struct buf b;

	(void)state;
	buf_init(&b);
	json_writer_init(&w, &b);
	json_begin_object(&w);
	json_key(&w, "a");
	json_begin_array(&w);
	json_int(&w, 1);
	json_begin_object(&w);
	json_end_object(&w);
	json_begin_array(&w);
	json_end_array(&w);
	json_string(&w, "x");
	json_null(&w);
	json_raw(&w, "{\"r\":1}", 7);
	json_end_array(&w);
	json_key(&w, "b");
	json_double(&w, 2.5);
	json_key(&w, "c");
	json_uint(&w, 7);
	json_key(&w, "d");
	json_bool(&w, true);
	json_end_object(&w);
	assert_int_equal(json_writer_error(&w), 0);
	assert_int_equal(buf_terminate(&b), 0);
	assert_string_equal((char *)b.data,
			    "{\"a\":[1,{},[],\"x\",null,{\"r\":1}],\"b\":2.5,\"c\":7,\"d\":true}");

	/* unbalanced and too deep are reported */
	buf_reset(&b);
	json_writer_init(&w, &b);
	json_begin_array(&w);
	assert_int_equal(json_writer_error(&w), -EINVAL);
	json_end_array(&w);
	json_end_array(&w);
	assert_int_equal(json_writer_error(&w), -EINVAL);
	json_writer_init(&w, &b);
	for (int i = 0; i < JSON_MAX_DEPTH + 1; i++)
		json_begin_array(&w);
	assert_int_equal(json_writer_error(&w), -EINVAL);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_profile_type_roundtrip),
	    cmocka_unit_test(test_profile_type_rejects),
	    cmocka_unit_test(test_profile_type_json),
	    cmocka_unit_test(test_parse_accepts),
	    cmocka_unit_test(test_parse_type_optional),
	    cmocka_unit_test(test_parse_rejects_with_position),
	    cmocka_unit_test(test_parse_caret_alignment),
	    cmocka_unit_test(test_parse_limits),
	    cmocka_unit_test(test_parse_nasty_regexes),
	    cmocka_unit_test(test_compiled_matchers),
	    cmocka_unit_test(test_json_appenders),
	    cmocka_unit_test(test_json_writer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
