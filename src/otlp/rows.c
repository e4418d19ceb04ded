/*
 * rows.c — OTLP profiles for the store's row path (otlp.h,
 * otlp_convert_rows): one stack table for the whole request, then each
 * profile as rows (request stack number, value).
 *
 * Why: an OTLP request shares one dictionary among all its profiles, so the
 * stacks a request uses are described once however many profiles (one per
 * process and sample type, as the OpenTelemetry eBPF profiler sends) use
 * them. Building a pprof per profile described them once per profile, and
 * the store then hashed and looked up every location of every profile
 * again. Here the dictionary's locations become builder locations once per
 * request, each dictionary stack a profile uses becomes one sample of one
 * pprof (the stack table), and the store interns that table once
 * (store_intern_stacks); a profile is then just its rows.
 *
 * Acceptance is the same as otlp_convert's, check for check (internal.h):
 * every sample of a profile is checked before any of its stacks joins the
 * table, so a rejected profile leaves nothing behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp/internal.h"

/* The table's samples carry their stack number as a label: the builder
 * merges samples with equal stacks and labels, and two dictionary rows may
 * hold the same locations, yet each row must keep its own sample so that
 * sample k of the table is stack number k. The store ignores sample labels
 * when interning stacks. */
#define STACK_LABEL "otlp_stack"

struct rows_conv {
	struct conv c;
	uint32_t *slot_of; /* dictionary stack row -> stack number + 1, 0 = unused */
	size_t n_stacks;
};

/* The stack number of dictionary stack row si, added to the table on first
 * use; -ENOMEM. */
static int64_t stack_number(struct rows_conv *rc, int32_t si)
{
	struct conv *c = &rc->c;
	const Opentelemetry__Proto__Profiles__V1development__Stack *st = c->v->d->stack_table[si];
	uint64_t small[64], *locs = small;
	int64_t one = 1;
	int rc_add;

	if (rc->slot_of[si])
		return rc->slot_of[si] - 1;
	if (st->n_location_indices > sizeof(small) / sizeof(small[0])) {
		locs = arena_alloc(c->a, st->n_location_indices * sizeof(*locs));
		if (!locs)
			return -ENOMEM;
	}
	for (size_t k = 0; k < st->n_location_indices; k++) {
		locs[k] = otlp_location_id(c, st->location_indices[k]);
		if (!locs[k])
			return -ENOMEM;
	}
	struct pprof_label_desc label = {.key = STACK_LABEL, .num = (int64_t)rc->n_stacks};
	rc_add = pprof_builder_add_sample(c->b, locs, st->n_location_indices, &one, &label, 1);
	if (rc_add)
		return rc_add;
	rc->slot_of[si] = (uint32_t)++rc->n_stacks;
	return (int64_t)rc->n_stacks - 1;
}

/* Converts one profile into out: -EINVAL rejects it, -ENOMEM fails all. */
static int convert_profile_rows(struct rows_conv *rc, const otlp_resource_profiles *rp,
				const otlp_scope_profiles *sp, const otlp_profile_msg *p,
				struct otlp_rows_profile *out, struct kiln_error *err)
{
	struct conv *c = &rc->c;
	struct otlp_header h;
	char where[64];
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = otlp_profile_header(c, rp, sp, p, &h, err)))
		return r;
	out->stacks = arena_alloc(c->a, (p->n_samples + 1) * sizeof(*out->stacks));
	out->values = arena_alloc(c->a, (p->n_samples + 1) * sizeof(*out->values));
	if (!out->stacks || !out->values)
		return kiln_error_set(err, ENOMEM, "out of memory");
	for (size_t k = 0; k < p->n_samples; k++) {
		snprintf(where, sizeof(where), "samples[%zu]", k);
		if ((r = otlp_sample_check(c, p->samples[k], where, &out->values[k], err)))
			return r;
	}
	/* Every sample is good: now its stacks may join the table. */
	for (size_t k = 0; k < p->n_samples; k++) {
		int64_t n = stack_number(rc, p->samples[k]->stack_index);

		if (n < 0)
			return kiln_error_set(err, ENOMEM, "out of memory");
		out->stacks[k] = (uint32_t)n;
	}
	out->n = p->n_samples;
	out->labels = c->labels;
	out->n_labels = c->n_labels;
	out->type = (struct store_series_type){.sample_type = h.sample_type,
					       .sample_unit = h.sample_unit,
					       .period_type = h.period_type,
					       .period_unit = h.period_unit,
					       .period = h.period,
					       .delta = h.delta};
	out->timestamp_ms = h.timestamp_ms;
	out->samples = p->n_samples;
	return 0;
}

