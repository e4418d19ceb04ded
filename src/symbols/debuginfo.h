/*
 * debuginfo.h — where debug files come from, by GNU build ID.
 *
 * A content-addressed store under <storage>/debuginfo/<build-id>/: uploaded
 * files land there as "debuginfo" after validation (an ELF file whose build
 * ID is the one named, within the size limit), and files fetched from
 * debuginfod upstreams are cached there too. debuginfo_store_find looks in
 * this order:
 *
 *   1. <storage>/debuginfo/<build-id>/debuginfo (uploaded or fetched before)
 *   2. each local directory in order (local_dirs: the server's
 *      --symbols-local-dir, kilnctl's --debug-dir or /usr/lib/debug):
 *      DIR/.build-id/xx/yyyy.debug (a debug file), then DIR/.build-id/xx/yyyy
 *      (a whole binary). Each is opened with O_NOFOLLOW and O_NONBLOCK only if
 *      it resolves to a regular file inside DIR (a link pointing outside is
 *      refused: fd_open_under) and used only if its build ID is the one asked
 *      and then the operator's own files (own_files: the server's binary,
 *      so that its self-profile is named), by their build ID
 *   3. the binary at the hinted path, if its build ID matches and it has
 *      DWARF; one with only .symtab is returned too, but a debuginfod fetch
 *      is queued for it (DWARF adds lines and inlined frames). Only callers
 *      on the host the path belongs to give a hint (kilnctl): the server
 *      never opens a path a client named (symbolizer_config.by_build_id_only)
 *   4. debuginfod upstreams — never inline: the lookup queues a fetch on the
 *      store's own thread and returns -EAGAIN; the caller retries later.
 *      Every request has a deadline (http_timeout_seconds) and is cut short
 *      when the store is freed. Failed fetches are remembered (negative
 *      cache) for negative_ttl_seconds so a missing build ID is not asked
 *      for on every location; after that, a lookup asks again. A stripped
 *      binary at the hinted path is returned while the upstreams say no.
 *
 * Thread-safe. Ingestion never waits on it: only the symbolizer (running
 * off the ingest path) calls debuginfo_store_find.
 */
#ifndef KILN_SYMBOLS_DEBUGINFO_H
#define KILN_SYMBOLS_DEBUGINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/error.h"

struct debuginfo_config {
	const char *storage_path;     /* files go to <storage_path>/debuginfo; NULL: no store */
	const char *const *upstreams; /* debuginfod base URLs, NULL-terminated; NULL: none */
	int http_timeout_seconds;     /* per debuginfod request; 0: 30 */
	size_t max_upload_bytes;      /* 0: 1 GiB */
	int negative_ttl_seconds;     /* 0: 600 */
	/* Directories searched by build ID (see above), NULL-terminated; NULL:
	 * none. One that does not exist is skipped. */
	const char *const *local_dirs;
	/* Files of the operator's own (the server's executable), found by
	 * their build ID like a local directory's, NULL-terminated; NULL:
	 * none. Read once, at creation. */
	const char *const *own_files;
	/* Called (on the fetch thread, no lock held) after a debuginfod fetch
	 * stored a file, so that answers from a poorer source are redone. */
	void (*on_fetched)(void *arg, const char *build_id);
	void *on_fetched_arg;
	/* Called just before a new file (upload or fetch) becomes visible,
	 * with on_fetched_arg: the caller durably notes that answers for
	 * build_id must be redone, since a crash right after the rename would
	 * leave them otherwise. A negative errno (with e set) refuses it. */
	int (*before_adopt)(void *arg, const char *build_id, struct kiln_error *e);
};

struct debuginfo_store;

struct debuginfo_store *debuginfo_store_new(const struct debuginfo_config *config,
					    struct kiln_error *e);
/* Stops the fetch thread (an in-flight request is aborted: this does not
 * wait for the network). NULL-safe. */
void debuginfo_store_free(struct debuginfo_store *d);

/* Finds a debug file for build_id (path_hint: the binary's path, may be NULL)
 * and copies its path into out. Returns 0; -EAGAIN while a debuginfod fetch
 * is queued or running; -ENOENT when nothing is known (and, with upstreams,
 * they said no within the negative TTL). */
int debuginfo_store_find(struct debuginfo_store *d, const char *build_id, const char *path_hint,
			 char *out, size_t outsz);

/* Whether the store has a file for build_id that was uploaded or fetched. */
bool debuginfo_store_has(struct debuginfo_store *d, const char *build_id);

/* Validates and stores an upload: data must be an ELF file whose GNU build ID
 * is build_id, at most max_upload_bytes. Written to a temporary file and
 * renamed, so readers never see a partial file. Returns 0, -EINVAL (not ELF,
 * build ID mismatch), -EFBIG, or an I/O -errno, with detail in e. */
int debuginfo_store_put(struct debuginfo_store *d, const char *build_id, const void *data,
			size_t size, struct kiln_error *e);

/* Removes what was uploaded or fetched for build_id (the operator's local
 * directories are never touched). Answers already computed from it stay in
 * the metastore; a later lookup may fetch it again from debuginfod.
 * Returns 0, -EINVAL (not a build ID), -ENOENT (nothing stored), -ENOTSUP
 * (no storage path) or an I/O -errno, with detail in e. */
int debuginfo_store_delete(struct debuginfo_store *d, const char *build_id, struct kiln_error *e);

/* The maximum upload size. */
size_t debuginfo_store_max_upload(const struct debuginfo_store *d);

/* Calls fn for every stored build ID (size in bytes, mtime). */
int debuginfo_store_list(struct debuginfo_store *d,
			 void (*fn)(void *arg, const char *build_id, uint64_t size, time_t mtime),
			 void *arg);

#endif
