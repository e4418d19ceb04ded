/*
 * perfmap_reader.c — reading processes' perf maps, safely and as they grow.
 *
 * Where: /tmp/perf-N.map inside the process's own root (/proc/PID/root),
 * N being its pid in its own pid namespace (the last NSpid of
 * /proc/PID/status), so a container's JIT is named too.
 *
 * The file belongs to the process, which may be hostile; the agent is
 * root. So:
 *  - the path is resolved inside the process's root (openat2
 *    RESOLVE_IN_ROOT: a /tmp that is a symbolic link cannot lead out), as
 *    an O_PATH descriptor with O_NOFOLLOW: nothing is opened for reading
 *    yet, so a FIFO cannot block and a device is never opened;
 *  - it must be a regular file, not on FUSE (whose reads its owner could
 *    hold forever), owned by the process's real or effective uid: a link
 *    to /etc/shadow is a symlink (refused) or a file owned by root, which
 *    only a root process could plant, and root can read it anyway;
 *  - only then is it opened for reading, through /proc/self/fd of that
 *    same inode, and read with bounded preads (PERFMAP_FILE_MAX_BYTES over
 *    the file's life).
 *
 * Growth: the file's (dev, inode) and the bytes consumed are kept; a later
 * read parses only what was appended. Another inode at the path, or a file
 * shorter than what was consumed, is read again from scratch. A file that
 * vanished leaves the names loaded as they are (the code may still run).
 *
 * When: a process's map is read when one of its samples has a frame in a
 * JIT region, at most once a second (doubling up to a minute while it has
 * no file), and once more before each window's profiles are built, while
 * it lives. A process gone keeps the names it had (its proc_info, which
 * windows hold, owns them).
 */
#include "agent/agent.h"
#include "agent/perfmap.h"
#include "common/htab.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

#define REFRESH_NS     (1000ull * 1000000)
#define BACKOFF_MAX_NS (60ull * 1000000000)
/* One pread; a refresh reads at most READ_MAX_PER_REFRESH. */
#define READ_CHUNK	     (256u << 10)
#define READ_MAX_PER_REFRESH (4u << 20)

struct perfmap_registry {
	char *proc_root;
	struct perfmap_budget budget;
	struct perfmap_metrics *m;
	char *chunk; /* READ_CHUNK bytes, reused by every read */
};

struct perfmap_proc {
	struct perfmap_registry *reg;
	struct perfmap *map;
	bool ids_read;	     /* nspid and uids below are known */
	uint32_t nspid;	     /* the pid in its own namespace */
	uint32_t ruid, euid; /* who may own the file */
	char path[40];	     /* /tmp/perf-N.map */
	bool have_file;	     /* dev/ino below name the file read */
	uint64_t dev, ino;
	uint64_t consumed;   /* bytes of it parsed */
	bool over;	     /* PERFMAP_FILE_MAX_BYTES consumed */
	uint64_t next_ns;    /* no read before (monotonic) */
	uint64_t backoff_ns; /* while reads fail */
	bool error_logged;   /* the first rejected line was logged */
};

#define ADD(f, v) atomic_fetch_add_explicit(&r->m->f, (v), memory_order_relaxed)
#define SET(f, v) atomic_store_explicit(&r->m->f, (v), memory_order_relaxed)

struct perfmap_registry *perfmap_registry_new(const char *proc_root, size_t max_bytes,
					      struct perfmap_metrics *m)
{
	struct perfmap_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->proc_root = strdup(proc_root ? proc_root : "/proc");
	r->chunk = malloc(READ_CHUNK);
	r->budget.limit = max_bytes;
	r->m = m;
	if (!r->proc_root || !r->chunk) {
		perfmap_registry_free(r);
		return NULL;
	}
	return r;
}

void perfmap_registry_free(struct perfmap_registry *r)
{
	if (!r)
		return;
	free(r->proc_root);
	free(r->chunk);
	free(r);
}

static void publish(struct perfmap_registry *r)
{
	SET(bytes, r->budget.used);
}

void perfmap_proc_free(struct perfmap_proc *pp)
{
	struct perfmap_registry *r;

	if (!pp)
		return;
	r = pp->reg;
	if (pp->map) {
		atomic_fetch_sub_explicit(&r->m->symbols, perfmap_count(pp->map),
					  memory_order_relaxed);
		perfmap_free(pp->map);
		publish(r);
	}
	free(pp);
}

bool perfmap_jit_region(const struct proc_mapping *m)
{
	if (!m || !m->path[0])
		return true;
	return strncmp(m->path, "/memfd:", 7) == 0 || strncmp(m->path, "[anon", 5) == 0 ||
	       strcmp(m->path, "//anon") == 0;
}

