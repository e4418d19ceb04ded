/*
 * test_convert.c — unit tests for src/otlp: requests written as OTLP/JSON
 * (so each test reads as the message it sends), re-encoded by the JSON
 * reader, unpacked and converted; the results checked as pprof profiles
 * and labels, the errors by what they name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "otlp/otlp.h"

/* A dictionary with one mapping, two functions, a location with an inlined
 * frame, an unmapped python frame, one link and a stack of both. */
#define DICT                                                                                       \
	"\"dictionary\":{\"stringTable\":[\"\",\"samples\",\"count\",\"cpu\",\"nanoseconds\","     \
	"\"inner\",\"outer\",\"/bin/app\",\"profile.frame.type\",\"python\",\"py\","               \
	"\"process.executable.build_id.gnu\",\"thread.name\"],"                                    \
	"\"mappingTable\":[{},{\"memoryStart\":\"4096\",\"memoryLimit\":\"8192\","                 \
	"\"filenameStrindex\":7,\"attributeIndices\":[3]}],"                                       \
	"\"functionTable\":[{},{\"nameStrindex\":5},{\"nameStrindex\":6},{\"nameStrindex\":10}],"  \
	"\"locationTable\":[{},{\"mappingIndex\":1,\"address\":\"4100\",\"lines\":["               \
	"{\"functionIndex\":1,\"line\":\"3\"},{\"functionIndex\":2,\"line\":\"9\"}]},"             \
	"{\"lines\":[{\"functionIndex\":3}],\"attributeIndices\":[1]}],"                           \
	"\"linkTable\":[{},{\"traceId\":\"000102030405060708090a0b0c0d0e0f\","                     \
	"\"spanId\":\"0001020304050607\"}],"                                                       \
	"\"attributeTable\":[{},{\"keyStrindex\":8,\"value\":{\"stringValue\":\"python\"}},"       \
	"{\"keyStrindex\":12,\"value\":{\"stringValue\":\"w1\"}},"                                 \
	"{\"keyStrindex\":11,\"value\":{\"stringValue\":\"abcdef\"}}],"                            \
	"\"stackTable\":[{},{\"locationIndices\":[1,2]}]}"

#define PROFILE(samples)                                                                           \
	"{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"                                 \
	"\"periodType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"period\":\"10\","                \
	"\"timeUnixNano\":\"1700000000000000000\",\"samples\":[" samples "]}"

#define REQUEST(profiles)                                                                          \
	"{\"resourceProfiles\":[{\"resource\":{\"attributes\":["                                   \
	"{\"key\":\"service.name\",\"value\":{\"stringValue\":\"shop\"}},"                         \
	"{\"key\":\"process.pid\",\"value\":{\"intValue\":\"42\"}},"                               \
	"{\"key\":\"9lives\",\"value\":{\"boolValue\":true}}]},"                                   \
	"\"scopeProfiles\":[{\"scope\":{\"name\":\"ebpf-profiler\"},\"profiles\":[" profiles       \
	"]}]}]," DICT "}"

struct conv {
	struct arena *a;
	struct otlp_result res;
	struct otlp_rows rows; /* the same request through otlp_convert_rows */
	int rows_rc;
	struct kiln_error err;
	int rc;
};

static int64_t profile_total(const struct pprof_profile *p)
{
	const pprof_msg *m = pprof_profile_msg(p);
	int64_t t = 0;

	for (size_t i = 0; i < m->n_sample; i++)
		t += m->sample[i]->value[0];
	return t;
}

/* The row converter accepts and rejects what otlp_convert does, with the
 * same messages, labels, times and totals. */
static void check_rows_parity(const struct conv *c, const struct kiln_error *rows_err)
{
	assert_int_equal(c->rows_rc, c->rc);
	if (c->rc) {
		assert_string_equal(rows_err->msg, c->err.msg);
		return;
	}
	assert_int_equal(c->rows.n_seen, c->res.n_seen);
	assert_int_equal(c->rows.n_profiles, c->res.n_profiles);
	assert_int_equal(c->rows.n_rejected, c->res.n_rejected);
	assert_string_equal(c->rows.error_message, c->res.error_message);
	for (size_t i = 0; i < c->res.n_profiles; i++) {
		const struct otlp_profile *p = &c->res.profiles[i];
		const struct otlp_rows_profile *r = &c->rows.profiles[i];
		int64_t total = 0;

		assert_int_equal(r->n_labels, p->n_labels);
		for (size_t k = 0; k < p->n_labels; k++) {
			assert_string_equal(r->labels[k].name, p->labels[k].name);
			assert_string_equal(r->labels[k].value, p->labels[k].value);
		}
		assert_int_equal(r->timestamp_ms, p->timestamp_ms);
		assert_int_equal(r->type.delta, p->delta);
		for (size_t k = 0; k < r->n; k++) {
			assert_true(r->stacks[k] < c->rows.n_stacks);
			total += r->values[k];
		}
		assert_int_equal(total, profile_total(p->profile));
	}
}

