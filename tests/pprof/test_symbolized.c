/*
 * test_symbolized.c — pprof_encode_symbolized: lines added to the locations
 * that had none (inlined frames innermost first), functions and strings
 * shared with the source's, mapping flags set from what was added, and
 * everything else byte for byte as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "pprof/pprof.h"

/* Location ids as made() hands them out. */
enum { L_INLINED = 1, L_SYMTAB, L_KERNEL, L_UNKNOWN, L_NO_MAPPING };

/* An agent-shaped profile: a user mapping whose locations are bare
 * addresses, a kernel location that is named already, one without a
 * mapping; labels, a comment, period, time and a default type. */
static struct pprof_profile *make(void)
{
	struct pprof_builder *b = pprof_builder_new();
	struct pprof_profile *p;
	assert_non_null(b);
	assert_int_equal(pprof_builder_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pprof_builder_set_period(b, "cpu", "nanoseconds", 52631578), 0);
	assert_int_equal(pprof_builder_set_default_sample_type(b, "cpu"), 0);
	assert_int_equal(pprof_builder_add_comment(b, "window"), 0);
	pprof_builder_set_time(b, 1700000000000000000, 10000000000);
	struct pprof_mapping_desc user = {.memory_start = 0x555500001000,
					  .memory_limit = 0x555500002000,
					  .file_offset = 0x1000,
					  .filename = "/usr/bin/app",
					  .build_id = "0123abcd"};
	struct pprof_mapping_desc kernel = {.memory_start = 0x8000000000000000ull,
					    .memory_limit = UINT64_MAX,
					    .filename = "[kernel.kallsyms]",
					    .has_functions = true};
	uint64_t mu = pprof_builder_mapping(b, &user), mk = pprof_builder_mapping(b, &kernel);
	uint64_t fk =
	    pprof_builder_function(b, "do_syscall_64", "do_syscall_64", "[kernel.kallsyms]", 0);
	struct pprof_line_desc lk = {fk, 0, 0};
	assert_int_equal(pprof_builder_location(b, mu, 0x555500001100, NULL, 0), L_INLINED);
	assert_int_equal(pprof_builder_location(b, mu, 0x555500001200, NULL, 0), L_SYMTAB);
	assert_int_equal(pprof_builder_location(b, mk, 0xffffffff81000000, &lk, 1), L_KERNEL);
	assert_int_equal(pprof_builder_location(b, mu, 0x555500001300, NULL, 0), L_UNKNOWN);
	assert_int_equal(pprof_builder_location(b, 0, 0x7f0000000000, NULL, 0), L_NO_MAPPING);
	uint64_t s0[3] = {L_KERNEL, L_INLINED, L_SYMTAB}, s1[2] = {L_UNKNOWN, L_SYMTAB},
		 s2[1] = {L_NO_MAPPING};
	int64_t v0[2] = {3, 3 * 52631578}, v1[2] = {1, 52631578}, v2[2] = {2, 2 * 52631578};
	struct pprof_label_desc lab[2] = {{.key = "thread_id", .str = "42"},
					  {.key = "bytes", .num = 7, .num_unit = "bytes"}};
	assert_int_equal(pprof_builder_add_sample(b, s0, 3, v0, lab, 2), 0);
	assert_int_equal(pprof_builder_add_sample(b, s1, 2, v1, lab, 1), 0);
	assert_int_equal(pprof_builder_add_sample(b, s2, 1, v2, NULL, 0), 0);
	assert_int_equal(pprof_builder_to_profile(b, &p, NULL), 0);
	pprof_builder_free(b);
	return p;
}

static const pprof_function_msg *line_fn(const struct pprof_profile *p, uint64_t loc, size_t i)
{
	const pprof_location_msg *l = pprof_location(p, loc);
	assert_non_null(l);
	assert_true(i < l->n_line);
	const pprof_function_msg *f = pprof_function(p, l->line[i]->function_id);
	assert_non_null(f);
	return f;
}

static struct pprof_profile *roundtrip(const struct buf *out)
{
	struct pprof_profile *d = NULL;
	struct kiln_error err = {0};