/* Reads NSpid (last field) and Uid (real, effective) of /proc/PID/status. */
static int read_ids(struct perfmap_registry *r, uint32_t pid, struct perfmap_proc *pp)
{
	char path[256], *line, *save = NULL;
	bool have_pid = false, have_uid = false;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/status", r->proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, r->chunk, READ_CHUNK - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	r->chunk[n] = '\0';
	for (line = strtok_r(r->chunk, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *last = strrchr(line, '\t'), *end;
			unsigned long v;

			last = last ? last + 1 : line + 6;
			v = strtoul(last, &end, 10);
			if (end != last && v > 0 && v <= UINT32_MAX) {
				pp->nspid = (uint32_t)v;
				have_pid = true;
			}
		} else if (strncmp(line, "Uid:", 4) == 0) {
			unsigned long ru, eu;

			if (sscanf(line + 4, "%lu %lu", &ru, &eu) == 2) {
				pp->ruid = (uint32_t)ru;
				pp->euid = (uint32_t)eu;
				have_uid = true;
			}
		}
	}
	/* Kernels before 4.1 have no NSpid: the pid is then the only one. */
	if (!have_pid) {
		pp->nspid = pid;
		have_pid = true;
	}
	if (!have_uid)
		return -EINVAL;
	snprintf(pp->path, sizeof(pp->path), "/tmp/perf-%u.map", pp->nspid);
	pp->ids_read = true;
	return 0;
}

/* An O_PATH descriptor of the perf map inside root_fd, never following a
 * symbolic link out of it, or -errno. */
