/*
 * python_parse.c — the interpreter facts the Python walk needs, as pure
 * functions over bytes (no agent state, no I/O), so that they link alone
 * into their fuzz target.
 *
 * The offsets of 3.9-3.12 were read from each version's own headers
 * (Include/cpython/pystate.h, Include/internal/pycore_runtime.h,
 * pycore_interp.h, pycore_frame.h, cpython/frameobject.h, cpython/code.h,
 * cpython/unicodeobject.h) with offsetof on x86-64; they hold for every
 * patch release of a minor version (the fields read are ABI within one).
 * 3.13 publishes them itself in _Py_DebugOffsets at the start of
 * _PyRuntime, which wins over the table when it checks out.
 *
 * Line tables (what CPython's Objects/lnotab_notes.txt and
 * Objects/locations.md describe):
 *   3.9   co_lnotab: (byte delta u8, line delta s8) pairs from byte 0 and
 *         co_firstlineno; an instruction's line is that of the last pair
 *         whose start is at or before it
 *   3.10  co_linetable: (byte length u8, line delta s8) pairs, each a
 *         range; a line delta of -128 means the range has no line
 *   3.11+ the location table: entries of one header byte (bit 7 set,
 *         bits 3-6 a kind, bits 0-2 the length in code units less one)
 *         and kind-dependent varints (6-bit little-endian chunks, bit 6
 *         set when another follows); kinds 0-9 keep the line (one column
 *         byte), 10-12 add kind - 10 (two column bytes), 13 a signed
 *         varint delta, 14 a signed varint delta and three varints of
 *         end line and columns, 15 no location
 */
#include "agent/python.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NO_FIELD 0xffff

/* Fields 3.9 and 3.10 share; the rest per version below. */
#define PY39_COMMON                                                                                \
	.runtime_interp_head = 32, .interp_tstate_head = 8, .tstate_next = 8,                      \
	.tstate_thread_id = 176, .tstate_native_thread_id = NO_FIELD, .tstate_frame = 24,          \
	.cframe_current_frame = NO_FIELD, .frame_back = 24, .frame_code = 32,                      \
	.frame_owner = NO_FIELD, .code_adaptive = NO_FIELD, .code_name = 112,                      \
	.code_qualname = NO_FIELD, .code_filename = 104, .code_firstlineno = 40,                   \
	.code_linetable = 120, .unicode_state = 32, .unicode_length = 16,                          \
	.unicode_ascii_size = 48, .unicode_compact_size = 72, .bytes_size = 16, .bytes_sval = 32

static const struct python_version_table {
	uint16_t version;
	uint8_t layout;
	struct python_offsets off;
} tables[] = {
    {0x0309, PYTHON_LAYOUT_FRAME_OBJECT, {PY39_COMMON, .frame_instr = 104}},
    {0x030a, PYTHON_LAYOUT_FRAME_OBJECT, {PY39_COMMON, .frame_instr = 96}},
    {0x030b,
     PYTHON_LAYOUT_IS_ENTRY,
     {.runtime_interp_head = 40,
      .interp_tstate_head = 16,
      .tstate_next = 8,
      .tstate_thread_id = 152,
      .tstate_native_thread_id = 160,
      .tstate_frame = 56, /* cframe */
      .cframe_current_frame = 8,
      .frame_back = 48,
      .frame_code = 32,
      .frame_instr = 56, /* prev_instr */
      .frame_owner = 68, /* is_entry */
      .code_adaptive = 184,
      .code_name = 120,
      .code_qualname = 128,
      .code_filename = 112,
      .code_firstlineno = 72,
      .code_linetable = 136,
      .unicode_state = 32,
      .unicode_length = 16,
      .unicode_ascii_size = 48,
      .unicode_compact_size = 72,
      .bytes_size = 16,
      .bytes_sval = 32}},
    {0x030c,
     PYTHON_LAYOUT_CSTACK_OWNER,
     {.runtime_interp_head = 40,
      .interp_tstate_head = 72,
      .tstate_next = 8,
      .tstate_thread_id = 136,
      .tstate_native_thread_id = 144,
      .tstate_frame = 56, /* cframe */
      .cframe_current_frame = 0,
      .frame_back = 8,
      .frame_code = 0,
      .frame_instr = 56, /* prev_instr */
      .frame_owner = 70,
      .code_adaptive = 192,
      .code_name = 120,
      .code_qualname = 128,
      .code_filename = 112,
      .code_firstlineno = 68,
      .code_linetable = 136,
      .unicode_state = 32,
      .unicode_length = 16,
      .unicode_ascii_size = 40,
      .unicode_compact_size = 56,
      .bytes_size = 16,
      .bytes_sval = 32}},
    {0x030d,
     PYTHON_LAYOUT_CSTACK_OWNER_DIRECT,
     {.runtime_interp_head = 632,
      .interp_tstate_head = 7344,
      .tstate_next = 8,
      .tstate_thread_id = 152,
      .tstate_native_thread_id = 160,
      .tstate_frame = 72, /* current_frame */
      .cframe_current_frame = NO_FIELD,
      .frame_back = 8,
      .frame_code = 0,	 /* f_executable */
      .frame_instr = 56, /* instr_ptr */
      .frame_owner = 70,
      .code_adaptive = 200,
      .code_name = 120,
      .code_qualname = 128,
      .code_filename = 112,
      .code_firstlineno = 68,
      .code_linetable = 136,
      .unicode_state = 32,
      .unicode_length = 16,
      .unicode_ascii_size = 40,
      .unicode_compact_size = 56,
      .bytes_size = 16,
      .bytes_sval = 32}},
};

