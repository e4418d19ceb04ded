/*
 * process_metrics.c — process_* metrics from /proc/self, as the Prometheus
 * client libraries define them (the Go client's process collector):
 *
 *   process_cpu_seconds_total     utime + stime of /proc/self/stat
 *   process_resident_memory_bytes rss of /proc/self/stat, in bytes
 *   process_open_fds              entries of /proc/self/fd
 *   process_start_time_seconds    starttime of /proc/self/stat after the
 *                                 boot time (btime of /proc/stat), Unix time
 */
#include "common/process_metrics.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The fields of /proc/self/stat this file uses. */
struct self_stat {
	unsigned long long utime, stime; /* clock ticks */
	unsigned long long starttime;	 /* clock ticks after boot */
	long long rss;			 /* pages */
};

/* Parses /proc/self/stat. Returns 0, or -errno. The command name (field 2)
 * may hold spaces and parentheses, so fields are counted from its last ')'. */
static int read_self_stat(struct self_stat *st)
{
	char line[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	char *p;
	int n;

	if (!f)
		return -errno;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || !(p = strrchr(line, ')')))
		return -EINVAL;
	/* Fields 3 (state) to 24 (rss); 14, 15, 22 and 24 are kept. */
	n = sscanf(p + 1,
		   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
		   "%*d %llu %*u %lld",
		   &st->utime, &st->stime, &st->starttime, &st->rss);
	return n == 4 ? 0 : -EINVAL;
}

/* The boot time, Unix seconds (btime of /proc/stat). Returns 0, or -errno. */
static int read_boot_time(unsigned long long *btime)
{
	char line[256];
	FILE *f = fopen("/proc/stat", "re");
	int rc = -EINVAL;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "btime %llu", btime) == 1) {
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* Open descriptors, not counting the one this count itself opens. Returns
 * the count, or -errno. */
static long count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n > 0 ? n - 1 : 0;
}

static int family(struct buf *out, const char *name, const char *type, const char *help, double v)
{
	return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.15g\n", name, help, name, type,
			  name, v);
}

int process_metrics_render(struct buf *out)
{
	double tick = (double)sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long btime;
	struct self_stat st;
	long fds;
	int rc = 0;

	if (read_self_stat(&st) == 0) {
		rc |= family(out, "process_cpu_seconds_total", "counter",
			     "Total user and system CPU time spent in seconds.",
			     (double)(st.utime + st.stime) / tick);
		rc |= family(out, "process_resident_memory_bytes", "gauge",
			     "Resident memory size in bytes.", (double)st.rss * (double)page);
		if (read_boot_time(&btime) == 0)
			rc |= family(out, "process_start_time_seconds", "gauge",
				     "Start time of the process since unix epoch in seconds.",
				     (double)btime + (double)st.starttime / tick);
	}
	fds = count_open_fds();
	if (fds >= 0)
		rc |= family(out, "process_open_fds", "gauge", "Number of open file descriptors.",
			     (double)fds);
	return rc ? -ENOMEM : 0;
}
