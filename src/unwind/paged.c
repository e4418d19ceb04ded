/*
 * paged.c — cutting a table for the kernel's paged row pool, and finding
 * a pc's row in it (unwind_row.h, "paged storage").
 *
 * Page p's rows are [lo_p, hi_p): lo_p the last row starting at or before
 * the page's first byte (the row in force there), hi_p the first row
 * starting on a later page. Consecutive pages share a row (hi_p - 1 ==
 * lo_{p+1} when no row starts exactly at the page boundary), so within a
 * segment the rows are stored once; a segment that starts mid-table begins
 * with its first page's row in force, which the segment before also holds.
 * The search (here and in the BPF walk) is the plain "last row whose pc
 * <= target" over one page's range.
 */
#include "unwind/unwind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Page p's row range, for p from the table's first page on, computed
 * incrementally: the caller advances p by one each time. */
struct page_cursor {
	const struct unwind_table *t;
	size_t lo, hi; /* of the current page */
};

static void cursor_at(struct page_cursor *c, uint64_t page)
{
	uint64_t start = page << UNWIND_PAGE_SHIFT, end = (page + 1) << UNWIND_PAGE_SHIFT;
	const struct unwind_row *r = c->t->rows;

	while (c->lo + 1 < c->t->n && r[c->lo + 1].pc <= start)
		c->lo++;
	if (c->hi < c->lo)
		c->hi = c->lo;
	while (c->hi < c->t->n && r[c->hi].pc < end)
		c->hi++;
}

void unwind_layout_free(struct unwind_layout *l)
{
	if (!l)
		return;
	free(l->segs);
	memset(l, 0, sizeof(*l));
}

int unwind_layout_plan(const struct unwind_table *t, uint32_t max_rows, struct unwind_layout *l)
{
	struct page_cursor c = {.t = t};
	size_t cap = 0;
	uint64_t last;

	memset(l, 0, sizeof(*l));
	if (t->n == 0 || max_rows < UNWIND_PAGE_ROWS_MAX)
		return -EINVAL;
	l->page0 = t->rows[0].pc >> UNWIND_PAGE_SHIFT;
	last = t->rows[t->n - 1].pc >> UNWIND_PAGE_SHIFT;
	if (last - l->page0 + 1 > max_rows)
		return -E2BIG; /* the page index would not fit one chunk */
	l->npages = (uint32_t)(last - l->page0 + 1);
	for (uint32_t p = 0; p < l->npages; p++) {
		struct unwind_segment *s = l->nsegs ? &l->segs[l->nsegs - 1] : NULL;

		cursor_at(&c, (uint64_t)l->page0 + p);
		if (s && c.hi - s->row <= max_rows) {
			s->nrows = (uint32_t)(c.hi - s->row);
			s->npages++;
			continue;
		}
		if (l->nsegs == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct unwind_segment *v = realloc(l->segs, ncap * sizeof(*v));

			if (!v) {
				unwind_layout_free(l);
				return -ENOMEM;
			}
			l->segs = v;
			cap = ncap;
		}
		l->segs[l->nsegs++] = (struct unwind_segment){.row = (uint32_t)c.lo,
							      .nrows = (uint32_t)(c.hi - c.lo),
							      .page = p,
							      .npages = 1};
	}
	return 0;
}

void unwind_layout_pages(const struct unwind_table *t, const struct unwind_layout *l,
			 const uint32_t *seg_slot, struct unwind_page *pages)
{
	struct page_cursor c = {.t = t};

	for (size_t s = 0; s < l->nsegs; s++) {
		const struct unwind_segment *seg = &l->segs[s];

		for (uint32_t p = seg->page; p < seg->page + seg->npages; p++) {
			cursor_at(&c, (uint64_t)l->page0 + p);
			pages[p].first = seg_slot[s] + (uint32_t)(c.lo - seg->row);
			pages[p].n = (uint32_t)(c.hi - c.lo);
		}
	}
}

int64_t unwind_paged_find(const struct unwind_paged *pt, uint32_t pc)
{
	uint32_t page = pc >> UNWIND_PAGE_SHIFT, lo, hi, first;
	const struct unwind_row *r;
	const struct unwind_page *pg;

	if (page < pt->page0 || page - pt->page0 >= pt->npages)
		return -1;
	pg = (const struct unwind_page *)pt->slot(pt->ctx, pt->pages + (page - pt->page0));
	if (!pg || pg->n == 0 || pg->n > UNWIND_PAGE_ROWS_MAX)
		return -1;
	first = lo = pg->first;
	hi = pg->first + pg->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		r = pt->slot(pt->ctx, mid);
		if (!r)
			return -1;
		if (r->pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return -1;
	r = pt->slot(pt->ctx, lo - 1);
	return r ? (int64_t)r->rule : -1;
}
