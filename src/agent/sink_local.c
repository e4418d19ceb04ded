/*
 * sink_local.c — the --local-store-directory sink.
 *
 * Each profile becomes DIR/TIME_PID_COMM.pb.gz, e.g.
 * 20261123T073000Z_4242_nginx.pb.gz (window start in UTC, comm reduced to
 * [A-Za-z0-9._-]). Files are written atomically (temporary file, fsync,
 * rename), so a reader never sees half a profile. The series labels are in
 * the samples (series_labels_in_samples), which is how pprof tools see them.
 */
#include "agent/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct sink_local {
	struct agent_sink sink; /* first: the sink is cast back to this */
	char *dir;
};

static int local_write_window(struct agent_sink *s, const struct agent_profile *profiles, size_t n,
			      struct kiln_error *err)
{
	struct sink_local *l = (struct sink_local *)s;
	int written = 0, first_rc = 0;

	for (size_t i = 0; i < n; i++) {
		const struct agent_profile *p = &profiles[i];
		char comm[64], stamp[32], path[4096];
		time_t t = (time_t)(p->time_ns / 1000000000);
		struct buf b = {.data = (uint8_t *)p->pprof, .len = p->pprof_len};
		struct tm tm;
		size_t j;
		int rc;

		for (j = 0; p->comm[j] && j < sizeof(comm) - 1; j++) {
			char c = p->comm[j];

			comm[j] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					  (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'
				      ? c
				      : '_';
		}
		comm[j] = '\0';
		gmtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		snprintf(path, sizeof(path), "%s/%s_%u_%s.pb.gz", l->dir, stamp, p->pid, comm);
		/* Two profiles of one pid in one window (it exec'd a binary with
		 * the same name): keep both. */
		for (unsigned k = 2; access(path, F_OK) == 0 && k < 100; k++)
			snprintf(path, sizeof(path), "%s/%s_%u_%s_%u.pb.gz", l->dir, stamp, p->pid,
				 comm, k);
		rc = buf_write_file(&b, path);
		if (rc) {
			if (!first_rc)
				first_rc = kiln_error_set(err, -rc, "%s: %s", path, strerror(-rc));
			continue;
		}
		written++;
	}
	return first_rc && !written ? first_rc : written;
}

static void local_close(struct agent_sink *s)
{
	struct sink_local *l = (struct sink_local *)s;

	if (!l)
		return;
	free(l->dir);
	free(l);
}

int sink_local_new(const char *dir, struct agent_sink **out, struct kiln_error *err)
{
	struct sink_local *l;
	struct stat st;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return kiln_error_set(err, errno, "--local-store-directory %s: %s", dir,
				      strerror(errno));
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return kiln_error_set(err, ENOTDIR, "--local-store-directory %s: not a directory",
				      dir);
	l = calloc(1, sizeof(*l));
	if (!l || !(l->dir = strdup(dir))) {
		free(l);
		return -ENOMEM;
	}
	l->sink.name = "local";
	l->sink.series_labels_in_samples = true;
	l->sink.write_window = local_write_window;
	l->sink.close = local_close;
	*out = &l->sink;
	return 0;
}
