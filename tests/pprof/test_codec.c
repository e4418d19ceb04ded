/*
 * test_codec.c — unit tests for pprof decoding, encoding and validation:
 * round trips (raw and gzip), every validation invariant with the field it
 * names, and corrupt input (truncated, bit-flipped, random) failing cleanly.
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
#include <unistd.h>

#include "common/gzip.h"
#include "pprof/pprof.h"

/* A small profile: two sample types, a mapping, three functions (one
 * inlined), three locations (one unsymbolized), labels of both kinds. */
static struct pprof_builder *sample_builder(void)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_mapping_desc md = {.memory_start = 0x400000,
					.memory_limit = 0x500000,
					.filename = "/bin/app",
					.build_id = "abc123",
					.has_functions = true};
	uint64_t map, fmain, fwork, finl, lmain, lwork, lraw;
	struct pprof_line_desc l1[] = {{.line = 10}}, l2[] = {{.line = 5}, {.line = 20}};
	struct pprof_label_desc labels[] = {{.key = "span", .str = "checkout"},
					    {.key = "bytes", .num = 512, .num_unit = "bytes"}};
	uint64_t stack1[3], stack2[2];
	int64_t v1[] = {1, 10000000}, v2[] = {3, 30000000};

	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pprof_builder_set_period(b, "cpu", "nanoseconds", 10000000), 0);
	pprof_builder_set_time(b, 1700000000000000000, 10000000000);
	assert_int_equal(pprof_builder_add_comment(b, "made by test_codec"), 0);
	map = pprof_builder_mapping(b, &md);
	fmain = pprof_builder_function(b, "main", "main", "main.c", 1);
	fwork = pprof_builder_function(b, "work", "work", "work.c", 3);
	finl = pprof_builder_function(b, "inlined", "inlined", "work.c", 4);
	assert_true(map && fmain && fwork && finl);
	l1[0].function_id = fmain;
	l2[0].function_id = finl;
	l2[1].function_id = fwork;
	lmain = pprof_builder_location(b, map, 0x401000, l1, 1);
	lwork = pprof_builder_location(b, map, 0x402000, l2, 2);
	lraw = pprof_builder_location(b, map, 0x403abc, NULL, 0);
	assert_true(lmain && lwork && lraw);
	stack1[0] = lraw;
	stack1[1] = lwork;
	stack1[2] = lmain;
	stack2[0] = lwork;
	stack2[1] = lmain;
	assert_int_equal(pprof_builder_add_sample(b, stack1, 3, v1, labels, 2), 0);
	assert_int_equal(pprof_builder_add_sample(b, stack2, 2, v2, NULL, 0), 0);
	return b;
}

static void encode_sample(struct buf *out, bool gzip)
{
	struct pprof_builder *b = sample_builder();

	assert_int_equal(pprof_builder_encode(b, gzip, out), 0);
	pprof_builder_free(b);
}

