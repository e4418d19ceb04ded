/*
 * offcpu_block.c — threads that block in known places for known times, for
 * the agent's off-CPU test.
 *
 * Usage: offcpu_block SECONDS. For SECONDS of wall time, three threads
 * block over and over, each in one function of its own:
 *   block_in_nanosleep   nanosleep of 20 ms
 *   block_in_read        read of one byte from a pipe that a feeder thread
 *                        writes every 30 ms
 *   block_in_condwait    pthread_cond_wait on a condition a signaller
 *                        thread signals every 25 ms (a futex wait)
 * Each measures the wall time (CLOCK_MONOTONIC) around every blocking call
 * and prints, at exit, one line per place: "PLACE NANOSECONDS CALLS".
 * The feeder and the signaller block too (in feed_pipe and signal_cond),
 * in stacks of their own.
 *
 * Built with -O0 -fno-omit-frame-pointer, like the other agent programs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct place {
	const char *name;
	unsigned long long ns;
	unsigned long calls;
};

static struct place places[3] = {
    {"block_in_nanosleep", 0, 0},
    {"block_in_read", 0, 0},
    {"block_in_condwait", 0, 0},
};
static unsigned long long end_ns;
static int pipefd[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned long ticks, done;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void block_in_nanosleep(void)
{
	unsigned long long t0 = now_ns();

	sleep_ms(20);
	places[0].ns += now_ns() - t0;
	places[0].calls++;
}

__attribute__((noinline)) int block_in_read(void)
{
	unsigned long long t0 = now_ns();
	char c;
	ssize_t got = read(pipefd[0], &c, 1);

	places[1].ns += now_ns() - t0;
	places[1].calls++;
	return got == 1 && c == 'x';
}

__attribute__((noinline)) int block_in_condwait(unsigned long *seen)
{
	unsigned long long t0;
	int more;

	pthread_mutex_lock(&lock);
	t0 = now_ns();
	while (ticks == *seen && !done)
		pthread_cond_wait(&cond, &lock);
	places[2].ns += now_ns() - t0;
	places[2].calls++;
	*seen = ticks;
	more = !done;
	pthread_mutex_unlock(&lock);
	return more;
}

__attribute__((noinline)) void feed_pipe(void)
{
	while (now_ns() < end_ns) {
		sleep_ms(30);
		if (write(pipefd[1], "x", 1) != 1)
			break;
	}
	if (write(pipefd[1], "q", 1) != 1)
		abort();
}

__attribute__((noinline)) void signal_cond(void)
{
	while (now_ns() < end_ns) {
		sleep_ms(25);
		pthread_mutex_lock(&lock);
		ticks++;
		pthread_cond_signal(&cond);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	done = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

static void *sleeper(void *arg)
{
	while (now_ns() < end_ns)
		block_in_nanosleep();
	return NULL;
}

static void *reader(void *arg)
{
	while (block_in_read())
		;
	return NULL;
}

static void *waiter(void *arg)
{
	unsigned long seen = 0;

	while (block_in_condwait(&seen))
		;
	return NULL;
}

static void *feeder(void *arg)
{
	feed_pipe();
	return NULL;
}

static void *signaller(void *arg)
{
	signal_cond();
	return NULL;
}

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = {sleeper, reader, waiter, feeder, signaller};
	pthread_t t[5];
	double secs = argc > 1 ? atof(argv[1]) : 5;

	if (pipe(pipefd) != 0) {
		perror("pipe");
		return 1;
	}
	end_ns = now_ns() + (unsigned long long)(secs * 1e9);
	for (int i = 0; i < 5; i++)
		if (pthread_create(&t[i], NULL, fns[i], NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 3; i++)
		printf("%s %llu %lu\n", places[i].name, places[i].ns, places[i].calls);
	return 0;
}
