/*
 * decode.c — bytes to a validated struct pprof_profile (its accessors are
 * in profile.c).
 *
 * Gzip input (magic 1f 8b) is inflated first, bounded by max_inflated_bytes.
 * The message is parsed (parse.c) into the profile's arena, so that freeing
 * a profile is one arena_free no matter how many submessages it has; the
 * (inflated) message bytes stay with the profile, as its strings point into
 * them.
 * Nothing is handed out before pprof_profile_index has validated it.
 */
#include "pprof/internal.h"

#include "common/gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_INFLATED ((size_t)1 << 30)

/* What a decoder keeps (pprof.h): a message buffer and an arena up to these
 * sizes, which cover agent and runtime/pprof profiles many times over; a
 * bigger profile's memory goes back to malloc. */
#define KEEP_RAW   ((size_t)2 << 20)
#define KEEP_ARENA (PPROF_DECODER_KEEP_BYTES - KEEP_RAW)

struct pprof_decoder {
	struct gzip_inflater *inflater;
	struct buf raw;	     /* spare message buffer, len 0 */
	struct arena *arena; /* spare, reset */
};

/* One chunk for the whole message where possible (a growing arena takes
 * five or six for an agent profile, the big ones fresh from the kernel each
 * time): the parsed structs take 3.4 times the message bytes for agent CPU
 * profiles, up to 4 for sample-heavy ones. */
static size_t arena_chunk_for(size_t msg_len)
{
	return msg_len < (2u << 20) ? msg_len * 4 + 16 * 1024 : 8u << 20;
}

static int decode(struct pprof_decoder *d, const void *data, size_t len,
		  const struct pprof_decode_opts *opts, struct pprof_profile **out,
		  struct kiln_error *err)
{
	size_t max =
	    opts && opts->max_inflated_bytes ? opts->max_inflated_bytes : DEFAULT_MAX_INFLATED;
	struct pprof_profile *p;
	size_t chunk;
	int rc;

	*out = NULL;
	if (len == 0)
		return kiln_error_set(err, EINVAL, "empty input: not a pprof profile");
	p = calloc(1, sizeof(*p));
	if (!p)
		return kiln_error_set(err, ENOMEM, "out of memory");
	if (d && d->raw.data) {
		p->raw = d->raw; /* len 0: reused as if fresh */
		memset(&d->raw, 0, sizeof(d->raw));
	}
	/* The message bytes stay with the profile: its strings point into
	 * them (pprof_parse), which saves a copy and an allocation per
	 * string, most of a profile's string table. */
	if (gzip_is_gzip(data, len)) {
		rc = gzip_inflate_with(d ? d->inflater : NULL, data, len, max, &p->raw, err);
		if (rc)
			goto fail;
		if (p->raw.len == 0) {
			rc = kiln_error_set(err, EINVAL, "empty input after gunzip");
			goto fail;
		}
	} else if (buf_reserve(&p->raw, len + 1) == 0) {
		memcpy(p->raw.data, data, len);
		p->raw.len = len;
	} else {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	/* pprof_parse needs data[len] writable (the last string's
	 * terminator); gzip_inflate_with leaves room for it. */
	if ((rc = buf_reserve(&p->raw, 1))) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	chunk = arena_chunk_for(p->raw.len);
	if (d && d->arena && arena_capacity(d->arena) >= chunk) {
		p->arena = d->arena;
		d->arena = NULL;
	} else {
		p->arena = arena_new(chunk);
		if (!p->arena) {
			rc = kiln_error_set(err, ENOMEM, "out of memory");
			goto fail;
		}
	}
	rc = pprof_parse(p->arena, p->raw.data, p->raw.len, &p->msg, err);
	if (rc)
		goto fail;
	rc = pprof_profile_index(p, err);
	if (rc)
		goto fail;
	*out = p;
	return 0;
fail:
	pprof_decoder_recycle(d, p);
	return rc;
}

int pprof_decode(const void *data, size_t len, const struct pprof_decode_opts *opts,
		 struct pprof_profile **out, struct kiln_error *err)
{
	return decode(NULL, data, len, opts, out, err);
}

struct pprof_decoder *pprof_decoder_new(void)
{
	struct pprof_decoder *d = calloc(1, sizeof(*d));

	if (d && !(d->inflater = gzip_inflater_new())) {
		free(d);
		d = NULL;
	}
	return d;
}

void pprof_decoder_free(struct pprof_decoder *d)
{
	if (!d)
		return;
	gzip_inflater_free(d->inflater);
	buf_free(&d->raw);
	arena_free(d->arena);
	free(d);
}

int pprof_decoder_decode(struct pprof_decoder *d, const void *data, size_t len,
			 const struct pprof_decode_opts *opts, struct pprof_profile **out,
			 struct kiln_error *err)
{
	return decode(d, data, len, opts, out, err);
}

void pprof_decoder_recycle(struct pprof_decoder *d, struct pprof_profile *p)
{
	if (!p)
		return;
	/* Keep the larger of d's spare and p's (the smaller is freed with
	 * p): profiles of one source grow slowly, and a spare kept from a
	 * smaller one would be too small for every later decode. */
	if (d && p->raw.data && p->raw.cap <= KEEP_RAW &&
	    (!d->raw.data || d->raw.cap < p->raw.cap)) {
		struct buf t = d->raw;
		d->raw = p->raw;
		d->raw.len = 0;
		p->raw = t;
	}
	if (d && p->arena) {
		arena_reset(p->arena);
		size_t cap = arena_capacity(p->arena);
		if (cap <= KEEP_ARENA && (!d->arena || arena_capacity(d->arena) < cap)) {
			struct arena *t = d->arena;
			d->arena = p->arena;
			p->arena = t;
		}
	}
	pprof_profile_free(p);
}

int pprof_decode_file(const char *path, const struct pprof_decode_opts *opts,
		      struct pprof_profile **out, struct kiln_error *err)
{
	struct buf b = {0};
	int rc;

	*out = NULL;
	rc = buf_read_file(&b, path, 0);
	if (rc) {
		kiln_error_set(err, rc, "%s", strerror(-rc));
		kiln_error_prefix(err, "%s: ", path);
		return rc;
	}
	rc = pprof_decode(b.data, b.len, opts, out, err);
	if (rc)
		kiln_error_prefix(err, "%s: ", path);
	buf_free(&b);
	return rc;
}
