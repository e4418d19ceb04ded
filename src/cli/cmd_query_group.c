/*
 * cmd_query_group.c — `kilnctl query --group-by=LABEL`: a profile grouped
 * by a label's values, one first-level frame "LABEL=value" per value (and
 * "LABEL=(none)" for series without it), as the server's group_by builds
 * it.
 *
 * kilnctl renders from the pprof the server sends, and one merged pprof no
 * longer says which series a sample came from, so the groups are fetched
 * one by one: the label's values (GET /api/v1/values over the same range),
 * then the pprof of the query with LABEL="value" added to its matchers, per
 * value. Each group's profile is folded into one tree under its group
 * frame.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/cli_query.h"

/* Appends `by="value"` to the matchers of query (which may have none). */
static int add_matcher(struct buf *out, const char *query, const char *by, const char *value)
{
	size_t n = strlen(query);
	while (n && (query[n - 1] == ' ' || query[n - 1] == '\t'))
		n--;
	const char *open = memchr(query, '{', n);
	int rc = 0;

	buf_reset(out);
	if (open && n && query[n - 1] == '}') {
		size_t head = (size_t)(n - 1); /* up to the closing brace */
		bool empty = true;
		for (const char *p = open + 1; p < query + head; p++)
			if (*p != ' ' && *p != '\t')
				empty = false;
		rc = buf_append(out, query, head);
		if (rc == 0 && !empty)
			rc = buf_append(out, ",", 1);
	} else {
		rc = buf_append(out, query, n);
		if (rc == 0)
			rc = buf_append(out, "{", 1);
	}
	if (rc == 0)
		rc = buf_printf(out, "%s=\"", by);
	for (const char *v = value; rc == 0 && *v; v++) {
		if (*v == '"' || *v == '\\')
			rc = buf_append(out, "\\", 1);
		if (rc == 0)
			rc = buf_append(out, v, 1);
	}
	if (rc == 0)
		rc = buf_append(out, "\"}", 2);
	if (rc == 0)
		rc = buf_terminate(out);
	return rc;
}

static int get(const struct cli_server_opts *srv, const char *url, struct buf *body,
	       const char *query)
{
	long status = 0;
	buf_reset(body);
	if (cli_http_get(url, srv->token, &srv->tls, body, &status))
		return -EIO;
	if (status != 200) {
		cli_print_server_error(status, body, query);
		return -EIO;
	}
	return 0;
}

int cli_query_fetch_groups(const struct cli_server_opts *srv, const char *base, const char *query,
			   const char *by, const char *range, struct cli_query_groups *out)
{
	struct buf url = {0}, body = {0}, sel = {0};
	char **values = NULL;
	size_t n_values = 0;
	CURL *esc = curl_easy_init();
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (!esc)
		goto out;
	if ((rc = cli_fetch_label_values(srv, base, query, by, range, &values, &n_values)))
		goto out;
	rc = -ENOMEM;
	out->text = calloc(n_values + 1, sizeof(*out->text));
	out->profile = calloc(n_values + 1, sizeof(*out->profile));
	if (!out->text || !out->profile)
		goto out;
	/* i == n_values: the series without the label (by="" matches them). */
	for (size_t i = 0; i <= n_values; i++) {
		const char *v = i < n_values ? values[i] : "";
		struct kiln_error err = {0};
		struct pprof_profile *p = NULL;
		char *q;
		rc = add_matcher(&sel, query, by, v);
		if (rc)
			goto out;
		q = curl_easy_escape(esc, (const char *)sel.data, 0);
		buf_reset(&url);
		rc = q ? buf_printf(&url, "%s/api/v1/query?report=pprof&query=%s%s", base, q, range)
		       : -ENOMEM;
		curl_free(q);
		if (rc == 0)
			rc = buf_terminate(&url);
		if (rc)
			goto out;
		if ((rc = get(srv, (const char *)url.data, &body, (const char *)sel.data)))
			goto out;
		if ((rc = pprof_decode(body.data, body.len, NULL, &p, &err))) {
			fprintf(stderr, "kilnctl: the server's pprof for %s: %s\n",
				(const char *)sel.data, err.msg);
			goto out;
		}
		if (pprof_sample_count(p) == 0) {
			pprof_profile_free(p);
			continue;
		}
		struct buf text = {0};
		if (buf_printf(&text, "%s=%s", by, i < n_values ? v : "(none)") ||
		    buf_terminate(&text)) {
			buf_free(&text);
			pprof_profile_free(p);
			rc = -ENOMEM;
			goto out;
		}
		out->text[out->n] = (char *)text.data; /* taken over from the buf */
		out->profile[out->n++] = p;
	}
	rc = 0;
out:
	if (rc == -ENOMEM)
		fprintf(stderr, "kilnctl: out of memory\n");
	for (size_t i = 0; i < n_values; i++)
		free(values[i]);
	free(values);
	if (esc)
		curl_easy_cleanup(esc);
	buf_free(&url);
	buf_free(&body);
	buf_free(&sel);
	return rc;
}

int cli_query_group_tree(const struct cli_query_groups *g, const struct query_tree_options *o,
			 struct query_tree **out, struct kiln_error *err)
{
	struct query_tree *t = NULL;
	int rc = query_tree_create(o, &t, err);

	for (size_t i = 0; rc == 0 && i < g->n; i++) {
		rc = query_tree_set_group(t, g->text[i]);
		if (rc == 0)
			rc = query_tree_add(t, g->profile[i], -1, QUERY_SIDE_SINGLE, err);
	}
	if (rc == 0)
		rc = query_tree_set_group(t, NULL);
	if (rc == 0)
		rc = query_tree_finish(t, err);
	if (rc) {
		query_tree_free(t);
		t = NULL;
	}
	*out = t;
	return rc;
}

void cli_query_groups_release(struct cli_query_groups *g)
{
	for (size_t i = 0; i < g->n; i++) {
		free(g->text[i]);
		pprof_profile_free(g->profile[i]);
	}
	free(g->text);
	free(g->profile);
	memset(g, 0, sizeof(*g));
}
