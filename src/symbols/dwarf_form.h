/*
 * dwarf_form.h — the bottom layer of src/symbols' DWARF reader: the debug
 * sections it reads, a bounds-checked cursor over their bytes (fixed-size
 * values, LEB128, strings) and attribute forms (the bytes a form takes,
 * skipping a value of any form it knows). It calls nothing above it: the
 * DIE walk (dwarf_info.c) and the line programs (dwarf_line.c) read
 * through it.
 *
 * A read past the end of its bytes returns 0 and sets the cursor's bad
 * flag, which the caller checks before trusting what it read; strings
 * returned point into the section bytes.
 */
#ifndef KILN_SYMBOLS_DWARF_FORM_H
#define KILN_SYMBOLS_DWARF_FORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum kdw_sec {
	KDW_INFO,
	KDW_ABBREV,
	KDW_LINE,
	KDW_LINE_STR,
	KDW_STR,
	KDW_STR_OFFSETS,
	KDW_ADDR,
	KDW_RANGES,
	KDW_RNGLISTS,
	KDW_ARANGES,
	KDW_NSECS
};

/* The section bytes (already inflated); absent sections have size 0. */
struct kdw_sections {
	const uint8_t *p[KDW_NSECS];
	size_t size[KDW_NSECS];
};

extern const char *const kdw_sec_names[KDW_NSECS]; /* ".debug_info", ... */

/* A cursor over [p, end): reads past the end return 0 and set bad, which
 * the caller checks before trusting what it read. */
struct kdw_cur {
	const uint8_t *p, *end;
	bool bad;
};

/* Grows the scratch array *pp of *cap elements of size sz to hold at least
 * n, doubling from first; with zero, the new elements are zeroed. False
 * when out of memory (the array is left as it was). */
static inline bool kdw_grow(void *pp, size_t *cap, size_t n, size_t sz, size_t first, bool zero)
{
	void **p = pp;
	size_t c = *cap ? *cap : first;
	void *np;

	if (n <= *cap)
		return true;
	while (c < n)
		c *= 2;
	np = realloc(*p, c * sz);
	if (!np)
		return false;
	if (zero)
		memset((char *)np + *cap * sz, 0, (c - *cap) * sz);
	*p = np;
	*cap = c;
	return true;
}

static inline bool kdw_need(struct kdw_cur *c, size_t n)
{
	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		c->p = c->end;
		return false;
	}
	return true;
}

static inline uint64_t kdw_fixed(struct kdw_cur *c, size_t n)
{
	uint64_t v = 0;

	if (!kdw_need(c, n))
		return 0;
	switch (n) { /* little-endian (x86-64, arm64) */
	case 2: {
		uint16_t x;

		memcpy(&x, c->p, 2);
		v = x;
		break;
	}
	case 4: {
		uint32_t x;

		memcpy(&x, c->p, 4);
		v = x;
		break;
	}
	case 8:
		memcpy(&v, c->p, 8);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			v |= (uint64_t)c->p[i] << (8 * i);
	}
	c->p += n;
	return v;
}

static inline uint8_t kdw_u8(struct kdw_cur *c)
{
	return kdw_need(c, 1) ? *c->p++ : 0;
}

static inline uint64_t kdw_uleb(struct kdw_cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;

	if (c->p < c->end && *c->p < 0x80) /* most values: one byte */
		return *c->p++;
	while (c->p < c->end) {
		uint8_t b = *c->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	c->bad = true;
	return 0;
}

static inline int64_t kdw_sleb(struct kdw_cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (c->p < c->end) {
		uint8_t b = *c->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << shift;
			return (int64_t)v;
		}
	}
	c->bad = true;
	return 0;
}

static inline void kdw_skip(struct kdw_cur *c, uint64_t n)
{
	if ((uint64_t)(c->end - c->p) < n) {
		c->bad = true;
		c->p = c->end;
		return;
	}
	c->p += n;
}

/* A NUL-terminated string at the cursor (NULL and bad if unterminated). */
const char *kdw_cstr(struct kdw_cur *c);

/* The string at offset off of section sec, NULL if off is out of range or
 * the string is not terminated inside the section. */
const char *kdw_str_at(const struct kdw_sections *s, enum kdw_sec sec, uint64_t off);

/* Skips one attribute value of form (DW_FORM_indirect included). Returns
 * false for a form it does not know (c->bad is then set too). */
bool kdw_form_skip(struct kdw_cur *c, uint64_t form, uint8_t addr_size, uint16_t version);

/* The bytes a value of form always takes, or -1 when it varies. */
int kdw_form_fixed_size(uint64_t form, uint8_t addr_size, uint16_t version);

#endif
