/*
 * test_ingest_stream.c — IngestService/Push on the server side: the message
 * decoder refuses garbage with a message that says where, sessions map
 * references to store ids, windows are acked once durable and stored once,
 * and a hostile client (huge or undefined references, unknown sessions,
 * endless new agents or stacks) gets errors or resets, never unbounded
 * memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store_test_util.h"
#include "common/ingest_proto.h"
#include "server/ingest_stream.h"

struct fixture {
	char *dir;
	struct store *s;
	struct stream_sessions *t;
	struct arena *a;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct store_options opts = {0};
	struct kiln_error err = {0};
	struct stream_limits lim = {.max_sessions = 4, .max_stacks_per_session = 200};

	f->dir = make_tmpdir();
	opts.path = f->dir;
	assert_int_equal(store_open(&opts, &f->s, &err), 0);
	f->t = stream_sessions_new(&lim);
	f->a = arena_new(0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	stream_sessions_free(f->t);
	store_close(f->s);
	arena_free(f->a);
	rm_rf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* A window: one series (ref series_ref, defined when define_series), the
 * stacks of p from first_ref when p, and rows (ref i, value i + 1) for refs
 * row_refs[0..n). */
static void put_window(struct buf *req, uint64_t id, bool define_series, uint32_t series_ref,
		       const struct pprof_profile *p, uint32_t first_ref, const uint32_t *row_refs,
		       size_t n)
{
	struct buf w = {0}, sub = {0}, lab = {0}, rows = {0}, pb = {0};
	uint32_t last = 0;

	ingest_put_field_varint(&w, 1, id);
	ingest_put_field_varint(&w, 2, 1000 * id);
	if (define_series) {
		ingest_put_field_varint(&sub, 1, series_ref);
		ingest_put_field_str(&lab, 1, "__name__");
		ingest_put_field_str(&lab, 2, "parca_agent");
		ingest_put_field_bytes(&sub, 2, lab.data, lab.len);
		buf_reset(&lab);
		ingest_put_field_str(&lab, 1, "job");
		ingest_put_field_str(&lab, 2, "stream");
		ingest_put_field_bytes(&sub, 2, lab.data, lab.len);
		ingest_put_field_str(&sub, 3, "samples");
		ingest_put_field_str(&sub, 4, "count");
		ingest_put_field_str(&sub, 5, "cpu");
		ingest_put_field_str(&sub, 6, "nanoseconds");
		ingest_put_field_varint(&sub, 7, 10000000);
		ingest_put_field_varint(&sub, 8, 1);
		ingest_put_field_bytes(&w, 3, sub.data, sub.len);
	}
	if (p) {
		buf_reset(&sub);
		pprof_encode(pprof_profile_msg(p), false, &pb);
		ingest_put_field_varint(&sub, 1, first_ref);
		ingest_put_field_bytes(&sub, 2, pb.data, pb.len);
		ingest_put_field_bytes(&w, 4, sub.data, sub.len);
	}
	for (size_t i = 0; i < n; i++) {
		ingest_put_row(&rows, row_refs[i] - last, (int64_t)i + 1);
		last = row_refs[i];
	}
	buf_reset(&sub);
	ingest_put_field_varint(&sub, 1, series_ref);
	ingest_put_field_bytes(&sub, 2, rows.data, rows.len);
	ingest_put_field_bytes(&w, 5, sub.data, sub.len);
	ingest_put_field_bytes(req, 4, w.data, w.len);
	buf_free(&w);
	buf_free(&sub);
	buf_free(&lab);
	buf_free(&rows);
	buf_free(&pb);
}

static void put_head(struct buf *req, uint64_t agent, uint64_t session, bool start)
{
	buf_reset(req);
	ingest_put_field_fixed64(req, 1, agent);
	ingest_put_field_fixed64(req, 2, session);
	if (start)
		ingest_put_field_varint(req, 3, 1);
}

static int push(struct fixture *f, const struct buf *req, struct stream_push_result *res,
		struct kiln_error *err)
{
	struct ingest_push msg;
	int rc;

