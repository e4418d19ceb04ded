/*
 * bearer.c — reading a bearer token from a file, for every client that talks
 * to a server requiring tokens (kilnctl's query and debuginfo commands, the
 * agent's push and debuginfo upload). One rule in one place: the token is
 * the file's first line, without surrounding blanks; an empty one is an
 * error, so a wrong path or an empty file is said at start-up instead of as
 * a 401 on every request.
 */
#include <errno.h>
#include <string.h>

#include "client/client.h"
#include "common/buf.h"

int bearer_token_read_file(const char *path, char *out, size_t cap, struct kiln_error *err)
{
	struct buf b = {0};
	int rc = buf_read_file(&b, path, 1 << 16);
	size_t start = 0, end;

	if (rc < 0) {
		buf_free(&b);
		return kiln_error_set(err, -rc, "%s: cannot read the token: %s", path,
				      strerror(-rc));
	}
	end = b.len;
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] == '\n' || b.data[i] == '\r' || b.data[i] == '\0') {
			end = i;
			break;
		}
	while (start < end && (b.data[start] == ' ' || b.data[start] == '\t'))
		start++;
	while (end > start && (b.data[end - 1] == ' ' || b.data[end - 1] == '\t'))
		end--;
	if (end == start) {
		buf_free(&b);
		return kiln_error_set(err, EINVAL, "%s: no token on the first line", path);
	}
	if (end - start >= cap) {
		buf_free(&b);
		return kiln_error_set(err, E2BIG, "%s: the token is longer than %zu bytes", path,
				      cap - 1);
	}
	memcpy(out, b.data + start, end - start);
	out[end - start] = '\0';
	memset(b.data, 0, b.len);
	buf_free(&b);
	return 0;
}
