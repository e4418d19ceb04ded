/*
 * agent.h — kiln-agent: a whole-system eBPF CPU profiler producing labelled
 * pprof profiles. The module's contract; the files behind it:
 *
 *   main.c         entry point: flags, sinks, signals, then agent_run
 *   agent.c        the main loop: poll, cut windows, hand profiles to sinks
 *   privileges.c   what the agent needs of the kernel, checked by capability
 *   profiler.bpf.c / profiler.h   kernel side: one ring-buffer record per sample
 *   sampler.c      load the skeleton, open perf events per CPU, poll the ring
 *   unwind.bpf.h   kernel side: the user-stack walk with unwind tables
 *   unwinder.c     which files' tables are in the kernel, which process maps which
 *   offcpu.bpf.h   kernel side: off-CPU samples (where threads block, how long)
 *   offcpu.c       attach those programs (finish_task_switch by its real name,
 *                  found by offcpu_ksym.c)
 *   python.bpf.h, python_frames.h, python.c, python_parse.c
 *                  Python frames: CPython processes, code object names (python.h)
 *   perfmap.c, perfmap_reader.c
 *                  JIT frames named from processes' perf maps (perfmap.h)
 *   mmapwatch.c    executable mappings as the kernel reports them, for
 *                  processes gone before /proc is read
 *   window.c       aggregate records into per-process windows
 *   profile.c      turn one process's window into a pprof profile
 *   frame.c        what one sampled frame is: mapping, address, name (frame.h)
 *   push_window.c, push_window_pprof.c
 *                  a window as the push sink queues it: resolved stacks, no
 *                  pprof (push_window.h)
 *   procinfo.c     per-process cache: /proc/PID/{stat,maps,cgroup,exe}, labels
 *   procmaps.c     /proc/PID/maps parsing (pure)
 *   buildid.c      GNU build IDs from ELF notes
 *   ksymcache.c    kernel frame names, looked up on demand and cached
 *   kallsyms.c     a /proc/kallsyms table (fallback for old kernels)
 *   labels.c       label sets, cgroup -> systemd_unit/container_id, k=v lists
 *   sink_local.c   the --local-store-directory sink
 *   sink_remote.c  the push sink: IngestService/Push (sink_stream.c) or
 *                  WriteRaw to a Parca-compatible server
 *   debuginfo_uploader.c  debug info of profiled binaries to the server
 *   lazy/lazylibs.c       libcurl and libmicrohttpd, opened on first use
 *   metrics.c      counters and the /metrics endpoint
 *
 * Data flow: sampler -> window (per pid, per stack+thread counts; process
 * info captured from /proc the first time a pid is seen so that short-lived
 * processes keep their mappings) -> at the end of each window, one pprof per
 * process -> every sink (the stream push sink takes the window's resolved
 * stacks instead: push_window.h). The sampling path is one thread; beside it run the
 * HTTP server thread (reads atomic counters only), the push sink's sender
 * and the debuginfo upload workers, each fed through a queue.
 */
#ifndef KILN_AGENT_AGENT_H
#define KILN_AGENT_AGENT_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "agent/perfmap.h"
#include "agent/profiler.h"
#include "client/client.h"
#include "common/buf.h"
#include "common/error.h"

/* ---- labels (labels.c) ----------------------------------------------------- */

struct agent_label {
	char *name;
	char *value;
};

/* An owned, name-sorted set of labels; a zeroed struct is empty. */
struct agent_labels {
	struct agent_label *v;
	size_t n, cap;
};

/* Sets name=value (replacing an existing value). Copies both strings.
 * An empty value removes the label, as in Prometheus. Returns 0 or -ENOMEM. */
int labels_set(struct agent_labels *l, const char *name, const char *value);
const char *labels_get(const struct agent_labels *l, const char *name);
int labels_copy(struct agent_labels *dst, const struct agent_labels *src);
void labels_free(struct agent_labels *l);
/* Prometheus label-name rule: [a-zA-Z_][a-zA-Z0-9_]*, not starting "__". */
bool agent_label_name_valid(const char *name);
/* Parses "k=v,k2=v2" (--metadata-external-labels) into l. */
int labels_parse_list(struct agent_labels *l, const char *text, struct kiln_error *err);

/* Picks the cgroup path to label a process with from /proc/PID/cgroup text:
 * the unified (v2, "0::") path if it is not "/", else the name=systemd one,
 * else the first non-root v1 path, else "/". Writes into out (NUL-terminated). */
int cgroup_path_from_proc(const char *text, char *out, size_t outsz);
/* Derives labels from a cgroup path: systemd_unit (the deepest component
 * ending in .service or .scope) and container_id (docker, containerd/cri,
 * cri-o, podman and kubepods patterns: a 64-hex id). Either output is set
 * to "" when there is none. */
void cgroup_derive(const char *path, char *unit, size_t unitsz, char *container_id, size_t idsz);

/* ---- /proc/PID/maps (procmaps.c) ----------------------------------------- */

struct proc_mapping {
	uint64_t start, limit, offset;
	uint64_t inode;
	unsigned dev_major, dev_minor;
	bool exec;
	char *path;	/* as in maps ("" for anonymous; "[vdso]" ...) */
	char *build_id; /* hex, "" if none/unreadable */
	/* executable_info: ELF type (0: unknown) and the executable PT_LOAD
	 * this mapping maps (valid when has_load). */
	uint16_t elf_type;
	bool has_load;
	uint64_t load_offset, load_vaddr;
};

struct proc_maps {
	struct proc_mapping *v; /* sorted by start */
	size_t n, cap;
};

/* Parses the text of /proc/PID/maps, keeping executable mappings only (they
 * are the only ones a stack can point into). Build IDs are left "". Returns
 * 0, -EINVAL naming the bad line, or -ENOMEM. */
