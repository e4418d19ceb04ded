/*
 * sink_local.c — the --local-store-directory sink.
 *
 * Default layout: one file per window, DIR/TIME.pb.gz, e.g.
 * 20261123T073000Z.pb.gz (window start in UTC): a single pprof holding
 * every process's samples, each sample carrying its process's series
 * labels (pid, comm, executable, cgroup, node, ...) beside thread_id and
 * thread_name, so `go tool pprof -tagfocus=pid=^4242$` or `-tagfocus=comm=X`
 * gives one process, and `-tags` lists them. One file rather than one per
 * process: creating ~200 files every 10 s (an inode allocation, a write
 * and a rename each) was a quarter of the agent's CPU in bench-agent.
 *
 * --local-store-layout=process: one file per process per window,
 * DIR/TIME_PID_COMM.pb.gz, e.g. 20261123T073000Z_4242_nginx.pb.gz (comm
 * reduced to [A-Za-z0-9._-]), the series labels also in the samples.
 *
 * Files appear atomically (temporary file, then rename without
 * replacing), so a reader never sees half a profile. No fsync: a window's
 * profiles are cheap to lose in a crash.
 */
#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct sink_local {
	struct agent_sink sink; /* first: the sink is cast back to this */
	char *dir;
	bool per_process;
};

/* Writes data to DIR/.tmp then renames it to name (or name_2 ... if taken:
 * two profiles of one pid in one window, after an exec). */
static int write_profile(const char *dir, const char *stem, const uint8_t *data, size_t len)
{
	char tmp[4096], path[4096];
	size_t off = 0;
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, stem);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		off += (size_t)n;
	}
	if (close(fd) != 0 && !rc)
		rc = -errno;
	for (unsigned k = 1; !rc && k < 100; k++) {
		if (k == 1)
			snprintf(path, sizeof(path), "%s/%s.pb.gz", dir, stem);
		else
			snprintf(path, sizeof(path), "%s/%s_%u.pb.gz", dir, stem, k);
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			rc = -errno;
	}
	unlink(tmp);
	return rc ? rc : -EEXIST;
}

static int local_write_window(struct agent_sink *s, const struct agent_profile *profiles, size_t n,
			      struct kiln_error *err)
{
	struct sink_local *l = (struct sink_local *)s;
	int written = 0, first_rc = 0;

	for (size_t i = 0; i < n; i++) {
		const struct agent_profile *p = &profiles[i];
		char comm[64], stamp[32], stem[256];
		time_t t = (time_t)(p->time_ns / 1000000000);
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
		if (l->per_process)
			snprintf(stem, sizeof(stem), "%s_%u_%s", stamp, p->pid, comm);
		else
			snprintf(stem, sizeof(stem), "%s", stamp);
		rc = write_profile(l->dir, stem, p->pprof, p->pprof_len);
		if (rc) {
			if (!first_rc)
				first_rc = kiln_error_set(err, -rc, "%s/%s.pb.gz: %s", l->dir, stem,
							  strerror(-rc));
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

int sink_local_new(const char *dir, bool per_process, struct agent_sink **out,
		   struct kiln_error *err)
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
	l->per_process = per_process;
	l->sink.shape = per_process ? SINK_PER_PROCESS_LABELLED : SINK_WINDOW;
	l->sink.write_window = local_write_window;
	l->sink.close = local_close;
	*out = &l->sink;
	return 0;
}
