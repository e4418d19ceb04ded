/*
 * fuzz_python_parse.c — libFuzzer target for the parsers of CPython
 * process memory (src/agent/python_parse.c): the line tables of 3.9,
 * 3.10 and 3.11+ and 3.13's _Py_DebugOffsets block.
 *
 * Input: one byte choosing the version (its low 3 bits: 3.9 ... 3.13),
 * four bytes of instruction index, then the table (or the block). A line
 * is -1 or positive; a block either parses to offsets the kernel's walk
 * can use (frame fields inside its bounded read) or is refused with a
 * message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/python.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t versions[] = {0x0309, 0x030a, 0x030b, 0x030c, 0x030d};
	struct python_offsets o;
	uint32_t instr, hex;
	char err[160];
	int line;

	if (size < 5)
		return 0;
	memcpy(&instr, data + 1, 4);
	line = python_line_for(versions[data[0] % 5], data + 5, size - 5, data[0] >> 3, instr);
	if (line < -1)
		abort();
	err[0] = '\0';
	if (python_debug_offsets_parse(data + 5, size - 5, &o, &hex, err, sizeof(err)) == 0) {
		if (o.frame_back > 104 || o.frame_code > 104 || o.frame_instr > 104 ||
		    o.frame_owner > 104 || (hex >> 16) != 0x030d)
			abort();
	} else if (!err[0]) {
		abort();
	}
	return 0;
}
