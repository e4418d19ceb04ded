/*
 * log.h — leveled logging to stderr.
 *
 * One line per event. Formats (--log-format, as Parca's binaries name them):
 *   text (default)  2026-11-22T19:30:00.123Z level=warn message
 *   logfmt          ts=2026-11-22T19:30:00.123Z level=warn msg="message"
 *   json            {"ts":"2026-11-22T19:30:00.123Z","level":"warn","msg":"message"}
 * Level and format are process-wide settings (the sanctioned globals
 * besides the metrics registry), set once by main from the flags.
 */
#ifndef KILN_COMMON_LOG_H
#define KILN_COMMON_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Returns 0, or -EINVAL for an unknown name ("debug", "info", "warn", "error"). */
int log_set_level_name(const char *name);
void log_set_level(enum log_level level);
/* Returns 0, or -EINVAL for a name other than "text", "logfmt", "json". */
int log_set_format_name(const char *name);
enum log_level log_get_level(void);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