int procmaps_parse(const char *text, size_t len, struct proc_maps *out, struct kiln_error *err);
/* The executable mappings of an open /proc/PID/maps through the
 * PROCMAP_QUERY ioctl (Linux 6.11+): one call per code mapping, and the
 * kernel formats no line for the data and anonymous ones, which are most
 * of a process's. Same result as procmaps_parse on the text except for
 * [vsyscall] (not a VMA of the process). Appends to out; 0, -EOPNOTSUPP
 * (older kernel: read the text), or another negative errno. */
int procmaps_query(int maps_fd, struct proc_maps *out);
/* Whether the process of an open /proc/PID/maps has an executable mapping
 * at addr (one PROCMAP_QUERY): 0, -ENOENT, -EOPNOTSUPP (older kernel), or
 * another negative errno. */
int procmaps_query_addr(int maps_fd, uint64_t addr);
/* The executable mapping of an open /proc/PID/maps that contains addr or,
 * if none does, the first above it (out->start > addr), with out->path
 * pointing at name (NUL-terminated, "" when anonymous) and build_id NULL.
 * 0, -ENOENT (no executable mapping at or above addr), -EOPNOTSUPP, or
 * another negative errno. */
int procmaps_query_at(int maps_fd, uint64_t addr, struct proc_mapping *out, char *name,
		      size_t namesz);
/* Inserts e (taking its strings) in address order; -EEXIST (e not taken)
 * when it overlaps a mapping already there, -ENOMEM. */
int procmaps_insert(struct proc_maps *m, const struct proc_mapping *e);
/* Appends e (taking its strings) after the last mapping; 0 or -ENOMEM. */
int procmaps_push(struct proc_maps *m, const struct proc_mapping *e);
/* The mapping containing addr, or NULL. */
const struct proc_mapping *procmaps_find(const struct proc_maps *m, uint64_t addr);
void procmaps_free(struct proc_maps *m);

/* ---- mmap records (mmapwatch.c) ------------------------------------------ */

/* One kernel record about a process's code: an executable mapping
 * (PERF_RECORD_MMAP2), an exec (PERF_RECORD_COMM with the exec flag) or a
 * new process (PERF_RECORD_FORK of a process, not of a thread). */
struct mmap_event {
	uint32_t pid;
	bool exec;	       /* the process exec'd: what was noted of it is gone */
	uint32_t parent;       /* nonzero: pid was forked by parent (its code) */
	struct proc_mapping m; /* !exec && !parent: path points into the record */
};
/* Parses one perf record, header included, of len bytes: 1 (*out filled)
 * for an executable MMAP2, an exec COMM or a process FORK, 0 for any other
 * record, -EINVAL for a malformed one. */
int mmap_record_parse(const void *rec, size_t len, struct mmap_event *out);

struct mmap_watch;
typedef void (*mmap_event_fn)(void *ctx, const struct mmap_event *e);
/* Opens a dummy perf event per online CPU that reports executable mmaps,
 * execs and forks into a ring; an error says what is lost without it. */
int mmap_watch_open(struct mmap_watch **out, struct kiln_error *err);
/* Hands every record since the last drain to fn (in each CPU's order);
 * returns how many records the kernel dropped on full rings meanwhile. */
uint64_t mmap_watch_drain(struct mmap_watch *w, mmap_event_fn fn, void *ctx);
void mmap_watch_close(struct mmap_watch *w);

/* ---- build IDs (buildid.c) ------------------------------------------------- */

/* Reads the GNU build ID (NT_GNU_BUILD_ID note) of the ELF file at path into
 * hex (lowercase). Returns 0, -ENOENT when the file has none, -ENOEXEC when
 * it is not ELF, or another negative errno. */
int buildid_read_file(const char *path, char *hex, size_t hexsz);

/* What the agent keeps of an ELF file besides its build ID: the type and
 * the PT_LOAD headers (for a mapping's executable_info). */
#define ELF_FACTS_MAX_LOADS 8
struct elf_load {
	uint64_t offset, vaddr, filesz;
	uint32_t flags; /* PF_X ... */
};
struct elf_facts {
	char *build_id; /* hex, "" if none */
	uint16_t type;	/* e_type (ET_EXEC, ET_DYN), 0 when not ELF */
	size_t nloads;
	struct elf_load loads[ELF_FACTS_MAX_LOADS];
};
/* The executable PT_LOAD a mapping at file offset map_offset maps (the
 * first executable one when none contains the offset): its p_offset and
 * p_vaddr. False when f has no executable PT_LOAD. */
bool elf_facts_load_for(const struct elf_facts *f, uint64_t map_offset, uint64_t *offset,
			uint64_t *vaddr);

/* A cache of build IDs keyed by the file's identity. */
struct buildid_cache;
struct buildid_cache *buildid_cache_new(void);
void buildid_cache_free(struct buildid_cache *c);
/* Looks up or reads the build ID of path; "" when there is none. The
 * returned string lives as long as the cache. */
const char *buildid_cache_get(struct buildid_cache *c, const char *path);
/* The same for a mapped file, keyed by the device and inode that
 * /proc/PID/maps shows, so that a hit costs no system call (most of a new
 * process's mappings are libraries already seen). */
const char *buildid_cache_get_mapped(struct buildid_cache *c, const char *path, unsigned dev_major,
				     unsigned dev_minor, uint64_t inode);
/* The same, with the ELF type and load segments; never NULL (an unreadable
 * file gives empty facts). Lives as long as the cache. */
const struct elf_facts *buildid_cache_facts_mapped(struct buildid_cache *c, const char *path,
						   unsigned dev_major, unsigned dev_minor,
						   uint64_t inode);

