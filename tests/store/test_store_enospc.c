/*
 * test_store_enospc.c — a full disk: the store lives on a 2 MiB tmpfs
 * (mounted by the test; it runs as root). Writes with ever new stacks fill
 * it until one fails with -ENOSPC and a message saying so; reads keep
 * returning exactly the acknowledged data; once space is freed writes work
 * again, and after a reopen everything acknowledged is still there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "common/log.h"
#include "store_test_util.h"

struct fx {
	char *mnt;
	char path[4096];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->mnt = make_tmpdir();
	if (mount("tmpfs", f->mnt, "tmpfs", 0, "size=2m")) {
		fprintf(stderr, "mount tmpfs on %s: %s (the test needs root)\n", f->mnt,
			strerror(errno));
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/store", f->mnt);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	umount2(f->mnt, MNT_DETACH);
	rmdir(f->mnt);
	free(f->mnt);
	free(f);
	return 0;
}

static int64_t total_of(struct store *s)
{
	struct store_selector sel = {CPU_TYPE, NULL, 0, 0, INT64_MAX};
	struct pprof_profile *p = merge_to_profile(s, &sel);
	int64_t t = -1;

	if (p) {
		t = pprof_profile_msg(p)->n_sample_type ? profile_total(p, 0) : 0;
		pprof_profile_free(p);
	}
	return t;
}

static void test_full_disk(void **state)
{
	struct fx *f = *state;
	struct store_options o = {.path = f->path, .head_max_rows = 1u << 30};
	struct store *s;
	struct kiln_error err = {0};
	struct label l[2] = {{"__name__", "process_cpu"}, {"node", "a"}};
	char filler[4096];
	int64_t acked = 0;
	int rc = 0, i;

	/* Room to free later. */
	snprintf(filler, sizeof(filler), "%s/filler", f->mnt);
	FILE *fp = fopen(filler, "w");
	assert_non_null(fp);
	for (int k = 0; k < 256; k++)
		fwrite(filler, 1, 1024, fp);
	fclose(fp);

	assert_int_equal(store_open(&o, &s, &err), 0);
	for (i = 0; i < 100000; i++) {
		/* a new variant each time: new locations and stacks */
		struct pprof_profile *p = make_profile(50, i + 1, i * 50);

		kiln_error_clear(&err);
		rc = store_write_profile(s, l, 2, p, 1000 + i, true, &err);
		if (rc == 0)
			acked += profile_total(p, 0);
		pprof_profile_free(p);
		if (rc)
			break;
	}
	assert_int_equal(rc, -ENOSPC);
	assert_non_null(strstr(err.msg, "disk full"));
	fprintf(stderr, "disk full after %d writes: %s\n", i, err.msg);
	/* reads keep working and show exactly the acknowledged writes */
	assert_int_equal(total_of(s), acked);
	struct pprof_profile *p = make_profile(50, 1, 7);
	kiln_error_clear(&err);
	assert_int_equal(store_write_profile(s, l, 2, p, 999999, true, &err), -ENOSPC);
	assert_int_equal(total_of(s), acked);
	/* free space: writes work again */
	unlink(filler);
	kiln_error_clear(&err);
	rc = store_write_profile(s, l, 2, p, 999999, true, &err);
	if (rc)
		fprintf(stderr, "write after freeing space: %s\n", err.msg);
	assert_int_equal(rc, 0);
	acked += profile_total(p, 0);
	assert_int_equal(total_of(s), acked);
	pprof_profile_free(p);
	store_close(s);
	assert_int_equal(store_open(&o, &s, &err), 0);
	assert_int_equal(total_of(s), acked);
	store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
