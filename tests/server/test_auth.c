/*
 * test_auth.c — the tokens file parser and the per-request check: good files
 * load with their roles; every kind of bad line is refused with FILE:LINE
 * and what is wrong; roles admit exactly what docs/SECURITY.md says; and
 * every route in the tables declares a role (writes need write, queries
 * read, self-profiling admin).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/auth.h"
#include "server/internal.h"

#define R "rrrrrrrrrrrrrrrr" /* 16 characters: the shortest token accepted */
#define W "wwwwwwwwwwwwwwwwwwww"
#define A "aAzZ09-._~+/aaaa=="

static struct auth_tokens *parse_ok(const char *text)
{
	struct auth_tokens *t = NULL;
	struct kiln_error err = {0};
	int rc = auth_tokens_parse(text, strlen(text), "tokens", &t, &err);
	if (rc != 0)
		fail_msg("unexpected error: %s", err.msg);
	return t;
}

/* Parses text, expects -EINVAL and a message starting with want_prefix
 * and holding want_part. */
static void parse_bad(const char *text, const char *want_prefix, const char *want_part)
{
	struct auth_tokens *t = NULL;
	struct kiln_error err = {0};
	int rc = auth_tokens_parse(text, strlen(text), "tokens", &t, &err);
	assert_int_equal(rc, -EINVAL);
	assert_null(t);
	if (strncmp(err.msg, want_prefix, strlen(want_prefix)) != 0 || !strstr(err.msg, want_part))
		fail_msg("message \"%s\": want prefix \"%s\" and \"%s\"", err.msg, want_prefix,
			 want_part);
}

static void test_parse_good_file(void **state)
{
	struct auth_tokens *t = parse_ok("# Kiln tokens\n"
					 "\n"
					 "read " R "\n"
					 "   # indented comment\n"
					 "write\t" W "  \r\n"
					 "admin " A); /* no final newline */
	assert_int_equal(t->n, 3);
	assert_int_equal(t->v[0].role, AUTH_READ);
	assert_int_equal(t->v[0].line, 3);
	assert_int_equal(t->v[1].role, AUTH_WRITE);
	assert_int_equal(t->v[1].line, 5);
	assert_int_equal(t->v[2].role, AUTH_ADMIN);
	assert_int_equal(t->v[2].line, 6);
	assert_int_equal(strlen(t->v[0].fingerprint), 8);
	assert_int_equal(auth_tokens_match(t, R, strlen(R)), AUTH_READ);
	assert_int_equal(auth_tokens_match(t, W, strlen(W)), AUTH_WRITE);
	assert_int_equal(auth_tokens_match(t, A, strlen(A)), AUTH_ADMIN);
	assert_int_equal(auth_tokens_match(t, "nope", 4), AUTH_OPEN);
	/* A prefix of a token is not the token. */
	assert_int_equal(auth_tokens_match(t, R, strlen(R) - 1), AUTH_OPEN);
	auth_tokens_free(t);
}

static void test_parse_bad_lines(void **state)
{
	parse_bad("read " R "\nreader " W "\n", "tokens:2: unknown role \"reader\"",
		  "read, write or admin");
	parse_bad("\n\nwrite\n", "tokens:3: role write without a token", "ROLE TOKEN");
	parse_bad("read short\n", "tokens:1: the token is shorter than 16", "");
	parse_bad("read " R " extra\n", "tokens:1: unexpected text after the token", "");
	parse_bad("read " R " # comment\n", "tokens:1: unexpected text after the token",
		  "comments go on lines of their own");
	parse_bad("read " R "\nadmin " R "\n", "tokens:2: the same token as on line 1", "");
	parse_bad("read abc\"defghijklmnopqrs\n", "tokens:1: the token holds a character", "");
	parse_bad("read =abcdefghijklmnopqrs\n", "tokens:1: the token must start", "");
	parse_bad("read abcdefghijklmnop=q\n", "tokens:1: the token holds a character", "");
	parse_bad("READ " R "\n", "tokens:1: unknown role \"READ\"", "");
	parse_bad("# only comments\n\n", "tokens: no tokens", "");
	parse_bad("", "tokens: no tokens", "");

	char long_tok[AUTH_TOKEN_MAX + 16] = "read ";
	memset(long_tok + 5, 'x', AUTH_TOKEN_MAX + 1);
	long_tok[5 + AUTH_TOKEN_MAX + 1] = '\0';
	parse_bad(long_tok, "tokens:1: the token is longer than 256", "");

	struct auth_tokens *t = NULL;
	struct kiln_error err = {0};
	assert_int_equal(auth_tokens_parse("read " R "\0x", 23, "f", &t, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "NUL"));
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/kiln-test-auth.XXXXXX";
	int fd = mkstemp(path);
	struct auth_tokens *t = NULL;
	struct kiln_error err = {0};

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "read " R "\nwrite x\n", 5 + 16 + 9), 5 + 16 + 9);
	close(fd);
	assert_int_equal(auth_tokens_load(path, &t, &err), -EINVAL);
	char want[128];
	snprintf(want, sizeof(want), "%s:2: the token is shorter", path);
	assert_non_null(strstr(err.msg, want));
	unlink(path);
	kiln_error_clear(&err);
	assert_true(auth_tokens_load(path, &t, &err) < 0);
	assert_non_null(strstr(err.msg, path));
}

