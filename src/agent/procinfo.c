/*
 * procinfo.c — what the agent knows about each sampled process.
 *
 * An entry is read from /proc the first time a pid shows up in a sample
 * (the kernel wakes the agent for it: within ~20 ms), so a process that
 * exits before the window ends is still attributed: its mappings,
 * executable and cgroup were captured while it lived. A process gone even
 * before that takes its executable and code mappings from the kernel's
 * mmap records (mmapwatch.c), kept per pid as notes for a few seconds. Files are opened through /proc/PID/root so
 * that a process in a container (another mount namespace) gets the build
 * IDs of its own binaries; the mapping paths stay as the process sees them.
 * Code mappings: where the kernel has the PROCMAP_QUERY ioctl (6.11+),
 * learned one at a time, each when a frame first needs it (proc_cache_
 * resolve), while the process lives: a process's samples touch a few of
 * its mappings, and the kernel formats nothing else. Elsewhere the whole
 * text of /proc/PID/maps is read at first sight.
 *
 * Entries are kept in a chained hash by pid and dropped when the process
 * exits (the BPF exit event). They are re-read after exec (the BPF exec
 * event), when a frame falls outside every known mapping
 * (dlopen, JIT; rate-limited), or when the pid was reused (start time
 * differs). Windows hold references so that expiry never frees an entry a
 * pending profile still points at.
 */
#include "agent/agent.h"
#include "common/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PROC_BUCKETS 1024

/* What the kernel's mmap records said of a process (mmapwatch.c), kept for
 * a process that is gone before its first reading from /proc: its code
 * mappings since its exec, and the executable (the first code mapping
 * after the exec: the kernel maps the binary before its interpreter).
 * Notes are only needed between a process's first sample and its reading
 * (20 ms for a new process, 2 s at most), so each lives NOTE_TTL_NS; at
 * most NOTES_MAX pids, so that a host starting hundreds of processes a
 * second holds a few MB of them (~20 code mappings a process), not more. */
struct proc_note {
	uint32_t pid;
	uint32_t parent; /* forked from, not exec'd since: its code is the parent's */
	bool after_exec;
	uint64_t noted_ns;
	char *exe;
	struct proc_maps maps;
	struct proc_note *next;
};
#define NOTE_TTL_NS (5ull * 1000000000)
/* How often a forked child's unknown address may make its parent's maps
 * be read again (agent.c asks the same of every process). */
#define MAPS_REREAD_NS (1000ull * 1000000)
#define NOTES_MAX      4096
#define NOTE_MAPS_MAX  256

struct proc_cache {
	char *proc_root;
	struct proc_info *buckets[PROC_BUCKETS];
	size_t count;
	struct buildid_cache *buildids;
	/* The host's executable [vsyscall] page, if it has one: a fixed
	 * page in every process that PROCMAP_QUERY does not report (it is
	 * not a VMA of the process), added to what it does. */
	struct proc_mapping vsyscall;
	bool has_vsyscall;
	/* The kernel answers PROCMAP_QUERY: entries are lazy (proc_info). */
	bool lazy;
	/* Kept /proc/PID/maps fds (proc_info.maps_fd) and their budget: half
	 * the soft RLIMIT_NOFILE; past it, an fd is opened per query. */
	size_t open_fds, max_fds;
	/* Holds each /proc file read (kept: a 4 KiB malloc per new process
	 * was a sixth of reading it, the heap being full of small frees). */
	struct buf scratch;
	struct proc_note *notes[PROC_BUCKETS];
	size_t n_notes;
	/* How many parents deep note_parent is: a chain of forks (a subshell
	 * of a subshell) is followed a few steps, never round a reused pid. */
	int parent_depth;
};

static int read_fd(struct buf *b, int fd);

/* Reads a one-record /proc file (stat, cgroup: the kernel formats the
 * whole record on the first read and hands over what fits), so a read
 * that does not fill the buffer is the end: one read instead of two.
 * Not for maps: a multi-record file comes a page at a time. */
