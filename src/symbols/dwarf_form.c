/*
 * dwarf_form.c — strings and attribute forms of src/symbols' DWARF reader
 * (see dwarf_form.h): the bottom layer, which calls nothing above it.
 */
#include <dwarf.h>
#include <string.h>

#include "symbols/dwarf_form.h"

const char *const kdw_sec_names[KDW_NSECS] = {
    ".debug_info",	  ".debug_abbrev", ".debug_line",   ".debug_line_str", ".debug_str",
    ".debug_str_offsets", ".debug_addr",   ".debug_ranges", ".debug_rnglists", ".debug_aranges",
};

const char *kdw_cstr(struct kdw_cur *c)
{
	const uint8_t *z = c->p < c->end ? memchr(c->p, 0, (size_t)(c->end - c->p)) : NULL;
	const char *s = (const char *)c->p;

	if (!z) {
		c->bad = true;
		c->p = c->end;
		return NULL;
	}
	c->p = z + 1;
	return s;
}

const char *kdw_str_at(const struct kdw_sections *s, enum kdw_sec sec, uint64_t off)
{
	if (off >= s->size[sec])
		return NULL;
	/* A section ending in NUL terminates every string in it (the usual
	 * case: no scan). */
	if (s->p[sec][s->size[sec] - 1] != 0 && !memchr(s->p[sec] + off, 0, s->size[sec] - off))
		return NULL;
	return (const char *)s->p[sec] + off;
}

int kdw_form_fixed_size(uint64_t form, uint8_t addr_size, uint16_t version)
{
	switch (form) {
	case DW_FORM_addr:
		return addr_size;
	case DW_FORM_flag_present:
	case DW_FORM_implicit_const:
		return 0;
	case DW_FORM_data1:
	case DW_FORM_ref1:
	case DW_FORM_flag:
	case DW_FORM_strx1:
	case DW_FORM_addrx1:
		return 1;
	case DW_FORM_data2:
	case DW_FORM_ref2:
	case DW_FORM_strx2:
	case DW_FORM_addrx2:
		return 2;
	case DW_FORM_strx3:
	case DW_FORM_addrx3:
		return 3;
	case DW_FORM_data4:
	case DW_FORM_ref4:
	case DW_FORM_strx4:
	case DW_FORM_addrx4:
	case DW_FORM_ref_sup4:
	case DW_FORM_strp:
	case DW_FORM_line_strp:
	case DW_FORM_sec_offset:
	case DW_FORM_strp_sup:
	case DW_FORM_GNU_ref_alt:
	case DW_FORM_GNU_strp_alt:
		return 4; /* 32-bit DWARF only */
	case DW_FORM_ref_addr:
		return version == 2 ? addr_size : 4;
	case DW_FORM_data8:
	case DW_FORM_ref8:
	case DW_FORM_ref_sig8:
	case DW_FORM_ref_sup8:
		return 8;
	case DW_FORM_data16:
		return 16;
	default:
		return -1;
	}
}

bool kdw_form_skip(struct kdw_cur *c, uint64_t form, uint8_t addr_size, uint16_t version)
{
	int n = kdw_form_fixed_size(form, addr_size, version);

	if (n >= 0) {
		kdw_skip(c, (uint64_t)n);
		return !c->bad;
	}
	switch (form) {
	case DW_FORM_udata:
	case DW_FORM_ref_udata:
	case DW_FORM_strx:
	case DW_FORM_addrx:
	case DW_FORM_loclistx:
	case DW_FORM_rnglistx:
	case DW_FORM_GNU_addr_index:
	case DW_FORM_GNU_str_index:
		kdw_uleb(c);
		break;
	case DW_FORM_sdata:
		kdw_sleb(c);
		break;
	case DW_FORM_string:
		kdw_cstr(c);
		break;
	case DW_FORM_block1:
		kdw_skip(c, kdw_u8(c));
		break;
	case DW_FORM_block2:
		kdw_skip(c, kdw_fixed(c, 2));
		break;
	case DW_FORM_block4:
		kdw_skip(c, kdw_fixed(c, 4));
		break;
	case DW_FORM_block:
	case DW_FORM_exprloc:
		kdw_skip(c, kdw_uleb(c));
		break;
	case DW_FORM_indirect: {
		uint64_t f = kdw_uleb(c);

		if (c->bad || f == DW_FORM_indirect || f == DW_FORM_implicit_const)
			break;
		return kdw_form_skip(c, f, addr_size, version);
	}
	default:
		c->bad = true;
		return false;
	}
	return !c->bad;
}