/* ---- kernel symbols (kallsyms.c) ------------------------------------------ */

struct kallsyms;
/* Loads text symbols from a kallsyms-format file. -EPERM with a message if
 * every address reads as zero (kptr_restrict hides them from us). */
int kallsyms_load(const char *path, struct kallsyms **out, struct kiln_error *err);
void kallsyms_free(struct kallsyms *k);
/* The symbol containing addr: name and module ("" for the core kernel).
 * Returns false when addr is outside every known symbol. */
bool kallsyms_lookup(const struct kallsyms *k, uint64_t addr, const char **name,
		     const char **module, uint64_t *sym_start);
size_t kallsyms_count(const struct kallsyms *k);

/* ---- kernel frame names on demand (ksymcache.c) -------------------------- */

/* Names addrs[0..n) (n <= KSYM_BATCH) in the kernel's %pS form; *names
 * receives them. Returns how many were named or a negative errno
 * (sampler_symbolize has this shape). */
typedef int (*ksym_batch_fn)(void *ctx, const uint64_t *addrs, size_t n,
			     const char (**names)[KSYM_NAME_LEN]);
struct ksym_cache;
/* fn may be NULL if a table is set before the first resolve. */
struct ksym_cache *ksym_cache_new(ksym_batch_fn fn, void *ctx);
void ksym_cache_free(struct ksym_cache *c);
/* Resolves from a /proc/kallsyms table instead of fn (takes ownership). */
void ksym_cache_set_table(struct ksym_cache *c, struct kallsyms *table);
/* Notes that addr will be looked up. Returns 0 or -ENOMEM. */
int ksym_cache_want(struct ksym_cache *c, uint64_t addr);
/* Names every address wanted since the last call, in batches. Returns 0 or
 * the first error (what could not be named stays unnamed until a clear). */
int ksym_cache_resolve(struct ksym_cache *c);
/* The name and module ("" for the core kernel) of a resolved address. */
bool ksym_cache_lookup(const struct ksym_cache *c, uint64_t addr, const char **name,
		       const char **module);
/* Forgets every name (addresses of unloaded modules get reused). */
void ksym_cache_clear(struct ksym_cache *c);
size_t ksym_cache_count(const struct ksym_cache *c);
/* Splits "name+0xoff/0xsize [module]" (module optional). False for a bare
 * address (no symbol) or text that does not fit. */
bool ksym_parse(const char *text, char *name, size_t namesz, char *module, size_t modsz);
/* The address to name a kernel frame by: return addresses (every frame but
 * the leaf) minus one, so that a call ending a function names that
 * function rather than the next. */
static inline uint64_t ksym_frame_addr(uint64_t addr, bool leaf)
{
	return leaf ? addr : addr - 1;
}

/* ---- processes (procinfo.c) ---------------------------------------------- */

/* What the agent knows about one process; captured when first sampled. */
struct proc_info {
	uint32_t pid;
	/* /proc/PID/stat field 22: tells pid reuse apart; 0 when a kept maps
	 * fd does that instead (proc_cache_get) */
	uint64_t start_time;
	char comm[32];
	char *executable;	    /* /proc/PID/exe target, "" if unknown */
	struct agent_labels labels; /* series labels except node/external */
	/* All series labels (host labels + labels): built for the first
	 * profile (agent.c, profile_series_labels) and reused by every later
	 * window's, instead of a copy per process per window. */
	struct agent_labels series;
	bool series_ok;
	struct proc_maps maps;
	bool maps_ok; /* maps were readable */
	/* lazy: maps holds only the code mappings samples have hit so far,
	 * each asked of the kernel (PROCMAP_QUERY) for a frame's address
	 * while the process lives; gaps (start/limit only) are ranges found
	 * to hold no code, so that the non-code words a frame-pointer walk
	 * yields cost one query, not one per sample. */
	bool lazy;
	struct proc_maps gaps;
	/* /proc/PID/maps kept open for PROCMAP_QUERY while the process lives
	 * (lazy entries, within the cache's fd budget): no path walk per
	 * query, and the fd is bound to the process's address space, so a
	 * query that succeeds on it is about this process, never a reused
	 * pid (after exec or exit it fails with ESRCH). */
	bool has_maps_fd;
	int maps_fd;
	uint64_t last_seen_ns;	     /* monotonic: last sample */
	uint64_t maps_read_ns;	     /* monotonic: last (re)read of maps */
	uint64_t refresh_backoff_ns; /* grows while re-reads find nothing new */
	bool stale;		     /* exec seen: re-read before next use */
	bool gone;		     /* read after it exited: maps from mmap notes */
	uint64_t exited_ns;	     /* monotonic: exit seen (0: alive) */
	bool cached;		     /* linked in the cache (else owned by its holders) */
	unsigned refs;		     /* windows holding this entry */
	struct proc_info *next;	     /* hash chain */
	/* JIT names from its perf map (perfmap.h), NULL until a frame needs
	 * them. */
	struct perfmap_proc *perfmap;
};

struct proc_cache;
/* proc_root: normally "/proc"; tests point it elsewhere. */
struct proc_cache *proc_cache_new(const char *proc_root);
void proc_cache_free(struct proc_cache *c);
/* Returns the cached info for pid, reading /proc the first time (or after an
 * exec). comm is the process name a sample gives: exact (comm_exact, from
 * the main thread) wins over /proc/PID/stat's, which may already show a
 * later exec; otherwise it is used only when /proc is gone. Never NULL
 * except on out-of-memory: a vanished process gets an entry with what the
 * sample told us. The entry stays valid while refs > 0. */
struct proc_info *proc_cache_get(struct proc_cache *c, uint32_t pid, const char *comm,
				 bool comm_exact, uint64_t now_ns);
