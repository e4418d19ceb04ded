/*
 * keysearch.h — sorted keys laid out for cold lookups, one generic search
 * generated for 64-bit keys (kdw_keys64_*: segment and wide line-row
 * addresses) and 32-bit keys (kdw_keys32_*: line rows as offsets from
 * their unit's lowest address). The lowest layer of src/symbols' DWARF
 * reader: it calls nothing, and the line programs (dwarf_line.c) and the
 * CU index (cu_index.c) build and search their tables with it.
 *
 * A lookup in a structure built moments ago but since pushed out of cache
 * (a cold symbolization resolves addresses all over a binary) pays one
 * dependent cache miss per probe of a binary search: 10 or more on a
 * large line table. So the sorted keys get two levels in front of them in
 * the same block: level 1 holds the first key of every cache line of keys
 * (every 8th 64-bit key, every 16th 32-bit one), level 2 the first of
 * every line of level 1. A lookup halves over level 2 (mostly cached: every
 * lookup into the structure reads it), then reads one line of level 1 and
 * one line of keys: two misses where there were ten. Block layout, 64-byte
 * aligned, each part padded with the type's maximum to whole lines:
 *   [level 2][level 1][keys]
 * A level that would fit one line is left out (one line of keys or fewer:
 * no level 1; one line of level 1 or fewer: no level 2): most units are
 * small, and padded lines for them were most of the memory the levels
 * took. The keys' pointer is the structure's; the levels are found from it
 * and the number of keys.
 *
 * For a key type T with PER keys to a 64-byte line, KDW_KEYS_DEFINE(W, T,
 * PER, TMAX) defines:
 *   kdw_keysW_pad(n)      n rounded up to whole lines;
 *   kdw_keysW_level_n(n)  the entries of the level above n (0: none);
 *   kdw_keysW_words(n)    the T words of a block for n keys;
 *   kdw_keysW_at(block, n)  the keys' place in a 64-byte aligned block;
 *   kdw_keysW_finish(keys, n)  fills the padding and both levels once
 *                         keys[0 .. n) (ascending) are set;
 *   kdw_keysW_find(keys, n, x, companion, sz)  the index of the last key
 *                         at or below x, SIZE_MAX when none; as soon as
 *                         the key's line is known, the elements of size sz
 *                         of companion (an array the caller reads next;
 *                         NULL: none) at that line's indexes are
 *                         prefetched, so that both misses overlap;
 *   kdw_keysW_prefetch(keys, n)  starts loading the line of a find's first
 *                         probe (to overlap its miss with other work).
 */
#ifndef KILN_SYMBOLS_KEYSEARCH_H
#define KILN_SYMBOLS_KEYSEARCH_H

#include <stddef.h>
#include <stdint.h>

/* The index of the first of the n ascending values v[] at or above x (n
 * when none): a plain binary search, for arrays without levels. */
static inline size_t kdw_lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0;

	while (n > 0) {
		size_t half = n / 2;

		if (v[lo + half] < x) {
			lo += half + 1;
			n -= half + 1;
		} else {
			n = half;
		}
	}
	return lo;
}

