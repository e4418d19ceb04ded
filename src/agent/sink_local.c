/*
 * sink_local.c — the --local-store-directory sink.
 *
 * Default layout (--local-store-layout=process, what issue 3 asks for):
 * one file per process per window, DIR/TIME_PID_COMM.pb.gz, e.g.
 * 20261123T073000Z_4242_nginx.pb.gz (window start in UTC; comm reduced
 * to [A-Za-z0-9._-]), the series labels also in the samples. Profiles
 * that fit one file-system block come in stored gzip blocks (agent.c,
 * LOCAL_STORED_MAX).
 *
 * --local-store-layout=window: one file per window, DIR/TIME.pb.gz: a
 * single pprof holding every process's samples, each sample carrying its
 * process's series labels (pid, comm, executable, cgroup, node, ...)
 * beside thread_id and thread_name, so `go tool pprof
 * -tagfocus=pid=^4242$` or `-tagfocus=comm=X` gives one process, and
 * `-tags` lists them: one inode a window instead of ~200, for hosts where
 * creating files is the agent's main cost.
 *
 * Off-CPU profiles (--off-cpu-threshold) sit beside the CPU ones under the
 * same stem with ".offcpu" before ".pb.gz": TIME_PID_COMM.offcpu.pb.gz,
 * or TIME.offcpu.pb.gz in the window layout.
 *
 * Files appear atomically, so a reader never sees half a profile: each is
 * written to an unnamed file (O_TMPFILE) in the directory and linked in
 * under its name with linkat, which fails rather than replace a file;
 * where the file system has no O_TMPFILE, to a temporary name then
 * renamed without replacing. Both relative to a directory fd kept open,
 * so no path is walked twice. The unnamed file saves the rename's second
 * directory entry and lookup: 20 against 27 us a file on this VM's ext4
 * (bench-agent writes ~1,000 a minute). No fsync: a window's profiles are
 * cheap to lose in a crash.
 */
#include "agent/agent.h"
#include "common/fdio.h"

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
	int dirfd;
	bool per_process;
	/* O_TMPFILE refused once (file system without it): temp + rename. */
	bool no_tmpfile;
};

/* The name of the k-th try for stem and extension: STEM.EXT, then
 * STEM_2.EXT ... (two profiles of one pid in one window, after an exec). */
static void final_name(char *out, size_t outsz, const char *stem, const char *ext, unsigned k)
{
	if (k == 1)
		snprintf(out, outsz, "%s%s", stem, ext);
	else
		snprintf(out, outsz, "%s_%u%s", stem, k, ext);
}

/* Links the open unnamed file fd into the directory under the first free
 * name. AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH, which the agent (root)
 * has; /proc/self/fd/N is the fallback without it. */
static int link_tmpfile(int dirfd, int fd, const char *stem, const char *ext)
{
	char name[4096], self[64];

	for (unsigned k = 1; k < 100; k++) {
		final_name(name, sizeof(name), stem, ext, k);
		if (linkat(fd, "", dirfd, name, AT_EMPTY_PATH) == 0)
			return 0;
		if (errno == ENOENT || errno == EPERM) {
			snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
			if (linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) == 0)
				return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Writes data to .STEM.tmp then renames it to its final name. */
static int write_renamed(int dirfd, const char *stem, const char *ext, const uint8_t *data,
			 size_t len)
{
	char tmp[4096], name[4096];
	int fd, rc;

	snprintf(tmp, sizeof(tmp), ".%s%s.tmp", stem, ext);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = fd_write_all(fd, data, len);
	if (close(fd) != 0 && !rc)
		rc = -errno;
	for (unsigned k = 1; !rc && k < 100; k++) {
		final_name(name, sizeof(name), stem, ext, k);
		if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			rc = -errno;
	}
	unlinkat(dirfd, tmp, 0);
	return rc ? rc : -EEXIST;
}

static int write_profile(struct sink_local *l, const char *stem, const char *ext,
			 const uint8_t *data, size_t len)
{
	int fd, rc;

	if (l->no_tmpfile)
		return write_renamed(l->dirfd, stem, ext, data, len);
	fd = openat(l->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0) {
		/* EOPNOTSUPP (the file system), EISDIR (a kernel before 3.11
		 * sees a plain directory open): from now on temp + rename. */
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return -errno;
		l->no_tmpfile = true;
		return write_renamed(l->dirfd, stem, ext, data, len);
	}
	rc = fd_write_all(fd, data, len);
	if (!rc)
		rc = link_tmpfile(l->dirfd, fd, stem, ext);
	close(fd); /* unlinked if never linked: nothing left behind */
	return rc;
}

static int local_write_window(struct agent_sink *s, const struct agent_profile *profiles, size_t n,
			      struct kiln_error *err)
{
	struct sink_local *l = (struct sink_local *)s;
	int written = 0, first_rc = 0;

	for (size_t i = 0; i < n; i++) {
		const struct agent_profile *p = &profiles[i];
		const char *ext = p->kind == AGENT_PROFILE_OFFCPU ? ".offcpu.pb.gz" : ".pb.gz";
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
		rc = write_profile(l, stem, ext, p->pprof, p->pprof_len);
		if (rc) {
			if (!first_rc)
				first_rc = kiln_error_set(err, -rc, "%s/%s%s: %s", l->dir, stem,
							  ext, strerror(-rc));
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
	if (l->dirfd >= 0)
		close(l->dirfd);
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
	l->dirfd = open(dir, O_DIRECTORY | O_PATH | O_CLOEXEC);
	if (l->dirfd < 0) {
		int e = errno;

		free(l->dir);
		free(l);
		return kiln_error_set(err, e, "--local-store-directory %s: %s", dir, strerror(e));
	}
	l->sink.name = "local";
	l->per_process = per_process;
	l->sink.shape = per_process ? SINK_PER_PROCESS_LABELLED : SINK_WINDOW;
	l->sink.write_window = local_write_window;
	l->sink.close = local_close;
	*out = &l->sink;
	return 0;
}
