/*
 * cmd_query_range.c — `kilnctl query-range`: the metrics graph's series in
 * the terminal.
 *
 *   kilnctl query-range --address=HOST:PORT 'QUERY' [--since=1h | --start=MS --end=MS]
 *                       [--step=DUR] [--sum-by=a,b] [--limit=N]
 *                       [--output=table|points|json] [-o FILE]
 *
 * It asks GET /api/v1/query_range, which does the work: --sum-by sums the
 * series per value of those labels (PromQL's sum by), --limit keeps the N
 * largest groups and sums the rest into one series labelled
 * __other__="K more". The table lists each series' total, its number of
 * points and its labels, largest first as the server ranks them; points
 * prints one "labels<TAB>ms<TAB>value" line per point for scripts; json is
 * the server's answer as it is. No matching series exits 1.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/duration.h"

static void range_usage(FILE *f)
{
	fprintf(f, "Usage: kilnctl query-range --address=HOST:PORT 'QUERY' [flags]\n"
		   "\n"
		   "The series of QUERY over time, as the UI's metrics graph draws them.\n"
		   "\n"
		   "Flags:\n"
		   "  --address=HOST:PORT   server (default 127.0.0.1:7070)\n"
		   "  --since=DUR           the last DUR: 30s, 15m, 1h, 2d (default 1h)\n"
		   "  --start=MS --end=MS   or an explicit range, ms since the epoch\n"
		   "  --step=DUR            sum points into steps of DUR (default: as stored)\n"
		   "  --sum-by=a,b          one series per value of these labels, summed\n"
		   "  --limit=N             the N largest series, the rest summed as "
		   "__other__\n"
		   "  --output=table|points|json  (default table)\n"
		   "  --bearer-token=T      sent as Authorization: Bearer T (role read)\n"
		   "  --bearer-token-file=F the same, read from F's first line\n"
		   "  --tls-ca-file=F       check an https server's certificate with these CAs\n"
		   "  --tls-cert-file=F --tls-key-file=F  client certificate (mTLS)\n"
		   "  -o FILE               write to FILE instead of stdout\n");
}

/* `{a="x", b="y"}` of a series' labels object, values quoted as JSON
 * strings (so no control byte from the server reaches the terminal). */
static int put_labels(struct buf *out, const json_t *labels)
{
	const char *k;
	json_t *v;
	int rc = buf_append(out, "{", 1);
	bool first = true;

	json_object_foreach((json_t *)labels, k, v)
	{
		char *val = json_dumps(v, JSON_ENCODE_ANY);
		if (!val)
			rc = -ENOMEM;
		/* Label names are [a-zA-Z_][a-zA-Z0-9_]* (the store checks them). */
		if (rc == 0)
			rc = buf_printf(out, "%s%s=%s", first ? "" : ", ", k, val);
		free(val);
		first = false;
	}
	return rc ? rc : buf_append(out, "}", 1);
}

static int render(const json_t *series, const char *output, struct buf *text)
{
	int rc = 0;
	if (strcmp(output, "table") == 0)
		rc = buf_printf(text, "%20s %8s  %s\n", "TOTAL", "POINTS", "LABELS");
	for (size_t i = 0; rc == 0 && i < json_array_size(series); i++) {
		const json_t *s = json_array_get(series, i);
		const json_t *pts = json_object_get(s, "points");
		struct buf labels = {0};
		long long total = 0;
		rc = put_labels(&labels, json_object_get(s, "labels"));
		if (rc == 0)
			rc = buf_terminate(&labels);
		for (size_t j = 0; j < json_array_size(pts); j++)
			total += json_integer_value(json_array_get(json_array_get(pts, j), 1));
		if (rc == 0 && strcmp(output, "table") == 0)
			rc = buf_printf(text, "%20lld %8zu  %s\n", total, json_array_size(pts),
					(const char *)labels.data);
		for (size_t j = 0;
		     rc == 0 && strcmp(output, "points") == 0 && j < json_array_size(pts); j++) {
			const json_t *pt = json_array_get(pts, j);
			rc = buf_printf(text, "%s\t%lld\t%lld\n", (const char *)labels.data,
					(long long)json_integer_value(json_array_get(pt, 0)),
					(long long)json_integer_value(json_array_get(pt, 1)));
		}
		buf_free(&labels);
	}
	return rc;
}