bool python_offsets_for(uint16_t version, struct python_offsets *out, uint8_t *layout)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (tables[i].version == version) {
			*out = tables[i].off;
			*layout = tables[i].layout;
			return true;
		}
	}
	return false;
}

uint16_t python_version_from_name(const char *path)
{
	const char *base = strrchr(path, '/'), *p;
	unsigned minor = 0;
	int digits = 0;

	base = base ? base + 1 : path;
	if (strncmp(base, "libpython3.", 11) == 0)
		p = base + 11;
	else if (strncmp(base, "python3.", 8) == 0)
		p = base + 8;
	else
		return 0;
	while (*p >= '0' && *p <= '9' && digits < 3) {
		minor = minor * 10 + (unsigned)(*p++ - '0');
		digits++;
	}
	if (!digits || (*p >= '0' && *p <= '9'))
		return 0;
	/* what may follow: ".so...", a build flag ("d", "m", "t"), or nothing */
	if (*p && *p != '.' && *p != 'd' && *p != 'm' && *p != 't')
		return 0;
	return (uint16_t)(0x0300 | minor);
}

/* ---- _Py_DebugOffsets (3.13) ------------------------------------------------ */

/* Where 3.13.0's _Py_DebugOffsets keeps each offset the walk uses (its
 * Include/internal/pycore_runtime.h: every member a uint64_t). */
enum {
	DBG_VERSION = 8,
	DBG_INTERPRETERS_HEAD = 40,
	DBG_THREADS_HEAD = 72,
	DBG_TS_NEXT = 168,
	DBG_TS_CURRENT_FRAME = 184,
	DBG_TS_THREAD_ID = 192,
	DBG_TS_NATIVE_THREAD_ID = 200,
	DBG_FR_PREVIOUS = 232,
	DBG_FR_EXECUTABLE = 240,
	DBG_FR_INSTR_PTR = 248,
	DBG_FR_OWNER = 264,
	DBG_CO_FILENAME = 280,
	DBG_CO_NAME = 288,
	DBG_CO_QUALNAME = 296,
	DBG_CO_LINETABLE = 304,
	DBG_CO_FIRSTLINENO = 312,
	DBG_CO_ADAPTIVE = 344,
	DBG_BYTES_SIZE = 520,
	DBG_BYTES_SVAL = 528,
	DBG_UNI_STATE = 544,
	DBG_UNI_LENGTH = 552,
	DBG_UNI_ASCII_SIZE = 560,
};

static uint64_t le64(const uint8_t *b)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