/* Each role against each route role, through auth_check. */
static void test_check_roles(void **state)
{
	char path[] = "/tmp/kiln-test-auth.XXXXXX";
	int fd = mkstemp(path);
	const char *text = "read " R "\nwrite " W "\nadmin " A "\n";
	struct auth_config c = {.tokens_file = path};
	struct auth *a = NULL;
	struct kiln_error err = {0};
	char why[256];

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(auth_new(&c, &a, &err), 0);
	assert_true(auth_enabled(a));

	assert_int_equal(auth_check(a, AUTH_OPEN, NULL, "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_READ, NULL, "x", why, sizeof(why)), -EACCES);
	assert_int_equal(auth_check(a, AUTH_READ, "Basic abc", "x", why, sizeof(why)), -EACCES);
	assert_int_equal(auth_check(a, AUTH_READ, "Bearer nope", "x", why, sizeof(why)), -EACCES);
	assert_null(strstr(why, "nope")); /* never echoes a token */
	assert_int_equal(auth_check(a, AUTH_READ, "Bearer " R, "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_READ, "bearer   " R "  ", "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_WRITE, "Bearer " R, "x", why, sizeof(why)), -EPERM);
	assert_int_equal(auth_check(a, AUTH_WRITE, "Bearer " W, "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_READ, "Bearer " W, "x", why, sizeof(why)), -EPERM);
	assert_int_equal(auth_check(a, AUTH_ADMIN, "Bearer " W, "x", why, sizeof(why)), -EPERM);
	assert_int_equal(auth_check(a, AUTH_ADMIN, "Bearer " A, "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_WRITE, "Bearer " A, "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_METRICS, "Bearer " R, "x", why, sizeof(why)), 0);
	assert_int_equal(auth_check(a, AUTH_METRICS, NULL, "x", why, sizeof(why)), -EACCES);

	/* Reload: a rewritten file replaces the tokens; a broken one keeps them. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "read " W "\n", 5 + 20 + 1), 5 + 20 + 1);
	close(fd);
	assert_int_equal(auth_reload(a, &err), 0);
	assert_int_equal(auth_check(a, AUTH_READ, "Bearer " R, "x", why, sizeof(why)), -EACCES);
	assert_int_equal(auth_check(a, AUTH_READ, "Bearer " W, "x", why, sizeof(why)), 0);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "reed " R "\n", 5 + 16 + 1), 5 + 16 + 1);
	close(fd);
	assert_int_equal(auth_reload(a, &err), -EINVAL);
	assert_int_equal(auth_check(a, AUTH_READ, "Bearer " W, "x", why, sizeof(why)), 0);

	/* The internal token survives reloads. */
	assert_int_equal(auth_add_internal(a, "internal-token-0123456789", AUTH_ADMIN), 0);
	assert_int_equal(
	    auth_check(a, AUTH_ADMIN, "Bearer internal-token-0123456789", "x", why, sizeof(why)),
	    0);
	auth_free(a);
	unlink(path);

	/* No tokens file: everything is admitted. */
	struct auth_config open_c = {0};
	assert_int_equal(auth_new(&open_c, &a, &err), 0);
	assert_false(auth_enabled(a));
	assert_int_equal(auth_check(a, AUTH_ADMIN, NULL, "x", why, sizeof(why)), 0);
	auth_free(a);
}

/* The tables: every endpoint declares the role the policy gives it. */
static void test_routes_declare_roles(void **state)
{
	for (size_t i = 0; i < server_n_grpc_methods; i++) {
		const struct grpc_method *m = &server_grpc_methods[i];
		enum auth_role want = strstr(m->path, "WriteRaw") ||
					      strstr(m->path, "DebuginfoService/") ||
					      strstr(m->path, "ProfilesService/Export") ||
					      strstr(m->path, "IngestService/Push")
					  ? AUTH_WRITE
					  : AUTH_READ;
		if (!strncmp(m->path, "/grpc.health.v1.Health/", 23)) /* probes, like /ready */
			want = AUTH_OPEN;
		if (m->need != want)
			fail_msg("%s needs %s, want %s", m->path, auth_role_name(m->need),
				 auth_role_name(want));
	}
	for (size_t i = 0; i < server_n_http_routes; i++) {
		const struct http_route *r = &server_http_routes[i];
		enum auth_role want = AUTH_READ;
		if (!strcmp(r->path, "/healthy") || !strcmp(r->path, "/ready") ||
		    !strcmp(r->path, "/"))
			want = AUTH_OPEN;
		else if (!strcmp(r->path, "/metrics"))
			want = AUTH_METRICS;
		else if (!strcmp(r->path, "/ingest") ||		      /* Pyroscope's push */
			 !strcmp(r->path, "/v1development/profiles")) /* OTLP push */
			want = AUTH_WRITE;
		else if (!strncmp(r->path, "/debug/", 7) || strcmp(r->method, "GET") != 0)
			want = AUTH_ADMIN;
		if (r->need != want)
			fail_msg("%s %s needs %s, want %s", r->method, r->path,
				 auth_role_name(r->need), auth_role_name(want));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_good_file),
	    cmocka_unit_test(test_parse_bad_lines),
	    cmocka_unit_test(test_load_file),
	    cmocka_unit_test(test_check_roles),
	    cmocka_unit_test(test_routes_declare_roles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
