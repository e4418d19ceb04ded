/*
 * test_common.c — unit tests for src/common: buf, htab, arena, gzip, error,
 * fdio's fd_open_regular.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/fdio.h"
#include "common/gzip.h"
#include "common/htab.h"

static void test_buf_grows_and_formats(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(buf_printf(&b, "%d,", i), 0);
	assert_int_equal(buf_terminate(&b), 0);
	assert_true(strncmp((char *)b.data, "0,1,2,", 6) == 0);
	assert_non_null(strstr((char *)b.data, ",999,"));
	buf_free(&b);
	assert_null(b.data);
}

static void test_buf_file_roundtrip(void **state)
{
	char path[] = "/tmp/kiln-test-XXXXXX";
	struct buf a, b;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	buf_init(&a);
	buf_init(&b);
	assert_int_equal(buf_append_str(&a, "hello kiln"), 0);
	assert_int_equal(buf_write_file(&a, path), 0);
	assert_int_equal(buf_read_file(&b, path, 0), 0);
	assert_int_equal(b.len, a.len);
	assert_memory_equal(a.data, b.data, a.len);
	buf_reset(&b);
	assert_int_equal(buf_read_file(&b, path, 4), -EFBIG);
	unlink(path);
	buf_free(&a);
	buf_free(&b);
}

static void test_htab_interns_many_keys(void **state)
{
	struct htab *h = htab_new(0);
	char key[32];
	uint64_t v;

	(void)state;
	assert_non_null(h);
	for (uint64_t i = 0; i < 100000; i++) {
		int n = snprintf(key, sizeof(key), "key-%llu", (unsigned long long)i);
		v = i + 1;
		assert_int_equal(htab_intern(h, key, (size_t)n, &v), 0);
	}
	for (uint64_t i = 0; i < 100000; i++) {
		int n = snprintf(key, sizeof(key), "key-%llu", (unsigned long long)i);
		v = 0;
		assert_int_equal(htab_intern(h, key, (size_t)n, &v), 1);
		assert_int_equal(v, i + 1);
	}
	assert_int_equal(htab_count(h), 100000);
	assert_false(htab_get(h, "absent", 6, &v));
	/* The empty key is a key like any other. */
	v = 7;
	assert_int_equal(htab_intern(h, "", 0, &v), 0);
	assert_true(htab_get(h, "", 0, &v));
	assert_int_equal(v, 7);

	size_t it = 0, seen = 0;
	while (htab_next(h, &it, NULL, NULL, NULL))
		seen++;
	assert_int_equal(seen, 100001);
	htab_free(h);
}

/* The hashed variants on a reserved table: each returned key copy is the
 * table's own and still holds the key after every later insert. */
static void test_htab_hashed_and_reserve(void **state)
{
	struct htab *h = htab_new(0);
	const void *copies[1000];
	char key[32];
	uint64_t *slot;

	(void)state;
	assert_non_null(h);
	assert_int_equal(htab_reserve(h, 1000), 0);
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(key, sizeof(key), "stack-%d", i);
		uint64_t hash = htab_hash(key, (size_t)n);

		assert_null(htab_lookup_hashed(h, hash, key, (size_t)n));
		copies[i] = htab_insert_hashed(h, hash, key, (size_t)n, (uint64_t)i);
		assert_non_null(copies[i]);
		assert_ptr_not_equal(copies[i], key);
		assert_memory_equal(copies[i], key, (size_t)n);
	}
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(key, sizeof(key), "stack-%d", i);

		slot = htab_lookup_hashed(h, htab_hash(key, (size_t)n), key, (size_t)n);
		assert_non_null(slot);
		assert_int_equal(*slot, (uint64_t)i);
		assert_memory_equal(copies[i], key, (size_t)n);
	}
	assert_int_equal(htab_count(h), 1000);
	htab_free(h);
}

/* A cleared table is empty and takes new keys; one grown past max_keys
 * shrinks back and still grows again. */
static void test_htab_clear_reuses(void **state)
{
	struct htab *h = htab_new(8);
	char key[32];
	uint64_t v;

	(void)state;
	assert_non_null(h);
	for (int round = 0; round < 3; round++) {
		int n = round == 1 ? 5000 : 20;

		for (int i = 0; i < n; i++) {
			int len = snprintf(key, sizeof(key), "r%d-k%d", round, i);

			v = (uint64_t)i;
			assert_int_equal(htab_intern(h, key, (size_t)len, &v), 0);
		}
		assert_int_equal(htab_count(h), (size_t)n);
		for (int i = 0; i < n; i++) {
			int len = snprintf(key, sizeof(key), "r%d-k%d", round, i);

			assert_true(htab_get(h, key, (size_t)len, &v));
			assert_int_equal(v, (uint64_t)i);
		}
		htab_clear(h, 32);
		assert_int_equal(htab_count(h), 0);
		assert_false(htab_get(h, "r0-k1", 5, &v));
		{
			size_t iter = 0, len;
			const void *k;

			assert_false(htab_next(h, &iter, &k, &len, &v));
		}
	}
	htab_free(h);
}