	assert_int_equal(pprof_decode(out->data, out->len, NULL, &d, &err), 0);
	return d;
}

static void test_lines_added_where_there_were_none(void **state)
{
	struct pprof_profile *p = make(), *d;
	const pprof_msg *pm = pprof_profile_msg(p), *dm;
	struct kiln_error err = {0};
	struct buf out = {0};
	/* An inlined frame in a function, by DWARF. */
	struct pprof_frame_desc inl[2] = {{"add", "add", "/src/app.c", 12, 10},
					  {"work", "work", "/src/app.c", 30, 25}};
	/* A symbol table's answer: no file, no line; and one equal to the
	 * kernel's function, which is shared rather than added. */
	struct pprof_frame_desc sym[1] = {{"work", NULL, NULL, 0, 0}};
	struct pprof_frame_desc kern[1] = {
	    {"do_syscall_64", "do_syscall_64", "[kernel.kallsyms]", 0, 0}};
	struct pprof_location_frames lf[5] = {{inl, 2}, {sym, 1}, {kern, 1}, {NULL, 0}, {sym, 1}};
	(void)state;

	assert_int_equal(pm->n_location, 5);
	/* The kernel location had lines: the frames given for it are ignored;
	 * the one without a mapping gets them (what to name is the caller's
	 * choice). */
	lf[2] = (struct pprof_location_frames){inl, 1};
	assert_int_equal(pprof_encode_symbolized(p, lf, true, &out, &err), 0);
	d = roundtrip(&out);
	dm = pprof_profile_msg(d);

	assert_string_equal(pprof_string(d, line_fn(d, L_INLINED, 0)->name), "add");
	assert_string_equal(pprof_string(d, line_fn(d, L_INLINED, 0)->filename), "/src/app.c");
	assert_int_equal(line_fn(d, L_INLINED, 0)->start_line, 10);
	assert_int_equal(pprof_location(d, L_INLINED)->line[0]->line, 12);
	assert_string_equal(pprof_string(d, line_fn(d, L_INLINED, 1)->name), "work");
	assert_int_equal(pprof_location(d, L_INLINED)->line[1]->line, 30);
	assert_int_equal(pprof_location(d, L_INLINED)->address, 0x555500001100);
	/* system_name NULL is the name; no file, no line. */
	assert_int_equal(pprof_location(d, L_SYMTAB)->n_line, 1);
	assert_string_equal(pprof_string(d, line_fn(d, L_SYMTAB, 0)->system_name), "work");
	assert_string_equal(pprof_string(d, line_fn(d, L_SYMTAB, 0)->filename), "");
	assert_int_equal(pprof_location(d, L_SYMTAB)->line[0]->line, 0);
	assert_int_equal(pprof_location(d, L_KERNEL)->n_line, 1);
	assert_string_equal(pprof_string(d, line_fn(d, L_KERNEL, 0)->name), "do_syscall_64");
	assert_int_equal(pprof_location(d, L_UNKNOWN)->n_line, 0);
	assert_int_equal(pprof_location(d, L_NO_MAPPING)->n_line, 1);
	/* Functions: the kernel's, add, work (DWARF, with file and start
	 * line), work (symbol table): equal ones are one. */
	assert_int_equal(dm->n_function, 4);
	assert_int_equal(line_fn(d, L_SYMTAB, 0)->id, line_fn(d, L_NO_MAPPING, 0)->id);
	assert_int_equal(dm->function[0]->id, pm->function[0]->id);
	/* The source's strings keep their indices; "work" is added once. */
	for (size_t i = 0; i < pm->n_string_table; i++)
		assert_string_equal(dm->string_table[i], pm->string_table[i]);
	size_t works = 0;
	for (size_t i = 0; i < dm->n_string_table; i++)
		works += strcmp(dm->string_table[i], "work") == 0;
	assert_int_equal(works, 1);

	/* The user mapping says what it gained; the kernel's is as it was. */
	const pprof_mapping_msg *mu = pprof_mapping(d, 1), *mk = pprof_mapping(d, 2);
	assert_true(mu->has_functions && mu->has_filenames && mu->has_line_numbers &&
		    mu->has_inline_frames);
	assert_string_equal(pprof_string(d, mu->filename), "/usr/bin/app");
	assert_string_equal(pprof_string(d, mu->build_id), "0123abcd");
	assert_int_equal(mu->memory_start, 0x555500001000);
	assert_int_equal(mu->file_offset, 0x1000);
	assert_true(mk->has_functions && !mk->has_filenames && !mk->has_line_numbers);

	/* Samples, labels, types, period, time, comments: unchanged. */
	assert_int_equal(dm->n_sample, pm->n_sample);
	for (size_t i = 0; i < pm->n_sample; i++) {
		assert_int_equal(dm->sample[i]->n_location_id, pm->sample[i]->n_location_id);
		assert_memory_equal(dm->sample[i]->location_id, pm->sample[i]->location_id,
				    pm->sample[i]->n_location_id * sizeof(uint64_t));
		assert_memory_equal(dm->sample[i]->value, pm->sample[i]->value,
				    pm->sample[i]->n_value * sizeof(int64_t));
		assert_int_equal(dm->sample[i]->n_label, pm->sample[i]->n_label);
	}
	assert_string_equal(pprof_string(d, dm->sample[0]->label[0]->str), "42");
	assert_int_equal(dm->sample[0]->label[1]->num, 7);
	assert_string_equal(pprof_string(d, dm->sample[0]->label[1]->num_unit), "bytes");
	assert_int_equal(dm->period, 52631578);
	assert_string_equal(pprof_string(d, dm->period_type->type), "cpu");
	assert_int_equal(dm->time_nanos, 1700000000000000000);
	assert_int_equal(dm->duration_nanos, 10000000000);
	assert_string_equal(pprof_string(d, dm->default_sample_type), "cpu");
	assert_int_equal(dm->n_comment, 1);
	assert_string_equal(pprof_string(d, dm->comment[0]), "window");

	buf_free(&out);
	pprof_profile_free(d);
	pprof_profile_free(p);
}