int python_debug_offsets_parse(const uint8_t *b, size_t len, struct python_offsets *out,
			       uint32_t *hexversion, char *err, size_t errsz)
{
	static const struct {
		uint16_t at;
		size_t field; /* offsetof in struct python_offsets */
		uint32_t max; /* the walk reads frames through a bounded buffer */
		const char *name;
	} fields[] = {
#define F(at, f, max) {at, offsetof(struct python_offsets, f), max, #f}
	    F(DBG_INTERPRETERS_HEAD, runtime_interp_head, 0xfff0),
	    F(DBG_THREADS_HEAD, interp_tstate_head, 0xfff0),
	    F(DBG_TS_NEXT, tstate_next, 0xfff0),
	    F(DBG_TS_CURRENT_FRAME, tstate_frame, 0xfff0),
	    F(DBG_TS_THREAD_ID, tstate_thread_id, 0xfff0),
	    F(DBG_TS_NATIVE_THREAD_ID, tstate_native_thread_id, 0xfff0),
	    F(DBG_FR_PREVIOUS, frame_back, 104),
	    F(DBG_FR_EXECUTABLE, frame_code, 104),
	    F(DBG_FR_INSTR_PTR, frame_instr, 104),
	    F(DBG_FR_OWNER, frame_owner, 104),
	    F(DBG_CO_FILENAME, code_filename, 0xfff0),
	    F(DBG_CO_NAME, code_name, 0xfff0),
	    F(DBG_CO_QUALNAME, code_qualname, 0xfff0),
	    F(DBG_CO_LINETABLE, code_linetable, 0xfff0),
	    F(DBG_CO_FIRSTLINENO, code_firstlineno, 0xfff0),
	    F(DBG_CO_ADAPTIVE, code_adaptive, 0xfff0),
	    F(DBG_BYTES_SIZE, bytes_size, 0xfff0),
	    F(DBG_BYTES_SVAL, bytes_sval, 0xfff0),
	    F(DBG_UNI_STATE, unicode_state, 0xfff0),
	    F(DBG_UNI_LENGTH, unicode_length, 0xfff0),
	    F(DBG_UNI_ASCII_SIZE, unicode_ascii_size, 0xfff0),
#undef F
	};
	uint64_t version;

	if (len < PYTHON_DEBUG_OFFSETS_SIZE) {
		snprintf(err, errsz, "_Py_DebugOffsets: %zu bytes, %d needed", len,
			 PYTHON_DEBUG_OFFSETS_SIZE);
		return -EINVAL;
	}
	if (memcmp(b, "xdebugpy", 8) != 0) {
		snprintf(err, errsz, "_Py_DebugOffsets: no \"xdebugpy\" cookie at offset 0");
		return -EINVAL;
	}
	version = le64(b + DBG_VERSION);
	if ((version >> 16) != 0x030d) {
		snprintf(err, errsz, "_Py_DebugOffsets: version 0x%llx at offset %d, not 3.13",
			 (unsigned long long)version, DBG_VERSION);
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint64_t v = le64(b + fields[i].at);
		uint16_t v16 = (uint16_t)v;

		if (v > fields[i].max) {
			snprintf(
			    err, errsz, "_Py_DebugOffsets: %s = %llu at offset %u, more than %u",
			    fields[i].name, (unsigned long long)v, fields[i].at, fields[i].max);
			return -EINVAL;
		}
		memcpy((char *)out + fields[i].field, &v16, sizeof(v16));
	}
	out->cframe_current_frame = NO_FIELD;
	/* PyCompactUnicodeObject: PyASCIIObject, then utf8_length and utf8 */
	out->unicode_compact_size = (uint16_t)(out->unicode_ascii_size + 16);
	*hexversion = (uint32_t)version;
	return 0;
}

/* ---- line tables ---------------------------------------------------------------- */

/* Lines are summed in 64 bits: a garbage table cannot overflow them. */
static int line_result(int64_t line)
{
	return line < 0 || line > INT32_MAX ? -1 : (int)line;
}

static int lnotab_line(const uint8_t *t, size_t len, int64_t line, uint32_t instr)
{
	uint64_t target = (uint64_t)instr * 2, addr = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > target)
			break;
		line += (int8_t)t[i + 1];
	}
	return line_result(line);
}

static int linetable310_line(const uint8_t *t, size_t len, int64_t line, uint32_t instr)
{
	uint64_t target = (uint64_t)instr * 2, start = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		uint64_t end = start + t[i];
		int8_t delta = (int8_t)t[i + 1];
		int64_t cur = -1;

		if (delta != -128) {
			line += delta;
			cur = line;
		}
		if (target >= start && target < end)
			return line_result(cur);
		start = end;
	}
	return -1;
}