/* Re-reads the maps of p if addr is in none of them (the process mapped new
 * code; asked first for that one address where the kernel can say), at
 * most once per min_interval_ns; the interval doubles (up to a
 * minute) each time a re-read does not explain the address, because a
 * frame-pointer walk through code without frame pointers yields garbage
 * addresses that no re-read will ever find. Addresses that cannot be user
 * code (page zero, the kernel half) never trigger a re-read. */
void proc_cache_refresh_for(struct proc_cache *c, struct proc_info *p, uint64_t addr,
			    uint64_t now_ns, uint64_t min_interval_ns);
/* What the agent calls for a user frame outside p's known mappings: for a
 * lazy entry, asks the kernel for the mapping at addr (once per gap: an
 * address in a range already found empty is skipped until the gaps are
 * forgotten, on the refresh schedule above); otherwise
 * proc_cache_refresh_for. Never asks about an exited process (its pid may
 * be someone else's). */
void proc_cache_resolve(struct proc_cache *c, struct proc_info *p, uint64_t addr, uint64_t now_ns,
			uint64_t min_interval_ns);
/* Marks pid's entry stale (it called exec). */
void proc_cache_invalidate(struct proc_cache *c, uint32_t pid);
/* Drops pid's entry (it exited); windows holding it keep it alive. */
void proc_cache_forget(struct proc_cache *c, uint32_t pid);
/* Marks pid's entry exited at now_ns without dropping it: the exit
 * tracepoint fires before the kernel tears the address space down, and
 * samples taken during that teardown (or still in the ring) must keep the
 * process's labels and mappings, which /proc no longer has. Lookups keep
 * returning the entry; proc_cache_reap_exited drops it later. */
void proc_cache_mark_exited(struct proc_cache *c, uint32_t pid, uint64_t now_ns);
#define PROC_EXIT_LINGER_NS (1000ull * 1000000)
/* Drops entries marked exited before cutoff_ns. */
void proc_cache_reap_exited(struct proc_cache *c, uint64_t cutoff_ns);
/* Drops entries not sampled since before cutoff_ns and not referenced. */
void proc_cache_expire(struct proc_cache *c, uint64_t cutoff_ns);
/* Notes what an mmap record says of a process (its code mappings since
 * its last exec), for when it is gone before /proc is read; notes expire
 * after 5 s (proc_cache_expire_notes). */
void proc_cache_note(struct proc_cache *c, const struct mmap_event *e, uint64_t now_ns);
void proc_cache_expire_notes(struct proc_cache *c, uint64_t now_ns);
size_t proc_cache_count(const struct proc_cache *c);
/* Reads /proc/PID/{stat,exe,cgroup,maps} into a fresh entry (exposed for
 * tests); comm and comm_exact as for proc_cache_get (comm may be NULL). */
struct proc_info *proc_info_read(const char *proc_root, uint32_t pid, const char *comm,
				 bool comm_exact, struct buildid_cache *bc);
void proc_info_free(struct proc_info *p);
/* A window holds an entry while it has samples for it; releasing the last
 * hold of an entry the cache already dropped frees it. */
void proc_info_hold(struct proc_info *p);
void proc_info_release(struct proc_info *p);

/* ---- windows (window.c) ------------------------------------------------- */

/* The key of one aggregated stack within a process: the thread and the
 * frames (kernel leaf first, then user leaf first) follow the header. */
struct window_stack_key {
	uint32_t tid;
	uint16_t n_kernel, n_user;
	char thread_comm[PROFILER_COMM_LEN];
};

/* What the off-CPU samples of one stack add up to. */
struct window_offcpu_total {
	uint64_t count; /* samples */
	uint64_t ns;	/* time off CPU */
};

struct window_proc {
	struct proc_info *info; /* held (proc_info_hold) until window_free */
	struct htab *stacks;	/* window_stack_key + frames -> sample count */
	uint64_t samples;
	/* Off-CPU samples, kept apart from CPU ones: window_stack_key +
	 * frames -> index into offcpu_totals (NULL until the first). */
	struct htab *offcpu;
	struct window_offcpu_total *offcpu_totals;
	size_t n_offcpu, cap_offcpu;
	uint64_t offcpu_samples;
};

/* The samples of one time window, per process. */
struct window {
	int64_t start_wall_ns;
	uint64_t start_mono_ns, end_mono_ns;
	struct htab *index; /* proc_info pointer -> index + 1 */
	struct window_proc *procs;
	size_t n, cap;
	uint64_t samples;	 /* CPU samples */
	uint64_t offcpu_samples; /* off-CPU samples */
};

struct window *window_new(uint64_t start_mono_ns, uint64_t end_mono_ns, int64_t start_wall_ns);
/* Counts one sample of process p: a CPU sample, or an off-CPU one
 * (PROFILER_EVENT_OFFCPU: its count and off_cpu_ns summed per stack).
 * Returns 0, -EINVAL (more frames than a sample holds) or -ENOMEM. */
int window_add(struct window *w, struct proc_info *p, const struct sample_event *e);
void window_free(struct window *w);

/* ---- profiles (profile.c) ------------------------------------------------- */

struct python; /* python.h */

