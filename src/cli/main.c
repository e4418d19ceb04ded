/*
 * main.c — kilnctl, the Kiln command-line client: a dispatcher over the
 * command groups in cmd_*.c. Adding a group is one line in commands[].
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"
#include "common/version.h"

static const struct cli_command commands[] = {
    {"pprof", "work with pprof files: folded, top, merge, validate, symbolize", cmd_pprof},
    {"query", "query a kiln server: top, flame graph, folded or pprof", cmd_query},
    {"query-range", "a query's series over time, summed by labels", cmd_query_range},
    {"push", "write pprof files to a kiln server", cmd_push},
    {"diff", "which functions got slower between two sides, with confidence", cmd_diff},
    {"debuginfo", "extract, upload and list debuginfo; symbolize addresses", cmd_debuginfo},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: kilnctl [--log-level=LEVEL] COMMAND [ARGS...]\n"
		   "       kilnctl --version | version\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nRun `kilnctl COMMAND --help` for a command's options.\n");
}

/* `kilnctl --version` and `kilnctl version`: one line, like kiln's. */
static int print_version(void)
{
	printf("kilnctl %s\n", kiln_version());
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;

	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0)
			return print_version();
		if (strncmp(argv[i], "--log-level=", 12) == 0 &&
		    log_set_level_name(argv[i] + 12) == 0)
			continue;
		fprintf(stderr, "kilnctl: unknown option %s\n", argv[i]);
		usage(stderr);
		return 2;
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[i], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[i], "version") == 0)
		return print_version();
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
		if (strcmp(argv[i], commands[c].name) == 0)
			return commands[c].run(argc - i, argv + i);
	fprintf(stderr, "kilnctl: unknown command \"%s\"\n", argv[i]);
	usage(stderr);
	return 2;
}
