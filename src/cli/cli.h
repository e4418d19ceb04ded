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
int cmd_push(int argc, char **argv);
int cmd_debuginfo(int argc, char **argv);
/* cmd_debuginfo.c's remote subcommands (cmd_debuginfo_remote.c). */
int cmd_debuginfo_upload(int argc, char **argv);
int cmd_debuginfo_ls(int argc, char **argv);

#endif