struct profile_env {
	/* Kernel frame names, resolved for this window's frames (see
	 * ksym_cache_want); NULL: kernel frames stay addresses. */
	const struct ksym_cache *ksyms;
	/* Python frame names (python_frame_name); NULL: none */
	const struct python *python;
	unsigned frequency_hz;
	const struct agent_labels *host_labels; /* node, kernel_release, external */
	/* Optional, reused across profiles (NULL: allocated per profile): a
	 * level-1 libdeflate compressor costs more to set up (~100s of KB of
	 * tables, faulted in) than to run on a small profile. */
	struct libdeflate_compressor *gz;
	struct buf *scratch; /* with gz: holds the raw encoding */
	/* Optional, with gz: a level-0 compressor (gzip framing around stored
	 * deflate blocks) for encodings of at most stored_max bytes. The local
	 * store uses it below one file-system block: a file takes a 4 KiB
	 * block compressed or not, and level 1 costs ~7 us of fixed set-up
	 * on a ~700-byte profile, a third of building it. */
	struct libdeflate_compressor *gz_store;
	size_t stored_max;
	/* Optional: a builder emptied and reused by every profile (NULL: one
	 * allocated per profile). A new builder's arena, five tables and
	 * arrays were a fifth of building a small profile. */
	struct pprof_builder *builder;
	/* Optional: where the push sink's window capture offers the files of
	 * the user mappings it meets (debuginfo upload), and the /proc they
	 * are read through (NULL: "/proc"). */
	struct debuginfo_uploader *uploader;
	const char *proc_root;
};

/* The series labels of a process: host labels, then the process's own
 * (which win on a clash). Appends to out. */
int profile_series_labels(const struct profile_env *env, const struct proc_info *p,
			  struct agent_labels *out);
/* Parca's ExecutableInfo of one pprof mapping: ELF type (0 for the kernel,
 * [vdso] and unreadable files) and the executable load segment. */
struct agent_exec_info {
	uint32_t elf_type;
	bool has_load;
	uint64_t load_offset, load_vaddr;
	const struct proc_mapping *mapping; /* NULL for the kernel */
};
struct agent_exec_infos {
	struct agent_exec_info *v; /* v[i] describes mapping id i + 1 */
	size_t n, cap;
};
void agent_exec_infos_free(struct agent_exec_infos *e);

/* Builds the gzipped pprof of one process's window into out. Kernel frames
 * carry function names; user frames carry address + exact mapping only.
 * With series_labels non-NULL, every sample also carries those labels.
 * With exec non-NULL, it receives one entry per mapping, in mapping order. */
int profile_build(const struct profile_env *env, const struct window *w,
		  const struct window_proc *wp, const struct agent_labels *series_labels,
		  struct buf *out, struct agent_exec_infos *exec, struct kiln_error *err);

/* The same for the off-CPU samples of one process's window, shaped as
 * Parca's agent shapes its off-CPU profile: sample type
 * wallclock/nanoseconds (the time off CPU), period type samples/count, so
 * that with __name__ parca_agent its type is
 * parca_agent:wallclock:nanoseconds:samples:count. */
int profile_build_offcpu(const struct profile_env *env, const struct window *w,
			 const struct window_proc *wp, const struct agent_labels *series_labels,
			 struct buf *out, struct agent_exec_infos *exec, struct kiln_error *err);

/* Builds one gzipped pprof of the whole window: every process's samples,
 * each also carrying its process's series labels (*series_labels[i] for
 * w->procs[i]), so that pprof tools split it with -tagfocus/-tagshow. */
int profile_build_window(const struct profile_env *env, const struct window *w,
			 const struct agent_labels *const *series_labels, struct buf *out,
			 struct kiln_error *err);
/* The same for the window's off-CPU samples. */
int profile_build_offcpu_window(const struct profile_env *env, const struct window *w,
				const struct agent_labels *const *series_labels, struct buf *out,
				struct kiln_error *err);

/* ---- metrics (metrics.c) -------------------------------------------------- */

/* Process-wide counters, written by the main loop, read by the HTTP thread. */
struct agent_metrics {
	atomic_uint_least64_t samples;	      /* records received from the kernel */
	atomic_uint_least64_t kernel_samples; /* kernel-side count (incl. lost) */
	atomic_uint_least64_t drops_ringbuf;  /* lost: ring buffer full */
	atomic_uint_least64_t drops_oom;      /* lost: agent out of memory */
	atomic_uint_least64_t kernel_stack_errors;
	atomic_uint_least64_t user_stack_errors;
	atomic_uint_least64_t exec_events;
	atomic_uint_least64_t exit_events;
	atomic_uint_least64_t mmap_records_lost;
	atomic_uint_least64_t profiles_written;
	atomic_uint_least64_t profiles_failed;
	atomic_uint_least64_t profiles_dropped; /* by sinks (e.g. push buffer full) */
	atomic_uint_least64_t windows;
	atomic_uint_least64_t window_read_ns_last;
	atomic_uint_least64_t window_read_ns_total;
	atomic_uint_least64_t processes_tracked;
	atomic_uint_least64_t debuginfo_uploaded;   /* build IDs uploaded */
	atomic_uint_least64_t debuginfo_not_wanted; /* the server had them */
	atomic_uint_least64_t debuginfo_failed;	    /* attempts that failed */
	atomic_uint_least64_t debuginfo_no_symbols; /* stripped: nothing to send */
	/* The unwinder (unwinder.c): samples by how their user stack ended
	 * (enum unwind_status), and the tables behind it. */
	atomic_uint_least64_t unwind_status[UNWIND_STATUS_NR];
	atomic_uint_least64_t unwind_walks;	  /* kernel-side walks with tables */
	atomic_uint_least64_t unwind_walk_ns;	  /* their time in BPF */
	atomic_uint_least64_t unwind_walk_frames; /* frames they emitted */
	/* their time per stack and per frame (profiler.h, walk_hist) */
	atomic_uint_least64_t unwind_walk_hist[WALK_HIST_NR * WALK_HIST_BUCKETS];
	atomic_uint_least64_t unwind_rewalked; /* copied stacks walked in user space */
	atomic_uint_least64_t unwind_tables;
	atomic_uint_least64_t unwind_processes;
	atomic_uint_least64_t unwind_table_bytes;
	atomic_uint_least64_t unwind_table_bytes_max;
	atomic_uint_least64_t unwind_table_builds;
	atomic_uint_least64_t unwind_table_build_ns;
	atomic_uint_least64_t unwind_table_failures;
	atomic_uint_least64_t unwind_tables_over_budget;
	atomic_uint_least64_t unwind_tables_evicted;
	atomic_uint_least64_t unwind_process_loads;
	atomic_uint_least64_t unwind_mappings_dropped;
	atomic_uint_least64_t unwind_map_bytes; /* chunks of the row pool, allocated */
	/* Off-CPU (offcpu.bpf.h): the kernel's counters, and the samples
	 * user space received. */
	atomic_uint_least64_t offcpu_enabled; /* 1 when the probes are attached */
	atomic_uint_least64_t offcpu_switches;
	atomic_uint_least64_t offcpu_recorded;
	atomic_uint_least64_t offcpu_short;
	atomic_uint_least64_t offcpu_kernel_samples;
	atomic_uint_least64_t offcpu_drops_slot_taken;
	atomic_uint_least64_t offcpu_drops_ringbuf;
	atomic_uint_least64_t offcpu_kernel_threads;
	atomic_uint_least64_t offcpu_nested;  /* CPU samples not taken */
	atomic_uint_least64_t offcpu_samples; /* received */
	atomic_uint_least64_t offcpu_profiles;
	/* Python frames (python.c, python.bpf.h) */
	atomic_uint_least64_t python_processes;	      /* CPython processes walked */
	atomic_uint_least64_t python_unsupported;     /* ... left native: version */
	atomic_uint_least64_t python_walks;	      /* kernel walks of their stacks */
	atomic_uint_least64_t python_walk_ns;	      /* time of those walks */
	atomic_uint_least64_t python_kernel_frames;   /* Python frames emitted */
	atomic_uint_least64_t python_code_unreadable; /* code objects not named */
	atomic_uint_least64_t python_fail[PYTHON_FAIL_NR];
	struct perfmap_metrics perfmap; /* perfmap.h */
};