#define KDW_KEYS_DEFINE(W, T, PER, TMAX)                                                           \
	static inline size_t kdw_keys##W##_pad(size_t n)                                           \
	{                                                                                          \
		return (n + (PER)-1) & ~(size_t)((PER)-1);                                         \
	}                                                                                          \
                                                                                                   \
	static inline size_t kdw_keys##W##_level_n(size_t n)                                       \
	{                                                                                          \
		return n > (PER) ? (n + (PER)-1) / (PER) : 0;                                      \
	}                                                                                          \
                                                                                                   \
	/* The last of the PER ascending keys at p (one cache line) at or below x,        \
	 * given p[0] <= x: branch-free probes, all in that line (the steps above         \
	 * PER / 2 fold away). */        \
	static inline size_t kdw_keys##W##_last_le(const T *p, T x)                                \
	{                                                                                          \
		size_t i = 0;                                                                      \
                                                                                                   \
		if ((PER) > 8)                                                                     \
			i = p[i + 8] <= x ? i + 8 : i;                                             \
		i = p[i + 4] <= x ? i + 4 : i;                                                     \
		i = p[i + 2] <= x ? i + 2 : i;                                                     \
		return p[i + 1] <= x ? i + 1 : i;                                                  \
	}                                                                                          \
                                                                                                   \
	static inline size_t kdw_keys##W##_words(size_t n)                                         \
	{                                                                                          \
		size_t n1 = kdw_keys##W##_level_n(n), n2 = kdw_keys##W##_level_n(n1);              \
                                                                                                   \
		return kdw_keys##W##_pad(n2) + kdw_keys##W##_pad(n1) + kdw_keys##W##_pad(n);       \
	}                                                                                          \
                                                                                                   \
	static inline T *kdw_keys##W##_at(T *block, size_t n)                                      \
	{                                                                                          \
		size_t n1 = kdw_keys##W##_level_n(n), n2 = kdw_keys##W##_level_n(n1);              \
                                                                                                   \
		return block + kdw_keys##W##_pad(n2) + kdw_keys##W##_pad(n1);                      \
	}                                                                                          \
                                                                                                   \
	static inline void kdw_keys##W##_finish(T *keys, size_t n)                                 \
	{                                                                                          \
		size_t n1 = kdw_keys##W##_level_n(n), n2 = kdw_keys##W##_level_n(n1);              \
		T *top1 = keys - kdw_keys##W##_pad(n1), *top2 = top1 - kdw_keys##W##_pad(n2);      \
                                                                                                   \
		for (size_t i = n; i < kdw_keys##W##_pad(n); i++)                                  \
			keys[i] = (TMAX);                                                          \
		for (size_t i = 0; i < kdw_keys##W##_pad(n1); i++) /* none without levels */       \
			top1[i] = i < n1 ? keys[(PER)*i] : (TMAX);                                 \
		for (size_t i = 0; i < kdw_keys##W##_pad(n2); i++)                                 \
			top2[i] = i < n2 ? top1[(PER)*i] : (TMAX);                                 \
	}                                                                                          \
                                                                                                   \
	static inline size_t kdw_keys##W##_find(const T *keys, size_t n, T x,                      \
						const void *companion, size_t sz)                  \
	{                                                                                          \
		size_t n1 = kdw_keys##W##_level_n(n), n2 = kdw_keys##W##_level_n(n1);              \
		size_t k = 0, j = 0, i;                                                            \
		const T *top1 = keys - kdw_keys##W##_pad(n1);                                      \
		const T *top2 = top1 - kdw_keys##W##_pad(n2);                                      \
                                                                                                   \
		/* The first entry of the topmost level is keys[0]. */                             \
		if (n == 0 || (n2 ? top2[0] : n1 ? top1[0] : keys[0]) > x)                         \
			return SIZE_MAX;                                                           \
		for (size_t m = n2; m > 1;) { /* branch-free: no mispredicted waits */             \
			size_t half = m / 2;                                                       \
                                                                                                   \
			k = top2[k + half] <= x ? k + half : k;                                    \
			m -= half;                                                                 \
		}                                                                                  \
		/* top1[PER k] and keys[PER j] are at or below x. The padding is     \
		 * only when x is TMAX (and then every real key is too): the clamps. */             \
		if (n1) {                                                                          \
			j = (PER)*k + kdw_keys##W##_last_le(top1 + (PER)*k, x);                    \
			j = j < n1 ? j : n1 - 1;                                                   \
		}                                                                                  \
		if (companion)                                                                     \
			for (size_t b = 0; b < (PER)*sz; b += 64)                                  \
				__builtin_prefetch((const char *)companion + (PER)*j * sz + b);    \
		i = (PER)*j + kdw_keys##W##_last_le(keys + (PER)*j, x);                            \
		return i < n ? i : n - 1;                                                          \
	}                                                                                          \
                                                                                                   \
	static inline void kdw_keys##W##_prefetch(const T *keys, size_t n)                         \
	{                                                                                          \
		size_t n1 = kdw_keys##W##_level_n(n), n2 = kdw_keys##W##_level_n(n1);              \
                                                                                                   \
		__builtin_prefetch(keys - kdw_keys##W##_pad(n1) - kdw_keys##W##_pad(n2) + n2 / 2); \
	}

KDW_KEYS_DEFINE(64, uint64_t, 8, UINT64_MAX)
KDW_KEYS_DEFINE(32, uint32_t, 16, UINT32_MAX)

#endif
