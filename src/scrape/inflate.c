/*
 * inflate.c — gunzip for the scheduler thread with state kept across
 * scrapes: one inflater (common/gzip.h) and one output buffer, instead of
 * a fresh state and a fresh buffer (faulted in page by page) per response.
 * The inflated bytes are then decoded as plain protobuf.
 */
#include <errno.h>

#include "common/gzip.h"
#include "scrape/scrape_internal.h"

/* Kept between scrapes only up to this size; a bigger one is released. */
#define KEEP_CAP ((size_t)8 << 20)

void scrape_inflater_release(struct scrape_inflater *z)
{
	gzip_inflater_free(z->z);
	z->z = NULL;
	buf_free(&z->out);
}

void scrape_inflater_trim(struct scrape_inflater *z)
{
	if (z->out.cap > KEEP_CAP)
		buf_free(&z->out);
	buf_reset(&z->out);
}

int scrape_inflate(struct scrape_inflater *z, const void *data, size_t len, size_t max_out,
		   struct kiln_error *err)
{
	buf_reset(&z->out);
	if (!z->z && !(z->z = gzip_inflater_new()))
		return kiln_error_set(err, ENOMEM, "gzip: out of memory");
	return gzip_inflate_with(z->z, data, len, max_out, &z->out, err);
}
