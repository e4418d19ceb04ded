/*
 * rpc_query_fields.h — Parca's newer QueryRequest fields mapped onto kiln's
 * query features (qexec_request), for the gRPC, gRPC-Web and Connect
 * QueryService:
 *   group_by               "labels.NAME" → a flame graph grouped by NAME
 *                          (one first-level frame "NAME=value" per value);
 *                          "function_name" is how kiln always merges frames;
 *   filter                 stack filters → focus / ignore, frame filters →
 *                          hide, as PCRE2 patterns built from Parca's
 *                          case-insensitive string conditions;
 *   sandwich_by_function   → the sandwich report, the callers half when
 *                          invert_call_stack is set (as Parca's UI asks);
 * and QueryRangeRequest.sum_by → series summed per value of those labels.
 * Whatever kiln cannot do as asked (another group_by field, criteria on
 * binaries, files, addresses or lines, source_reference, runtime_filter)
 * is refused with a message naming the field; nothing is ignored silently.
 */
#ifndef KILN_SERVER_RPC_QUERY_FIELDS_H
#define KILN_SERVER_RPC_QUERY_FIELDS_H

#include <stddef.h>

#include "common/arena.h"
#include "parca/query/v1alpha1/query.pb-c.h"
#include "server/qexec.h"

/* Sets qr's group_by, focus, ignore, hide, sandwich and sandwich_side from
 * r's fields (strings allocated in a). 0, or -EINVAL with why (NUL
 * terminated, names the field) for a request kiln cannot answer as asked;
 * -ENOMEM. Call after the report type is known (r->report_type). */
int rpc_query_fields_apply(struct arena *a, const Parca__Query__V1alpha1__QueryRequest *r,
			   struct qexec_request *qr, char *why, size_t len);

/* The range answer of a QueryRangeRequest with sum_by: the store's series
 * for ss summed per value of r->sum_by (labels the answer keeps), points
 * bucketed by step_ms (0: as they are), largest total first, packed as
 * MetricsSeries into *out (arena a). 0, -EINVAL with why, or a store error
 * in err. */
int rpc_query_range_sum_by(struct arena *a, struct server *s,
			   const Parca__Query__V1alpha1__QueryRangeRequest *r,
			   const struct store_selector *ss, int64_t step_ms,
			   Parca__Query__V1alpha1__ValueType *sample_type,
			   Parca__Query__V1alpha1__ValueType *period_type,
			   Parca__Query__V1alpha1__QueryRangeResponse *out, char *why, size_t len,
			   struct kiln_error *err);

#endif
