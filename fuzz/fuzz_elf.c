/*
 * fuzz_elf.c — arbitrary bytes as an ELF file: the reader (elfinfo), the
 * upload validation (debuginfo_store_put without a store), extraction and
 * the symbolizer (symbol tables, DWARF, CU index) must not crash or leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/symbols.h"

static void count_answer(void *ctx, size_t i, const struct symbols_location *loc)
{
	(*(size_t *)ctx)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[] = "/tmp/kiln-fuzz-elf-XXXXXX", out[64];
	struct elfinfo info;
	struct symbolizer *s;
	int fd;

	elfinfo_read_mem(data, size, &info, NULL);
	fd = mkstemp(path);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		unlink(path);
		return 0;
	}
	close(fd);
	snprintf(out, sizeof(out), "%s.out", path);
	symbols_extract_debuginfo(path, out, NULL);
	unlink(out);
	s = symbolizer_new(NULL);
	if (s) {
		struct symbols_object obj = {NULL, path};
		struct symbols_location loc;
		uint64_t addrs[] = {0, 0x1000, 0x1139, 0x401000, UINT64_MAX};

		for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++)
			symbolizer_resolve(s, &obj, addrs[i], &loc, NULL);
		if (elfinfo_read_mem(data, size, &info, NULL) == 0)
			for (size_t i = 0; i < info.nloads; i++)
				symbolizer_resolve(s, &obj, info.loads[i].vaddr + 16, &loc, NULL);
		symbolizer_free(s);
	}
	/* The same addresses as one batch, in a fresh symbolizer (for inputs
	 * of odd size one whose batches take a helper thread, and whose
	 * opening batch reads compressed DWARF with the stream reader). */
	s = symbolizer_new(
	    size & 1
		? &(struct symbolizer_config){.batch_threads = 2,
					      .batch_threads_always = true,
					      .stream_test = SYMBOLIZER_STREAM_FRONT + size % 4 / 2}
		: NULL);
	if (s) {
		struct symbols_object obj = {NULL, path};
		uint64_t addrs[5 + ELFINFO_MAX_LOADS] = {0x1139, 0, 0x401000, 0x1000, UINT64_MAX};
		size_t n = 5, answered = 0;

		if (elfinfo_read_mem(data, size, &info, NULL) == 0)
			for (size_t i = 0; i < info.nloads; i++)
				addrs[n++] = info.loads[i].vaddr + 16;
		if (symbolizer_resolve_batch(s, &obj, addrs, n, count_answer, &answered, NULL) ==
			0 &&
		    answered != n)
			abort(); /* every address answered once */
		symbolizer_free(s);
	}
	unlink(path);
	return 0;
}
