/*
 * batch.h — resolving many addresses of one object at once (internal to
 * src/symbols): batch.c reads a cold object CU by CU in address order, on
 * more threads when large; stream_batch.c is the batch that opens a file,
 * reading units while .debug_info inflates. Above resolving one address
 * (resolve.h), whose answers (the serial reference path) a batch's equal;
 * below the public API (symbolizer.c). State diagrams: the top comments of
 * batch.c and stream_batch.c.
 */
#ifndef KILN_SYMBOLS_BATCH_H
#define KILN_SYMBOLS_BATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/cu_index.h"
#include "symbols/symbols.h"

struct symbolizer;
struct symfile;
struct batch_helper;
struct worker;

struct bmiss {
	uint64_t addr;
	uint32_t i;    /* the address's index in the batch */
	uint32_t next; /* the next miss of the same CU, in address order */
};

/* What the work found for one miss: its node in its CU's index (-1: none)
 * and its line row's file name (NULL: no row; no_file: a row whose file
 * has no name) and line. It takes the place of a struct bmiss in the
 * radix sort's spare buffer: fresh memory for it was a tenth of a cold
 * pass's page faults on libc. */
struct bfound {
	const char *file;
	int32_t node;
	int32_t line;
};
_Static_assert(sizeof(struct bfound) <= sizeof(struct bmiss) &&
		   _Alignof(struct bfound) <= _Alignof(struct bmiss),
	       "a struct bfound fits in the place of a struct bmiss");

/* One batch call, shared by its threads. The work (lines, walk, index per
 * listed CU) is spread over them, CU by CU from a counter; the answers are
 * made and emitted on the calling thread alone (the result cache, the
 * symfile's names and the caller's emit are not for threads): of its own
 * CUs as it goes, of the helpers' once they are done. */
struct batch {
	struct symbolizer *s;
	struct symfile *f;
	symbols_emit_fn emit;
	void *ctx;
	uint8_t *emitted; /* per address: set once emitted (a stream batch's), or NULL */
	/* Set by the calling thread before it sets listed: */
	const struct bmiss *m; /* the misses, sorted */
	struct kdw_cu **cus;   /* the listed CUs (the symfile reader's units) */
	const uint32_t *head;  /* by unit ordinal: its first miss, in address order */
	size_t nlisted;
	size_t longest;	    /* the most misses of one listed CU */
	struct bfound *res; /* per miss (by its index in m) */
	/* Helpers start before the misses are listed and wait for them. */
	atomic_bool listed;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_size_t next;    /* the next listed CU to take */
	struct cu_index **idx; /* per listed CU; NULL: go address by address */
	bool *answered;	       /* per listed CU (the calling thread's) */
};

/* One thread's share: its reader, arena, names and scratch (the symfile's,
 * or a helper's), and arrays for the addresses of one CU. */
struct batch_worker {
	struct batch *bt;
	struct batch_helper *helper; /* NULL: the calling thread */
	struct cu_reader r;
	uint64_t *want; /* one CU's addresses, ascending, each once */
	int32_t *node, *depth;
	struct kdw_row *rows; /* each one's line row, when found */
	bool *found;
	size_t reader_cus;
	struct worker *thread; /* a helper's, while it works */
};

/* The batch a file is opened for (symfile_get): its addresses, where its
 * answers go, and which of them the opening answered already. */
struct opening {
	const uint64_t *addrs;
	size_t n;
	symbols_emit_fn emit;
	void *ctx;
	uint8_t *emitted; /* out: per address, 1 once emitted (NULL: none; the caller frees) */
};

/* Sorts m[0..n) by address (LSD radix over the bytes in which addresses
 * differ, stable) with tmp[0..n); returns the sorted array (m or tmp). */
struct bmiss *batch_sort_misses(struct bmiss *m, struct bmiss *tmp, size_t n);

/* Whether a batch of n addresses not cached yet is for more than one
 * thread (given an object with BATCH_THREAD_INFO bytes of DIEs). */
bool batch_wants_helpers(const struct symbolizer *s, size_t n);

/* w's arrays for the misses of one CU (at most bt->longest); false when
 * out of memory. */
bool batch_worker_arrays(struct batch_worker *w);
void batch_worker_free(struct batch_worker *w);

/* The work for the misses of one listed CU of w's reader (the list from
 * m[first], ascending): its line program run once against all of them,
 * its DIE tree walked once for them, the nodes found kept as an index in
 * w's arena. NULL (nothing found) when the reader cannot read the CU. */
struct cu_index *batch_cu(struct batch_worker *w, struct kdw_cu *kcu, uint32_t first);

/* Answers (and caches) the misses of the list from m[first], which the
 * work on their CU found in idx; emits them when bt has an emit. On the
 * calling thread only. */
void batch_answer_found(struct batch *bt, uint32_t first, const struct cu_index *idx);

/* symbolizer_resolve_batch for the open symfile f; emitted (or NULL): the
 * addresses answered already (by the stream batch that opened f). */
int symfile_resolve_batch(struct symbolizer *s, struct symfile *f, const uint64_t *addrs, size_t n,
			  symbols_emit_fn emit, void *ctx, const uint8_t *emitted);

/* Opens path for s, for the batch op (NULL: for one address), which it
 * starts answering while .debug_info inflates (stream_batch.c). With
 * by_build_id_only, a final symbolic link is not followed and the file
 * must have build ID want_id (when not NULL/""). */
struct symfile *symfile_open(struct symbolizer *s, const char *path, const char *want_id,
			     struct opening *op, struct kiln_error *e);

#endif