int cmd_query_range(int argc, char **argv)
{
	static struct cli_server_opts srv = {.address = "127.0.0.1:7070"};
	const char *output = "table", *out_path = NULL, *sum_by = NULL;
	int64_t since = 3600000, start = 0, end = 0, step = 0;
	long limit = 0;
	bool have_start = false, have_end = false;
	enum { O_SINCE = 1, O_START, O_END, O_STEP, O_SUM_BY, O_LIMIT, O_OUTPUT, O_HELP };
	static const struct option opts[] = {
	    CLI_SERVER_OPTIONS,
	    {"since", required_argument, NULL, O_SINCE},
	    {"start", required_argument, NULL, O_START},
	    {"end", required_argument, NULL, O_END},
	    {"step", required_argument, NULL, O_STEP},
	    {"sum-by", required_argument, NULL, O_SUM_BY},
	    {"limit", required_argument, NULL, O_LIMIT},
	    {"output", required_argument, NULL, O_OUTPUT},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		int taken = cli_server_opt(&srv, o, optarg, "query-range");
		if (taken < 0)
			return 2;
		if (taken)
			continue;
		switch (o) {
		case O_SINCE:
		case O_STEP:
			if (duration_parse_ms(optarg, 0, o == O_SINCE ? &since : &step) ||
			    (o == O_STEP && step <= 0)) {
				fprintf(stderr,
					"kilnctl query-range: --%s=%s: expected e.g. 30s, 15m, 1h, "
					"2d\n",
					o == O_SINCE ? "since" : "step", optarg);
				return 2;
			}
			break;
		case O_START:
		case O_END: {
			int64_t v;
			if (cli_parse_ms(optarg, &v)) {
				fprintf(stderr,
					"kilnctl query-range: %s: expected milliseconds since the "
					"epoch\n",
					optarg);
				return 2;
			}
			if (o == O_START)
				start = v, have_start = true;
			else
				end = v, have_end = true;
			break;
		}
		case O_SUM_BY:
			sum_by = optarg;
			break;
		case O_LIMIT: {
			char *e;
			limit = strtol(optarg, &e, 10);
			if (*e || e == optarg || limit < 0 || limit > 10000) {
				fprintf(stderr,
					"kilnctl query-range: --limit=%s: expected 0 to 10000\n",
					optarg);
				return 2;
			}
			break;
		}
		case O_OUTPUT:
			output = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case O_HELP:
		case 'h':
			range_usage(stdout);
			return 0;
		default:
			range_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "kilnctl query-range: expected exactly one QUERY argument\n");
		range_usage(stderr);
		return 2;
	}
	if (strcmp(output, "table") && strcmp(output, "points") && strcmp(output, "json")) {
		fprintf(stderr,
			"kilnctl query-range: --output=%s: expected table, points or json\n",
			output);
		return 2;
	}
	const char *query = argv[optind];
	if (!have_end)
		end = realtime_ms();
	if (!have_start)
		start = end - since;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *esc = curl_easy_init();
	char *q = esc ? curl_easy_escape(esc, query, 0) : NULL;
	char *by = esc && sum_by ? curl_easy_escape(esc, sum_by, 0) : NULL;
	struct buf url = {0}, body = {0}, text = {0};
	json_t *doc = NULL;
	int ret = 1;
	if (!q || (sum_by && !by)) {
		fprintf(stderr, "kilnctl: out of memory\n");
		goto out;
	}
	bool has_scheme =
	    strncmp(srv.address, "http://", 7) == 0 || strncmp(srv.address, "https://", 8) == 0;
	buf_printf(&url, "%s%s/api/v1/query_range?query=%s&start=%lld&end=%lld",
		   has_scheme ? "" : "http://", srv.address, q, (long long)start, (long long)end);
	if (step)
		buf_printf(&url, "&step=%lld", (long long)step);
	if (by)
		buf_printf(&url, "&sum_by=%s", by);
	if (limit)
		buf_printf(&url, "&limit=%ld", limit);
	buf_terminate(&url);

	long status = 0;
	if (cli_http_get((const char *)url.data, srv.token, &srv.tls, &body, &status))
		goto out;
	if (status != 200) {
		cli_print_server_error(status, &body, query);
		goto out;
	}
	json_error_t jerr;
	doc = json_loadb((const char *)body.data, body.len, 0, &jerr);
	const json_t *series = json_object_get(doc, "series");
	if (!json_is_array(series)) {
		fprintf(stderr, "kilnctl: the server's answer has no series list: %s\n", jerr.text);
		goto out;
	}
	if (json_array_size(series) == 0) {
		fprintf(stderr, "kilnctl: no series match %s from %lld to %lld ms\n", query,
			(long long)start, (long long)end);
		goto out;
	}
	if (strcmp(output, "json") == 0) {
		ret = cli_write_out(out_path, body.data, body.len);
		goto out;
	}
	if (render(series, output, &text)) {
		fprintf(stderr, "kilnctl: out of memory\n");
		goto out;
	}
	ret = cli_write_out(out_path, text.data, text.len);
out:
	json_decref(doc);
	curl_free(q);
	curl_free(by);
	if (esc)
		curl_easy_cleanup(esc);
	buf_free(&url);
	buf_free(&body);
	buf_free(&text);
	curl_global_cleanup();
	return ret;
}