struct metrics_server;
/* Serves GET /metrics (and /healthy) on addr ("host:port" or ":port").
 * Returns 0 or a negative errno with err filled. */
int metrics_server_start(const char *addr, struct agent_metrics *m, struct metrics_server **out,
			 struct kiln_error *err);
void metrics_server_stop(struct metrics_server *s);
/* Prometheus text exposition of m, appended to out. */
int metrics_render(const struct agent_metrics *m, struct buf *out);

/* ---- sinks ---------------------------------------------------------------- */

/* One process's profile for one window (or, for a SINK_WINDOW sink, the
 * whole window's). */
struct agent_profile {
	uint32_t pid;
	const char *comm;
	const struct agent_labels *labels; /* all series labels (sorted) */
	int64_t time_ns;		   /* window start, wall clock */
	int64_t duration_ns;
	const uint8_t *pprof; /* gzipped pprof; see enum agent_sink_shape */
	size_t pprof_len;
	const struct agent_exec_info *exec_info; /* one per pprof mapping */
	size_t n_exec_info;
	enum agent_profile_kind {
		AGENT_PROFILE_CPU = 0,
		AGENT_PROFILE_OFFCPU, /* profile_build_offcpu's */
	} kind;
};

/* What a sink receives each window. */
enum agent_sink_shape {
	/* One profile per process, labels beside it (a server stores them as
	 * the series). */
	SINK_PER_PROCESS,
	/* One profile per process whose samples also carry the series labels
	 * (so that `pprof -tagfocus=comm=X` works on a file). */
	SINK_PER_PROCESS_LABELLED,
	/* One profile for the whole window, every sample carrying its
	 * process's series labels (profile_build_window). */
	SINK_WINDOW,
	SINK_SHAPES
};

/* Where profiles go. A sink receives every window's profiles in one call
 * (so a remote sink can batch them into one request) and must not block
 * the sampler for long: slow I/O belongs in its own thread. */
struct agent_sink {
	const char *name;
	enum agent_sink_shape shape;
	/* Returns the number of profiles written, or a negative errno with err
	 * filled; the agent counts and logs failures and keeps going. With
	 * SINK_WINDOW, n is 1 and the profile is the whole window's (pid 0,
	 * comm "", labels NULL, no exec_info). */
	int (*write_window)(struct agent_sink *s, const struct agent_profile *profiles, size_t n,
			    struct kiln_error *err);
	/* Optional, instead of write_window: takes the window itself (its
	 * processes' series labels set) and resolves its frames with env, so
	 * that no profile is built for this sink. Returns the number of
	 * process profiles taken, or a negative errno with err filled. */
	int (*write_stacks)(struct agent_sink *s, const struct window *w,
			    const struct profile_env *env, struct kiln_error *err);
	/* Flushes and releases the sink (NULL-safe target). */
	void (*close)(struct agent_sink *s);
	struct agent_metrics *metrics;
};

/* The --local-store-directory sink, written atomically; creates dir if
 * needed. per_process false (the default layout): one file per window,
 * DIR/TIME.pb.gz, holding every process; true: DIR/TIME_PID_COMM.pb.gz,
 * one per process. */
int sink_local_new(const char *dir, bool per_process, struct agent_sink **out,
		   struct kiln_error *err);

/* The push sink (issue 5): each window's profiles as one
 * ProfileStoreService/WriteRaw request, labels beside each profile plus
 * __name__="parca_agent"; queued in memory (bounded) and sent by its own
 * thread with retries, so sampling never waits for the network. */