static int read_small(const char *proc_root, uint32_t pid, const char *file, struct buf *b)
{
	char path[256];
	ssize_t n;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%u/%s", proc_root, pid, file);
	buf_reset(b);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (buf_reserve(b, 4096) != 0) {
		close(fd);
		return -1;
	}
	do
		n = read(fd, b->data, b->cap - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		rc = -1;
	else
		b->len = (size_t)n;
	if (!rc && (size_t)n == b->cap - 1)
		rc = read_fd(b, fd);
	close(fd);
	if (rc)
		return -1;
	return buf_terminate(b);
}

/* Appends what is left of fd to b (a /proc file reports no size). */
static int read_fd(struct buf *b, int fd)
{
	for (;;) {
		ssize_t n;

		if (buf_reserve(b, 16384) != 0)
			return -ENOMEM;
		n = read(fd, b->data + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		b->len += (size_t)n;
		if (b->len > (64u << 20))
			return -EFBIG;
	}
}

/* Field 22 of /proc/PID/stat (after the parenthesised comm, which may
 * contain spaces and parentheses: scan from the last ')'). */
static uint64_t stat_start_time(const char *stat)
{
	const char *p = strrchr(stat, ')');
	unsigned long long v = 0;
	int field = 2;

	if (!p)
		return 0;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field == 22)
		sscanf(p, "%llu", &v);
	return v;
}

/* The name in "PID (NAME) STATE ...": from the first '(' to the last ')'
 * (a name may itself contain parentheses). Leaves out alone if absent. */
static void stat_comm(const char *stat, char *out, size_t outsz)
{
	const char *open = strchr(stat, '('), *close = strrchr(stat, ')');

	if (!open || !close || close < open)
		return;
	snprintf(out, outsz, "%.*s", (int)(close - open - 1), open + 1);
}

/* Sets m's build ID, ELF type and load segment from f. */
static void set_facts(struct proc_mapping *m, const struct elf_facts *f)
{
	m->elf_type = f->type;
	m->has_load = elf_facts_load_for(f, m->offset, &m->load_offset, &m->load_vaddr);
	if (f->build_id[0]) {
		char *s = strdup(f->build_id);

		if (s) {
			free(m->build_id);
			m->build_id = s;
		}
	}
}

/* Fills m's build ID, ELF type and load segment from the file it maps
 * (through /proc/PID/root; cached per device and inode). */
static void map_facts(const char *proc_root, uint32_t pid, struct proc_mapping *m,
		      struct buildid_cache *bc)
{
	char path[4096];

	if (!m->path || m->path[0] != '/' || !bc)
		return;
	snprintf(path, sizeof(path), "%s/%u/root%s", proc_root, pid, m->path);
	set_facts(m, buildid_cache_facts_mapped(bc, path, m->dev_major, m->dev_minor, m->inode));
}

/* map_facts for a process that is gone (no /proc/PID/root): the file at
 * the same path on the host, if it is the mapped inode; else no facts,
 * and nothing cached for that inode. */
static void map_facts_host(struct proc_mapping *m, struct buildid_cache *bc)
{
	struct stat st;

	if (!m->path || m->path[0] != '/' || !bc || !m->inode || stat(m->path, &st) != 0 ||
	    st.st_ino != m->inode || major(st.st_dev) != m->dev_major ||
	    minor(st.st_dev) != m->dev_minor)
		return;
	set_facts(m, buildid_cache_facts_mapped(bc, m->path, m->dev_major, m->dev_minor, m->inode));
}

/* Adds a copy of *src (strings duplicated; build_id "") to maps, in
 * order; returns the copy, or NULL (out of memory, or an overlap). */
static struct proc_mapping *add_copy(struct proc_maps *maps, const struct proc_mapping *src)
{
	struct proc_mapping v = *src;

	v.path = strdup(src->path ? src->path : "");
	v.build_id = strdup("");
	if (!v.path || !v.build_id || procmaps_insert(maps, &v) != 0) {
		free(v.path);
		free(v.build_id);
		return NULL;
	}
	return (struct proc_mapping *)procmaps_find(maps, v.start);
}

/* ---- notes from mmap records ---- */

static struct proc_note *note_find(struct proc_cache *c, uint32_t pid)
{
	struct proc_note *n = c->notes[pid % PROC_BUCKETS];

	while (n && n->pid != pid)
		n = n->next;
	return n;
}

static void note_free(struct proc_note *n)
{
	procmaps_free(&n->maps);
	free(n->exe);
	free(n);
}

void proc_cache_note(struct proc_cache *c, const struct mmap_event *e, uint64_t now_ns)
{
	struct proc_note *n = note_find(c, e->pid);

	if (!n) {
		if (c->n_notes >= NOTES_MAX)
			return;
		n = calloc(1, sizeof(*n));
		if (!n)
			return;
		n->pid = e->pid;
		n->noted_ns = now_ns;
		n->next = c->notes[e->pid % PROC_BUCKETS];
		c->notes[e->pid % PROC_BUCKETS] = n;
		c->n_notes++;
	}
	if (e->parent) {
		/* The rings are drained CPU by CPU, so a child's own exec and
		 * mmap records may come before its fork's: only a note that has
		 * nothing else takes the parent (and loses it to any later). */
		if (!n->after_exec && !n->maps.n)
			n->parent = e->parent;
		return;
	}
	if (e->exec) {
		procmaps_free(&n->maps);
		free(n->exe);
		n->exe = NULL;
		n->after_exec = true;
		n->parent = 0;
		n->noted_ns = now_ns;
		return;
	}
	/* Code of its own: whatever the order its records were drained in, it
	 * exec'd (or loaded a library); its parent's code is not its own. */
	n->parent = 0;
	if (n->maps.n >= NOTE_MAPS_MAX)
		return;
	/* A mapping laid over others (MAP_FIXED: the dynamic loader placing a
	 * segment) replaces what it covers; what it does not cover stays. */
	for (size_t i = 0; i < n->maps.n;) {
		struct proc_mapping o = n->maps.v[i];

		if (!(o.start < e->m.limit && e->m.start < o.limit)) {
			i++;
			continue;
		}
		memmove(&n->maps.v[i], &n->maps.v[i + 1], (n->maps.n - i - 1) * sizeof(o));
		n->maps.n--;
		if (o.limit > e->m.limit) { /* the part above */
			struct proc_mapping hi = o;

			hi.offset += e->m.limit - o.start;
			hi.start = e->m.limit;
			add_copy(&n->maps, &hi);
		}
		if (o.start < e->m.start) { /* the part below */
			o.limit = e->m.start;
			add_copy(&n->maps, &o);
		}
		free(o.path);
		free(o.build_id);
		i = 0; /* pieces went in in order: look again from the start */
	}
	if (!add_copy(&n->maps, &e->m))
		return;
	if (n->after_exec && !n->exe && e->m.path && e->m.path[0] == '/')
		n->exe = strdup(e->m.path);
}

void proc_cache_expire_notes(struct proc_cache *c, uint64_t now_ns)
{
	for (size_t i = 0; i < PROC_BUCKETS && c->n_notes; i++) {
		struct proc_note **link = &c->notes[i], *n;

		while ((n = *link)) {
			if (now_ns - n->noted_ns > NOTE_TTL_NS) {
				*link = n->next;
				note_free(n);
				c->n_notes--;
			} else {
				link = &n->next;
			}
		}
	}
}

/* add_copy keeping src's facts (build ID, load segment): a mapping a
 * forked child has from its parent's entry. */
static struct proc_mapping *add_inherited(struct proc_maps *maps, const struct proc_mapping *src)
{
	struct proc_mapping *m = add_copy(maps, src);
	char *id;

	if (m && src->build_id && src->build_id[0] && (id = strdup(src->build_id))) {
		free(m->build_id);
		m->build_id = id;
	}
	return m;
}

/* The entry of the process n's process was forked from (read now if it is
 * not cached), or NULL: not forked, too deep, or unreadable. */
static struct proc_info *note_parent(struct proc_cache *c, const struct proc_note *n,
				     uint64_t now_ns)
{
	struct proc_info *pp;

	if (!n || !n->parent || c->parent_depth >= 4)
		return NULL;
	c->parent_depth++;
	pp = proc_cache_get(c, n->parent, NULL, false, now_ns);
	c->parent_depth--;
	return pp;
}

/* Adds the noted mapping at addr of p's process, if any: for a process
 * gone from /proc; one it was forked without exec takes its parent's.
 * Returns whether addr is now mapped. */
static bool note_learn(struct proc_cache *c, struct proc_info *p, uint64_t addr)
{
	struct proc_note *n = note_find(c, p->pid);
	const struct proc_mapping *m = n ? procmaps_find(&n->maps, addr) : NULL;
	struct proc_mapping *added;
	struct proc_info *pp;

	if (!m && (pp = note_parent(c, n, p->last_seen_ns))) {
		c->parent_depth++;
		proc_cache_resolve(c, pp, addr, p->last_seen_ns, MAPS_REREAD_NS);
		c->parent_depth--;
		m = procmaps_find(&pp->maps, addr);
		return m && add_inherited(&p->maps, m);
	}
	if (!m)
		return false;
	added = add_copy(&p->maps, m);
	if (added)
		map_facts_host(added, c->buildids);
	return added != NULL;
}

/* p was read after its process had exited (no executable, no maps):
 * what the mmap records said of it instead, and for a child forked
 * without exec, what its parent's entry has. */
static void note_apply(struct proc_cache *c, struct proc_info *p, const struct proc_note *n)
{
	struct proc_info *pp = note_parent(c, n, p->last_seen_ns);

	if (pp) {
		/* Forked: in its parent's cgroup too (its own is unreadable). */
		static const char *const inherited[] = {"cgroup", "systemd_unit", "container_id"};

		for (size_t i = 0; i < sizeof(inherited) / sizeof(inherited[0]); i++)
			labels_set(&p->labels, inherited[i], labels_get(&pp->labels, inherited[i]));
	}
	if (n->exe || (pp && pp->executable[0])) {
		char *exe = strdup(n->exe ? n->exe : pp->executable);

		if (exe && labels_set(&p->labels, "executable", exe) == 0) {
			free(p->executable);
			p->executable = exe;
		} else {
			free(exe);
		}
	}
	p->gone = true;
	procmaps_free(&p->gaps);
	for (size_t i = 0; i < n->maps.n; i++) {
		struct proc_mapping *added;

		if (procmaps_find(&p->maps, n->maps.v[i].start))
			continue;
		added = add_copy(&p->maps, &n->maps.v[i]);
		if (added)
			map_facts_host(added, c->buildids);
	}
	for (size_t i = 0; pp && i < pp->maps.n; i++)
		if (!procmaps_find(&p->maps, pp->maps.v[i].start))
			add_inherited(&p->maps, &pp->maps.v[i]);
	p->maps_ok = true;
}

static void read_maps(const char *proc_root, struct proc_info *p, struct buildid_cache *bc,
		      const struct proc_mapping *vsyscall, struct buf *b)
{
	char mpath[256];
	int fd, rc;

	procmaps_free(&p->maps);
	procmaps_free(&p->gaps);
	p->maps_ok = false;
	snprintf(mpath, sizeof(mpath), "%s/%u/maps", proc_root, p->pid);
	fd = open(mpath, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	/* Asking the kernel for the code mappings only costs about half of
	 * having it print every mapping (it formats each line, path
	 * included) and parsing the text. */
	rc = procmaps_query(fd, &p->maps);
	if (!rc && vsyscall && !add_copy(&p->maps, vsyscall))
		rc = -ENOMEM;
	if (rc == -EOPNOTSUPP) {
		procmaps_free(&p->maps);
		buf_reset(b);
		rc = read_fd(b, fd);
		if (!rc)
			rc = buf_terminate(b);
		if (!rc)
			rc = procmaps_parse((const char *)b->data, b->len, &p->maps, NULL);
	}
	close(fd);
	if (rc) {
		procmaps_free(&p->maps);
		return;
	}
	for (size_t i = 0; i < p->maps.n; i++)
		map_facts(proc_root, p->pid, &p->maps.v[i], bc);
	p->maps_ok = true;
}

static void maps_fd_close(struct proc_cache *c, struct proc_info *p)
{
	if (!p->has_maps_fd)
		return;
	close(p->maps_fd);
	p->has_maps_fd = false;
	if (c && c->open_fds)
		c->open_fds--;
}

/* An open /proc/PID/maps for p: its kept fd, or a new one (kept if the
 * budget allows; *owned says the caller must close it). -errno. */
static int maps_fd_get(struct proc_cache *c, struct proc_info *p, bool *owned)
{
	char path[256];
	int fd;

	*owned = false;
	if (p->has_maps_fd)
		return p->maps_fd;
	snprintf(path, sizeof(path), "%s/%u/maps", c->proc_root, p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (p->cached && c->open_fds < c->max_fds) {
		p->maps_fd = fd;
		p->has_maps_fd = true;
		c->open_fds++;
	} else {
		*owned = true;
	}
	return fd;
}

/* scratch: a buffer to read /proc files into (kept by the caller).
 * read_stat false: the caller has the process name (comm, exact) and
 * tells pid reuse apart without the start time (a kept maps fd), so
 * /proc/PID/stat is not read and start_time stays 0. */
static struct proc_info *info_read(const char *proc_root, uint32_t pid, const char *comm,
				   bool comm_exact, bool read_stat, struct buildid_cache *bc,
				   const struct proc_mapping *vsyscall, bool lazy,
				   struct buf *scratch)
{
	struct proc_info *p = calloc(1, sizeof(*p));
	char path[256], exe[4096] = "", cgroup[4096] = "/", unit[512], cid[80], num[16];
	struct buf b = *scratch;
	ssize_t n;

	if (!p)
		return NULL;
	p->pid = pid;
	snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
	/* stat has the process name (the group leader's, as /proc/PID/comm)
	 * beside the start time: one open for both. */
	if (read_stat && read_small(proc_root, pid, "stat", &b) == 0) {
		p->start_time = stat_start_time((const char *)b.data);
		if (!comm_exact || !p->comm[0])
			stat_comm((const char *)b.data, p->comm, sizeof(p->comm));
	}
	snprintf(path, sizeof(path), "%s/%u/exe", proc_root, pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	p->executable = strdup(exe);
	if (read_small(proc_root, pid, "cgroup", &b) == 0)
		cgroup_path_from_proc((const char *)b.data, cgroup, sizeof(cgroup));
	if (lazy) {
		/* Mappings come one at a time, as frames need them. */
		p->lazy = true;
		p->maps_ok = !vsyscall || add_copy(&p->maps, vsyscall);
	} else {
		read_maps(proc_root, p, bc, vsyscall, &b);
	}
	*scratch = b; /* it may have grown */
	if (!p->executable)
		goto oom;

	cgroup_derive(cgroup, unit, sizeof(unit), cid, sizeof(cid));
	snprintf(num, sizeof(num), "%u", pid);
	if (labels_set(&p->labels, "pid", num) || labels_set(&p->labels, "comm", p->comm) ||
	    labels_set(&p->labels, "executable", p->executable) ||
	    labels_set(&p->labels, "cgroup", cgroup) ||
	    labels_set(&p->labels, "systemd_unit", unit) ||
	    labels_set(&p->labels, "container_id", cid))
		goto oom;
	return p;
oom:
	proc_info_free(p);
	return NULL;
}

struct proc_info *proc_info_read(const char *proc_root, uint32_t pid, const char *comm,
				 bool comm_exact, struct buildid_cache *bc)
{
	struct buf b;
	struct proc_info *p;

	buf_init(&b);
	p = info_read(proc_root, pid, comm, comm_exact, true, bc, NULL, false, &b);
	buf_free(&b);
	return p;
}

void proc_info_free(struct proc_info *p)
{
	if (!p)
		return;
	if (p->has_maps_fd)
		close(p->maps_fd);
	free(p->executable);
	labels_free(&p->labels);
	labels_free(&p->series);
	procmaps_free(&p->maps);
	procmaps_free(&p->gaps);
	perfmap_proc_free(p->perfmap);
	free(p);
}

/* The [vsyscall] line of our own maps (the page is the same in every
 * process), with a static path. */
static bool find_vsyscall(const char *proc_root, struct proc_mapping *out)
{
	struct proc_maps m = {0};
	struct buf b;
	bool found = false;

	char path[256];

	snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)getpid());
	buf_init(&b);
	if (buf_read_file(&b, path, 64 << 20) == 0 && buf_terminate(&b) == 0 &&
	    procmaps_parse((const char *)b.data, b.len, &m, NULL) == 0) {
		for (size_t i = 0; i < m.n && !found; i++) {
			if (strcmp(m.v[i].path, "[vsyscall]") == 0) {
				*out = m.v[i];
				out->path = "[vsyscall]";
				out->build_id = "";
				found = true;
			}
		}
	}
	procmaps_free(&m);
	buf_free(&b);
	return found;
}

/* Whether the kernel answers PROCMAP_QUERY on proc_root's maps files. */
static bool can_query(const char *proc_root)
{
	char path[256];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	rc = procmaps_query_addr(fd, (uint64_t)(uintptr_t)&can_query);
	close(fd);
	return rc == 0;
}

struct proc_cache *proc_cache_new(const char *proc_root)
{
	struct proc_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->proc_root = strdup(proc_root ? proc_root : "/proc");
	c->buildids = buildid_cache_new();
	if (!c->proc_root || !c->buildids) {
		proc_cache_free(c);
		return NULL;
	}
	{
		struct rlimit rl;

		c->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
				 ? (size_t)rl.rlim_cur / 2
				 : 512;
	}
	c->has_vsyscall = find_vsyscall(c->proc_root, &c->vsyscall);
	c->lazy = can_query(c->proc_root);
	return c;
}

void proc_cache_free(struct proc_cache *c)
{
	if (!c)
		return;
	/* Windows are released before the cache (agent.c), so no entry is
	 * still held here. */
	for (size_t i = 0; i < PROC_BUCKETS; i++) {
		struct proc_info *p = c->buckets[i], *next;

		for (; p; p = next) {
			next = p->next;
			proc_info_free(p);
		}
	}
	for (size_t i = 0; i < PROC_BUCKETS; i++) {
		struct proc_note *n = c->notes[i], *next;

		for (; n; n = next) {
			next = n->next;
			note_free(n);
		}
	}
	buildid_cache_free(c->buildids);
	buf_free(&c->scratch);
	free(c->proc_root);
	free(c);
}

static uint64_t current_start_time(struct proc_cache *c, uint32_t pid)
{
	if (read_small(c->proc_root, pid, "stat", &c->scratch) == 0)
		return stat_start_time((const char *)c->scratch.data);
	return 0;
}

/* Unlinks p from its chain; frees it unless a window still holds it (the
 * window then owns it: see window.c, which frees orphans on release). */
static void cache_unlink(struct proc_cache *c, struct proc_info *p, struct proc_info **link)
{
	*link = p->next;
	p->next = NULL;
	p->cached = false;
	maps_fd_close(c, p);
	c->count--;
	if (p->refs == 0)
		proc_info_free(p);
}

void proc_info_hold(struct proc_info *p)
{
	p->refs++;
}

void proc_info_release(struct proc_info *p)
{
	if (--p->refs == 0 && !p->cached)
		proc_info_free(p);
}

struct proc_info *proc_cache_get(struct proc_cache *c, uint32_t pid, const char *comm,
				 bool comm_exact, uint64_t now_ns)
{
	struct proc_info **link = &c->buckets[pid % PROC_BUCKETS], *p;
	bool fd_first;

	for (; (p = *link); link = &p->next) {
		if (p->pid != pid)
			continue;
		/* An exited entry answers for its last samples only: later, the
		 * pid belongs to someone else. */
		if (!p->stale && (!p->exited_ns || now_ns - p->exited_ns < PROC_EXIT_LINGER_NS)) {
			p->last_seen_ns = now_ns;
			return p;
		}
		/* After exec (or a pid reused): read everything again, but keep
		 * the old entry alive for windows that still reference it. */
		cache_unlink(c, p, link);
		break;
	}
	/* With the name from the sample and a maps fd to keep, /proc/PID/stat
	 * has nothing to add: the kept fd tells a reused pid apart (see
	 * proc_info) without the start time: ~30% of a first reading. */
	fd_first = c->lazy && comm_exact && comm && comm[0] && c->open_fds < c->max_fds;
	p = info_read(c->proc_root, pid, comm, comm_exact, !fd_first, c->buildids,
		      c->has_vsyscall ? &c->vsyscall : NULL, c->lazy, &c->scratch);
	if (!p)
		return NULL;
	/* Gone already (a process of a few milliseconds): /proc gave neither
	 * its executable nor its maps, the kernel's mmap records may. */
	p->last_seen_ns = now_ns;
	if (!p->executable[0]) {
		struct proc_note *n = note_find(c, pid);

		if (n && (n->maps.n || n->parent))
			note_apply(c, p, n);
	}
	p->maps_read_ns = now_ns;
	p->next = c->buckets[pid % PROC_BUCKETS];
	p->cached = true;
	c->buckets[pid % PROC_BUCKETS] = p;
	c->count++;
	if (fd_first) {
		bool owned;
		int fd = maps_fd_get(c, p, &owned);

		/* Not kept after all (gone, refused): the start time then. */
		if (fd >= 0 && owned)
			close(fd);
		if (fd < 0 || owned)
			p->start_time = current_start_time(c, pid);
	}
	return p;
}

/* Whether pid has an executable mapping at addr: 0, -ENOENT, or another
 * negative errno (unknown: the kernel lacks PROCMAP_QUERY, the process is
 * gone). */
static int code_mapped_at(const char *proc_root, uint32_t pid, uint64_t addr)
{
	char path[256];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%u/maps", proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = procmaps_query_addr(fd, addr);
	close(fd);
	return rc;
}

void proc_cache_refresh_for(struct proc_cache *c, struct proc_info *p, uint64_t addr,
			    uint64_t now_ns, uint64_t min_interval_ns)
{
	uint64_t interval =
	    p->refresh_backoff_ns > min_interval_ns ? p->refresh_backoff_ns : min_interval_ns;
	struct buf b;

	if (addr < 0x10000 || addr >= 0x800000000000ull || procmaps_find(&p->maps, addr))
		return;
	if (p->maps_read_ns && now_ns - p->maps_read_ns < interval)
		return;
	p->maps_read_ns = now_ns;
	/* Most such addresses are not code at all (a frame-pointer walk past
	 * a function without frame pointers reads stack words): one query
	 * for that address says so without re-reading every mapping. */
	if (code_mapped_at(c->proc_root, p->pid, addr) == -ENOENT) {
		if (interval < 60ull * 1000000000)
			p->refresh_backoff_ns = interval * 2;
		return;
	}
	/* A reused pid is a different process: leave the old entry alone and
	 * let the next lookup start afresh. */
	if (p->start_time && current_start_time(c, p->pid) != p->start_time) {
		proc_cache_invalidate(c, p->pid);
		return;
	}
	buf_init(&b);
	read_maps(c->proc_root, p, c->buildids, c->has_vsyscall ? &c->vsyscall : NULL, &b);
	buf_free(&b);
	if (procmaps_find(&p->maps, addr))
		p->refresh_backoff_ns = 0;
	else if (interval < 60ull * 1000000000)
		p->refresh_backoff_ns = interval * 2;
}

/* Records [start, limit) as holding no code, merged with the gaps it
 * touches. */
static void add_gap(struct proc_maps *gaps, uint64_t start, uint64_t limit)
{
	struct proc_mapping g = {.start = start, .limit = limit};
	size_t i = 0;

	/* Few gaps per process (about one per code mapping): linear. */
	while (i < gaps->n) {
		struct proc_mapping *o = &gaps->v[i];

		if (o->limit < g.start || o->start > g.limit) {
			i++;
			continue;
		}
		g.start = o->start < g.start ? o->start : g.start;
		g.limit = o->limit > g.limit ? o->limit : g.limit;
		memmove(o, o + 1, (gaps->n - i - 1) * sizeof(*o));
		gaps->n--;
	}
	procmaps_insert(gaps, &g);
}

/* Asks the kernel for the code mapping at addr and adds it, or the gap
 * below the next one (and that one). Returns true if addr is now mapped. */
static bool learn(struct proc_cache *c, struct proc_info *p, uint64_t addr)
{
	char name[4096];
	struct proc_mapping m, *added;
	bool owned;
	int fd, rc;

	fd = maps_fd_get(c, p, &owned);
	if (fd < 0)
		return note_learn(c, p, addr);
	rc = procmaps_query_at(fd, addr, &m, name, sizeof(name));
	if (owned)
		close(fd);
	if (rc == -ENOENT) {
		add_gap(&p->gaps, addr, 0x800000000000ull);
		return false;
	}
	if (rc) /* ESRCH: it exited since (the fd outlives the address space) */
		return note_learn(c, p, addr);
	if (m.start > addr)
		add_gap(&p->gaps, addr, m.start);
	added = add_copy(&p->maps, &m);
	if (added)
		map_facts(c->proc_root, p->pid, added, c->buildids);
	return m.start <= addr;
}

void proc_cache_resolve(struct proc_cache *c, struct proc_info *p, uint64_t addr, uint64_t now_ns,
			uint64_t min_interval_ns)
{
	uint64_t interval =
	    p->refresh_backoff_ns > min_interval_ns ? p->refresh_backoff_ns : min_interval_ns;
	bool forgot = false;

	if (addr < 0x10000 || addr >= 0x800000000000ull || procmaps_find(&p->maps, addr))
		return;
	/* Gone: only what the mmap records said is left to ask. */
	if (p->gone || p->exited_ns) {
		note_learn(c, p, addr);
		return;
	}
	if (!p->lazy) {
		proc_cache_refresh_for(c, p, addr, now_ns, min_interval_ns);
		return;
	}
	if (p->stale)
		return;
	if (procmaps_find(&p->gaps, addr)) {
		/* Found empty before: garbage, unless the process mapped code
		 * there since (dlopen, JIT), which is asked again on the
		 * refresh schedule, after checking the pid is still its. */
		if (p->maps_read_ns && now_ns - p->maps_read_ns < interval)
			return;
		/* A kept maps fd answers for this process only (see
		 * proc_info); without one, check the pid is still its. */
		if (!p->has_maps_fd && p->start_time &&
		    current_start_time(c, p->pid) != p->start_time) {
			proc_cache_invalidate(c, p->pid);
			return;
		}
		procmaps_free(&p->gaps);
		forgot = true;
	}
	if (!p->maps_read_ns)
		p->maps_read_ns = now_ns;
	if (learn(c, p, addr)) {
		if (forgot)
			p->refresh_backoff_ns = 0;
	} else if (forgot && interval < 60ull * 1000000000) {
		p->refresh_backoff_ns = interval * 2;
	}
	if (forgot)
		p->maps_read_ns = now_ns;
}

void proc_cache_invalidate(struct proc_cache *c, uint32_t pid)
{
	for (struct proc_info *p = c->buckets[pid % PROC_BUCKETS]; p; p = p->next) {
		if (p->pid == pid) {
			p->stale = true;
			maps_fd_close(c, p);
		}
	}
}

void proc_cache_forget(struct proc_cache *c, uint32_t pid)
{
	struct proc_info **link = &c->buckets[pid % PROC_BUCKETS], *p;

	while ((p = *link)) {
		if (p->pid == pid)
			cache_unlink(c, p, link);
		else
			link = &p->next;
	}
}

void proc_cache_mark_exited(struct proc_cache *c, uint32_t pid, uint64_t now_ns)
{
	for (struct proc_info *p = c->buckets[pid % PROC_BUCKETS]; p; p = p->next) {
		if (p->pid == pid && !p->exited_ns) {
			p->exited_ns = now_ns ? now_ns : 1;
			maps_fd_close(c, p); /* an exited entry asks nothing */
		}
	}
}

void proc_cache_reap_exited(struct proc_cache *c, uint64_t cutoff_ns)
{
	for (size_t i = 0; i < PROC_BUCKETS; i++) {
		struct proc_info **link = &c->buckets[i], *p;

		while ((p = *link)) {
			if (p->exited_ns && p->exited_ns < cutoff_ns)
				cache_unlink(c, p, link);
			else
				link = &p->next;
		}
	}
}

void proc_cache_expire(struct proc_cache *c, uint64_t cutoff_ns)
{
	for (size_t i = 0; i < PROC_BUCKETS; i++) {
		struct proc_info **link = &c->buckets[i], *p;

		while ((p = *link)) {
			if (p->last_seen_ns < cutoff_ns && p->refs == 0)
				cache_unlink(c, p, link);
			else
				link = &p->next;
		}
	}
}

size_t proc_cache_count(const struct proc_cache *c)
{
	return c->count;
}