static void test_arena_alignment_and_big_blocks(void **state)
{
	struct arena *a = arena_new(1024);

	(void)state;
	assert_non_null(a);
	for (int i = 1; i < 100; i++) {
		void *p = arena_alloc(a, (size_t)i);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 16, 0);
		memset(p, 0xab, (size_t)i);
	}
	char *big = arena_alloc(a, 1 << 20);
	assert_non_null(big);
	memset(big, 1, 1 << 20);
	assert_string_equal(arena_strdup(a, "kiln"), "kiln");
	arena_free(a);
}

/* arena_reset keeps the largest chunk and nothing else: the arena is empty,
 * its capacity is that chunk, and allocations fitting it come from it again
 * (same addresses) while bigger ones still work. */
static void test_arena_reset_reuses_largest_chunk(void **state)
{
	struct arena *a = arena_new(4096);

	(void)state;
	assert_non_null(a);
	assert_int_equal(arena_capacity(a), 0);
	char *first = arena_alloc(a, 100);
	assert_non_null(first);
	for (int i = 0; i < 200; i++) /* grows into more chunks */
		assert_non_null(arena_alloc(a, 100));
	char *big = arena_alloc(a, 100000);
	assert_non_null(big);
	memset(big, 7, 100000);
	assert_true(arena_used(a) >= 100 * 201 + 100000);
	arena_reset(a);
	assert_int_equal(arena_used(a), 0);
	size_t cap = arena_capacity(a);
	assert_true(cap >= 100000); /* the big allocation's chunk is the largest */
	char *again = arena_alloc(a, 1000);
	assert_ptr_equal(again, big); /* reused from the start */
	assert_int_equal(arena_capacity(a), cap - 1008);
	memset(again, 1, 1000);
	assert_non_null(arena_alloc(a, 1 << 20)); /* past it: a fresh chunk */
	arena_reset(a);
	assert_true(arena_capacity(a) >= 1 << 20);
	arena_reset(a); /* twice: still one empty chunk */
	assert_true(arena_capacity(a) >= 1 << 20);
	assert_string_equal(arena_strdup(a, "kiln"), "kiln");
	arena_free(a);
	/* An arena that never allocated resets to nothing. */
	a = arena_new(0);
	arena_reset(a);
	assert_int_equal(arena_capacity(a), 0);
	assert_non_null(arena_alloc(a, 10));
	arena_free(a);
}

static void test_gzip_roundtrip_and_limits(void **state)
{
	struct buf raw, gz, out;
	struct kiln_error err = {0};

	(void)state;
	buf_init(&raw);
	buf_init(&gz);
	buf_init(&out);
	for (int i = 0; i < 100000; i++)
		buf_printf(&raw, "line %d\n", i % 17);
	assert_int_equal(gzip_deflate(raw.data, raw.len, 6, &gz), 0);
	assert_true(gzip_is_gzip(gz.data, gz.len));
	assert_true(gz.len < raw.len / 10);
	assert_int_equal(gzip_inflate(gz.data, gz.len, 0, &out, &err), 0);
	assert_int_equal(out.len, raw.len);
	assert_memory_equal(out.data, raw.data, raw.len);

	/* A bomb: refused at the limit, output untouched. */
	buf_reset(&out);
	assert_int_equal(gzip_inflate(gz.data, gz.len, 1000, &out, &err), -EFBIG);
	assert_int_equal(out.len, 0);
	assert_non_null(strstr(err.msg, "limit"));

	/* Truncated and corrupted streams are errors with a message. */
	kiln_error_clear(&err);
	assert_int_equal(gzip_inflate(gz.data, gz.len / 2, 0, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "truncated"));
	kiln_error_clear(&err);
	gz.data[gz.len / 2] ^= 0xff;
	gz.data[gz.len / 2 + 1] ^= 0x55;
	assert_true(gzip_inflate(gz.data, gz.len, 0, &out, &err) < 0);
	assert_true(err.msg[0] != '\0');
	buf_free(&raw);
	buf_free(&gz);
	buf_free(&out);
}

/* The kept inflater: members appended after what out holds, the limit
 * exact to the byte, growth far past the first guess, checksums. */
