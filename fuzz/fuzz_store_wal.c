/*
 * fuzz_store_wal.c — libFuzzer target for the store's recovery decoders:
 * the WAL segment, metastore log and block file readers. The input becomes
 * the files of a store directory, which is then opened (replay, block
 * index parsing) and queried (block frames decoded). It must never crash,
 * leak or read out of bounds, whatever the bytes.
 *
 * Input: byte 0 selects the layout, the rest is split by a 4-byte length:
 *   0: WAL segment only      1: meta.log only      2: one block file
 *   3: meta.log + WAL        4: meta.log + block
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "pprof/pprof.h"
#include "store/store.h"

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static void put_file(const char *dir, const char *name, const uint8_t *d, size_t n)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	if (n && write(fd, d, n) < 0)
		(void)0;
	close(fd);
}

static void on_type(void *ctx, const char *t)
{
	(void)ctx, (void)t;
}

static void on_range(void *ctx, const struct label *l, size_t nl, const struct store_point *p,
		     size_t n)
{
	(void)ctx, (void)l, (void)nl, (void)p, (void)n;
}

static void collect_type(void *ctx, const char *t)
{
	char **out = ctx;

	if (!*out)
		*out = strdup(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[64];
	char sub[4200];
	const uint8_t *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	struct store *s = NULL;
	struct store_options o = {0};
	char *type = NULL;

	log_set_level(LOG_ERROR);
	if (size < 1)
		return 0;
	/* tmpfs when available: fsync is free there */
	snprintf(dir, sizeof(dir), "%s/kiln-fuzz-store-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		return 0;
	uint8_t mode = data[0] % 5;
	data++, size--;
	if (mode >= 3 && size >= 4) {
		uint32_t la = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
			      (uint32_t)data[3] << 24;
		data += 4, size -= 4;
		na = la < size ? la : size;
		a = data;
		b = data + na;
		nb = size - na;
	} else {
		b = data;
		nb = size;
	}
	snprintf(sub, sizeof(sub), "%s/wal", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/blocks", dir);
	mkdir(sub, 0755);
	switch (mode) {
	case 0:
		put_file(dir, "wal/0000000000000001.log", b, nb);
		break;
	case 1:
		put_file(dir, "meta.log", b, nb);
		break;
	case 2:
		put_file(dir, "blocks/b-0000000000000001.kb", b, nb);
		break;
	case 3:
		put_file(dir, "meta.log", a, na);
		put_file(dir, "wal/0000000000000001.log", b, nb);
		break;
	case 4:
		put_file(dir, "meta.log", a, na);
		put_file(dir, "blocks/b-0000000000000001.kb", b, nb);
		break;
	}
	o.path = dir;
	if (store_open(&o, &s, NULL) == 0) {
		struct store_selector sel = {NULL, NULL, 0, INT64_MIN, INT64_MAX};

		store_profile_types(s, INT64_MIN, INT64_MAX, collect_type, &type, NULL);
		store_profile_types(s, INT64_MIN, INT64_MAX, on_type, NULL, NULL);
		sel.profile_type = type;
		store_query_range(s, &sel, on_range, NULL, NULL);
		if (type) {
			struct pprof_builder *pb = pprof_builder_new();

			store_merge(s, &sel, pb, NULL);
			sel.start_ms = 0; /* partial blocks: row decoding */
			sel.end_ms = 1;
			store_merge(s, &sel, pb, NULL);
			pprof_builder_free(pb);
		}
		free(type);
		store_close(s);
	}
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
