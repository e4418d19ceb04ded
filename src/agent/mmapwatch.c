/*
 * mmapwatch.c — every executable mapping the host's processes make, as the
 * kernel reports it, for processes that are gone before /proc is read.
 *
 * The agent reads a process's mappings from /proc when its first sample
 * arrives (procinfo.c). A compiler pass, an assembler or a script's command
 * may live a few milliseconds: by then it has exited and /proc has nothing.
 * perf solves this with the kernel's mmap records, and so does this file:
 * one PERF_COUNT_SW_DUMMY event per online CPU, counting nothing, asks for
 * PERF_RECORD_MMAP2 (executable mappings only: attr.mmap_data stays 0),
 * PERF_RECORD_COMM with the exec flag and PERF_RECORD_FORK (a child that
 * never execs runs its parent's code: a shell's subshell, a forking
 * server's worker), into a small ring per CPU. The
 * agent's loop drains the rings just before it consumes the BPF ring
 * (sampler_set_before_consume), so the mappings of a process are noted
 * before its samples are handled (it mapped its code before running it).
 * Nothing wakes the agent for these records; a ring that fills between
 * drains loses records, counted (PERF_RECORD_LOST), never silently.
 *
 * Cost: one record per executable mmap, exec, fork and exit on the host
 * (threads' forks and exits too: the kernel has no process-only switch),
 * written by the kernel; none for processes that do none of these (a
 * steady host).
 */
#include "agent/agent.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Data pages per CPU ring (a power of two): 64 KiB holds ~600 records, a
 * few seconds of a busy build per CPU. */
#define WATCH_PAGES 16

struct watch_ring {
	int fd;
	void *base; /* the metadata page, then the data pages */
	size_t data_size;
};

struct mmap_watch {
	struct watch_ring *rings;
	int n;
	size_t page;
	uint8_t *scratch; /* a record that wraps around the ring's end */
};

/* PERF_RECORD_MMAP2 body: pid, tid, addr, len, pgoff, then (without
 * PERF_RECORD_MISC_MMAP_BUILD_ID) maj, min, ino, ino_generation, then
 * prot, flags, and the NUL-terminated file name padded to 8 bytes. */
struct mmap2_body {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
};

