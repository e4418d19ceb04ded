/*
 * json_check.h — reads JSON that Kiln wrote back with Python's json module
 * (strict: UTF-8 required, NaN/Infinity refused) and runs assertions on it.
 *
 * json_check(&buf, "assert doc['total'] == 10\n") writes buf to a temporary
 * file, runs python3 with `doc` bound to the parsed document and the given
 * statements, and fails the cmocka test if parsing or an assertion fails.
 * Python is the peer here: a JSON parser Kiln did not write.
 */
#ifndef KILN_TEST_JSON_CHECK_H
#define KILN_TEST_JSON_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/buf.h"

static inline void json_check(const struct buf *b, const char *python)
{
	char data_path[] = "/tmp/kiln-json-XXXXXX";
	char script_path[] = "/tmp/kiln-jsonpy-XXXXXX";
	char cmd[256];
	int fd, rc;
	FILE *f;

	fd = mkstemp(data_path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b->data, b->len), (ssize_t)b->len);
	close(fd);
	fd = mkstemp(script_path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fprintf(f,
		"import json, sys\n"
		"def no_constants(c):\n"
		"    raise ValueError('non-standard constant ' + c)\n"
		"with open(sys.argv[1], encoding='utf-8', errors='strict') as fh:\n"
		"    doc = json.loads(fh.read(), parse_constant=no_constants)\n"
		"%s\n",
		python);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 %s %s", script_path, data_path);
	rc = system(cmd);
	unlink(data_path);
	unlink(script_path);
	if (rc != 0)
		fail_msg("python3 rejected the JSON or an assertion failed (status %d)", rc);
}

#endif
