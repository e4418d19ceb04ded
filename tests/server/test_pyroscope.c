/*
 * test_pyroscope.c — unit tests for POST /ingest's parsers (pyroscope.h):
 * the name with its labels and type suffix, from/until, folded and lines
 * stacks, and multipart/form-data bodies; each refusal names where.
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

#include "common/buf.h"
#include "server/pyroscope.h"

static void test_name(void **state)
{
	struct pyro_name *nm = malloc(sizeof(*nm));
	struct kiln_error err = {0};
	char app[PYRO_MAX_NAME_BYTES];
	const char *suffix;

	kiln_error_clear(&err);
	assert_int_equal(
	    pyro_parse_name("my.app.cpu{env=prod, otel.scope.name = x,9k=v}", nm, &err), 0);
	assert_string_equal(nm->app, "my.app.cpu");
	assert_int_equal(nm->n_labels, 3);
	assert_string_equal(nm->names[0], "env");
	assert_string_equal(nm->values[0], "prod");
	assert_string_equal(nm->names[1], "otel_scope_name");
	assert_string_equal(nm->values[1], "x");
	assert_string_equal(nm->names[2], "_k");
	pyro_split_app(nm->app, app, &suffix);
	assert_string_equal(app, "my.app");
	assert_string_equal(suffix, "cpu");
	pyro_split_app("my.app", app, &suffix);
	assert_string_equal(app, "my.app");
	assert_null(suffix);
	assert_string_equal(pyro_type_for_suffix("alloc_space")->metric, "memory");
	assert_string_equal(pyro_type_for_suffix("mutex_duration")->sample_type, "delay");

	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_name("app{}", nm, &err), 0);
	assert_int_equal(nm->n_labels, 0);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_name("app{a=b", nm, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "byte 3 not closed"));
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_name("app{a}", nm, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no '='"));
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_name("{a=b}", nm, &err), -EINVAL);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_name("", nm, &err), -EINVAL);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_name(NULL, nm, &err), -EINVAL);
	free(nm);
}

static void test_time(void **state)
{
	struct kiln_error err = {0};
	int64_t t;

	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("1700000000", 0, &t, &err), 0);
	assert_int_equal(t, 1700000000);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("1700000000123", 0, &t, &err), 0);
	assert_int_equal(t, 1700000000);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("1700000000123456789", 0, &t, &err), 0);
	assert_int_equal(t, 1700000000);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("now", 1000, &t, &err), 0);
	assert_int_equal(t, 1000);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("now-2m", 1000, &t, &err), 0);
	assert_int_equal(t, 880);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("now-2x", 1000, &t, &err), -EINVAL);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("12a", 1000, &t, &err), -EINVAL);
	kiln_error_clear(&err);
	assert_int_equal(pyro_parse_time("99999999999999999999999", 1000, &t, &err), -EINVAL);
}

struct collected {
	struct buf out;
};

static int collect(void *ctx, const char *const *frames, size_t n, int64_t value)
{
	struct collected *c = ctx;
	for (size_t i = 0; i < n; i++)
		buf_printf(&c->out, "%s%s", i ? ";" : "", frames[i]);
	buf_printf(&c->out, " %lld|", (long long)value);
	return 0;
}

static int folded(const char *in, bool lines, char *out, size_t size, struct kiln_error *err)
{
	struct collected c = {0};
	int rc = pyro_folded_parse((const uint8_t *)in, strlen(in), lines, collect, &c, err);
	buf_terminate(&c.out);
	snprintf(out, size, "%s", c.out.data ? (char *)c.out.data : "");
	buf_free(&c.out);
	return rc;
}

static void test_folded(void **state)
{
	struct kiln_error err = {0};
	char got[512];

	kiln_error_clear(&err);
	assert_int_equal(folded("a;b;c 42\r\n\nx y;z  7\nlast 0", false, got, sizeof(got), &err),
			 0);
	assert_string_equal(got, "a;b;c 42|x y;z 7|last 0|");
	kiln_error_clear(&err);
	assert_int_equal(folded("a;b\na;b\nc", true, got, sizeof(got), &err), 0);
	assert_string_equal(got, "a;b 1|a;b 1|c 1|");

	kiln_error_clear(&err);
	assert_int_equal(folded("a 1\nb", false, got, sizeof(got), &err), -EINVAL);
	assert_string_equal(err.msg, "line 2 (byte 4): no value (expected \"a;b;c 42\")");
	kiln_error_clear(&err);
	assert_int_equal(folded("a -1", false, got, sizeof(got), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 1 (byte 2): value \"-1\""));
	kiln_error_clear(&err);
	assert_int_equal(folded("a 99999999999999999999", false, got, sizeof(got), &err), -EINVAL);
	kiln_error_clear(&err);
	assert_int_equal(folded("a;;b 1", false, got, sizeof(got), &err), -EINVAL);
	assert_string_equal(err.msg, "line 1 (byte 2): empty frame name");
	kiln_error_clear(&err);
	assert_int_equal(folded(" 5", false, got, sizeof(got), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "empty stack"));
	kiln_error_clear(&err);
	assert_int_equal(pyro_folded_parse((const uint8_t *)"a\0b 1", 5, false, collect,
					   &(struct collected){0}, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "NUL byte"));
}

static void test_multipart(void **state)
{
	static const char body[] =
	    "ignored preamble\r\n--XyZ\r\n"
	    "Content-Disposition: form-data; name=\"profile\"; filename=\"p.pprof\"\r\n"
	    "Content-Type: application/octet-stream\r\n\r\n"
	    "PP\r\nROF\r\n--XyZ\r\n"
	    "content-disposition: form-data; name=\"sample_type_config\"\r\n\r\n{}\r\n"
	    "--XyZ--\r\n";
	struct pyro_part parts[PYRO_MAX_PARTS];
	struct kiln_error err = {0};
	char boundary[80];
	size_t n;

	kiln_error_clear(&err);
	assert_int_equal(pyro_multipart_boundary("multipart/form-data; boundary=XyZ", boundary,
						 sizeof(boundary), &err),
			 0);
	assert_string_equal(boundary, "XyZ");
	kiln_error_clear(&err);
	assert_int_equal(pyro_multipart_boundary("multipart/form-data; boundary=\"a b\"; x=y",
						 boundary, sizeof(boundary), &err),
			 0);
	assert_string_equal(boundary, "a b");
	kiln_error_clear(&err);
	assert_int_equal(pyro_multipart_boundary("text/plain", boundary, sizeof(boundary), &err),
			 -EINVAL);
	assert_int_equal(
	    pyro_multipart_boundary("multipart/form-data", boundary, sizeof(boundary), &err),
	    -EINVAL);

	kiln_error_clear(&err);
	assert_int_equal(
	    pyro_multipart_parse((const uint8_t *)body, sizeof(body) - 1, "XyZ", parts, &n, &err),
	    0);
	assert_int_equal(n, 2);
	const struct pyro_part *p = pyro_multipart_find(parts, n, "profile");
	assert_non_null(p);
	assert_int_equal(p->len, 7);
	assert_memory_equal(p->data, "PP\r\nROF", 7);
	p = pyro_multipart_find(parts, n, "sample_type_config");
	assert_non_null(p);
	assert_memory_equal(p->data, "{}", 2);
	assert_null(pyro_multipart_find(parts, n, "prev_profile"));

	/* Truncated in a header line, then in the data. */
	kiln_error_clear(&err);
	assert_int_equal(pyro_multipart_parse((const uint8_t *)body, 80, "XyZ", parts, &n, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "not ended by CRLF"));
	kiln_error_clear(&err);
	assert_int_equal(pyro_multipart_parse((const uint8_t *)body,
					      (size_t)(strstr(body, "ROF") - body) + 3, "XyZ",
					      parts, &n, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "not closed"));
	/* No delimiter at all, a part without a name, garbage after one. */
	kiln_error_clear(&err);
	assert_int_equal(pyro_multipart_parse((const uint8_t *)"abc", 3, "XyZ", parts, &n, &err),
			 -EINVAL);
	static const char noname[] = "--B\r\nContent-Type: x\r\n\r\nd\r\n--B--";
	kiln_error_clear(&err);
	assert_int_equal(
	    pyro_multipart_parse((const uint8_t *)noname, sizeof(noname) - 1, "B", parts, &n, &err),
	    -EINVAL);
	assert_non_null(strstr(err.msg, "no Content-Disposition"));
	static const char junk[] = "--B junk";
	kiln_error_clear(&err);
	assert_int_equal(
	    pyro_multipart_parse((const uint8_t *)junk, sizeof(junk) - 1, "B", parts, &n, &err),
	    -EINVAL);
	assert_non_null(strstr(err.msg, "byte 4: expected CRLF"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name),
	    cmocka_unit_test(test_time),
	    cmocka_unit_test(test_folded),
	    cmocka_unit_test(test_multipart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