	arena_reset(f->a);
	kiln_error_clear(err);
	rc = ingest_push_decode(req->data, req->len, f->a, &msg, err);
	return rc ? rc : stream_push_apply(f->t, f->s, &msg, res, err);
}

static int64_t stored_total(struct fixture *f)
{
	struct store_matcher mt = {STORE_MATCH_EQ, "job", "stream", NULL};
	struct store_selector sel = {"parca_agent:samples:count:cpu:nanoseconds:delta", &mt, 1, 0,
				     INT64_MAX};
	struct pprof_profile *p = merge_to_profile(f->s, &sel);
	int64_t t = p ? profile_total(p, 0) : 0;

	pprof_profile_free(p);
	return t;
}

static void test_push_and_replay(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *p = make_profile_ex(10, 1, 0, true);
	uint32_t refs[] = {0, 3, 9};
	struct stream_push_result res;
	struct kiln_error err = {0};
	struct buf req = {0};

	put_head(&req, 42, 1, true);
	put_window(&req, 1, true, 0, p, 0, refs, 3);
	assert_int_equal(push(f, &req, &res, &err), 0);
	assert_int_equal(res.n_acked, 1);
	assert_int_equal(res.acked[0], 1);
	assert_int_equal(res.rows_written, 3);
	assert_int_equal(stored_total(f), 1 + 2 + 3);
	/* The same request again (an answer lost in transit): acked, not stored. */
	assert_int_equal(push(f, &req, &res, &err), 0);
	assert_int_equal(res.n_acked, 1);
	assert_int_equal(res.duplicates, 1);
	assert_int_equal(stored_total(f), 6);
	/* Next window by reference only: no definitions. */
	put_head(&req, 42, 1, false);
	put_window(&req, 2, false, 0, NULL, 0, refs, 2);
	assert_int_equal(push(f, &req, &res, &err), 0);
	assert_int_equal(res.rows_written, 2);
	assert_int_equal(stored_total(f), 9);
	/* A session the server does not know: reset, nothing written. */
	put_head(&req, 42, 77, false);
	put_window(&req, 3, false, 0, NULL, 0, refs, 2);
	assert_int_equal(push(f, &req, &res, &err), 0);
	assert_true(res.reset_session);
	assert_int_equal(res.n_acked, 0);
	assert_int_equal(stored_total(f), 9);
	/* A new session replaying window 2 and sending 3: 2 is not doubled. */
	put_head(&req, 42, 78, true);
	put_window(&req, 2, true, 0, p, 0, refs, 2);
	put_window(&req, 3, false, 0, NULL, 0, refs, 1);
	assert_int_equal(push(f, &req, &res, &err), 0);
	assert_int_equal(res.n_acked, 2);
	assert_int_equal(res.duplicates, 1);
	assert_int_equal(stored_total(f), 10);
	buf_free(&req);
	pprof_profile_free(p);
}

static void test_hostile_refs(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *p = make_profile_ex(5, 1, 0, true);
	struct stream_push_result res;
	struct kiln_error err = {0};
	struct buf req = {0};
	uint32_t undefined[] = {5}, huge[] = {0xfffffff0u};

	/* A row naming a stack never defined. */
	put_head(&req, 1, 1, true);
	put_window(&req, 1, true, 0, p, 0, undefined, 1);
	assert_int_equal(push(f, &req, &res, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "stack ref 5 was not defined"));
	put_head(&req, 1, 2, true);
	put_window(&req, 1, true, 0, p, 0, huge, 1);
	assert_int_equal(push(f, &req, &res, &err), -EINVAL);
	/* Definitions that skip references. */
	put_head(&req, 1, 3, true);
	put_window(&req, 1, true, 5, p, 0, NULL, 0);
	assert_int_equal(push(f, &req, &res, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "next series ref is 0"));
	put_head(&req, 1, 4, true);
	put_window(&req, 1, true, 0, p, 1000000, NULL, 0);
	assert_int_equal(push(f, &req, &res, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "first_ref 1000000"));
	/* Rows for a series never defined. */
	put_head(&req, 1, 5, true);
	put_window(&req, 1, false, 3, p, 0, NULL, 0);
	assert_int_equal(push(f, &req, &res, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "series_ref 3"));
	assert_int_equal(stored_total(f), 0);
	buf_free(&req);
	pprof_profile_free(p);
}