static void test_gzip_inflater_edges(void **state)
{
	struct gzip_inflater *z = gzip_inflater_new();
	struct buf a, out;
	struct kiln_error err = {0};
	size_t n = 3 << 20;
	char *zeros = calloc(1, n);

	(void)state;
	assert_non_null(z);
	assert_non_null(zeros);
	buf_init(&a);
	buf_init(&out);
	assert_int_equal(gzip_deflate("hello, ", 7, 6, &a), 0);
	assert_int_equal(gzip_deflate("world", 5, 1, &a), 0);
	assert_int_equal(buf_append(&out, ">>", 2), 0);
	assert_int_equal(gzip_inflate_with(z, a.data, a.len, 12, &out, &err), 0);
	assert_int_equal(out.len, 14);
	assert_memory_equal(out.data, ">>hello, world", 14);
	assert_true(out.cap > out.len); /* room for a terminator */
	/* One byte over the limit: refused, out as it was. */
	assert_int_equal(gzip_inflate_with(z, a.data, a.len, 11, &out, &err), -EFBIG);
	assert_int_equal(out.len, 14);
	/* Nothing to inflate: nothing appended. */
	assert_int_equal(gzip_inflate_with(z, a.data, 0, 0, &out, &err), 0);
	assert_int_equal(out.len, 14);
	/* Not gzip, and a member followed by garbage. */
	kiln_error_clear(&err);
	assert_int_equal(gzip_inflate_with(z, "plain", 5, 0, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "not gzip"));
	/* A wrong CRC-32, then a wrong ISIZE, in the second member's trailer. */
	a.data[a.len - 8] ^= 1;
	kiln_error_clear(&err);
	assert_int_equal(gzip_inflate_with(z, a.data, a.len, 0, &out, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "checksum"));
	a.data[a.len - 8] ^= 1;
	a.data[a.len - 4] ^= 1;
	assert_int_equal(gzip_inflate_with(z, a.data, a.len, 0, &out, &err), -EBADMSG);
	assert_int_equal(out.len, 14);
	/* 1000:1 is past the plausible-ISIZE guess: the buffer grows. */
	buf_reset(&a);
	buf_reset(&out);
	assert_int_equal(gzip_deflate(zeros, n, 9, &a), 0);
	assert_int_equal(gzip_inflate_with(z, a.data, a.len, n, &out, &err), 0);
	assert_int_equal(out.len, n);
	assert_memory_equal(out.data, zeros, n);
	assert_true(out.cap <= 2 * n + 4096);
	free(zeros);
	buf_free(&a);
	buf_free(&out);
	gzip_inflater_free(z);
}

static void test_error_keeps_first_and_prefixes(void **state)
{
	struct kiln_error err = {0};

	(void)state;
	assert_int_equal(kiln_error_set(&err, EINVAL, "inner %d", 1), -EINVAL);
	assert_int_equal(kiln_error_set(&err, ENOMEM, "outer"), -ENOMEM);
	kiln_error_prefix(&err, "%s: ", "file.pb");
	assert_string_equal(err.msg, "file.pb: inner 1");
	assert_int_equal(err.code, -EINVAL);
	assert_int_equal(kiln_error_set(NULL, 5, "x"), -5);
}

/* A regular file opens (blocking again); a FIFO with no writer, a device
 * and a directory are refused at once, each with a message naming it. */
static void test_fd_open_regular_refuses_fifos_and_devices(void **state)
{
	char dir[] = "/tmp/kiln-test-XXXXXX", fifo[64], file[64];
	struct kiln_error err = {0};
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	fd = open(file, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fd_write_all(fd, "x", 1), 0);
	close(fd);

	fd = fd_open_regular(file, &err);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	assert_int_equal(fd_open_regular(fifo, &err), -EINVAL);
	assert_string_equal(err.msg + strlen(dir), "/fifo: not a regular file");
	kiln_error_clear(&err);
	assert_int_equal(fd_open_regular("/dev/zero", &err), -EINVAL);
	assert_string_equal(err.msg, "/dev/zero: not a regular file");
	assert_int_equal(fd_open_regular(dir, NULL), -EINVAL);
	assert_int_equal(fd_open_regular("/nonexistent/kiln", NULL), -ENOENT);
	unlink(fifo);
	unlink(file);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_grows_and_formats),
	    cmocka_unit_test(test_buf_file_roundtrip),
	    cmocka_unit_test(test_htab_interns_many_keys),
	    cmocka_unit_test(test_htab_hashed_and_reserve),
	    cmocka_unit_test(test_htab_clear_reuses),
	    cmocka_unit_test(test_arena_alignment_and_big_blocks),
	    cmocka_unit_test(test_arena_reset_reuses_largest_chunk),
	    cmocka_unit_test(test_gzip_roundtrip_and_limits),
	    cmocka_unit_test(test_gzip_inflater_edges),
	    cmocka_unit_test(test_error_keeps_first_and_prefixes),
	    cmocka_unit_test(test_fd_open_regular_refuses_fifos_and_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
