/*
 * perfmap.h — JIT code named through perf maps (/tmp/perf-PID.map).
 *
 * A JIT (Node with --perf-basic-prof, a Java perf-map agent or `jcmd
 * Compiler.perfmap`, .NET with DOTNET_PerfMapEnabled=1, LuaJIT, Julia...)
 * writes one line per piece of code it emits: "START SIZE name", START and
 * SIZE in hex (an optional 0x is accepted), the name running to the end of
 * the line. Its code lives in anonymous executable memory that no binary
 * describes, so these names are the only ones such frames can get, and
 * only on this host: the agent puts them in the profile itself.
 *
 * Two layers:
 *  - struct perfmap (perfmap.c): the parser and table of one file, fed the
 *    bytes of a file that only grows; pure (no I/O), the file is the
 *    process's, hence hostile: garbage lines are counted and skipped, never
 *    trusted (the libFuzzer target fuzz/fuzz_perfmap.c drives it).
 *  - struct perfmap_proc and the registry (perfmap_reader.c): finding and
 *    reading a process's file safely, re-reading what it appended, the
 *    memory caps, and the /metrics counters.
 *
 * Later entries for the same code win: a JIT reuses addresses when it
 * moves or replaces code, and the file only ever grows. An entry that
 * starts where an earlier one starts replaces it; an entry overlapping an
 * earlier one at another start hides it for the addresses both cover.
 *
 * Memory: each table's bytes (entries and names) count against its own
 * cap (PERFMAP_PROC_MAX_BYTES) and against a budget shared by every
 * process (--perf-map-max-bytes); entries beyond either are dropped and
 * counted, never evicting what is loaded (the names a window's samples
 * already point at stay true).
 */
#ifndef KILN_AGENT_PERFMAP_H
#define KILN_AGENT_PERFMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct proc_info;
struct proc_mapping;
struct sample_event;
struct window;

/* A line longer than this is garbage (a Java signature fits easily). */
#define PERFMAP_LINE_MAX 4096
/* Bytes of one process's table, entries and names. */
#define PERFMAP_PROC_MAX_BYTES (16u << 20)
/* Bytes read from one file over its life (a writer that never stops, or a
 * file of garbage): past it the file is left alone until it is replaced
 * or shrinks. */
#define PERFMAP_FILE_MAX_BYTES (64u << 20)
/* Default of the budget shared by every process (--perf-map-max-bytes). */
#define PERFMAP_DEFAULT_MAX_BYTES (64u << 20)

/* Memory shared by every table: used never exceeds limit. */
struct perfmap_budget {
	size_t used, limit;
};

/* What one perfmap_feed did (added to by each call). */
struct perfmap_feed_stats {
	uint64_t symbols_added;
	uint64_t lines_rejected;
	uint64_t symbols_dropped; /* over a cap */
};

/* One parsed line: name points into the line (not NUL-terminated). */
struct perfmap_line {
	uint64_t start, size;
	const char *name;
	size_t name_len;
};

/* Parses one line (without its newline; a trailing '\r' is ignored).
 * Returns true, or false with *why saying what is wrong (a static
 * string). */
bool perfmap_parse_line(const char *line, size_t len, struct perfmap_line *out, const char **why);

struct perfmap;

/* An empty table whose bytes count against budget (which must outlive
 * it; NULL: only the per-table cap). NULL on out-of-memory. */
struct perfmap *perfmap_new(struct perfmap_budget *budget);
/* NULL-safe; gives the table's bytes back to its budget. */
void perfmap_free(struct perfmap *pm);
/* Empties the table (the file was replaced or shrank): bytes given back,
 * line numbering and a partial line forgotten. */
void perfmap_clear(struct perfmap *pm);

/* Parses the complete lines at the start of data[0..len) into the table
 * and returns how many bytes it consumed: the caller feeds the rest again
 * with what follows once the writer has finished the line. A line of
 * PERFMAP_LINE_MAX bytes or more without a newline is consumed as garbage
 * (and the rest of it, up to its newline, by later calls). */
size_t perfmap_feed(struct perfmap *pm, const char *data, size_t len,
		    struct perfmap_feed_stats *st);

