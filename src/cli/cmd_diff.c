/*
 * cmd_diff.c — `kilnctl diff`: which functions got slower between two
 * sides, with what confidence, for a terminal or a CI gate.
 *
 *   kilnctl diff [--address=HOST:PORT] [QUERY] [--a-query=Q --b-query=Q]
 *                [--since=DUR | --a-start=MS --a-end=MS --b-start=MS --b-end=MS]
 *                [--buckets=N] [--alpha=A] [--threshold=POINTS] [--nodecount=N]
 *
 * Two time ranges of one query (yesterday's deploy against today's), or
 * two queries over one range (`{version="1"}` against `{version="2"}`).
 * The server does the work (GET /api/v1/query?mode=diff&report=regression,
 * query/regress.c says which test and why); this prints its rows as a
 * table. Exit status: 0 when no function regressed by --threshold points
 * or more with confidence, 3 when one did (so a CI step can fail on it),
 * 1 on errors, 2 on usage errors.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "common/duration.h"

#define EXIT_REGRESSION 3

static void diff_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: kilnctl diff [flags] [QUERY]\n"
	    "\n"
	    "Ranks the functions whose share of the profile changed from side A (before)\n"
	    "to side B (after), tested per time window (Mann-Whitney U, Benjamini-\n"
	    "Hochberg). Exit status 3 when a function regressed by --threshold or more.\n"
	    "\n"
	    "Sides (QUERY is both sides' query unless --a-query/--b-query):\n"
	    "  --a-query=Q --b-query=Q   e.g. 'T{version=\"1\"}' and 'T{version=\"2\"}'\n"
	    "  --since=DUR           both sides over the last DUR (default 1h), for two queries\n"
	    "  --a-start=MS --a-end=MS --b-start=MS --b-end=MS  explicit ranges, ms since epoch\n"
	    "  --before=DUR --after=DUR  A is [now-before-after, now-after), B the last DUR after\n"
	    "\n"
	    "Flags:\n"
	    "  --address=HOST:PORT   server (default 127.0.0.1:7070); http:// or https:// ok\n"
	    "  --buckets=N           windows per side (default 12)\n"
	    "  --alpha=A             false discovery rate (default 0.05)\n"
	    "  --threshold=POINTS    smallest change of total share that counts, in\n"
	    "                        percentage points (default 1)\n"
	    "  --nodecount=N         rows shown (default 20, 0 = all)\n"
	    "  --bearer-token=T | --bearer-token-file=F   role read\n"
	    "  --tls-ca-file=F --tls-cert-file=F --tls-key-file=F\n"
	    "\n"
	    "Example: did today's deploy make anything slower than yesterday's?\n"
	    "  kilnctl diff 'parca_agent:samples:count:cpu:nanoseconds:delta{comm=\"api\"}' \\\n"
	    "      --before=24h --after=24h --threshold=2\n");
}

static double num(const json_t *row, const char *key)
{
	return json_number_value(json_object_get(row, key));
}

/* Prints the report; returns the number of regressions. */
static int print_report(const json_t *doc, size_t limit)
{
	const json_t *rows = json_object_get(doc, "rows");
	size_t n = json_array_size(rows), regressions = 0, shown = 0;

	printf("%lld windows before, %lld after; %s, q <= %g, threshold %.2f points\n",
	       (long long)json_integer_value(json_object_get(doc, "a_windows")),
	       (long long)json_integer_value(json_object_get(doc, "b_windows")),
	       json_string_value(json_object_get(doc, "test")), num(doc, "alpha"),
	       num(doc, "threshold_pp"));
	printf("%-15s %8s %8s %8s %8s %8s %9s %7s  %s\n", "verdict", "total A", "total B", "delta",
	       "self A", "self B", "q", "effect", "function");
	for (size_t i = 0; i < n; i++) {
		const json_t *row = json_array_get(rows, i);
		const char *verdict = json_string_value(json_object_get(row, "verdict"));
		const char *name = json_string_value(json_object_get(row, "name"));
		const char *binary = json_string_value(json_object_get(row, "binary"));
		const char *slash = binary ? strrchr(binary, '/') : NULL;
		if (!verdict || !name)
			continue;
		regressions += strcmp(verdict, "regression") == 0;
		if (limit && shown >= limit)
			continue;
		shown++;
		printf("%-15s %7.2f%% %7.2f%% %+8.2f %7.2f%% %7.2f%% %9.2g %+7.2f  %s", verdict,
		       100 * num(row, "a_total_share"), 100 * num(row, "b_total_share"),
		       num(row, "delta_total_pp"), 100 * num(row, "a_self_share"),
		       100 * num(row, "b_self_share"), num(row, "q"), num(row, "effect"), name);
		if (binary && binary[0])
			printf(" [%s]", slash ? slash + 1 : binary);
		printf("\n");
	}
	if (shown < n)
		printf("(%zu more rows: --nodecount=0 shows all)\n", n - shown);
	if (n && strcmp(json_string_value(json_object_get(json_array_get(rows, 0), "verdict")),
			"not_enough_data") == 0)
		printf("Not enough data: each side needs at least 5 windows with samples; "
		       "widen the ranges or use fewer --buckets.\n");
	return (int)regressions;
}