static void convert(struct conv *c, const char *json)
{
	struct buf pb = {0};
	struct otlp_limits lim = {.now_ms = 1800000000000LL,
				  .min_time_ms = 946684800000LL,
				  .max_future_skew_ms = 3600000};
	otlp_request *req;

	memset(c, 0, sizeof(*c));
	c->a = arena_new(0);
	c->rc = otlp_json_to_protobuf(json, strlen(json), &pb, &c->err);
	if (c->rc == 0)
		c->rc = otlp_request_unpack(pb.data, pb.len, c->a, &req, &c->err);
	if (c->rc == 0) {
		struct kiln_error rows_err = {0};

		c->rows_rc = otlp_convert_rows(req, &lim, c->a, &c->rows, &rows_err);
		c->rc = otlp_convert(req, &lim, c->a, &c->res, &c->err);
		check_rows_parity(c, &rows_err);
	}
	buf_free(&pb);
}

static void conv_free(struct conv *c)
{
	otlp_result_release(&c->res);
	otlp_rows_release(&c->rows);
	arena_free(c->a);
}

static const char *label(const struct otlp_profile *p, const char *name)
{
	for (size_t i = 0; i < p->n_labels; i++)
		if (strcmp(p->labels[i].name, name) == 0)
			return p->labels[i].value;
	return NULL;
}

static void test_labels_stacks_and_frame_types(void **state)
{
	struct conv c;
	struct buf folded = {0};

	(void)state;
	convert(&c, REQUEST(PROFILE("{\"stackIndex\":1,\"values\":[\"5\"],\"linkIndex\":1,"
				    "\"attributeIndices\":[2]},"
				    "{\"stackIndex\":1,\"timestampsUnixNano\":[\"1\",\"2\"]}")));
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.res.n_profiles, 1);
	const struct otlp_profile *p = &c.res.profiles[0];
	assert_string_equal(p->labels[0].name, "__name__");
	assert_string_equal(p->labels[0].value, "ebpf_profiler");
	assert_string_equal(label(p, "service_name"), "shop");
	assert_string_equal(label(p, "process_pid"), "42");
	assert_string_equal(label(p, "_9lives"), "true");
	assert_true(p->delta);
	assert_int_equal(p->timestamp_ms, 1700000000000LL);

	/* 5 + two timestamps; outer;inner is the inlined frame, py the leaf's caller. */
	assert_int_equal(pprof_folded(p->profile, 0, &folded), 0);
	buf_terminate(&folded);
	assert_string_equal((char *)folded.data, "py;outer;inner 7\n");
	const pprof_msg *m = pprof_profile_msg(p->profile);
	bool app = false, python = false;
	for (size_t i = 0; i < m->n_mapping; i++) {
		const char *name = pprof_string(p->profile, m->mapping[i]->filename);
		if (strcmp(name, "/bin/app") == 0)
			app = strcmp(pprof_string(p->profile, m->mapping[i]->build_id), "abcdef") ==
			      0;
		if (strcmp(name, "[python]") == 0)
			python = true;
	}
	assert_true(app);
	assert_true(python);
	buf_free(&folded);
	conv_free(&c);
}

static void test_profile_errors_are_partial(void **state)
{
	struct conv c;

	(void)state;
	convert(
	    &c,
	    REQUEST(PROFILE("{\"stackIndex\":1,\"values\":[\"1\"]}") "," PROFILE(
		"{\"stackIndex\":7,\"values\":[\"1\"]}") "," PROFILE("{\"stackIndex\":1,\"values\":"
								     "[\"1\",\"2\"],"
								     "\"timestampsUnixNano\":"
								     "[\"1\"]}")));
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.res.n_seen, 3);
	assert_int_equal(c.res.n_profiles, 1);
	assert_int_equal(c.res.n_rejected, 2);
	assert_non_null(strstr(c.res.error_message,
			       "profiles[1]: samples[0].stack_index 7 is out of range (stack_table "
			       "has 2 rows)"));
	assert_non_null(strstr(c.res.error_message, "profiles[2]: samples[0]: 2 values but 1"));
	conv_free(&c);
}