/* Past max_stacks_per_session (200) the session starts over; past
 * max_sessions (4) agents share the slots: memory stays bounded. */
static void test_bounded_memory(void **state)
{
	struct fixture *f = *state;
	struct pprof_profile *p = make_profile_ex(150, 1, 0, true);
	struct stream_push_result res;
	struct kiln_error err = {0};
	struct buf req = {0};
	size_t n, bytes, first_bytes = 0;
	uint32_t r0[] = {0};

	put_head(&req, 9, 1, true);
	put_window(&req, 1, true, 0, p, 0, r0, 1);
	assert_int_equal(push(f, &req, &res, &err), 0);
	put_head(&req, 9, 1, false);
	put_window(&req, 2, false, 0, p, 150, r0, 1);
	assert_int_equal(push(f, &req, &res, &err), 0);
	assert_true(res.reset_session);
	assert_int_equal(res.n_acked, 0);
	for (uint64_t agent = 100; agent < 140; agent++) {
		put_head(&req, agent, 1, true);
		put_window(&req, 1, true, 0, p, 0, r0, 1);
		assert_int_equal(push(f, &req, &res, &err), 0);
		assert_int_equal(res.n_acked, 1);
		stream_sessions_stats(f->t, &n, &bytes);
		assert_true(n <= 4);
		if (!first_bytes)
			first_bytes = bytes;
	}
	stream_sessions_stats(f->t, &n, &bytes);
	assert_true(bytes <= 4 * (64u << 10));
	buf_free(&req);
	pprof_profile_free(p);
}

static void test_decoder_rejects_garbage(void **state)
{
	struct fixture *f = *state;
	struct ingest_push msg;
	struct kiln_error err = {0};
	struct buf req = {0};
	static const uint8_t junk[] = {0x22, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};

	assert_int_equal(ingest_push_decode(junk, sizeof(junk), f->a, &msg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "PushRequest"));
	kiln_error_clear(&err);
	/* No agent id. */
	ingest_put_field_fixed64(&req, 2, 5);
	assert_int_equal(ingest_push_decode(req.data, req.len, f->a, &msg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "agent_id"));
	/* Windows out of order. */
	put_head(&req, 1, 1, true);
	put_window(&req, 5, false, 0, NULL, 0, NULL, 0);
	put_window(&req, 4, false, 0, NULL, 0, NULL, 0);
	kiln_error_clear(&err);
	assert_int_equal(ingest_push_decode(req.data, req.len, f->a, &msg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "windows[1]"));
	/* A label that is not UTF-8. */
	buf_reset(&req);
	put_head(&req, 1, 1, true);
	struct buf w = {0}, s = {0}, l = {0};
	ingest_put_field_varint(&w, 1, 1);
	ingest_put_field_bytes(&l, 1, "\xff\xfe", 2);
	ingest_put_field_bytes(&s, 2, l.data, l.len);
	ingest_put_field_bytes(&w, 3, s.data, s.len);
	ingest_put_field_bytes(&req, 4, w.data, w.len);
	kiln_error_clear(&err);
	assert_int_equal(ingest_push_decode(req.data, req.len, f->a, &msg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "windows[0]: series[0]: labels[0]"));
	buf_free(&w);
	buf_free(&s);
	buf_free(&l);
	buf_free(&req);
}

static void test_response_roundtrip(void **state)
{
	uint64_t ids[] = {1, 300, 1u << 20};
	struct ingest_push_response r;
	struct kiln_error err = {0};
	struct buf b = {0};

	(void)state;
	assert_int_equal(ingest_response_encode(ids, 3, true, &b), 0);
	assert_int_equal(ingest_response_decode(b.data, b.len, &r, &err), 0);
	assert_int_equal(r.n_acked, 3);
	assert_int_equal(r.acked[2], 1u << 20);
	assert_true(r.reset_session);
	free(r.acked);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_push_and_replay, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_refs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bounded_memory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_decoder_rejects_garbage, setup, teardown),
	    cmocka_unit_test(test_response_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