struct sink_remote_config {
	const char *address; /* host:port or URL */
	bool insecure;	     /* cleartext HTTP/2 */
	bool insecure_skip_verify;
	struct tls_client_files tls; /* CA, client certificate and key */
	const char *bearer_token;    /* NULL: none */
	size_t buffer_bytes;	     /* 0: 64 MiB */
	/* --remote-store-protocol: AUTO tries IngestService/Push and falls
	 * back to WriteRaw when the server answers UNIMPLEMENTED. */
	enum sink_remote_protocol {
		SINK_PROTOCOL_AUTO = 0,
		SINK_PROTOCOL_STREAM,
		SINK_PROTOCOL_WRITERAW,
	} protocol;
};
int sink_remote_new(const struct sink_remote_config *cfg, struct agent_metrics *metrics,
		    struct agent_sink **out, struct kiln_error *err);

/* ---- debuginfo upload (debuginfo_uploader.c) ------------------------------ */

/* Uploads the debug info of profiled binaries to the server in background
 * threads (Parca's DebuginfoService; see client.h debuginfo_upload_file):
 * each build ID is asked about once, retried with backoff after failures. */
struct debuginfo_uploader_config {
	const char *address; /* the remote store */
	bool insecure, insecure_skip_verify;
	struct tls_client_files tls;
	const char *bearer_token;
	size_t max_parallel;	       /* worker threads; 0: 2 */
	int timeout_ms;		       /* per gRPC call; 0: 120 s */
	uint64_t max_bytes_per_second; /* per upload; 0: unlimited */
	const char *temp_dir;	       /* for extracts; NULL: /tmp */
	bool no_strip;		       /* upload whole binaries (--debuginfo-strip=false) */
};
struct debuginfo_uploader;
struct debuginfo_uploader *debuginfo_uploader_new(const struct debuginfo_uploader_config *cfg,
						  struct agent_metrics *m, struct kiln_error *err);
/* Never blocks on the network: queues build_id (file at path) unless it
 * was handled already or is waiting for its retry. */
void debuginfo_uploader_offer(struct debuginfo_uploader *u, const char *build_id, const char *path);
void debuginfo_uploader_free(struct debuginfo_uploader *u);

/* ---- the unwinder's user-space half (unwinder.c) --------------------------- */

/* The BPF maps the unwinder fills (sampler_unwind_maps). */
struct sampler_unwind_maps {
	int procs_fd;	     /* unwind_procs: pid -> struct unwind_proc */
	int chunks_fd;	     /* unwind_chunks: the row pool's array of maps */
	uint32_t max_chunks; /* its cap (--unwind-table-max-bytes) */
	/* the BPF program's unwind_pool_gen, bumped when slots are freed */
	volatile uint32_t *pool_gen;
};

struct unwinder;
/* debug_dir: where separate debug files are looked up by build ID for
 * files without CFI of their own ("/usr/lib/debug"; NULL: nowhere).
 * NULL on out-of-memory. */
struct unwinder *unwinder_new(const struct sampler_unwind_maps *maps, const char *debug_dir,
			      struct agent_metrics *m);
void unwinder_free(struct unwinder *u);
/* (Re)loads pid's code mappings and their tables into the kernel. 0,
 * -ENOENT (gone, or a kernel thread), or another negative errno. */
int unwinder_load(struct unwinder *u, const char *proc_root, uint32_t pid, uint64_t now);
/* Whether pid may be reloaded now (never loaded, or not within the last
 * second: a pc outside every mapping asks for a reload). */
bool unwinder_reload_due(struct unwinder *u, uint32_t pid, uint64_t now);
/* This drain's loads and walks are done: the table memory they mapped
 * into the agent is unmapped (it stays in the kernel). */
void unwinder_idle(struct unwinder *u);
/* Drops pid (exec or exit): its tables lose a reference. True if it was
 * known. */
bool unwinder_forget(struct unwinder *u, uint32_t pid, uint64_t now);
void unwinder_update_metrics(struct unwinder *u);
/* Walks a copied user stack (regs: rip, rsp, rbp; stack: stack_len bytes
 * from rsp) with pid's tables, as the BPF walk does: up to max frames into
 * frames, how it ended into *status. Tables of code the walk meets that
 * were not built yet are built on the way (and the kernel told). The
 * frame count, or -ENOENT when pid has no tables. */
int unwinder_walk(struct unwinder *u, uint32_t pid, const uint64_t regs[3], const uint8_t *stack,
		  size_t stack_len, uint64_t *frames, size_t max, uint8_t *status, uint64_t now);

/* ---- the agent (agent.c) -------------------------------------------------- */

struct agent_config {
	unsigned frequency_hz;	      /* --profiling-cpu-sampling-frequency */
	uint64_t duration_ns;	      /* --profiling-duration */
	const char *node;	      /* --node */
	struct agent_labels external; /* --metadata-external-labels */
	const char *http_address;     /* --http-address ("" = off) */
	const char *proc_root;	      /* "/proc" */
	size_t ringbuf_bytes;	      /* 0 = sized from the CPU count */
	/* Bytes of BPF map memory for unwind tables (--unwind-table-max-bytes);
	 * 0: frame pointers only (the kernel's walker, as perf -g). */
	size_t unwind_table_bytes;
	const char *debug_dir; /* separate debug files, for tables */
	bool python_frames;    /* --python-frames: walk CPython's frames */
	struct agent_sink **sinks;
	size_t n_sinks;
	struct debuginfo_uploader *uploader; /* NULL: no debuginfo upload */
	/* --off-cpu-threshold (0: no off-CPU profile) and
	 * --off-cpu-probability (the share of switch-outs noted, 0..1). */
	uint64_t offcpu_threshold_ns;
	double offcpu_probability;
	/* Memory for JIT names read from perf maps (--perf-map-max-bytes);
	 * 0: perf maps are not read. */
	size_t perf_map_max_bytes;
};