static void test_dictionary_errors_refuse_the_request(void **state)
{
	static const struct {
		const char *from, *to, *want;
	} cases[] = {
	    {"\"mappingIndex\":1,", "\"mappingIndex\":5,",
	     "dictionary.location_table[1].mapping_index 5 is out of range (mapping_table has 2"},
	    {"{\"functionIndex\":1,", "{\"functionIndex\":9,",
	     "dictionary.location_table[1].lines[0].function_index 9 is out of range"},
	    {"\"locationIndices\":[1,2]", "\"locationIndices\":[1,-1]",
	     "dictionary.stack_table[1].location_indices[1] -1 is out of range"},
	    {"{\"nameStrindex\":5}", "{\"nameStrindex\":50}",
	     "dictionary.function_table[1].name_strindex 50 is out of range (string_table has 13"},
	    {"\"attributeIndices\":[3]", "\"attributeIndices\":[30]",
	     "dictionary.mapping_table[1].attribute_indices[0] 30 is out of range"},
	};
	char json[8192], out[8192];

	(void)state;
	snprintf(json, sizeof(json), "%s", REQUEST(PROFILE("{\"stackIndex\":1,\"values\":[1]}")));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct conv c;
		char *at = strstr(json, cases[i].from);
		assert_non_null(at);
		snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - json), json, cases[i].to,
			 at + strlen(cases[i].from));
		convert(&c, out);
		assert_int_equal(c.rc, -EINVAL);
		if (!strstr(c.err.msg, cases[i].want))
			fail_msg("case %zu: %s", i, c.err.msg);
		conv_free(&c);
	}
}

static void test_json_errors_name_the_path(void **state)
{
	struct conv c;

	(void)state;
	convert(&c, "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{\"samples\":"
		    "[{\"values\":[\"x\"]}]}]}]}]}");
	assert_int_equal(c.rc, -EINVAL);
	assert_non_null(strstr(
	    c.err.msg, "resourceProfiles[0].scopeProfiles[0].profiles[0].samples[0].values[0]: "
		       "expected a 64-bit integer"));
	conv_free(&c);
	convert(&c, "{\"dictionary\":{\"linkTable\":[{\"traceId\":\"0g\"}]}}");
	assert_int_equal(c.rc, -EINVAL);
	assert_non_null(strstr(c.err.msg, "dictionary.linkTable[0].traceId: not hex"));
	conv_free(&c);
	convert(&c, "{\"resourceProfiles\":");
	assert_int_equal(c.rc, -EINVAL);
	assert_non_null(strstr(c.err.msg, "JSON body:"));
	conv_free(&c);
}

/* Row path: one stack table for the request; two dictionary rows with the
 * same locations stay two stacks (sample k of the table is stack k); a
 * rejected profile adds none. */
static void test_rows_share_one_stack_table(void **state)
{
	struct conv c;
	char json[8192];
	const char *from = "\"stackTable\":[{},{\"locationIndices\":[1,2]}]";
	char *at;

	(void)state;
	snprintf(
	    json, sizeof(json), "%s",
	    REQUEST(PROFILE(
		"{\"stackIndex\":1,\"values\":[\"2\"]},"
		"{\"stackIndex\":2,\"values\":[\"3\"]}") "," PROFILE("{\"stackIndex\":1,\"values\":"
								     "[\"4\"]}") "," PROFILE("{\"st"
											     "ackIn"
											     "dex\""
											     ":3,"
											     "\"val"
											     "ues\""
											     ":["
											     "\"1\""
											     "]},"
											     "{\"st"
											     "ackIn"
											     "dex\""
											     ":9,"
											     "\"val"
											     "ues\""
											     ":["
											     "\"1\""
											     "]"
											     "}")));
	at = strstr(json, from);
	assert_non_null(at);
	char out[8192];
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - json), json,
		 "\"stackTable\":[{},{\"locationIndices\":[1,2]},{\"locationIndices\":[1,2]},"
		 "{\"locationIndices\":[2]}]",
		 at + strlen(from));
	convert(&c, out);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.rows.n_profiles, 2);
	assert_int_equal(c.rows.n_rejected, 1);
	/* Rows 1 and 2 only: row 3 belongs to the rejected profile. */
	assert_int_equal(c.rows.n_stacks, 2);
	const pprof_msg *m = pprof_profile_msg(c.rows.stacks);
	assert_int_equal(m->n_sample, 2);
	assert_int_equal(m->sample[0]->n_location_id, 2);
	assert_int_equal(m->sample[1]->n_location_id, 2);
	assert_int_equal(c.rows.profiles[0].n, 2);
	assert_int_equal(c.rows.profiles[0].stacks[0], 0);
	assert_int_equal(c.rows.profiles[0].stacks[1], 1);
	assert_int_equal(c.rows.profiles[1].stacks[0], 0);
	assert_int_equal(c.rows.profiles[1].values[0], 4);
	assert_string_equal(c.rows.profiles[0].type.sample_type, "samples");
	assert_string_equal(c.rows.profiles[0].type.period_type, "cpu");
	conv_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_labels_stacks_and_frame_types),
	    cmocka_unit_test(test_profile_errors_are_partial),
	    cmocka_unit_test(test_dictionary_errors_refuse_the_request),
	    cmocka_unit_test(test_json_errors_name_the_path),
	    cmocka_unit_test(test_rows_share_one_stack_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
