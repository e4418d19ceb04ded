/*
 * main.c — placeholder entry point; the real one lands with its issue.
 */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "not built yet\n");
	return 1;
}
