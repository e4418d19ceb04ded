/*
 * fuzz_ch_answers.c — libFuzzer target for the ClickHouse backend's parsers
 * of ClickHouse's answers (src/store/ch_read.c): the series table's rows,
 * the per-series time ranges and a fetch's stacks, locations, functions and
 * mappings rows (RowBinary). A ClickHouse that returns garbage must give an
 * error, never a crash, a leak or a read out of bounds.
 *
 * Input: byte 0 selects the parser, the rest is split by 4-byte lengths:
 *   0: series rows           1: series rows, then time ranges
 *   2: stacks, locations, functions, mappings (one fetch)
 * The store is an embedded one in a temporary directory with a backend
 * that has no connection attached: only the parsers run.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "store/ch.h"

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

/* The next length-prefixed part of the input (the rest when too short). */
static void next_part(const uint8_t **p, size_t *n, struct buf *out)
{
	size_t len = *n;

	buf_reset(out);
	if (*n >= 4) {
		uint32_t l;

		memcpy(&l, *p, 4);
		*p += 4;
		*n -= 4;
		len = l < *n ? l : *n;
	}
	if (len)
		(void)buf_append(out, *p, len);
	*p += len;
	*n -= len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[64];
	struct store *s = NULL;
	struct store_options o = {0};
	struct kiln_error err = {0};
	struct buf part[4] = {{0}};

	log_set_level(LOG_ERROR);
	if (size < 1)
		return 0;
	snprintf(dir, sizeof(dir), "%s/kiln-fuzz-ch-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		return 0;
	o.path = dir;
	if (store_open(&o, &s, &err))
		goto out;
	if (!(s->ch = ch_store_new()))
		goto out;
	uint8_t mode = data[0] % 3;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	for (int i = 0; i < 4; i++)
		next_part(&p, &n, &part[i]);
	memset(&err, 0, sizeof(err));
	if (mode == 0 || mode == 1)
		(void)ch_apply_series(s, part[0].data, part[0].len, &err);
	if (mode == 1) {
		memset(&err, 0, sizeof(err));
		(void)ch_apply_time_ranges(s, part[1].data, part[1].len, &err);
	}
	if (mode == 2)
		(void)ch_intern_objects(s, &part[0], &part[1], &part[2], &part[3], &err);
out:
	store_close(s); /* frees s->ch too */
	for (int i = 0; i < 4; i++)
		buf_free(&part[i]);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return 0;
}
