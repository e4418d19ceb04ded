/*
 * aaa_store_fallback.c — weak stand-ins for the storage interface so that
 * the server and kilnctl link while the embedded store (src/store, built in
 * parallel) has not been merged yet. Every call fails with -ENOSYS.
 *
 * Why the name: in libkiln.a this must be the first member of src/server.
 * GNU ld pulls archive members in passes over the archive index; while it
 * passes this member the first time, nothing references store_* yet (the
 * server objects come later), so it is skipped, and on the next pass the
 * real store's members (src/store sorts before src/server) win. Named
 * after server.o, this member would be pulled in the same pass as server.o
 * and its weak definitions would shadow the real store. Delete this file
 * once src/store implements store.h.
 */
#include <errno.h>
#include <string.h>

#include "store/store.h"

#define WEAK __attribute__((weak))

WEAK int store_open(const struct store_options *opts, struct store **out, struct kiln_error *err)
{
	*out = NULL;
	return kiln_error_set(err, ENOSYS, "this build has no storage backend (src/store missing)");
}

WEAK void store_close(struct store *s)
{
}

WEAK int store_write_profile(struct store *s, const struct store_label *labels, size_t n_labels,
			     const struct pprof_profile *p, int64_t timestamp_ms, bool delta,
			     struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK int store_profile_types(struct store *s, int64_t start_ms, int64_t end_ms,
			     void (*cb)(void *ctx, const char *profile_type), void *ctx,
			     struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK int store_label_names(struct store *s, const struct store_selector *sel,
			   void (*cb)(void *ctx, const char *name), void *ctx,
			   struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK int store_label_values(struct store *s, const struct store_selector *sel, const char *name,
			    void (*cb)(void *ctx, const char *value), void *ctx,
			    struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK int store_query_range(struct store *s, const struct store_selector *sel,
			   void (*cb)(void *ctx, const struct store_label *labels, size_t n_labels,
				      const struct store_point *points, size_t n_points),
			   void *ctx, struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK int store_merge(struct store *s, const struct store_selector *sel, struct pprof_builder *out,
		     struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK void store_get_stats(struct store *s, struct store_stats *out)
{
	memset(out, 0, sizeof(*out));
}

WEAK int store_matcher_compile(struct store_matcher *m, struct kiln_error *err)
{
	return kiln_error_set(err, ENOSYS, "no storage backend");
}

WEAK void store_matcher_release(struct store_matcher *m)
{
}

WEAK bool store_matcher_matches(const struct store_matcher *m, const char *value)
{
	return false;
}