/* Checks capabilities, BTF and perf events before anything else and explains what
 * is missing in one line. Returns 0 or a negative errno with err filled. */
int agent_preflight(struct kiln_error *err);
/* privileges.c: -1 with err naming each missing required capability
 * (CAP_BPF, CAP_PERFMON); a warning for the optional ones. */
int agent_check_privileges(struct kiln_error *err);

/* Runs until *stop becomes non-zero; then flushes the partial window.
 * Returns 0 or a negative errno with err filled. */
int agent_run(const struct agent_config *cfg, struct agent_metrics *metrics,
	      volatile sig_atomic_t *stop, struct kiln_error *err);

/* ---- sampler (sampler.c) ------------------------------------------------- */

struct sampler;
/* Called for every ring-buffer record. */
typedef void (*sampler_record_fn)(void *ctx, const void *data, size_t len);
/* Loads the BPF program, opens one perf event per online CPU at freq Hz and
 * attaches. Errors say which step failed and what to do about it. */
/* unwind_rows: the row budget of the table unwinder (0: frame pointers
 * only); if the kernel refuses the unwinder, the sampler falls back to
 * frame pointers with a warning. */
int sampler_open(unsigned freq, size_t ringbuf_bytes, uint32_t unwind_rows, sampler_record_fn fn,
		 void *ctx, struct sampler **out, struct kiln_error *err);
/* Off-CPU sampling (offcpu.bpf.h): threads off CPU at least threshold_ns
 * give a sample; probability: the share of switch-outs noted (0..1). */
struct sampler_offcpu {
	uint64_t threshold_ns;
	double probability;
};
/* sampler_open, with off-CPU sampling when offcpu is non-NULL. If the
 * kernel cannot take it (no finish_task_switch to probe), that is logged
 * and the sampler works without it (sampler_offcpu_active). */
int sampler_open_ex(unsigned freq, size_t ringbuf_bytes, uint32_t unwind_rows,
		    const struct sampler_offcpu *offcpu, sampler_record_fn fn, void *ctx,
		    struct sampler **out, struct kiln_error *err);
bool sampler_offcpu_active(const struct sampler *s);
/* The unwinder's maps: false when it is off. */
bool sampler_unwind_maps(struct sampler *s, struct sampler_unwind_maps *out);
/* python_procs (see python.bpf.h): -1 when the unwinder is off. */
int sampler_python_map_fd(struct sampler *s);
/* Waits up to timeout_ms for the kernel to signal a record worth prompt
 * attention (a process not seen before, a ring a quarter full) or a
 * signal, then delivers every record in the ring. Returns the count or a
 * negative errno. */
int sampler_poll(struct sampler *s, int timeout_ms);
/* Delivers every record already in the ring without waiting. */
int sampler_drain(struct sampler *s);
/* fn runs before each poll or drain delivers records (the agent drains
 * the kernel's mmap records there, so a process's mappings are noted
 * before its samples are handled). */
void sampler_set_before_consume(struct sampler *s, void (*fn)(void *ctx), void *ctx);
/* Detaches from the perf events: no sample is taken after this returns, so
 * a following drain sees every sample the kernel counted. */
void sampler_stop(struct sampler *s);
/* Names up to KSYM_BATCH kernel addresses through the kernel's kallsyms
 * lookup (%pS: "name+0xoff/0xsize [module]", or the bare hex address when
 * no symbol covers it). *names points into the sampler (valid until the
 * next call). Returns how many were named, or -EOPNOTSUPP when the kernel
 * lacks bpf_snprintf (before 5.13), or another negative errno. */
int sampler_symbolize(struct sampler *s, const uint64_t *addrs, size_t n,
		      const char (**names)[KSYM_NAME_LEN]);
bool sampler_can_symbolize(const struct sampler *s);
/* Sums the per-CPU kernel counters (enum profiler_stat) into out[STAT_NR]. */
int sampler_stats(struct sampler *s, uint64_t *out, size_t n);
/* The walk-time histograms (profiler.h, walk_hist) summed over CPUs into
 * out[histogram * WALK_HIST_BUCKETS + bucket]. 0 or -errno. */
int sampler_walk_hist(struct sampler *s, uint64_t *out, size_t n);
void sampler_close(struct sampler *s);

/* ---- off-CPU probes (offcpu.c) --------------------------------------------- */

struct bpf_program;
struct bpf_link;
/* Whether one line of /proc/kallsyms text (len bytes, the newline
 * optional) is a core-kernel text symbol finish_task_switch or
 * finish_task_switch.SUFFIX: 1 with its name in name, 0 for another
 * symbol, -EINVAL for a line that is not kallsyms', -ENAMETOOLONG. */
int offcpu_kallsyms_match(const char *line, size_t len, char *name, size_t namesz);
/* The name finish_task_switch has in the kallsyms file at path: 0 with
 * name filled, or a negative errno with err saying why. */
int offcpu_find_resume_symbol(const char *kallsyms_path, char *name, size_t namesz,
			      struct kiln_error *err);
/* The loaded off-CPU programs of the skeleton (offcpu.bpf.h). */
struct offcpu_programs {
	struct bpf_program *on_switch;	   /* raw_tp sched_switch */
	struct bpf_program *resume_tp;	   /* raw_tp sched_exit_tp */
	struct bpf_program *resume_kprobe; /* kprobe finish_task_switch */
};
/* Attaches a resume program (the sched_exit_tp tracepoint, else a kprobe
 * on finish_task_switch by whatever name the kernel has for it), then
 * on_switch. 0, or a negative errno with err filled and nothing
 * attached. */
int offcpu_attach(const struct offcpu_programs *progs, struct bpf_link **switch_link,
		  struct bpf_link **resume_link, struct kiln_error *err);

#endif
