/*
 * log.c — leveled logging (see log.h).
 */
#include "common/log.h"
#include "common/buf.h"
#include "common/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Process-wide singleton: the minimum level printed. */
static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

enum log_format { LOG_TEXT, LOG_LOGFMT, LOG_JSON };
static enum log_format format = LOG_TEXT;

int log_set_format_name(const char *name)
{
	static const char *const names[] = {"text", "logfmt", "json"};

	for (int i = 0; i < 3; i++) {
		if (strcmp(name, names[i]) == 0) {
			format = (enum log_format)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* logfmt's quoted value: backslash, quote and control characters escaped. */
static void logfmt_quote(char *out, size_t outsz, const char *s)
{
	size_t o = 0;

	out[o++] = '"';
	for (; *s && o + 7 < outsz; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (c < 0x20) {
			o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
}

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
	if (format == LOG_LOGFMT) {
		char quoted[sizeof(line) * 2];

		logfmt_quote(quoted, sizeof(quoted), line);
		fprintf(stderr, "ts=%s.%03ldZ level=%s msg=%s\n", stamp, ts.tv_nsec / 1000000,
			level_names[level], quoted);
	} else if (format == LOG_JSON) {
		struct buf msg = {0};

		if (json_append_string(&msg, line) == 0 && buf_terminate(&msg) == 0)
			fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":%s}\n",
				stamp, ts.tv_nsec / 1000000, level_names[level],
				(const char *)msg.data);
		buf_free(&msg);
	} else {
		fprintf(stderr, "%s.%03ldZ level=%s %s\n", stamp, ts.tv_nsec / 1000000,
			level_names[level], line);
	}
}