static void test_roundtrip_raw_and_gzip(void **state)
{
	struct buf raw = {0}, gz = {0}, again = {0};
	struct pprof_profile *p = NULL, *q = NULL;
	struct kiln_error err = {0};
	const pprof_msg *m;

	(void)state;
	encode_sample(&raw, false);
	encode_sample(&gz, true);
	assert_true(gzip_is_gzip(gz.data, gz.len));
	assert_false(gzip_is_gzip(raw.data, raw.len));
	assert_int_equal(pprof_decode(raw.data, raw.len, NULL, &p, &err), 0);
	assert_int_equal(pprof_decode(gz.data, gz.len, NULL, &q, &err), 0);
	m = pprof_profile_msg(p);
	assert_int_equal(m->n_sample, 2);
	assert_int_equal(pprof_sample_count(q), 2);
	assert_int_equal(m->n_location, 3);
	assert_int_equal(m->n_function, 3);
	assert_int_equal(m->n_mapping, 1);
	assert_int_equal(m->period, 10000000);
	assert_int_equal(m->time_nanos, 1700000000000000000);
	assert_string_equal(pprof_string(p, m->comment[0]), "made by test_codec");
	assert_string_equal(pprof_string(p, m->sample_type[1]->type), "cpu");
	assert_string_equal(pprof_string(p, m->period_type->unit), "nanoseconds");
	/* Inline order survives: line[0] is the inlined callee. */
	{
		const pprof_location_msg *l = pprof_location(p, m->sample[0]->location_id[1]);

		assert_non_null(l);
		assert_int_equal(l->n_line, 2);
		assert_string_equal(
		    pprof_string(p, pprof_function(p, l->line[0]->function_id)->name), "inlined");
		assert_string_equal(
		    pprof_string(p, pprof_function(p, l->line[1]->function_id)->name), "work");
		assert_string_equal(pprof_string(p, pprof_mapping(p, l->mapping_id)->build_id),
				    "abc123");
	}
	/* Raw re-encoding of the decoded message gives identical bytes. */
	assert_int_equal(pprof_encode(pprof_profile_msg(q), false, &again), 0);
	assert_int_equal(again.len, raw.len);
	assert_memory_equal(again.data, raw.data, raw.len);
	assert_null(pprof_location(p, 0));
	assert_null(pprof_location(p, 99));
	assert_string_equal(pprof_string(p, -1), "");
	assert_string_equal(pprof_string(p, 1 << 20), "");
	pprof_profile_free(p);
	pprof_profile_free(q);
	buf_free(&raw);
	buf_free(&gz);
	buf_free(&again);
}

/* Decoded strings point into the message bytes, terminated in place over
 * the key of the field after each (pprof_parse): a string that ends the
 * message, empty strings, and strings followed by other fields all come
 * out whole, from raw and gzip input, and raw input is left untouched. */
static void test_strings_in_place(void **state)
{
	/* string_table = {"", "ab", "", "cde"}, then period (field 12) = 7;
	 * the second message ends with a string. */
	static const uint8_t with_tail[] = {0x32, 0x00, 0x32, 0x02, 'a', 'b',  0x32, 0x00,
					    0x32, 0x03, 'c',  'd',  'e', 0x60, 0x07};
	static const uint8_t ends_in_string[] = {0x32, 0x00, 0x32, 0x01, 'x', 0x32,
						 0x00, 0x32, 0x02, 'y',	 'z'};
	const struct {
		const uint8_t *data;
		size_t len;
		const char *last;
	} cases[] = {{with_tail, sizeof(with_tail), "cde"},
		     {ends_in_string, sizeof(ends_in_string), "yz"}};

	(void)state;
	for (size_t c = 0; c < 2; c++) {
		uint8_t copy[32];
		struct buf gz = {0};

		memcpy(copy, cases[c].data, cases[c].len);
		assert_int_equal(gzip_deflate(cases[c].data, cases[c].len, 6, &gz), 0);
		for (int g = 0; g < 2; g++) {
			struct pprof_profile *p = NULL;
			struct kiln_error err = {0};
			const pprof_msg *m;

			if (g)
				assert_int_equal(pprof_decode(gz.data, gz.len, NULL, &p, &err), 0);
			else
				assert_int_equal(pprof_decode(copy, cases[c].len, NULL, &p, &err),
						 0);
			m = pprof_profile_msg(p);
			assert_int_equal(m->n_string_table, 4);
			assert_string_equal(m->string_table[0], "");
			assert_string_equal(m->string_table[1], c ? "x" : "ab");
			assert_string_equal(m->string_table[2], "");
			assert_string_equal(m->string_table[3], cases[c].last);
			assert_int_equal(m->period, c ? 0 : 7);
			pprof_profile_free(p);
		}
		assert_memory_equal(copy, cases[c].data, cases[c].len);
		buf_free(&gz);
	}
}

