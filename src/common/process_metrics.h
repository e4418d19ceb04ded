/*
 * process_metrics.h — the standard process_* families of a Prometheus
 * /metrics page, read from /proc/self.
 *
 * Both kiln and kiln-agent append them to their /metrics, so that dashboards
 * written for any Prometheus client library work on Kiln unchanged.
 */
#ifndef KILN_COMMON_PROCESS_METRICS_H
#define KILN_COMMON_PROCESS_METRICS_H

#include "common/buf.h"

/*
 * Appends process_cpu_seconds_total, process_resident_memory_bytes,
 * process_open_fds and process_start_time_seconds (each with its HELP and
 * TYPE lines) to out. A family whose /proc file cannot be read is left out
 * rather than reported as 0. Returns 0, or -ENOMEM when out cannot grow.
 */
int process_metrics_render(struct buf *out);

#endif