int otlp_convert_rows(const otlp_request *req, const struct otlp_limits *lim, struct arena *a,
		      struct otlp_rows *out, struct kiln_error *err)
{
	struct dict_view v;
	struct rows_conv rc = {.c = {.v = &v, .lim = lim, .a = a}};
	struct conv *c = &rc.c;
	size_t n_profiles = 0;
	int r = 0;

	memset(out, 0, sizeof(*out));
	otlp_dict_view_init(&v, req);
	c->max_labels = lim->max_labels ? lim->max_labels : OTLP_MAX_LABELS;
	if ((r = otlp_check_dictionary(&v, err)))
		return r;

	for (size_t i = 0; i < req->n_resource_profiles; i++)
		for (size_t j = 0; j < req->resource_profiles[i]->n_scope_profiles; j++)
			n_profiles += req->resource_profiles[i]->scope_profiles[j]->n_profiles;
	out->profiles = calloc(n_profiles + 1, sizeof(*out->profiles));
	c->location_ids = calloc(v.n_location + 1, sizeof(uint64_t));
	c->function_ids = calloc(v.n_function + 1, sizeof(uint64_t));
	c->mapping_ids = calloc(v.n_mapping + 1, sizeof(uint64_t));
	rc.slot_of = calloc(v.n_stack + 1, sizeof(uint32_t));
	c->b = pprof_builder_new_sized(1024);
	if (!out->profiles || !c->location_ids || !c->function_ids || !c->mapping_ids ||
	    !rc.slot_of || !c->b || pprof_builder_add_sample_type(c->b, "stacks", "count")) {
		r = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}

	for (size_t i = 0; i < req->n_resource_profiles; i++) {
		const otlp_resource_profiles *rp = req->resource_profiles[i];

		for (size_t j = 0; j < rp->n_scope_profiles; j++) {
			const otlp_scope_profiles *sp = rp->scope_profiles[j];

			for (size_t k = 0; k < sp->n_profiles; k++) {
				const otlp_profile_msg *p = sp->profiles[k];
				struct otlp_rows_profile *op = &out->profiles[out->n_profiles];
				struct kiln_error perr = {0};
				char where[128];

				out->n_seen++;
				r = convert_profile_rows(&rc, rp, sp, p, op, &perr);
				if (r == -ENOMEM) {
					*err = perr;
					goto out;
				}
				if (r) {
					snprintf(where, sizeof(where),
						 "resource_profiles[%zu].scope_profiles[%zu]."
						 "profiles[%zu]",
						 i, j, k);
					out->n_rejected++;
					out->samples_rejected += p->n_samples;
					otlp_note_rejection(out->error_message,
							    sizeof(out->error_message), where,
							    perr.msg);
					r = 0;
					continue;
				}
				out->samples_accepted += op->samples;
				out->n_profiles++;
			}
		}
	}
	out->n_stacks = rc.n_stacks;
	if (rc.n_stacks)
		r = pprof_builder_to_profile(c->b, &out->stacks, err);
out:
	pprof_builder_free(c->b);
	free(c->location_ids);
	free(c->function_ids);
	free(c->mapping_ids);
	free(rc.slot_of);
	if (r)
		otlp_rows_release(out);
	return r;
}

int otlp_rows_store(struct store *st, struct otlp_rows *res, struct kiln_error *err)
{
	uint32_t *ids = calloc(res->n_stacks + 1, sizeof(*ids));
	struct store_rows *groups = calloc(res->n_profiles + 1, sizeof(*groups));
	int rc = 0;

	if (!ids || !groups) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if (res->n_stacks && (rc = store_intern_stacks(st, res->stacks, NULL, 0, ids, err)))
		goto out;
	for (size_t i = 0; i < res->n_profiles; i++) {
		struct otlp_rows_profile *p = &res->profiles[i];
		int64_t sid = store_intern_series(st, p->labels, p->n_labels, &p->type, err);

		if (sid < 0) {
			rc = (int)sid;
			kiln_error_prefix(err, "profile %zu: ", i);
			goto out;
		}
		for (size_t k = 0; k < p->n; k++)
			p->stacks[k] = ids[p->stacks[k]];
		groups[i] = (struct store_rows){.series = (uint32_t)sid,
						.timestamp_ms = p->timestamp_ms,
						.stacks = p->stacks,
						.values = p->values,
						.n = p->n};
	}
	rc = store_write_groups(st, groups, res->n_profiles, err);
out:
	free(ids);
	free(groups);
	return rc;
}

void otlp_rows_release(struct otlp_rows *r)
{
	pprof_profile_free(r->stacks);
	r->stacks = NULL;
	r->n_stacks = 0;
	free(r->profiles);
	r->profiles = NULL;
	r->n_profiles = 0;
}
