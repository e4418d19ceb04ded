/*
 * table.c — the row array of one file's unwind table, and
 * unwind_table_build, which decides which of the file's sources give the
 * rows.
 *
 * Sources are pushed in order of trust (Go's own table first: the Go
 * linker's .debug_frame, when present, says the same with more bytes;
 * then .eh_frame, which is what the C runtime itself unwinds with for
 * exceptions, so it is right wherever it exists; .debug_frame last). A
 * stable sort keeps that order among rows of one pc, and
 * unwind_table_finish keeps the first. A source's NONE row (the end of its
 * last function) must not hide a later source's rows, so a NONE row loses
 * to any other row at the same pc.
 */
#include "unwind/unwind.h"

#include <errno.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void unwind_table_init(struct unwind_table *t)
{
	memset(t, 0, sizeof(*t));
}

void unwind_table_free(struct unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

int unwind_table_push(struct unwind_table *t, uint32_t pc, uint32_t rule)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct unwind_row *rows = realloc(t->rows, cap * sizeof(*rows));

		if (!rows)
			return -ENOMEM;
		t->rows = rows;
		t->cap = cap;
	}
	t->rows[t->n].pc = pc;
	t->rows[t->n].rule = rule;
	t->n++;
	return 0;
}

/* Bottom-up merge sort on pc: stable (push order decides among equal
 * pcs), O(n log n) on the already mostly sorted input a CFI section gives. */
static int sort_rows(struct unwind_table *t)
{
	struct unwind_row *tmp, *src = t->rows, *dst;

	if (t->n < 2)
		return 0;
	tmp = malloc(t->n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	dst = tmp;
	for (size_t width = 1; width < t->n; width *= 2) {
		for (size_t lo = 0; lo < t->n; lo += 2 * width) {
			size_t mid = lo + width < t->n ? lo + width : t->n;
			size_t hi = lo + 2 * width < t->n ? lo + 2 * width : t->n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = src[j].pc < src[i].pc ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct unwind_row *swap = src;
		src = dst;
		dst = swap;
	}
	if (src != t->rows)
		memcpy(t->rows, src, t->n * sizeof(*src));
	free(tmp);
	return 0;
}

void unwind_table_finish(struct unwind_table *t)
{
	size_t out = 0;

	if (sort_rows(t) != 0) {
		/* Out of memory for the scratch: an insertion sort is slow but
		 * needs none, and keeps the same order. */
		for (size_t i = 1; i < t->n; i++) {
			struct unwind_row r = t->rows[i];
			size_t j = i;

			while (j > 0 && t->rows[j - 1].pc > r.pc) {
				t->rows[j] = t->rows[j - 1];
				j--;
			}
			t->rows[j] = r;
		}
	}
	for (size_t i = 0; i < t->n; i++) {
		struct unwind_row r = t->rows[i];

		if (out > 0 && t->rows[out - 1].pc == r.pc) {
			/* Same pc: the first source wins, except over a NONE. */
			if (UNWIND_RULE_KIND(t->rows[out - 1].rule) == UNWIND_NONE)
				t->rows[out - 1] = r;
			continue;
		}
		if (out > 0 && t->rows[out - 1].rule == r.rule)
			continue;
		t->rows[out++] = r;
	}
	/* A leading NONE row says nothing. */
	if (out > 0 && UNWIND_RULE_KIND(t->rows[0].rule) == UNWIND_NONE) {
		memmove(t->rows, t->rows + 1, (out - 1) * sizeof(*t->rows));
		out--;
	}
	t->n = out;
}

const struct unwind_row *unwind_table_find(const struct unwind_table *t, uint32_t pc)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->rows[lo - 1] : NULL;
}
