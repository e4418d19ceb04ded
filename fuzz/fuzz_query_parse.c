/*
 * fuzz_query_parse.c — libFuzzer target for the query language parser.
 *
 * Any input must either parse or fail with a position inside the query;
 * what parses must survive a round trip through the canonical form with
 * the same type and matchers. Profile type parsing is fuzzed on the same
 * bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

static void check_roundtrip(const struct query_selector *sel, unsigned flags)
{
	struct query_selector again;
	struct buf b;

	buf_init(&b);
	if (query_selector_format(sel, &b) || buf_terminate(&b))
		abort();
	if (query_parse((const char *)b.data, flags, &again, NULL))
		abort();
	if ((sel->profile_type == NULL) != (again.profile_type == NULL) ||
	    (sel->profile_type && strcmp(sel->profile_type, again.profile_type)) ||
	    sel->n_matchers != again.n_matchers)
		abort();
	for (size_t i = 0; i < sel->n_matchers; i++)
		if (sel->matchers[i].op != again.matchers[i].op ||
		    strcmp(sel->matchers[i].name, again.matchers[i].name) ||
		    strcmp(sel->matchers[i].value, again.matchers[i].value))
			abort();
	query_selector_release(&again);
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned flag_sets[] = {0, QUERY_PARSE_TYPE_OPTIONAL};
	struct query_profile_type type;
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (size_t f = 0; f < sizeof(flag_sets) / sizeof(flag_sets[0]); f++) {
		struct query_selector sel;
		struct kiln_error err = {0};

		if (query_parse(text, flag_sets[f], &sel, &err) == 0) {
			check_roundtrip(&sel, flag_sets[f]);
		} else if (sel.error_position < 0 || (size_t)sel.error_position > strlen(text) ||
			   !err.msg[0]) {
			abort();
		}
		query_selector_release(&sel);
	}
	if (query_profile_type_parse(text, &type, NULL) == 0) {
		struct buf b;

		buf_init(&b);
		if (query_profile_type_format(&type, &b) || buf_terminate(&b) ||
		    strcmp((const char *)b.data, text))
			abort();
		buf_free(&b);
	}
	query_profile_type_release(&type);
	free(text);
	return 0;
}