/* The name of the code at addr (the latest entry covering it), valid until
 * the next perfmap_feed or perfmap_clear, or NULL. */
const char *perfmap_lookup(const struct perfmap *pm, uint64_t addr);
size_t perfmap_count(const struct perfmap *pm);
size_t perfmap_bytes(const struct perfmap *pm);
/* The first rejected line since the table was made or cleared ("line 12:
 * size is not hex"), or "" when none was. */
const char *perfmap_first_error(const struct perfmap *pm);

/* ---- processes (perfmap_reader.c) --------------------------------------- */

/* Why a read of a process's perf map failed (the /metrics reason). */
enum perfmap_failure {
	PERFMAP_FAIL_NOT_FOUND,	  /* no file (the runtime was not asked to write one) */
	PERFMAP_FAIL_SYMLINK,	  /* the path is a symbolic link: not followed */
	PERFMAP_FAIL_NOT_REGULAR, /* a FIFO, device, directory or FUSE file */
	PERFMAP_FAIL_OWNER,	  /* not owned by the process's user */
	PERFMAP_FAIL_TOO_BIG,	  /* PERFMAP_FILE_MAX_BYTES read already */
	PERFMAP_FAIL_PROC,	  /* /proc/PID/status or root unreadable (gone) */
	PERFMAP_FAIL_IO,	  /* open or read failed otherwise */
	PERFMAP_FAIL_NR
};

/* Process-wide counters, written by the main loop (part of struct
 * agent_metrics, read by the /metrics thread). */
struct perfmap_metrics {
	atomic_uint_least64_t symbols;	       /* gauge: entries loaded */
	atomic_uint_least64_t bytes;	       /* gauge: their memory */
	atomic_uint_least64_t symbols_read;    /* lines loaded, ever */
	atomic_uint_least64_t symbols_dropped; /* over a cap */
	atomic_uint_least64_t lines_rejected;  /* garbage */
	/* Sampled frames in JIT regions of processes with a perf map loaded,
	 * named by it or not. */
	atomic_uint_least64_t frames_named;
	atomic_uint_least64_t frames_unnamed;
	atomic_uint_least64_t failures[PERFMAP_FAIL_NR];
};

/* Appends the perf-map families to a Prometheus exposition. 0 or -ENOMEM. */
int perfmap_metrics_render(const struct perfmap_metrics *m, struct buf *out);

/* What the agent keeps for reading every process's perf map. */
struct perfmap_registry;

/* proc_root: normally "/proc"; max_bytes: the budget shared by every
 * process (0: perf maps are not read). m must outlive the registry, and
 * the registry every proc_info (free it after the process cache). NULL on
 * out-of-memory. */
struct perfmap_registry *perfmap_registry_new(const char *proc_root, size_t max_bytes,
					      struct perfmap_metrics *m);
void perfmap_registry_free(struct perfmap_registry *r);

/* One process's perf map and the state of reading it; owned by its
 * proc_info (freed by proc_info_free through perfmap_proc_free). */
struct perfmap_proc;
void perfmap_proc_free(struct perfmap_proc *pp);

/* Whether a frame in mapping m (NULL: in none) may be JIT code: anonymous
 * executable memory, a memfd (runtimes that map their code twice), or no
 * mapping at all. */
bool perfmap_jit_region(const struct proc_mapping *m);

/* What the agent calls for each sample of p (after its frames' mappings
 * were resolved): when a user frame is in a JIT region, reads p's perf
 * map, or what was appended to it, at most once a second (backing off
 * while there is no file), and only while p lives. */
void perfmap_note_sample(struct perfmap_registry *r, struct proc_info *p,
			 const struct sample_event *e, uint64_t now_ns);

/* Before a window's profiles are built: reads what the perf maps of its
 * live processes gained since (a process gone keeps the names it had) and
 * counts its JIT frames named and not. */
void perfmap_window_prepare(struct perfmap_registry *r, const struct window *w, uint64_t now_ns);

/* The name of p's code at addr (a frame's lookup address), or NULL;
 * *file is set to the perf map's path as the process sees it. */
const char *perfmap_proc_lookup(const struct proc_info *p, uint64_t addr, const char **file);

#endif