/* With nothing to add, the bytes are pprof_encode's of the source. */
static void test_nothing_to_add_is_the_same_bytes(void **state)
{
	struct pprof_profile *p = make();
	struct pprof_location_frames none[5] = {{NULL, 0}};
	struct buf a = {0}, b = {0}, c = {0};
	(void)state;

	assert_int_equal(pprof_encode(pprof_profile_msg(p), false, &a), 0);
	assert_int_equal(pprof_encode_symbolized(p, NULL, false, &b, NULL), 0);
	assert_int_equal(pprof_encode_symbolized(p, none, false, &c, NULL), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	assert_int_equal(a.len, c.len);
	assert_memory_equal(a.data, c.data, a.len);
	buf_free(&a);
	buf_free(&b);
	buf_free(&c);
	pprof_profile_free(p);
}

/* Symbolizing the output again changes nothing: its locations have lines. */
static void test_symbolized_twice_is_stable(void **state)
{
	struct pprof_profile *p = make(), *d;
	struct pprof_frame_desc f[1] = {{"work", "work", "/src/app.c", 30, 25}};
	struct pprof_location_frames lf[5] = {{f, 1}, {f, 1}, {NULL, 0}, {f, 1}, {NULL, 0}};
	struct buf a = {0}, b = {0};
	(void)state;

	assert_int_equal(pprof_encode_symbolized(p, lf, false, &a, NULL), 0);
	d = roundtrip(&a);
	assert_int_equal(pprof_encode_symbolized(d, lf, false, &b, NULL), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	assert_int_equal(pprof_profile_msg(d)->n_function, 2);
	buf_free(&a);
	buf_free(&b);
	pprof_profile_free(d);
	pprof_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lines_added_where_there_were_none),
	    cmocka_unit_test(test_nothing_to_add_is_the_same_bytes),
	    cmocka_unit_test(test_symbolized_twice_is_stable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
