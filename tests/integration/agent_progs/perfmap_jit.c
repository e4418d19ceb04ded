/*
 * perfmap_jit.c — a JIT in miniature that names its code in a perf map,
 * for the agent's perf-map test (tests/integration/agent_perfmap.sh).
 *
 * Usage: perfmap_jit SECONDS MODE. Copies two x86-64 countdown loops into
 * an anonymous executable page, jit_alpha_loop at its start and
 * jit_beta_loop 256 bytes in, and calls alpha twice for each beta call
 * (alpha also counts twice as far) until SECONDS have passed. MODE says
 * what /tmp/perf-PID.map (this pid) holds:
 *   good      the two names
 *   garbage   the two names among garbage lines and a last line with no
 *             newline
 *   huge      the two names, then ~80 MB of other lines (past the agent's
 *             caps)
 *   vanish    the two names; the file is removed halfway
 *   truncate  jit_before_alpha/beta; halfway the file is emptied and
 *             jit_after_alpha/beta written in it
 *   owner     the two names in a file owned by nobody (not the process)
 *   fifo      a FIFO no one writes (the agent must not block on it)
 *   symlink   a symbolic link to /etc/shadow (the agent must not follow it)
 * The file is removed at exit. Exits 2 when the page cannot be mapped.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BETA_OFFSET 256

static char map_path[64];

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* mov rcx, count; 1: dec rcx; jnz 1b; ret */
static void put_loop(uint8_t *at, uint64_t count)
{
	static const uint8_t code[] = {0x48, 0xb9, 0,	 0,    0,    0,	   0,	 0,
				       0,    0,	   0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};

	memcpy(at, code, sizeof(code));
	memcpy(at + 2, &count, sizeof(count));
}

static void write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);

		if (w <= 0) {
			perror("write");
			exit(1);
		}
		s += w;
		n -= (size_t)w;
	}
}

static void write_names(int fd, uint8_t *page, const char *alpha, const char *beta)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%lx %x %s\n%lx %x %s\n", (unsigned long)page, 16,
			 alpha, (unsigned long)(page + BETA_OFFSET), 16, beta);

	write_all(fd, line, (size_t)n);
}

/* ~80 MB of well-formed lines at addresses no code uses. */
static void write_huge(int fd)
{
	size_t cap = 1 << 20, len = 0;
	char *chunk = malloc(cap + 256);

	if (!chunk)
		exit(1);
	for (unsigned long i = 0; i < 1000000; i++) {
		len += (size_t)snprintf(chunk + len, 256, "%lx 10 filler_function_number_%lu_%s\n",
					0x100000000ul + i * 0x10, i,
					"with_a_long_name_to_fill_the_file_quickly_xxxxxxxxxx");
		if (len >= cap) {
			write_all(fd, chunk, len);
			len = 0;
		}
	}
	write_all(fd, chunk, len);
	free(chunk);
}

static void cleanup(void)
{
	unlink(map_path);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2, t0, half;
	const char *mode = argc > 2 ? argv[2] : "good";
	uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool halfway_done = false;
	int fd = -1;

	if (page == MAP_FAILED)
		return 2;
	put_loop(page, 4000000);
	put_loop(page + BETA_OFFSET, 2000000);
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", (int)getpid());
	unlink(map_path);
	atexit(cleanup);
	if (strcmp(mode, "fifo") == 0) {
		if (mkfifo(map_path, 0600) != 0)
			return 1;
	} else if (strcmp(mode, "symlink") == 0) {
		if (symlink("/etc/shadow", map_path) != 0)
			return 1;
	} else {
		fd = open(map_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			return 1;
		if (strcmp(mode, "garbage") == 0) {
			static const char junk[] = "garbage line\n"
						   "12 34\n"
						   "zz 10 bad_start\n"
						   "1000 0 zero_size\n"
						   "ffffffffffffffff 10 wraps\n"
						   "1000 10 bad\x01name\n"
						   "\n";

			write_all(fd, junk, sizeof(junk) - 1);
			write_names(fd, page, "jit_alpha_loop", "jit_beta_loop");
			write_all(fd, "\xff\xfe\n2000 10 half-writ", 21);
		} else if (strcmp(mode, "truncate") == 0) {
			write_names(fd, page, "jit_before_alpha", "jit_before_beta");
		} else {
			write_names(fd, page, "jit_alpha_loop", "jit_beta_loop");
			if (strcmp(mode, "huge") == 0)
				write_huge(fd);
			if (strcmp(mode, "owner") == 0 && fchown(fd, 65534, 65534) != 0)
				return 1;
		}
	}
	t0 = now_s();
	half = t0 + seconds / 2;
	while (now_s() - t0 < seconds) {
		((void (*)(void))page)();
		((void (*)(void))page)();
		((void (*)(void))(page + BETA_OFFSET))();
		if (!halfway_done && now_s() >= half) {
			halfway_done = true;
			if (strcmp(mode, "vanish") == 0) {
				unlink(map_path);
			} else if (strcmp(mode, "truncate") == 0) {
				if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
					return 1;
				write_names(fd, page, "jit_after_alpha", "jit_after_beta");
			}
		}
	}
	if (fd >= 0)
		close(fd);
	return 0;
}
