/*
 * cli_values.c — a label's values as the server lists them (GET
 * /api/v1/values), for the commands that split a query by label.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cli/cli.h"

int cli_fetch_label_values(const struct cli_server_opts *srv, const char *base, const char *query,
			   const char *by, const char *range, char ***values, size_t *n)
{
	CURL *esc = curl_easy_init();
	long status = 0;
	struct buf url = {0}, body = {0};
	json_t *doc = NULL;
	char *q = esc ? curl_easy_escape(esc, query, 0) : NULL;
	char *l = esc ? curl_easy_escape(esc, by, 0) : NULL;
	int rc = -ENOMEM;

	*values = NULL;
	*n = 0;
	if (!q || !l ||
	    buf_printf(&url, "%s/api/v1/values?label=%s&query=%s%s", base, l, q, range) ||
	    buf_terminate(&url))
		goto out;
	rc = -EIO;
	if (cli_http_get((const char *)url.data, srv->token, &srv->tls, &body, &status))
		goto out;
	if (status != 200) {
		cli_print_server_error(status, &body, query);
		goto out;
	}
	json_error_t jerr;
	doc = json_loadb((const char *)body.data, body.len, 0, &jerr);
	const json_t *arr = json_object_get(doc, "values");
	if (!json_is_array(arr)) {
		fprintf(stderr, "kilnctl: the server's values of %s are not a JSON list\n", by);
		rc = -EIO;
		goto out;
	}
	rc = -ENOMEM;
	*values = calloc(json_array_size(arr) + 1, sizeof(**values));
	if (!*values)
		goto out;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *v = json_string_value(json_array_get(arr, i));
		if (v && !((*values)[(*n)++] = strdup(v)))
			goto out;
	}
	rc = 0;
out:
	if (rc == -ENOMEM)
		fprintf(stderr, "kilnctl: out of memory\n");
	json_decref(doc);
	curl_free(q);
	curl_free(l);
	if (esc)
		curl_easy_cleanup(esc);
	buf_free(&url);
	buf_free(&body);
	return rc;
}
