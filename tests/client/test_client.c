/*
 * test_client.c — gRPC framing, and the libcurl client against a real gRPC
 * server (python3-grpcio, tests/client/grpc_peer.py): unary, client
 * streaming, metadata (bearer token, grpc-timeout), error status with a
 * percent-encoded message from the trailers, deadline, connection refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"

static void test_frame_roundtrip(void **state)
{
	struct buf b = {0};
	const uint8_t *msg;
	size_t len, used;
	bool comp;

	(void)state;
	assert_int_equal(grpc_frame_append(&b, "hello", 5), 0);
	assert_int_equal(grpc_frame_append(&b, "", 0), 0);
	assert_int_equal(b.len, 15);
	assert_memory_equal(b.data, "\0\0\0\0\5hello", 10);
	/* Every prefix shorter than the first frame asks for more. */
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(grpc_frame_parse(b.data, i, 100, &msg, &len, &comp, &used), 0);
	assert_int_equal(grpc_frame_parse(b.data, b.len, 100, &msg, &len, &comp, &used), 1);
	assert_int_equal(len, 5);
	assert_int_equal(used, 10);
	assert_false(comp);
	assert_memory_equal(msg, "hello", 5);
	assert_int_equal(
	    grpc_frame_parse(b.data + used, b.len - used, 100, &msg, &len, &comp, &used), 1);
	assert_int_equal(len, 0);
	assert_int_equal(used, 5);
	buf_free(&b);
}

static void test_frame_big_endian_and_limit(void **state)
{
	const uint8_t hdr[] = {1, 0x01, 0x02, 0x03, 0x04};
	const uint8_t *msg;
	size_t len, used;
	bool comp;

	(void)state;
	assert_int_equal(grpc_frame_parse(hdr, sizeof(hdr), 1000, &msg, &len, &comp, &used),
			 -EMSGSIZE);
	/* Within the limit but incomplete: wait for 0x01020304 bytes. */
	assert_int_equal(grpc_frame_parse(hdr, sizeof(hdr), 0x01020304, &msg, &len, &comp, &used),
			 0);
}

static void test_percent_decode(void **state)
{
	char s[] = "bad input: %C3%BC 100%25 %zz";

	(void)state;
	grpc_percent_decode(s);
	assert_string_equal(s, "bad input: \xc3\xbc 100% %zz");
	assert_string_equal(grpc_status_name(3), "INVALID_ARGUMENT");
	assert_string_equal(grpc_status_name(99), "UNKNOWN");
}

struct peer {
	pid_t pid;
	int stdin_fd;
	int port;
};

