/*
 * syscalls.c — a process that spends its time in the kernel: reads from
 * /dev/zero and writes to /dev/null in a loop for SECONDS of CPU time.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

int main(int argc, char **argv)
{
	double target = argc > 1 ? atof(argv[1]) : 3.0;
	int zero = open("/dev/zero", O_RDONLY), null = open("/dev/null", O_WRONLY);
	struct timespec ts;

	if (zero < 0 || null < 0)
		return 1;
	do {
		for (int i = 0; i < 64; i++) {
			if (read(zero, buf, sizeof(buf)) < 0 || write(null, buf, 4096) < 0)
				return 1;
		}
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9 < target);
	printf("%.3f\n", (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
	return 0;
}