int cmd_diff(int argc, char **argv)
{
	static struct cli_server_opts srv = {.address = "127.0.0.1:7070"};
	const char *query = NULL, *a_query = NULL, *b_query = NULL;
	const char *buckets = "12", *alpha = "0.05", *threshold = "1";
	int64_t since = 3600000, before = -1, after = -1;
	int64_t a_start = -1, a_end = -1, b_start = -1, b_end = -1;
	long nodecount = 20;
	enum {
		O_A_QUERY = 1,
		O_B_QUERY,
		O_SINCE,
		O_BEFORE,
		O_AFTER,
		O_A_START,
		O_A_END,
		O_B_START,
		O_B_END,
		O_BUCKETS,
		O_ALPHA,
		O_THRESHOLD,
		O_NODES,
		O_HELP
	};
	static const struct option opts[] = {
	    CLI_SERVER_OPTIONS,
	    {"a-query", required_argument, NULL, O_A_QUERY},
	    {"b-query", required_argument, NULL, O_B_QUERY},
	    {"since", required_argument, NULL, O_SINCE},
	    {"before", required_argument, NULL, O_BEFORE},
	    {"after", required_argument, NULL, O_AFTER},
	    {"a-start", required_argument, NULL, O_A_START},
	    {"a-end", required_argument, NULL, O_A_END},
	    {"b-start", required_argument, NULL, O_B_START},
	    {"b-end", required_argument, NULL, O_B_END},
	    {"buckets", required_argument, NULL, O_BUCKETS},
	    {"alpha", required_argument, NULL, O_ALPHA},
	    {"threshold", required_argument, NULL, O_THRESHOLD},
	    {"nodecount", required_argument, NULL, O_NODES},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int taken = cli_server_opt(&srv, o, optarg, "diff");
		if (taken < 0)
			return 2;
		if (taken)
			continue;
		int64_t *ms = NULL, *dur = NULL;
		switch (o) {
		case O_A_QUERY:
			a_query = optarg;
			break;
		case O_B_QUERY:
			b_query = optarg;
			break;
		case O_SINCE:
			dur = &since;
			break;
		case O_BEFORE:
			dur = &before;
			break;
		case O_AFTER:
			dur = &after;
			break;
		case O_A_START:
			ms = &a_start;
			break;
		case O_A_END:
			ms = &a_end;
			break;
		case O_B_START:
			ms = &b_start;
			break;
		case O_B_END:
			ms = &b_end;
			break;
		case O_BUCKETS:
			buckets = optarg;
			break;
		case O_ALPHA:
			alpha = optarg;
			break;
		case O_THRESHOLD:
			threshold = optarg;
			break;
		case O_NODES:
			nodecount = strtol(optarg, NULL, 10);
			break;
		case O_HELP:
		case 'h':
			diff_usage(stdout);
			return 0;
		default:
			diff_usage(stderr);
			return 2;
		}
		if (dur && duration_parse_ms(optarg, 0, dur)) {
			fprintf(stderr,
				"kilnctl diff: %s: expected a duration such as 30m, 1h, 2d\n",
				optarg);
			return 2;
		}
		if (ms && cli_parse_ms(optarg, ms)) {
			fprintf(stderr, "kilnctl diff: %s: expected milliseconds since the epoch\n",
				optarg);
			return 2;
		}
	}
	if (optind < argc)
		query = argv[optind++];
	if (optind < argc || !(a_query ? a_query : query) || !(b_query ? b_query : query)) {
		fprintf(stderr, "kilnctl diff: give one QUERY for both sides, or --a-query and "
				"--b-query\n");
		diff_usage(stderr);
		return 2;
	}
	a_query = a_query ? a_query : query;
	b_query = b_query ? b_query : query;

	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (before >= 0 || after >= 0) {
		/* B: the last `after`; A: the `before` just ahead of it. */
		after = after >= 0 ? after : 3600000;
		before = before >= 0 ? before : after;
		b_end = b_end >= 0 ? b_end : now;
		b_start = b_start >= 0 ? b_start : b_end - after;
		a_end = a_end >= 0 ? a_end : b_start - 1;
		a_start = a_start >= 0 ? a_start : a_end - before;
	} else {
		a_end = a_end >= 0 ? a_end : now;
		a_start = a_start >= 0 ? a_start : a_end - since;
		b_end = b_end >= 0 ? b_end : now;
		b_start = b_start >= 0 ? b_start : b_end - since;
	}
	if (strcmp(a_query, b_query) == 0 && a_start == b_start && a_end == b_end) {
		fprintf(stderr, "kilnctl diff: both sides are the same query over the same range; "
				"give --before/--after, ranges, or two queries\n");
		return 2;
	}

	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *esc = curl_easy_init();
	char *qa = esc ? curl_easy_escape(esc, a_query, 0) : NULL;
	char *qb = esc ? curl_easy_escape(esc, b_query, 0) : NULL;
	char *eb = esc ? curl_easy_escape(esc, buckets, 0) : NULL;
	char *ea = esc ? curl_easy_escape(esc, alpha, 0) : NULL;
	char *et = esc ? curl_easy_escape(esc, threshold, 0) : NULL;
	struct buf url = {0}, body = {0};
	json_t *doc = NULL;
	int ret = 1;
	if (!qa || !qb || !eb || !ea || !et) {
		fprintf(stderr, "kilnctl: out of memory\n");
		goto out;
	}
	bool has_scheme =
	    strncmp(srv.address, "http://", 7) == 0 || strncmp(srv.address, "https://", 8) == 0;
	buf_printf(&url,
		   "%s%s/api/v1/query?mode=diff&report=regression&a_query=%s&a_start=%lld&"
		   "a_end=%lld&b_query=%s&b_start=%lld&b_end=%lld&buckets=%s&alpha=%s&"
		   "threshold=%s",
		   has_scheme ? "" : "http://", srv.address, qa, (long long)a_start,
		   (long long)a_end, qb, (long long)b_start, (long long)b_end, eb, ea, et);
	buf_terminate(&url);
	long status = 0;
	if (cli_http_get((const char *)url.data, srv.token, &srv.tls, &body, &status))
		goto out;
	if (status != 200) {
		cli_print_server_error(status, &body, a_query);
		goto out;
	}
	json_error_t jerr;
	doc = json_loadb((const char *)body.data, body.len, 0, &jerr);
	if (!doc || !json_is_array(json_object_get(doc, "rows"))) {
		fprintf(stderr,
			"kilnctl diff: the server's answer is not a regression report: %s\n",
			doc ? "no rows" : jerr.text);
		goto out;
	}
	if (json_array_size(json_object_get(doc, "rows")) == 0) {
		fprintf(stderr, "kilnctl diff: no samples on either side; check the queries and "
				"ranges with kilnctl query\n");
		goto out;
	}
	ret = print_report(doc, nodecount > 0 ? (size_t)nodecount : 0) ? EXIT_REGRESSION : 0;
out:
	json_decref(doc);
	curl_free(qa);
	curl_free(qb);
	curl_free(eb);
	curl_free(ea);
	curl_free(et);
	if (esc)
		curl_easy_cleanup(esc);
	buf_free(&url);
	buf_free(&body);
	curl_global_cleanup();
	return ret;
}
