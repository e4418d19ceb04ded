/*
 * cmd_debuginfo_remote.c — `kilnctl debuginfo upload` and `ls` (pending the
 * DebuginfoService proto).
 */
#include <stdio.h>

#include "cli/cli.h"

int cmd_debuginfo_upload(int argc, char **argv)
{
	fprintf(stderr, "kilnctl debuginfo upload: not available in this build\n");
	return 1;
}

int cmd_debuginfo_ls(int argc, char **argv)
{
	fprintf(stderr, "kilnctl debuginfo ls: not available in this build\n");
	return 1;
}