static int peer_start(void **state)
{
	static struct peer p;
	int in[2], out[2];
	char line[64] = "";
	FILE *f;

	if (pipe(in) || pipe(out))
		return -1;
	p.pid = fork();
	if (p.pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl("/usr/bin/python3", "python3", "tests/client/grpc_peer.py", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p.stdin_fd = in[1];
	f = fdopen(out[0], "r");
	if (!f || !fgets(line, sizeof(line), f))
		return -1;
	fclose(f);
	p.port = atoi(line);
	*state = &p;
	return p.port > 0 ? 0 : -1;
}

static int peer_stop(void **state)
{
	struct peer *p = *state;

	if (p) {
		close(p->stdin_fd);
		kill(p->pid, SIGTERM);
		waitpid(p->pid, NULL, 0);
	}
	return 0;
}

static struct grpc_client *client_for(struct peer *p, const char *token, int timeout_ms)
{
	char addr[64];

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", p->port);
	struct grpc_client_config cfg = {
	    .address = addr, .insecure = true, .bearer_token = token, .timeout_ms = timeout_ms};
	struct grpc_client *c = grpc_client_new(&cfg, NULL);
	assert_non_null(c);
	return c;
}

static void test_unary_with_metadata(void **state)
{
	struct grpc_client *c = client_for(*state, "s3cret", 10000);
	struct grpc_status st;
	struct buf resp = {0};

	int rc = grpc_client_unary(c, "/kiln.test.Echo/Unary", "ping", 4, &resp, &st);
	if (rc)
		fail_msg("%d %s", rc, st.message);
	assert_int_equal(st.code, GRPC_STATUS_OK);
	assert_int_equal(resp.len, strlen("Bearer s3cret|1|ping"));
	assert_memory_equal(resp.data, "Bearer s3cret|1|ping", resp.len);
	/* Same connection, second call. */
	rc = grpc_client_unary(c, "/kiln.test.Echo/Unary", "", 0, &resp, &st);
	if (rc)
		fail_msg("second call: %d %s", rc, st.message);
	assert_int_equal(st.code, GRPC_STATUS_OK);
	assert_memory_equal(resp.data, "Bearer s3cret|1|", resp.len);
	buf_free(&resp);
	grpc_client_free(c);
}

static void test_error_status_from_trailers(void **state)
{
	struct grpc_client *c = client_for(*state, NULL, 10000);
	struct grpc_status st;
	struct buf resp = {0};

	assert_int_equal(grpc_client_unary(c, "/kiln.test.Echo/Unary", "fail", 4, &resp, &st), 0);
	assert_int_equal(st.code, GRPC_STATUS_INVALID_ARGUMENT);
	assert_string_equal(st.message, "bad input: \xc3\xbc 100%");
	assert_int_equal(resp.len, 0);
	/* grpcio answers an unknown method from the request's HEADERS and then
	 * resets the stream (RST_STREAM NO_ERROR) because the body is still
	 * coming. Debian 12's libcurl (7.88) drops the already received status
	 * when the reset lands in the same read, so the call fails as a stream
	 * error instead: either way it must fail, never look like success. */
	int rc = grpc_client_unary(c, "/kiln.test.Echo/Nope", "x", 1, &resp, &st);
	if (rc == 0)
		assert_int_equal(st.code, GRPC_STATUS_UNIMPLEMENTED);
	else if (!strstr(st.message, "HTTP/2"))
		fail_msg("unknown method: %d %s", rc, st.message);
	buf_free(&resp);
	grpc_client_free(c);
}

struct chunks {
	int i, n;
	char piece[4096];
};

static int next_chunk(void *arg, const void **msg, size_t *len)
{
	struct chunks *ch = arg;

	if (ch->i == ch->n)
		return 0;
	memset(ch->piece, 'a' + ch->i % 26, sizeof(ch->piece));
	ch->i++;
	*msg = ch->piece;
	*len = sizeof(ch->piece);
	return 1;
}

static void test_client_streaming(void **state)
{
	struct grpc_client *c = client_for(*state, NULL, 10000);
	struct chunks ch = {.n = 300}; /* 1.2 MB over many frames */
	struct grpc_status st;
	struct buf resp = {0};

	assert_int_equal(
	    grpc_client_stream(c, "/kiln.test.Echo/Concat", next_chunk, &ch, &resp, &st), 0);
	assert_int_equal(st.code, GRPC_STATUS_OK);
	assert_int_equal(resp.len, 300 * 4096);
	for (int i = 0; i < 300; i++)
		assert_int_equal(resp.data[i * 4096 + 17], 'a' + i % 26);
	buf_free(&resp);
	grpc_client_free(c);
}

static void test_deadline_and_refused(void **state)
{
	struct grpc_client *c = client_for(*state, NULL, 500);
	struct grpc_status st;
	struct buf resp = {0};

	grpc_client_unary(c, "/kiln.test.Echo/Slow", "x", 1, &resp, &st);
	assert_int_equal(st.code, GRPC_STATUS_DEADLINE_EXCEEDED);
	grpc_client_free(c);

	struct peer dead = {.port = 1}; /* nothing listens on port 1 */
	c = client_for(&dead, NULL, 2000);
	assert_true(grpc_client_unary(c, "/kiln.test.Echo/Unary", "x", 1, &resp, &st) < 0);
	assert_int_equal(st.code, GRPC_STATUS_UNAVAILABLE);
	buf_free(&resp);
	grpc_client_free(c);
}

int main(void)
{
	const struct CMUnitTest framing[] = {
	    cmocka_unit_test(test_frame_roundtrip),
	    cmocka_unit_test(test_frame_big_endian_and_limit),
	    cmocka_unit_test(test_percent_decode),
	};
	const struct CMUnitTest peer[] = {
	    cmocka_unit_test(test_unary_with_metadata),
	    cmocka_unit_test(test_error_status_from_trailers),
	    cmocka_unit_test(test_client_streaming),
	    cmocka_unit_test(test_deadline_and_refused),
	};
	int failed = cmocka_run_group_tests(framing, NULL, NULL);

	return failed + cmocka_run_group_tests(peer, peer_start, peer_stop);
}