int mmap_record_parse(const void *rec, size_t len, struct mmap_event *out)
{
	const struct perf_event_header *h = rec;
	const uint8_t *p = rec;

	if (len < sizeof(*h) || h->size < sizeof(*h) || h->size > len)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (h->type == PERF_RECORD_COMM) {
		/* pid, tid, then the new name */
		if (h->size < sizeof(*h) + 8)
			return -EINVAL;
		if (!(h->misc & PERF_RECORD_MISC_COMM_EXEC))
			return 0;
		memcpy(&out->pid, p + sizeof(*h), 4);
		out->exec = true;
		return 1;
	}
	if (h->type == PERF_RECORD_FORK) {
		uint32_t ids[4]; /* pid, ppid, tid, ptid; then the time */

		if (h->size < sizeof(*h) + sizeof(ids))
			return -EINVAL;
		memcpy(ids, p + sizeof(*h), sizeof(ids));
		/* A thread shares its process's pid; a new process's first
		 * thread is its pid. */
		if (ids[0] == ids[1] || ids[0] != ids[2] || ids[1] == 0)
			return 0;
		out->pid = ids[0];
		out->parent = ids[1];
		return 1;
	}
	if (h->type == PERF_RECORD_MMAP2) {
		struct mmap2_body b;
		const char *name = (const char *)p + sizeof(*h) + sizeof(b);
		size_t room;

		if (h->size < sizeof(*h) + sizeof(b) + 1)
			return -EINVAL;
		memcpy(&b, p + sizeof(*h), sizeof(b));
		room = h->size - sizeof(*h) - sizeof(b);
		if (!memchr(name, '\0', room))
			return -EINVAL; /* the name must end inside the record */
		if (!(b.prot & PROT_EXEC) || b.len == 0 || b.addr + b.len < b.addr)
			return 0;
		out->pid = b.pid;
		out->m.start = b.addr;
		out->m.limit = b.addr + b.len;
		out->m.offset = b.pgoff;
		out->m.exec = true;
		if (!(h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
			out->m.dev_major = b.maj;
			out->m.dev_minor = b.min;
			out->m.inode = b.ino;
		}
		out->m.path = (char *)name;
		out->m.build_id = "";
		return 1;
	}
	return 0;
}

static void ring_close(struct mmap_watch *w, struct watch_ring *r)
{
	if (r->base)
		munmap(r->base, w->page * (WATCH_PAGES + 1));
	if (r->fd >= 0)
		close(r->fd);
	r->base = NULL;
	r->fd = -1;
}

int mmap_watch_open(struct mmap_watch **out, struct kiln_error *err)
{
	struct perf_event_attr attr;
	struct mmap_watch *w = calloc(1, sizeof(*w));
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int opened = 0, rc;

	*out = NULL;
	if (!w || ncpu <= 0)
		goto oom;
	w->page = (size_t)sysconf(_SC_PAGESIZE);
	w->n = (int)ncpu;
	w->rings = calloc((size_t)ncpu, sizeof(*w->rings));
	w->scratch = malloc(w->page * WATCH_PAGES);
	if (!w->rings || !w->scratch)
		goto oom;
	for (int cpu = 0; cpu < w->n; cpu++)
		w->rings[cpu].fd = -1;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	attr.mmap = 1;
	attr.mmap2 = 1;
	attr.comm = 1;
	attr.comm_exec = 1;
	attr.task = 1; /* fork (and exit) records */
	attr.exclude_kernel = 1;
	attr.wakeup_events = 1u << 30; /* never: the agent drains on its own wakeups */
	for (int cpu = 0; cpu < w->n; cpu++) {
		struct watch_ring *r = &w->rings[cpu];

		r->fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (r->fd < 0) {
			if (errno == ENODEV || errno == EINVAL) /* an offline CPU */
				continue;
			rc = kiln_error_set(
			    err, errno,
			    "mmap records unavailable on cpu %d (%s): processes that "
			    "exit before /proc is read keep bare addresses",
			    cpu, strerror(errno));
			goto fail;
		}
		r->base = mmap(NULL, w->page * (WATCH_PAGES + 1), PROT_READ | PROT_WRITE,
			       MAP_SHARED, r->fd, 0);
		if (r->base == MAP_FAILED) {
			r->base = NULL;
			rc = kiln_error_set(err, errno,
					    "mapping the mmap-record ring of cpu %d: %s (raise "
					    "/proc/sys/kernel/perf_event_mlock_kb)",
					    cpu, strerror(errno));
			goto fail;
		}
		r->data_size = w->page * WATCH_PAGES;
		opened++;
	}
	if (!opened) {
		rc = kiln_error_set(err, ENODEV, "no CPU accepted an mmap-record event");
		goto fail;
	}
	*out = w;
	return 0;
oom:
	rc = kiln_error_set(err, ENOMEM, "out of memory");
fail:
	mmap_watch_close(w);
	return rc < 0 ? rc : -rc;
}

/* Delivers the records of one ring; returns the records the kernel lost. */
static uint64_t ring_drain(struct mmap_watch *w, struct watch_ring *r, mmap_event_fn fn, void *ctx)
{
	struct perf_event_mmap_page *meta = r->base;
	const uint8_t *data = (const uint8_t *)r->base + w->page;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail, lost = 0;

	while (tail < head) {
		struct perf_event_header h;
		size_t off = (size_t)(tail % r->data_size);
		const uint8_t *rec;
		struct mmap_event e;

		/* The header never wraps (records are 8-byte aligned). */
		memcpy(&h, data + off, sizeof(h));
		if (h.size < sizeof(h) || h.size > r->data_size || tail + h.size > head) {
			/* Not a record boundary (cannot happen with a sane
			 * kernel): drop what is left rather than stall here. */
			tail = head;
			lost++;
			break;
		}
		if (off + h.size <= r->data_size) {
			rec = data + off;
		} else {
			size_t first = r->data_size - off;

			memcpy(w->scratch, data + off, first);
			memcpy(w->scratch + first, data, h.size - first);
			rec = w->scratch;
		}
		if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
			uint64_t n;

			memcpy(&n, rec + sizeof(h) + 8, sizeof(n));
			lost += n;
		} else if (mmap_record_parse(rec, h.size, &e) == 1) {
			fn(ctx, &e);
		}
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return lost;
}

uint64_t mmap_watch_drain(struct mmap_watch *w, mmap_event_fn fn, void *ctx)
{
	uint64_t lost = 0;

	for (int i = 0; w && i < w->n; i++)
		if (w->rings[i].base)
			lost += ring_drain(w, &w->rings[i], fn, ctx);
	return lost;
}

void mmap_watch_close(struct mmap_watch *w)
{
	if (!w)
		return;
	for (int i = 0; w->rings && i < w->n; i++)
		ring_close(w, &w->rings[i]);
	free(w->rings);
	free(w->scratch);
	free(w);
}
