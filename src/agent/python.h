/*
 * python.h — Python frames in the agent's profiles (part of the agent
 * module, see agent.h; the kernel half is python.bpf.h, the types both
 * halves share python_frames.h).
 *
 *   python_parse.c  pure parsers of interpreter facts: the per-version
 *                   offset table, CPython 3.13's _Py_DebugOffsets, the
 *                   version in a file name, line tables (co_lnotab,
 *                   3.10's co_linetable, 3.11+'s location table)
 *   python.c        which processes run CPython (their mappings and the
 *                   interpreter's ELF symbols) and the BPF map entry of
 *                   each; the name cache: each Python frame of a sample
 *                   is named when the sample is drained, by reading its
 *                   code object from the process (process_vm_readv),
 *                   so that a process that exits before its window is
 *                   cut keeps its names
 *
 * Nothing here stops or traces a process: the kernel reads the frames in
 * the sample, user space reads code objects (immutable once made) and
 * strings from /proc-style memory reads.
 */
#ifndef KILN_AGENT_PYTHON_H
#define KILN_AGENT_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "agent/python_frames.h"

/* ---- parsers (python_parse.c) ----------------------------------------------- */

/* The offsets of CPython major.minor (0x0309 ... 0x030d), written from each
 * version's headers, and how its frames chain (enum python_layout). False
 * for a version without a table. */
bool python_offsets_for(uint16_t version, struct python_offsets *out, uint8_t *layout);

/* The major.minor (0x030b) in an interpreter file's name: libpython3.11.so*,
 * python3.11 (a path's last component); 0 when the name says none. */
uint16_t python_version_from_name(const char *path);

/* CPython 3.13+ publishes its own offsets at the start of _PyRuntime
 * (_Py_DebugOffsets): parses len bytes read there. Checks the cookie
 * ("xdebugpy"), that the version is 3.13 (the layout this reader knows)
 * and that every offset fits the walk's bounds. 0, or -EINVAL with why
 * in err (what and where) when the bytes are not such a block. */
#define PYTHON_DEBUG_OFFSETS_SIZE 584
int python_debug_offsets_parse(const uint8_t *b, size_t len, struct python_offsets *out,
			       uint32_t *hexversion, char *err, size_t errsz);

/* The line of the instruction at code unit instr (2-byte units from the
 * start of the bytecode) in a code object's line table of version
 * (0x0309: co_lnotab, 0x030a: co_linetable, 0x030b+: the location
 * table), starting at first_line. The line, or -1 when the table gives
 * that instruction none; -EINVAL-style garbage (a table that runs past
 * its end) gives -1 too: a line is a nicety, never worth a failure. */
int python_line_for(uint16_t version, const uint8_t *table, size_t len, int first_line,
		    uint32_t instr);

/* A held sample's frames (its stack walked again in user space, which
 * gives native frames only) with its Python chain put in place: each
 * native frame whose pc (a return address but for the leaf, frame 0) is
 * in [eval_start, eval_end) takes the next eval call's Python frames
 * from chain (innermost first, each call's ended by PYFRAME_GROUP_END,
 * as python.bpf.h's python_chain writes it) instead of itself, as the
 * kernel's walk does; an eval frame with no group left stays. Writes at
 * most max frames to out and returns their number; 0 when a group is
 * left over (the native walk was cut short before its eval frame: the
 * path would be wrong, the caller keeps the native frames), except when
 * no eval frame was found and the chain is one eval call's frames
 * (nothing native can sit between them): they follow the native ones. */
size_t python_merge_frames(uint64_t eval_start, uint64_t eval_end, const uint64_t *native, size_t n,
			   const uint64_t *chain, size_t nchain, uint64_t *out, size_t max);

/* ---- processes and names (python.c) ----------------------------------------- */

struct agent_metrics;
struct python;

/* map_fd: python_procs (see python.bpf.h); NULL on out-of-memory. */
struct python *python_new(int map_fd, struct agent_metrics *m);
void python_free(struct python *py);

/* Looks at pid's mappings for a CPython interpreter (a libpython3.X.so or
 * a python3.X executable) and, for a supported version, writes its map
 * entry. 0 (a Python process or not), -ENOENT (gone), or another negative
 * errno. An unsupported version is counted, not an error. */
int python_load(struct python *py, const char *proc_root, uint32_t pid);

/* python_merge_frames with pid's eval loop; 0 when pid is not a walked
 * CPython process (the caller keeps the frames it had). */
size_t python_interleave(const struct python *py, uint32_t pid, const uint64_t *native, size_t n,
			 const uint64_t *chain, size_t nchain, uint64_t *out, size_t max);

struct sample_event;
/* A held sample (its stack copied, walked again in user space) that
 * carries its Python chain (n_python > 0): its user frames become
 * native[0..n) (the walk of its copy; NULL: the frames it came with)
 * interleaved with the chain. False, e untouched, when that cannot be
 * done (pid not walked, or its frames have Python frames already). */
bool python_held_frames(const struct python *py, struct sample_event *e, const uint64_t *native,
			size_t n);

/* A mapping of pid (path) was made: if it is a CPython interpreter's
 * file, pid is loaded now (python_load) rather than at its first sample,
 * so that samples taken before its unwind tables exist carry Python
 * frames. Cheap for any other file (its name is looked at). */
void python_note_mapping(struct python *py, const char *proc_root, uint32_t pid, const char *path);

/* Loads every CPython process running now (an executable named python*),
 * at start-up: their first samples then carry Python frames. */
void python_scan(struct python *py, const char *proc_root);

/* pid exec'd or exited: its entry goes (the kernel drops it too); the
 * names of its frames stay until python_reap_names after now + linger. */
void python_forget(struct python *py, uint32_t pid, uint64_t now_ns);

/* Names the Python frames among frames[0..n) of a sample of pid (reads
 * each code object not seen yet while the process lives; one named in an
 * earlier drain is checked to be the same object on its first use in
 * this one, since a freed code object's memory may hold another). */
void python_note_frames(struct python *py, uint32_t pid, const uint64_t *frames, size_t n);

/* A new drain of the ring begins (see python_note_frames). */
void python_new_drain(struct python *py);

/* What a Python frame of pid is: qualified name, file and line (0 when
 * unknown). False when its code object could not be read. The strings
 * live until the next python_reap_names. */
bool python_frame_name(const struct python *py, uint32_t pid, uint64_t frame, const char **name,
		       const char **file, int64_t *line);

/* Drops the names of processes forgotten before cutoff_ns, and all names
 * when the cache is over its memory bound (they are read again on the
 * next sample). Call between windows only: profiles use the names. */
void python_reap_names(struct python *py, uint64_t cutoff_ns);

/* Copies the kernel's Python counters (enum profiler_stat) into m. */
void python_update_metrics(struct python *py, const uint64_t *stats);

#endif