static int open_path_in_root(int root_fd, const char *rel)
{
	struct open_how how = {
	    .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));

	/* Before Linux 5.6: the last component is still not followed. */
	if (fd < 0 && errno == ENOSYS)
		fd = openat(root_fd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

/* Opens pp's file for reading after the checks above; fills *st. Returns
 * the fd or -(enum perfmap_failure + 1). */
static int open_checked(struct perfmap_registry *r, uint32_t pid, struct perfmap_proc *pp,
			struct stat *st)
{
	char path[256];
	struct statfs sfs;
	int root_fd, path_fd, fd, fail = -1;

	snprintf(path, sizeof(path), "%s/%u/root", r->proc_root, pid);
	root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return -(PERFMAP_FAIL_PROC + 1);
	path_fd = open_path_in_root(root_fd, pp->path + 1);
	close(root_fd);
	if (path_fd < 0) {
		if (path_fd == -ENOENT)
			return -(PERFMAP_FAIL_NOT_FOUND + 1);
		if (path_fd == -ELOOP)
			return -(PERFMAP_FAIL_SYMLINK + 1);
		return -(PERFMAP_FAIL_IO + 1);
	}
	if (fstat(path_fd, st) != 0)
		fail = PERFMAP_FAIL_IO;
	else if (S_ISLNK(st->st_mode))
		fail = PERFMAP_FAIL_SYMLINK;
	else if (!S_ISREG(st->st_mode))
		fail = PERFMAP_FAIL_NOT_REGULAR;
	else if (fstatfs(path_fd, &sfs) != 0)
		fail = PERFMAP_FAIL_IO;
	else if (sfs.f_type == FUSE_SUPER_MAGIC)
		fail = PERFMAP_FAIL_NOT_REGULAR;
	else if (st->st_uid != pp->ruid && st->st_uid != pp->euid)
		fail = PERFMAP_FAIL_OWNER;
	if (fail >= 0) {
		close(path_fd);
		return -(fail + 1);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", path_fd);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	close(path_fd);
	return fd < 0 ? -(PERFMAP_FAIL_IO + 1) : fd;
}

/* Feeds what the file holds past pp->consumed (bounded) into pp->map. */
static int read_appended(struct perfmap_registry *r, struct perfmap_proc *pp, int fd,
			 const struct stat *st)
{
	struct perfmap_feed_stats fs = {0};
	size_t before = perfmap_count(pp->map), taken = 0;
	uint64_t size = (uint64_t)st->st_size;
	int rc = 0;

	while (pp->consumed < size && taken < READ_MAX_PER_REFRESH) {
		uint64_t want = size - pp->consumed;
		ssize_t n;
		size_t used;

		if (pp->consumed >= PERFMAP_FILE_MAX_BYTES) {
			pp->over = true;
			rc = -(PERFMAP_FAIL_TOO_BIG + 1);
			break;
		}
		if (want > READ_CHUNK)
			want = READ_CHUNK;
		n = pread(fd, r->chunk, (size_t)want, (off_t)pp->consumed);
		if (n < 0) {
			rc = -(PERFMAP_FAIL_IO + 1);
			break;
		}
		if (n == 0)
			break;
		used = perfmap_feed(pp->map, r->chunk, (size_t)n, &fs);
		taken += (size_t)n;
		pp->consumed += used;
		/* Nothing consumed: a last line still being written (a line
		 * cut by the chunk's end is read again whole). */
		if (used == 0)
			break;
	}
	atomic_fetch_add_explicit(&r->m->symbols, perfmap_count(pp->map) - before,
				  memory_order_relaxed);
	ADD(symbols_read, fs.symbols_added);
	ADD(symbols_dropped, fs.symbols_dropped);
	ADD(lines_rejected, fs.lines_rejected);
	publish(r);
	if (fs.lines_rejected && !pp->error_logged) {
		log_debug("perf map %s of pid %u: %s (such lines are skipped)", pp->path, pp->nspid,
			  perfmap_first_error(pp->map));
		pp->error_logged = true;
	}
	return rc;
}

/* Empties pp's table (the file was replaced or shrank). */
static void forget_file(struct perfmap_registry *r, struct perfmap_proc *pp)
{
	atomic_fetch_sub_explicit(&r->m->symbols, perfmap_count(pp->map), memory_order_relaxed);
	perfmap_clear(pp->map);
	publish(r);
	pp->consumed = 0;
	pp->over = false;
	pp->error_logged = false;
}

/* One read of p's perf map. 0 or -(enum perfmap_failure + 1). */
static int refresh(struct perfmap_registry *r, struct proc_info *p, struct perfmap_proc *pp)
{
	struct stat st;
	int fd, rc;

	if (!pp->ids_read && read_ids(r, p->pid, pp) != 0)
		return -(PERFMAP_FAIL_PROC + 1);
	fd = open_checked(r, p->pid, pp, &st);
	if (fd < 0)
		return fd;
	if (pp->have_file && (pp->dev != (uint64_t)st.st_dev || pp->ino != (uint64_t)st.st_ino ||
			      (uint64_t)st.st_size < pp->consumed))
		forget_file(r, pp);
	pp->have_file = true;
	pp->dev = (uint64_t)st.st_dev;
	pp->ino = (uint64_t)st.st_ino;
	rc = pp->over ? -(PERFMAP_FAIL_TOO_BIG + 1) : read_appended(r, pp, fd, &st);
	close(fd);
	return rc;
}

/* Whether p is still the live process its entry was read from: a gone,
 * exited or exec'd entry's pid may name another process now. */
static bool alive(const struct proc_info *p)
{
	return p->cached && !p->stale && !p->gone && !p->exited_ns;
}

/* Reads p's map if due (force: the window's read, due unless backing off
 * after a failure). */
static void refresh_due(struct perfmap_registry *r, struct proc_info *p, uint64_t now_ns,
			bool force)
{
	struct perfmap_proc *pp = p->perfmap;
	int rc;

	if (!alive(p) || r->budget.limit == 0)
		return;
	if (!pp) {
		pp = calloc(1, sizeof(*pp));
		if (!pp)
			return;
		pp->reg = r;
		pp->map = perfmap_new(&r->budget);
		if (!pp->map) {
			free(pp);
			return;
		}
		p->perfmap = pp;
	}
	if (now_ns < pp->next_ns && (!force || pp->backoff_ns))
		return;
	rc = refresh(r, p, pp);
	if (rc == 0) {
		pp->backoff_ns = 0;
		pp->next_ns = now_ns + REFRESH_NS;
		return;
	}
	/* A failure is counted once per attempt; attempts back off. */
	ADD(failures[-rc - 1], 1);
	pp->backoff_ns = pp->backoff_ns ? pp->backoff_ns * 2 : REFRESH_NS;
	if (pp->backoff_ns > BACKOFF_MAX_NS)
		pp->backoff_ns = BACKOFF_MAX_NS;
	pp->next_ns = now_ns + pp->backoff_ns;
}

void perfmap_note_sample(struct perfmap_registry *r, struct proc_info *p,
			 const struct sample_event *e, uint64_t now_ns)
{
	size_t nf = (size_t)e->n_kernel + e->n_user;

	if (!r || (p->perfmap && now_ns < p->perfmap->next_ns))
		return;
	for (size_t i = e->n_kernel; i < nf; i++) {
		uint64_t addr = e->frames[i];

		/* Page zero and the kernel half are never code. */
		if (addr < 0x10000 || addr >= 0x800000000000ull)
			continue;
		if (perfmap_jit_region(procmaps_find(&p->maps, addr))) {
			refresh_due(r, p, now_ns, false);
			return;
		}
	}
}

const char *perfmap_proc_lookup(const struct proc_info *p, uint64_t addr, const char **file)
{
	const char *name;

	if (!p->perfmap || !perfmap_count(p->perfmap->map))
		return NULL;
	name = perfmap_lookup(p->perfmap->map, addr);
	if (name && file)
		*file = p->perfmap->path;
	return name;
}

/* Counts w's frames of p in JIT regions, named and not (each weighted by
 * its stack's samples). */
static void count_frames(struct perfmap_registry *r, const struct window_proc *wp)
{
	const struct proc_info *p = wp->info;
	uint64_t named = 0, unnamed = 0, count;
	size_t iter = 0, klen;
	const void *key;

	while (htab_next(wp->stacks, &iter, &key, &klen, &count)) {
		const struct window_stack_key *k = key;
		const uint64_t *frames = (const uint64_t *)((const char *)key + sizeof(*k));

		for (size_t f = k->n_kernel; f < (size_t)k->n_kernel + k->n_user; f++) {
			uint64_t addr = ksym_frame_addr(frames[f], f == k->n_kernel);

			if (addr < 0x10000 || addr >= 0x800000000000ull ||
			    !perfmap_jit_region(procmaps_find(&p->maps, addr)))
				continue;
			if (perfmap_proc_lookup(p, addr, NULL))
				named += count;
			else
				unnamed += count;
		}
	}
	ADD(frames_named, named);
	ADD(frames_unnamed, unnamed);
}

void perfmap_window_prepare(struct perfmap_registry *r, const struct window *w, uint64_t now_ns)
{
	if (!r)
		return;
	for (size_t i = 0; i < w->n; i++) {
		struct proc_info *p = w->procs[i].info;

		if (!p->perfmap)
			continue;
		refresh_due(r, p, now_ns, true);
		/* Only processes with a map: elsewhere a frame in no mapping
		 * is mostly a frame-pointer walk's stray stack word. */
		if (perfmap_count(p->perfmap->map))
			count_frames(r, &w->procs[i]);
	}
}

int perfmap_metrics_render(const struct perfmap_metrics *m, struct buf *out)
{
	static const char *const reasons[PERFMAP_FAIL_NR] = {
	    [PERFMAP_FAIL_NOT_FOUND] = "not_found",
	    [PERFMAP_FAIL_SYMLINK] = "symlink",
	    [PERFMAP_FAIL_NOT_REGULAR] = "not_regular",
	    [PERFMAP_FAIL_OWNER] = "wrong_owner",
	    [PERFMAP_FAIL_TOO_BIG] = "too_big",
	    [PERFMAP_FAIL_PROC] = "process_gone",
	    [PERFMAP_FAIL_IO] = "io",
	};
#define L(f) ((unsigned long long)atomic_load_explicit(&m->f, memory_order_relaxed))
	int rc = buf_printf(
	    out,
	    "# HELP kiln_agent_perf_map_symbols JIT symbols loaded from perf maps "
	    "(/tmp/perf-PID.map).\n"
	    "# TYPE kiln_agent_perf_map_symbols gauge\n"
	    "kiln_agent_perf_map_symbols %llu\n"
	    "# HELP kiln_agent_perf_map_bytes Memory of those symbols (cap: "
	    "--perf-map-max-bytes).\n"
	    "# TYPE kiln_agent_perf_map_bytes gauge\n"
	    "kiln_agent_perf_map_bytes %llu\n"
	    "# HELP kiln_agent_perf_map_symbols_read_total Perf-map lines loaded.\n"
	    "# TYPE kiln_agent_perf_map_symbols_read_total counter\n"
	    "kiln_agent_perf_map_symbols_read_total %llu\n"
	    "# HELP kiln_agent_perf_map_symbols_dropped_total Perf-map lines not loaded: "
	    "over the per-process or total cap.\n"
	    "# TYPE kiln_agent_perf_map_symbols_dropped_total counter\n"
	    "kiln_agent_perf_map_symbols_dropped_total %llu\n"
	    "# HELP kiln_agent_perf_map_lines_rejected_total Perf-map lines that are not "
	    "\"START SIZE name\".\n"
	    "# TYPE kiln_agent_perf_map_lines_rejected_total counter\n"
	    "kiln_agent_perf_map_lines_rejected_total %llu\n"
	    "# HELP kiln_agent_perf_map_frames_total Sampled frames in JIT code of processes "
	    "with a perf map, by whether it named them.\n"
	    "# TYPE kiln_agent_perf_map_frames_total counter\n"
	    "kiln_agent_perf_map_frames_total{result=\"named\"} %llu\n"
	    "kiln_agent_perf_map_frames_total{result=\"unnamed\"} %llu\n"
	    "# HELP kiln_agent_perf_map_read_failures_total Reads of a perf map that failed, "
	    "by reason.\n"
	    "# TYPE kiln_agent_perf_map_read_failures_total counter\n",
	    L(symbols), L(bytes), L(symbols_read), L(symbols_dropped), L(lines_rejected),
	    L(frames_named), L(frames_unnamed));

	for (int i = 0; i < PERFMAP_FAIL_NR; i++)
		rc |=
		    buf_printf(out, "kiln_agent_perf_map_read_failures_total{reason=\"%s\"} %llu\n",
			       reasons[i], L(failures[i]));
#undef L
	return rc;
}