/* A varint of the location table at *i: 0, or -1 past the end (or too
 * long to be a real value). */
static int location_varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*i >= len || shift > 24)
			return -1;
		b = t[(*i)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*out = v;
	return 0;
}

static int location_svarint(const uint8_t *t, size_t len, size_t *i, int32_t *out)
{
	uint32_t u;

	if (location_varint(t, len, i, &u))
		return -1;
	*out = (u & 1) ? -(int32_t)(u >> 1) : (int32_t)(u >> 1);
	return 0;
}

static int location_line(const uint8_t *t, size_t len, int64_t line, uint32_t instr)
{
	uint64_t addr = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t h = t[i++];
		unsigned kind = (h >> 3) & 15, length = (h & 7) + 1;
		int32_t delta = 0;
		uint32_t skip;
		int64_t cur;

		if (!(h & 0x80))
			return -1; /* not an entry's first byte */
		switch (kind) {
		case 15: /* no location */
			cur = -1;
			break;
		case 14: /* long form */
			if (location_svarint(t, len, &i, &delta) ||
			    location_varint(t, len, &i, &skip) ||
			    location_varint(t, len, &i, &skip) ||
			    location_varint(t, len, &i, &skip))
				return -1;
			line += delta;
			cur = line;
			break;
		case 13: /* no column */
			if (location_svarint(t, len, &i, &delta))
				return -1;
			line += delta;
			cur = line;
			break;
		case 10:
		case 11:
		case 12: /* one line, two column bytes */
			line += (int64_t)kind - 10;
			cur = line;
			i += 2;
			break;
		default: /* short form: the same line, one column byte */
			cur = line;
			i += 1;
			break;
		}
		if (instr >= addr && instr < addr + length)
			return line_result(cur);
		addr += length;
	}
	return -1;
}

int python_line_for(uint16_t version, const uint8_t *table, size_t len, int first_line,
		    uint32_t instr)
{
	if (!table)
		return -1;
	if (version <= 0x0309)
		return lnotab_line(table, len, first_line, instr);
	if (version == 0x030a)
		return linetable310_line(table, len, first_line, instr);
	return location_line(table, len, first_line, instr);
}

size_t python_merge_frames(uint64_t eval_start, uint64_t eval_end, const uint64_t *native, size_t n,
			   const uint64_t *chain, size_t nchain, uint64_t *out, size_t max)
{
	size_t o = 0, c = 0, groups = 0;
	bool merged = false;

	for (size_t i = 0; i < n && o < max; i++) {
		uint64_t at = i ? native[i] - 1 : native[i];
		bool eval = !PYFRAME_IS(native[i]) && at >= eval_start && at < eval_end;

		/* an empty group (two ends in a row) is not one */
		while (c < nchain && chain[c] == PYFRAME_GROUP_END)
			c++;
		if (!eval || c >= nchain) {
			out[o++] = native[i];
			continue;
		}
		merged = true;
		for (; c < nchain && chain[c] != PYFRAME_GROUP_END && o < max; c++)
			if (PYFRAME_IS(chain[c]))
				out[o++] = chain[c];
	}
	/* No eval frame among the native ones (a walk cut short before
	 * them) and one eval call's frames: nothing native can sit between
	 * them, so they follow the native frames, the path whole. */
	for (size_t i = 0; i < nchain; i++)
		groups += chain[i] != PYFRAME_GROUP_END &&
			  (i + 1 == nchain || chain[i + 1] == PYFRAME_GROUP_END);
	if (!merged && groups == 1) {
		for (; c < nchain && o < max; c++)
			if (chain[c] != PYFRAME_GROUP_END && PYFRAME_IS(chain[c]))
				out[o++] = chain[c];
		return o;
	}
	/* a group the native frames had no eval frame for (unless out is
	 * full: a deep stack cut at the bound, as the kernel cuts it) */
	for (; c < nchain && o < max; c++)
		if (chain[c] != PYFRAME_GROUP_END && PYFRAME_IS(chain[c]))
			return 0;
	return o;
}