static void test_sample_type_index(void **state)
{
	struct buf raw = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};

	(void)state;
	encode_sample(&raw, false);
	assert_int_equal(pprof_decode(raw.data, raw.len, NULL, &p, &err), 0);
	assert_int_equal(pprof_sample_type_index(p, NULL, &err), 1); /* last */
	assert_int_equal(pprof_sample_type_index(p, "samples", &err), 0);
	assert_int_equal(pprof_sample_type_index(p, "alloc_space", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "alloc_space"));
	assert_non_null(strstr(err.msg, "samples, cpu"));
	pprof_profile_free(p);
	buf_free(&raw);
}

static void test_decode_file_names_path(void **state)
{
	char path[] = "/tmp/kiln-pprof-XXXXXX";
	struct buf junk = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	buf_append_str(&junk, "this is not a profile");
	assert_int_equal(buf_write_file(&junk, path), 0);
	assert_true(pprof_decode_file(path, NULL, &p, &err) < 0);
	assert_null(p);
	assert_true(strncmp(err.msg, path, strlen(path)) == 0);
	kiln_error_clear(&err);
	unlink(path);
	assert_int_equal(pprof_decode_file(path, NULL, &p, &err), -ENOENT);
	assert_true(strncmp(err.msg, path, strlen(path)) == 0);
	buf_free(&junk);
}

/* Decodes raw with protobuf-c (no validation), lets mutate break it, then
 * checks that both pprof_validate and a decode of the re-encoded bytes fail
 * with an error containing want. */
static void expect_invalid(void (*mutate)(pprof_msg *m), const char *want)
{
	struct buf raw = {0}, bad = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	pprof_msg *m;

	encode_sample(&raw, false);
	m = perftools__profiles__profile__unpack(NULL, raw.len, raw.data);
	assert_non_null(m);
	assert_int_equal(pprof_validate(m, &err), 0);
	mutate(m);
	assert_int_equal(pprof_validate(m, &err), -EINVAL);
	if (!strstr(err.msg, want))
		fail_msg("validate: \"%s\" does not contain \"%s\"", err.msg, want);
	kiln_error_clear(&err);
	assert_int_equal(pprof_encode(m, true, &bad), 0);
	assert_int_equal(pprof_decode(bad.data, bad.len, NULL, &p, &err), -EINVAL);
	assert_null(p);
	if (!strstr(err.msg, want))
		fail_msg("decode: \"%s\" does not contain \"%s\"", err.msg, want);
	perftools__profiles__profile__free_unpacked(m, NULL);
	buf_free(&raw);
	buf_free(&bad);
}

static void break_first_string(pprof_msg *m)
{
	char *t = m->string_table[0];

	m->string_table[0] = m->string_table[1];
	m->string_table[1] = t;
}

static void break_location_ref(pprof_msg *m)
{
	m->sample[1]->location_id[1] = 77;
}

static void break_function_ref(pprof_msg *m)
{
	m->location[1]->line[1]->function_id = 42;
}

static void break_mapping_ref(pprof_msg *m)
{
	m->location[2]->mapping_id = 9;
}

/* Ids 1, 2, 5: a dense table with a hole where sample 0's first frame was. */
static void break_location_hole(pprof_msg *m)
{
	m->location[2]->id = 5;
}

static void break_value_count(pprof_msg *m)
{
	m->sample[0]->n_value = 1;
}

static void break_string_index(pprof_msg *m)
{
	m->function[2]->name = 1000;
}

static void break_label_index(pprof_msg *m)
{
	m->sample[0]->label[0]->str = -3;
}

static void break_duplicate_id(pprof_msg *m)
{
	m->location[2]->id = m->location[0]->id;
}

static void break_zero_id(pprof_msg *m)
{
	m->function[0]->id = 0;
}

static void break_sample_type(pprof_msg *m)
{
	m->sample_type[0]->unit = 5000;
}

