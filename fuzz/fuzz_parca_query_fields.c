/*
 * fuzz_parca_query_fields.c — libFuzzer target for the mapping of Parca's
 * QueryRequest fields (group_by, filter, sandwich_by_function) onto kiln's
 * query features (server/rpc_query_fields.c).
 *
 * Any bytes must either fail to unpack, be refused with a reason, or give
 * frame filter patterns that compile: the conditions' strings are escaped
 * literals, so a pattern kiln built itself and then cannot compile is a
 * bug. The tree is created with the mapped options to check just that.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "query/query.h"
#include "server/rpc_query_fields.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_new(0);
	ProtobufCAllocator alloc;
	char why[256];

	if (!a)
		return 0;
	arena_protobuf_allocator(a, &alloc);
	Parca__Query__V1alpha1__QueryRequest *r =
	    (Parca__Query__V1alpha1__QueryRequest *)protobuf_c_message_unpack(
		&parca__query__v1alpha1__query_request__descriptor, &alloc, size, data);
	if (r) {
		struct qexec_request qr = {0};
		why[0] = 0;
		int rc = rpc_query_fields_apply(a, r, &qr, why, sizeof(why));
		if (rc == -EINVAL && !why[0])
			abort(); /* refused without saying why */
		if (rc == 0) {
			struct query_tree_options o = {.focus = qr.focus,
						       .ignore = qr.ignore,
						       .hide = qr.hide,
						       .sandwich = qr.sandwich,
						       .sandwich_side = qr.sandwich_side};
			struct query_tree *t = NULL;
			struct kiln_error err = {0};
			int trc = query_tree_create(&o, &t, &err);
			if (trc == -EINVAL)
				abort(); /* a pattern kiln built does not compile */
			query_tree_free(t);
		}
	}
	arena_free(a);
	return 0;
}
