/*
 * bench_pingpong.c — a context-switch storm for bench-agent's off-CPU case.
 *
 * Usage: bench_pingpong SECONDS [PAIRS [TRIPS_PER_SECOND]]. Each pair is two
 * threads passing one byte back and forth over two pipes, so each thread
 * blocks in read() once per round trip: about two context switches per
 * round trip. With TRIPS_PER_SECOND (per pair), the client keeps to that
 * pace by spinning, not sleeping, so that pacing adds no switch of its
 * own. Prints the round trips per second at exit, so that a profiler's
 * effect on the workload shows next to its own CPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct pair {
	int ping[2], pong[2];
	double start, end, rate;
	unsigned long trips;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *server(void *arg)
{
	struct pair *p = arg;
	char c;

	while (read(p->ping[0], &c, 1) == 1 && c == 'p')
		if (write(p->pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static void *client(void *arg)
{
	struct pair *p = arg;
	char c = 'p';

	while (now() < p->end) {
		for (int i = 0; i < 1000; i++) {
			if (write(p->ping[1], &c, 1) != 1 || read(p->pong[0], &c, 1) != 1)
				return NULL;
			p->trips++;
			while (p->rate > 0 && now() < p->start + (double)p->trips / p->rate)
				;
		}
	}
	c = 'q';
	if (write(p->ping[1], &c, 1) != 1)
		return NULL;
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 10, t0 = now();
	int npairs = argc > 2 ? atoi(argv[2]) : 1;
	double rate = argc > 3 ? atof(argv[3]) : 0;
	struct pair *pairs = calloc((size_t)npairs, sizeof(*pairs));
	pthread_t *t = calloc(2 * (size_t)npairs, sizeof(*t));
	unsigned long trips = 0;

	if (!pairs || !t || npairs < 1)
		return 1;
	for (int i = 0; i < npairs; i++) {
		if (pipe(pairs[i].ping) || pipe(pairs[i].pong)) {
			perror("pipe");
			return 1;
		}
		pairs[i].start = t0;
		pairs[i].end = t0 + secs;
		pairs[i].rate = rate;
		pthread_create(&t[2 * i], NULL, server, &pairs[i]);
		pthread_create(&t[2 * i + 1], NULL, client, &pairs[i]);
	}
	for (int i = 0; i < 2 * npairs; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < npairs; i++)
		trips += pairs[i].trips;
	printf("%.0f round trips/s\n", (double)trips / (now() - t0));
	return 0;
}