static void break_period_type(pprof_msg *m)
{
	m->period_type->type = 5000;
}

static void break_comment(pprof_msg *m)
{
	m->comment[0] = 5000;
}

static void test_validation_names_the_field(void **state)
{
	(void)state;
	expect_invalid(break_first_string, "string_table[0]: must be \"\"");
	expect_invalid(break_location_ref, "sample[1].location_id[1]: no location with id 77");
	expect_invalid(break_function_ref,
		       "location[1].line[1].function_id: no function with id 42");
	expect_invalid(break_mapping_ref, "location[2].mapping_id: no mapping with id 9");
	expect_invalid(break_location_hole, "sample[0].location_id[0]: no location with id 3");
	expect_invalid(break_value_count, "sample[0].value: 1 values for 2 sample types");
	expect_invalid(break_string_index, "function[2].name: string index 1000 out of range");
	expect_invalid(break_label_index, "sample[0].label[0].str: string index -3 out of range");
	expect_invalid(break_duplicate_id, "location[2].id: duplicate id 1");
	expect_invalid(break_zero_id, "function[0].id: must not be 0");
	expect_invalid(break_sample_type, "sample_type[0].unit: string index 5000");
	expect_invalid(break_period_type, "period_type.type: string index 5000");
	expect_invalid(break_comment, "comment[0]: string index 5000");
}

static void test_sparse_ids_resolve(void **state)
{
	struct buf raw = {0}, out = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	pprof_msg *m;

	(void)state;
	encode_sample(&raw, false);
	m = perftools__profiles__profile__unpack(NULL, raw.len, raw.data);
	assert_non_null(m);
	/* Huge ids force the hash-table path. */
	for (size_t i = 0; i < m->n_location; i++)
		m->location[i]->id += 1ull << 40;
	for (size_t i = 0; i < m->n_sample; i++)
		for (size_t j = 0; j < m->sample[i]->n_location_id; j++)
			m->sample[i]->location_id[j] += 1ull << 40;
	assert_int_equal(pprof_encode(m, false, &out), 0);
	assert_int_equal(pprof_decode(out.data, out.len, NULL, &p, &err), 0);
	assert_non_null(pprof_location(p, (1ull << 40) + 1));
	assert_null(pprof_location(p, 1));
	pprof_profile_free(p);
	perftools__profiles__profile__free_unpacked(m, NULL);
	buf_free(&raw);
	buf_free(&out);
}

static void test_empty_and_garbage_inputs(void **state)
{
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	const uint8_t gzip_magic_only[] = {0x1f, 0x8b};
	const uint8_t no_strings[] = {0x60, 0x05}; /* field 12 (period) = 5 */

	(void)state;
	assert_true(pprof_decode("", 0, NULL, &p, &err) < 0);
	assert_non_null(strstr(err.msg, "empty"));
	kiln_error_clear(&err);
	assert_true(pprof_decode(gzip_magic_only, 2, NULL, &p, &err) < 0);
	assert_non_null(strstr(err.msg, "gzip"));
	kiln_error_clear(&err);
	assert_int_equal(pprof_decode(no_strings, 2, NULL, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "string_table"));
	assert_null(p);
}

/* Step that visits at most `most` of n positions; odd, so that bit positions
 * vary across bytes. Bounds the work: each decode under ASan is not free and
 * the suite runs on loaded machines. */
static size_t stride(size_t n, size_t most)
{
	return n <= most ? 1 : ((n + most - 1) / most) | 1;
}

