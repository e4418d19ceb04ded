/*
 * cli.h — kilnctl's command groups.
 *
 * main.c dispatches `kilnctl GROUP ARGS...` through a table of these; each
 * group lives in its own cmd_GROUP.c and parses its own arguments. A group
 * returns the process exit status (0 success, 1 failure, 2 usage) and prints
 * failures itself as one line: "kilnctl: WHAT: PROBLEM".
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <getopt.h>
#include <stdint.h>

#include "client/client.h"
#include "common/buf.h"

struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the group name */
};

int cmd_pprof(int argc, char **argv);
/* cmd_pprof.c's `symbolize` subcommand (cmd_pprof_symbolize.c); argv[0] is
 * "symbolize". */
int cmd_pprof_symbolize(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_query_range(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_debuginfo(int argc, char **argv);
/* cmd_debuginfo.c's remote subcommands (cmd_debuginfo_remote.c). */
int cmd_debuginfo_upload(int argc, char **argv);
int cmd_debuginfo_ls(int argc, char **argv);

int cmd_diff(int argc, char **argv);

/* ---- shared by the server commands (cli_http.c) ---- */
/* The options of every command that talks to a server: put
 * CLI_SERVER_OPTIONS in the getopt_long table and hand each option to
 * cli_server_opt first. */
struct cli_server_opts {
	const char *address; /* "HOST:PORT" or a URL */
	const char *token;   /* NULL: none */
	char token_buf[4096];
	struct tls_client_files tls;
};
enum {
	CLI_OPT_ADDRESS = 1000,
	CLI_OPT_TOKEN,
	CLI_OPT_TOKEN_FILE,
	CLI_OPT_TLS_CA,
	CLI_OPT_TLS_CERT,
	CLI_OPT_TLS_KEY,
};
#define CLI_SERVER_OPTIONS                                                                         \
	{"address", required_argument, NULL, CLI_OPT_ADDRESS},                                     \
	    {"bearer-token", required_argument, NULL, CLI_OPT_TOKEN},                              \
	    {"bearer-token-file", required_argument, NULL, CLI_OPT_TOKEN_FILE},                    \
	    {"tls-ca-file", required_argument, NULL, CLI_OPT_TLS_CA},                              \
	    {"tls-cert-file", required_argument, NULL, CLI_OPT_TLS_CERT},                          \
	{                                                                                          \
		"tls-key-file", required_argument, NULL, CLI_OPT_TLS_KEY                           \
	}
/* 1 when getopt's o was one of CLI_SERVER_OPTIONS (taken into s), 0 when
 * it is not, -1 for a bad value (said on stderr as "kilnctl CMD: ..."). */
int cli_server_opt(struct cli_server_opts *s, int o, const char *arg, const char *cmd);
/* Milliseconds since the epoch, a whole number. 0 or -EINVAL. */
int cli_parse_ms(const char *s, int64_t *out);
/* GETs url into out (at most 1 GiB); token (NULL = none) goes out as a
 * bearer token. 0 with *status set, or -EIO after printing why. */
int cli_http_get(const char *url, const char *token, const struct tls_client_files *tls,
		 struct buf *out, long *status);
/* Prints the server's JSON error ({"error":..,"position":N}) readably. */
void cli_print_server_error(long status, struct buf *body, const char *query);
/* The values of label `by` in the series matching query over the URL time
 * parameters range ("&start=..&end=.."), from the server at base
 * ("http://HOST:PORT"), sorted (cli_values.c). *values (n of them) is
 * owned by the caller, each string and the array. 0, or -EIO / -ENOMEM
 * after printing why. */
int cli_fetch_label_values(const struct cli_server_opts *srv, const char *base, const char *query,
			   const char *by, const char *range, char ***values, size_t *n);
/* Writes data to path (NULL = stdout); 0, or 1 after printing why. */
int cli_write_out(const char *path, const void *data, size_t len);

#endif
