/*
 * log.c — leveled logging (see log.h).
 */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Process-wide singleton: the minimum level printed. */
static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_set_level_name(const char *name)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(name, level_names[i]) == 0) {
			min_level = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void log_set_level(enum log_level level)
{
	min_level = level;
}

enum log_level log_get_level(void)
{
	return min_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One fprintf per line so that concurrent threads do not interleave. */
	fprintf(stderr, "%s.%03ldZ level=%s %s\n", stamp, ts.tv_nsec / 1000000, level_names[level],
		line);
}