static void test_truncated_and_bitflipped(void **state)
{
	struct buf raw = {0}, gz = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	size_t i, failures = 0;

	(void)state;
	encode_sample(&raw, false);
	encode_sample(&gz, true);
	/* Every proper prefix of the gzip form fails (the trailer is checked):
	 * sampled positions plus the last 9, which cut into the trailer. */
	for (i = 1; i < gz.len; i += i + 9 >= gz.len ? 1 : stride(gz.len, 64)) {
		kiln_error_clear(&err);
		assert_true(pprof_decode(gz.data, i, NULL, &p, &err) < 0);
		assert_null(p);
		assert_true(err.msg[0] != '\0');
	}
	/* Raw prefixes either fail or decode to a valid profile: never crash. */
	for (i = 1; i < raw.len; i += stride(raw.len, 128)) {
		kiln_error_clear(&err);
		if (pprof_decode(raw.data, i, NULL, &p, &err) < 0) {
			failures++;
			assert_true(err.msg[0] != '\0');
		}
		pprof_profile_free(p);
		p = NULL;
	}
	assert_true(failures > (raw.len / stride(raw.len, 128)) / 2);
	/* Each single bit flip of the gzip form is caught by the CRC or inflate. */
	for (i = 0; i < gz.len * 8; i += stride(gz.len * 8, 512)) {
		gz.data[i / 8] ^= (uint8_t)(1u << (i % 8));
		kiln_error_clear(&err);
		if (pprof_decode(gz.data, gz.len, NULL, &p, &err) == 0) {
			/* Only a bit the format ignores (header mtime/xfl/os,
			 * deflate padding) may flip unnoticed: same profile. */
			struct buf same = {0};

			assert_int_equal(pprof_encode(pprof_profile_msg(p), false, &same), 0);
			assert_int_equal(same.len, raw.len);
			assert_memory_equal(same.data, raw.data, raw.len);
			buf_free(&same);
			pprof_profile_free(p);
			p = NULL;
		}
		gz.data[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	/* Raw bit flips: error or valid profile. */
	for (i = 0; i < raw.len * 8; i += stride(raw.len * 8, 512)) {
		raw.data[i / 8] ^= (uint8_t)(1u << (i % 8));
		if (pprof_decode(raw.data, raw.len, NULL, &p, &err) == 0)
			pprof_profile_free(p);
		p = NULL;
		raw.data[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	buf_free(&raw);
	buf_free(&gz);
}

static void test_random_inputs(void **state)
{
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	uint8_t data[512];
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (int round = 0; round < 2000; round++) {
		size_t len = 1 + (size_t)(x % sizeof(data));

		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			data[i] = (uint8_t)x;
		}
		/* Every fourth input is random deflate behind a gzip header. */
		if (round % 4 == 0 && len > 10)
			memcpy(data, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
		kiln_error_clear(&err);
		if (pprof_decode(data, len, NULL, &p, &err) == 0)
			pprof_profile_free(p);
		else
			assert_true(err.msg[0] != '\0');
		p = NULL;
	}
}

/* The raw encoding of a decoded profile: what "the same result" means. */
static void reencode(const struct pprof_profile *p, struct buf *out)
{
	buf_reset(out);
	assert_int_equal(pprof_encode(pprof_profile_msg(p), false, out), 0);
}

/* pprof_decoder_decode gives what pprof_decode gives, whatever the decoder
 * decoded or failed on before: a decoder reused across different profiles
 * (bigger, smaller, raw and gzip), across failures (garbage, truncated
 * gzip, a profile that fails validation half-parsed), with the previous
 * profile still alive or recycled, and with profiles recycled into another
 * decoder or into none. */
static void test_decoder_reuse_same_result(void **state)
{
	struct buf small_raw = {0}, small_gz = {0}, big_gz = {0}, want = {0}, got = {0};
	struct pprof_decoder *d = pprof_decoder_new(), *d2 = pprof_decoder_new();
	struct pprof_profile *p = NULL, *q = NULL;
	struct kiln_error err = {0};
	struct pprof_builder *b;

	(void)state;
	assert_non_null(d);
	assert_non_null(d2);
	encode_sample(&small_raw, false);
	encode_sample(&small_gz, true);
	/* A bigger profile: 3,000 distinct functions and locations. */
	b = pprof_builder_new();
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	struct pprof_mapping_desc md = {
	    .memory_start = 0x1000, .memory_limit = 0x100000, .filename = "/bin/big"};
	uint64_t map = pprof_builder_mapping(b, &md);
	for (int i = 0; i < 3000; i++) {
		char name[64];
		struct pprof_line_desc line = {.line = i};
		uint64_t loc;
		int64_t v = i + 1;

		snprintf(name, sizeof(name), "function_number_%d", i);
		line.function_id = pprof_builder_function(b, name, name, "big.c", 0);
		loc = pprof_builder_location(b, map, 0x1000 + (uint64_t)i * 16, &line, 1);
		assert_int_equal(pprof_builder_add_sample(b, &loc, 1, &v, NULL, 0), 0);
	}
	assert_int_equal(pprof_builder_encode(b, true, &big_gz), 0);
	pprof_builder_free(b);

	const struct buf *inputs[] = {&small_gz, &big_gz, &small_raw, &big_gz, &small_gz};
	for (size_t round = 0; round < 3; round++) {
		for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
			const struct buf *in = inputs[i];

			assert_int_equal(pprof_decode(in->data, in->len, NULL, &p, &err), 0);
			reencode(p, &want);
			pprof_profile_free(p);
			assert_int_equal(pprof_decoder_decode(d, in->data, in->len, NULL, &p, &err),
					 0);
			reencode(p, &got);
			assert_int_equal(got.len, want.len);
			assert_memory_equal(got.data, want.data, want.len);
			/* Round 1 keeps the previous profile alive while the
			 * next is decoded; round 2 recycles into the other
			 * decoder, round 0 into the same one. */
			if (round == 1) {
				pprof_decoder_recycle(d, q);
				q = p;
			} else {
				pprof_decoder_recycle(round ? d2 : d, p);
			}
			p = NULL;
			/* Failures in between leave the decoder usable. */
			kiln_error_clear(&err);
			assert_true(pprof_decoder_decode(d, "\x0a\xff\xff", 3, NULL, &p, &err) < 0);
			assert_null(p);
			assert_true(err.msg[0] != '\0');
			kiln_error_clear(&err);
			assert_true(pprof_decoder_decode(d, big_gz.data, big_gz.len / 2, NULL, &p,
							 &err) < 0);
			assert_null(p);
			/* Parses, then fails validation: a value but no sample type. */
			kiln_error_clear(&err);
			assert_int_equal(pprof_decoder_decode(d, "\x12\x04\x08\x05\x10\x01\x32\x00",
							      8, NULL, &p, &err),
					 -EINVAL);
			assert_null(p);
		}
	}
	pprof_decoder_recycle(d, q);
	/* A gzip bomb is refused through a decoder too. */
	{
		struct pprof_decode_opts opts = {.max_inflated_bytes = 1000};

		kiln_error_clear(&err);
		assert_int_equal(pprof_decoder_decode(d, big_gz.data, big_gz.len, &opts, &p, &err),
				 -EFBIG);
		assert_null(p);
	}
	/* NULL decoder: plain decode and free. */
	assert_int_equal(pprof_decoder_decode(NULL, small_gz.data, small_gz.len, NULL, &p, &err),
			 0);
	pprof_decoder_recycle(NULL, p);
	pprof_decoder_recycle(d, NULL);
	pprof_decoder_free(d);
	pprof_decoder_free(d2);
	pprof_decoder_free(NULL);
	buf_free(&small_raw);
	buf_free(&small_gz);
	buf_free(&big_gz);
	buf_free(&want);
	buf_free(&got);
}

/* ---- hand-written protobuf, for layouts the builder does not write ---- */

static void pb_varint(struct buf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	do {
		tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	assert_int_equal(buf_append(b, tmp, n), 0);
}

static void pb_uint(struct buf *b, uint32_t field, uint64_t v)
{
	pb_varint(b, (uint64_t)field << 3);
	pb_varint(b, v);
}

static void pb_bytes(struct buf *b, uint32_t field, const void *data, size_t len)
{
	pb_varint(b, (uint64_t)field << 3 | 2);
	pb_varint(b, len);
	if (len)
		assert_int_equal(buf_append(b, data, len), 0);
}

static void pb_msg(struct buf *b, uint32_t field, struct buf *sub)
{
	pb_bytes(b, field, sub->data, sub->len);
	buf_reset(sub);
}

static void pb_packed(struct buf *b, uint32_t field, const uint64_t *v, size_t n)
{
	struct buf tmp = {0};

	for (size_t i = 0; i < n; i++)
		pb_varint(&tmp, v[i]);
	pb_bytes(b, field, tmp.data, tmp.len);
	buf_free(&tmp);
}

/* One label {key, str or num} into a sample being written. */
static void pb_label(struct buf *sample, int64_t key, int64_t str, int64_t num)
{
	struct buf l = {0};

	pb_uint(&l, 1, (uint64_t)key);
	if (str)
		pb_uint(&l, 2, (uint64_t)str);
	else
		pb_uint(&l, 3, (uint64_t)num);
	pb_msg(sample, 3, &l);
	buf_free(&l);
}

/* A profile whose samples and locations are laid out in every way protobuf
 * allows: location ids and values unpacked (Go writes a stack of one or
 * two frames so) or split over several packed fields, empty and long packed
 * fields, many labels and lines; with unknown, unknown fields in between. */
static void layouts_message(struct buf *raw, bool unknown)
{
	static const char *strings[] = {"", "samples", "count", "fn", "file.c", "k", "v"};
	struct buf msg = {0}, sub = {0};
	uint64_t ids[] = {1, 2, 3, 300}, vals[] = {7, 1u << 20};

	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
		pb_bytes(raw, 6, strings[i], strlen(strings[i]));
	for (int t = 0; t < 2; t++) { /* two sample types */
		pb_uint(&msg, 1, 1);
		pb_uint(&msg, 2, 2);
		pb_msg(raw, 1, &msg);
	}
	pb_uint(&msg, 1, 1);
	pb_uint(&msg, 2, 3);
	pb_uint(&msg, 4, 4);
	pb_msg(raw, 5, &msg);
	/* Locations 1, 2, 3 with 1, 8 and 9 lines; 300 with none. */
	for (uint64_t id = 1; id <= 4; id++) {
		size_t n_line = id == 1 ? 1 : id == 2 ? 8 : id == 3 ? 9 : 0;

		pb_uint(&msg, 1, id == 4 ? 300 : id);
		if (unknown)
			pb_uint(&msg, 15, 99);
		pb_uint(&msg, 3, 0x1000 * id);
		for (size_t j = 0; j < n_line; j++) {
			pb_uint(&sub, 1, 1);
			pb_uint(&sub, 2, 10 + j);
			pb_msg(&msg, 4, &sub);
		}
		pb_msg(raw, 4, &msg);
	}
	/* The usual: packed once each, one label. */
	pb_packed(&msg, 1, ids, 4);
	pb_packed(&msg, 2, vals, 2);
	pb_label(&msg, 5, 0, 512);
	pb_msg(raw, 2, &msg);
	/* Unpacked. */
	pb_uint(&msg, 1, 2);
	if (unknown)
		pb_uint(&msg, 9, 1);
	pb_uint(&msg, 1, 1);
	pb_uint(&msg, 2, 3);
	pb_uint(&msg, 2, 4);
	pb_msg(raw, 2, &msg);
	/* Packed twice, values first, an empty packed field. */
	pb_packed(&msg, 2, vals, 2);
	pb_packed(&msg, 1, ids, 1);
	pb_bytes(&msg, 1, NULL, 0);
	pb_packed(&msg, 1, ids + 1, 3);
	pb_msg(raw, 2, &msg);
	/* Packed, then unpacked. */
	pb_packed(&msg, 1, ids, 3);
	pb_uint(&msg, 1, 300);
	pb_uint(&msg, 2, 5);
	pb_uint(&msg, 2, 6);
	pb_msg(raw, 2, &msg);
	/* Four labels (the one-pass limit), then five. */
	for (int n_lab = 4; n_lab <= 5; n_lab++) {
		pb_packed(&msg, 1, ids + 2, 2);
		for (int k = 0; k < n_lab; k++)
			pb_label(&msg, 5, k % 2 ? 6 : 0, k);
		pb_packed(&msg, 2, vals, 2);
		pb_msg(raw, 2, &msg);
	}
	/* A deep stack: 150 bytes of packed ids, past the one-pass limit. */
	{
		uint64_t deep[100];

		for (size_t k = 0; k < 100; k++)
			deep[k] = k % 2 ? 1 : 300;
		pb_packed(&msg, 1, deep, 100);
		pb_packed(&msg, 2, vals, 2);
		pb_msg(raw, 2, &msg);
	}
	/* No location at all; an empty value field before the real one. */
	pb_bytes(&msg, 2, NULL, 0);
	pb_packed(&msg, 2, vals, 2);
	pb_msg(raw, 2, &msg);
	buf_free(&msg);
	buf_free(&sub);
}

/* Every layout decodes to what protobuf-c's generic unpacker makes of it
 * (without the unknown fields, which protobuf-c keeps and re-encodes): the
 * parser reads the usual layout in one pass and the others in two. */
static void test_layouts_agree_with_protobuf_c(void **state)
{
	struct buf raw = {0}, plain = {0}, want = {0}, got = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	pprof_msg *ref;

	(void)state;
	layouts_message(&raw, true);
	layouts_message(&plain, false);
	ref = perftools__profiles__profile__unpack(NULL, plain.len, plain.data);
	assert_non_null(ref);
	if (pprof_validate(ref, &err) != 0 || pprof_decode(raw.data, raw.len, NULL, &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(pprof_encode(ref, false, &want), 0);
	assert_int_equal(pprof_encode(pprof_profile_msg(p), false, &got), 0);
	assert_int_equal(got.len, want.len);
	assert_memory_equal(got.data, want.data, want.len);
	assert_int_equal(pprof_sample_count(p), 8);
	pprof_profile_free(p);
	perftools__profiles__profile__free_unpacked(ref, NULL);
	buf_free(&raw);
	buf_free(&plain);
	buf_free(&want);
	buf_free(&got);
}

static void test_gzip_bomb_refused(void **state)
{
	struct buf raw = {0}, gz = {0};
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	struct pprof_decode_opts opts = {.max_inflated_bytes = 64};

	(void)state;
	encode_sample(&raw, false);
	assert_true(raw.len > 64);
	assert_int_equal(gzip_deflate(raw.data, raw.len, 6, &gz), 0);
	assert_int_equal(pprof_decode(gz.data, gz.len, &opts, &p, &err), -EFBIG);
	assert_null(p);
	buf_free(&raw);
	buf_free(&gz);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_raw_and_gzip),
	    cmocka_unit_test(test_strings_in_place),
	    cmocka_unit_test(test_sample_type_index),
	    cmocka_unit_test(test_decode_file_names_path),
	    cmocka_unit_test(test_validation_names_the_field),
	    cmocka_unit_test(test_sparse_ids_resolve),
	    cmocka_unit_test(test_empty_and_garbage_inputs),
	    cmocka_unit_test(test_truncated_and_bitflipped),
	    cmocka_unit_test(test_random_inputs),
	    cmocka_unit_test(test_gzip_bomb_refused),
	    cmocka_unit_test(test_decoder_reuse_same_result),
	    cmocka_unit_test(test_layouts_agree_with_protobuf_c),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
