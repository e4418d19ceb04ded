/*
 * cli.h — kilnctl's subcommands. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process exit status.
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

int cmd_query(int argc, char **argv);

#endif
