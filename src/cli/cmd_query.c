/*
 * cmd_query.c — `kilnctl query`: ask a kiln server for a profile.
 *
 *   kilnctl query --address=HOST:PORT 'QUERY' [--since=1h | --start=MS --end=MS]
 *                 [--mode=merge|single --time=MS] [--output=top|flame|folded|pprof]
 *                 [--width=N] [--max-depth=N] [--min-share=PCT] [--color=auto|always|never]
 *                 [--nodecount=N] [--group-by=LABEL] [-o FILE]
 *                 [--bearer-token=T | --bearer-token-file=F]
 *
 * It fetches the merged (or single) profile as gzipped pprof from the HTTP
 * API (GET /api/v1/query?report=pprof, libcurl) and renders top and folded
 * output locally with the query module, so what it prints is computed from
 * exactly the bytes `--output=pprof` would save; `--output=flame` draws an
 * icicle graph as wide as the terminal (flame_text.c). A query that matches
 * nothing exits 1, so scripts can tell "no data" from a profile. --group-by
 * fetches one profile per label value (cmd_query_group.c) and puts each
 * under a first-level "LABEL=value" frame. Server errors are printed
 * with the query position they point at. A server that requires tokens
 * (docs/SECURITY.md) gets `Authorization: Bearer T`; queries need role read.
 */
#include <errno.h>
#include <getopt.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "common/duration.h"
#include "common/clock.h"
#include "cli/cli.h"
#include "cli/cli_query.h"
#include "client/client.h"
#include "common/buf.h"
#include "pprof/pprof.h"
#include "query/query.h"

static void query_usage(FILE *f)
{
	fprintf(f, "Usage: kilnctl query --address=HOST:PORT 'QUERY' [flags]\n"
		   "\n"
		   "QUERY is a profile type with optional matchers, e.g.\n"
		   "  'parca_agent:samples:count:cpu:nanoseconds:delta{comm=\"nginx\"}'\n"
		   "\n"
		   "Flags:\n"
		   "  --address=HOST:PORT   server (default 127.0.0.1:7070); http:// or https:// "
		   "prefix ok\n"
		   "  --since=DUR           merge the last DUR: 30s, 15m, 1h, 2d (default 1h)\n"
		   "  --start=MS --end=MS   or an explicit range, ms since the epoch\n"
		   "  --mode=merge|single   merge a range (default) or one profile at --time=MS\n"
		   "  --output=top|flame|folded|pprof  (default top; flame: an icicle graph)\n"
		   "  --width=N             flame: columns (default: the terminal's, else 120)\n"
		   "  --max-depth=N         flame: rows below the root (default all)\n"
		   "  --min-share=PCT       flame: leave out frames under PCT%% of the total\n"
		   "  --color=auto|always|never  flame: colour by package (auto: on a terminal)\n"
		   "  --focus=RE            keep only samples through a function matching RE\n"
		   "  --ignore=RE           drop samples through a function matching RE\n"
		   "  --hide=RE             take functions matching RE out of the stacks\n"
		   "  --prune-from=RE       drop what a function matching RE calls\n"
		   "  --sandwich=FUNC       the callers and the callees of FUNC (exact name)\n"
		   "  --sandwich-side=callers|callees  only one half\n"
		   "  --group-by=LABEL      one first-level frame per value of LABEL "
		   "(\"comm=nginx\")\n"
		   "  --nodecount=N         rows of the top table (default 30, 0 = all)\n"
		   "  --bearer-token=T      sent as Authorization: Bearer T (role read)\n"
		   "  --bearer-token-file=F the same, read from F's first line\n"
		   "  --tls-ca-file=F       check an https server's certificate with these CAs\n"
		   "  --tls-cert-file=F --tls-key-file=F  client certificate (mTLS)\n"
		   "  -o FILE               write to FILE instead of stdout\n");
}

/* The columns of the terminal the flame graph goes to: stdout's when it
 * is one, else $COLUMNS, else 120. */
static unsigned terminal_width(const char *out_path)
{
	struct winsize ws;
	const char *env = getenv("COLUMNS");
	if (!out_path && isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
	    ws.ws_col > 0)
		return ws.ws_col;
	if (env && atoi(env) > 0)
		return (unsigned)atoi(env);
	return 120;
}

/* --color=auto: colour only a terminal that can show it, and never when
 * the user set NO_COLOR (no-color.org). */
static bool colour_terminal(const char *out_path)
{
	const char *term = getenv("TERM");
	const char *no_colour = getenv("NO_COLOR");
	return !out_path && isatty(STDOUT_FILENO) && term && strcmp(term, "dumb") != 0 &&
	       !(no_colour && no_colour[0]);
}

/* Appends p (or, with groups, the grouped profiles) rendered as output
 * (top, flame or folded) through a tree built with topts. */
static int render(const struct pprof_profile *p, const struct cli_query_groups *groups,
		  const char *output, const struct query_tree_options *topts,
		  const struct query_flame_text_options *flame, long nodecount, struct buf *text,
		  struct kiln_error *err)
{
	struct query_tree *tree = NULL;
	struct query_top *top = NULL;
	int rc = groups ? cli_query_group_tree(groups, topts, &tree, err)
			: query_tree_build(p, -1, topts, &tree, err);

	if (rc == 0 && strcmp(output, "folded") == 0) {
		rc = query_tree_write_folded(tree, text);
	} else if (rc == 0 && strcmp(output, "flame") == 0) {
		rc = query_tree_write_flame_text(tree, flame, text);
	} else if (rc == 0) {
		rc = query_top_build(tree, &top, err);
		if (rc == 0)
			rc = query_top_write_text(top, nodecount > 0 ? (size_t)nodecount : 0, text);
	}
	query_top_free(top);
	query_tree_free(tree);
	return rc;
}

int cmd_query(int argc, char **argv)
{
	static struct cli_server_opts srv = {.address = "127.0.0.1:7070"};
	const char *mode = "merge", *output = "top";
	const char *out_path = NULL, *query = NULL, *group_by = NULL;
	struct cli_query_groups groups = {0};
	int64_t since = 3600000, start = 0, end = 0, at = 0;
	bool have_start = false, have_end = false, have_time = false;
	long nodecount = 30;
	struct query_flame_text_options flame = {0};
	struct query_tree_options topts = {0};
	bool have_side = false;
	enum { COLOUR_AUTO, COLOUR_ALWAYS, COLOUR_NEVER } colour_mode = COLOUR_AUTO;
	enum {
		O_SINCE = 1,
		O_START,
		O_END,
		O_MODE,
		O_TIME,
		O_OUTPUT,
		O_NODES,
		O_WIDTH,
		O_MAX_DEPTH,
		O_MIN_SHARE,
		O_COLOUR,
		O_FOCUS,
		O_IGNORE,
		O_HIDE,
		O_PRUNE_FROM,
		O_SANDWICH,
		O_SANDWICH_SIDE,
		O_GROUP_BY,
		O_HELP
	};
	static const struct option opts[] = {
	    CLI_SERVER_OPTIONS,
	    {"since", required_argument, NULL, O_SINCE},
	    {"start", required_argument, NULL, O_START},
	    {"end", required_argument, NULL, O_END},
	    {"mode", required_argument, NULL, O_MODE},
	    {"time", required_argument, NULL, O_TIME},
	    {"output", required_argument, NULL, O_OUTPUT},
	    {"nodecount", required_argument, NULL, O_NODES},
	    {"width", required_argument, NULL, O_WIDTH},
	    {"max-depth", required_argument, NULL, O_MAX_DEPTH},
	    {"min-share", required_argument, NULL, O_MIN_SHARE},
	    {"color", required_argument, NULL, O_COLOUR},
	    {"focus", required_argument, NULL, O_FOCUS},
	    {"ignore", required_argument, NULL, O_IGNORE},
	    {"hide", required_argument, NULL, O_HIDE},
	    {"prune-from", required_argument, NULL, O_PRUNE_FROM},
	    {"sandwich", required_argument, NULL, O_SANDWICH},
	    {"sandwich-side", required_argument, NULL, O_SANDWICH_SIDE},
	    {"group-by", required_argument, NULL, O_GROUP_BY},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		int taken = cli_server_opt(&srv, o, optarg, "query");
		if (taken < 0)
			return 2;
		if (taken)
			continue;
		switch (o) {
		case O_SINCE:
			if (duration_parse_ms(optarg, 0, &since)) {
				fprintf(
				    stderr,
				    "kilnctl query: --since=%s: expected e.g. 30s, 15m, 1h, 2d\n",
				    optarg);
				return 2;
			}
			break;
		case O_START:
		case O_END:
		case O_TIME: {
			int64_t v;
			if (cli_parse_ms(optarg, &v)) {
				fprintf(
				    stderr,
				    "kilnctl query: %s: expected milliseconds since the epoch\n",
				    optarg);
				return 2;
			}
			if (o == O_START)
				start = v, have_start = true;
			else if (o == O_END)
				end = v, have_end = true;
			else
				at = v, have_time = true;
			break;
		}
		case O_MODE:
			mode = optarg;
			break;
		case O_OUTPUT:
			output = optarg;
			break;
		case O_WIDTH:
		case O_MAX_DEPTH: {
			char *e;
			long v = strtol(optarg, &e, 10);
			if (*e || e == optarg || v < (o == O_WIDTH) || v > 100000) {
				fprintf(stderr,
					"kilnctl query: --%s=%s: expected a whole number%s\n",
					o == O_WIDTH ? "width" : "max-depth", optarg,
					o == O_WIDTH ? " from 1 to 100000" : "");
				return 2;
			}
			if (o == O_WIDTH)
				flame.width = (unsigned)v;
			else
				flame.max_depth = (unsigned)v;
			break;
		}
		case O_MIN_SHARE: {
			char *e;
			double v = strtod(optarg, &e);
			if (e == optarg || (*e && strcmp(e, "%")) || !(v >= 0 && v <= 100)) {
				fprintf(stderr,
					"kilnctl query: --min-share=%s: expected a percentage "
					"from 0 to 100, e.g. 0.5 or 0.5%%\n",
					optarg);
				return 2;
			}
			flame.min_share = v / 100;
			break;
		}
		case O_COLOUR:
			if (strcmp(optarg, "auto") == 0)
				colour_mode = COLOUR_AUTO;
			else if (strcmp(optarg, "always") == 0)
				colour_mode = COLOUR_ALWAYS;
			else if (strcmp(optarg, "never") == 0)
				colour_mode = COLOUR_NEVER;
			else {
				fprintf(stderr,
					"kilnctl query: --color=%s: expected auto, always or "
					"never\n",
					optarg);
				return 2;
			}
			break;
		case O_FOCUS:
			topts.focus = optarg;
			break;
		case O_IGNORE:
			topts.ignore = optarg;
			break;
		case O_HIDE:
			topts.hide = optarg;
			break;
		case O_PRUNE_FROM:
			topts.prune_from = optarg;
			break;
		case O_SANDWICH:
			topts.sandwich = optarg;
			break;
		case O_SANDWICH_SIDE:
			if (strcmp(optarg, "callers") && strcmp(optarg, "callees")) {
				fprintf(stderr,
					"kilnctl query: --sandwich-side=%s: expected callers or "
					"callees\n",
					optarg);
				return 2;
			}
			have_side = true;
			topts.sandwich_side = strcmp(optarg, "callers") == 0
						  ? QUERY_SANDWICH_CALLERS
						  : QUERY_SANDWICH_CALLEES;
			break;
		case O_GROUP_BY:
			if (!optarg[0] || strpbrk(optarg, "{}=,\"")) {
				fprintf(stderr,
					"kilnctl query: --group-by=%s: expected a label name\n",
					optarg);
				return 2;
			}
			group_by = optarg;
			break;
		case O_NODES:
			nodecount = strtol(optarg, NULL, 10);
			break;
		case 'o':
			out_path = optarg;
			break;
		case O_HELP:
		case 'h':
			query_usage(stdout);
			return 0;
		default:
			query_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "kilnctl query: expected exactly one QUERY argument\n");
		query_usage(stderr);
		return 2;
	}
	query = argv[optind];
	if (strcmp(output, "top") && strcmp(output, "flame") && strcmp(output, "folded") &&
	    strcmp(output, "pprof")) {
		fprintf(stderr,
			"kilnctl query: --output=%s: expected top, flame, folded or pprof\n",
			output);
		return 2;
	}
	if (group_by && strcmp(output, "pprof") == 0) {
		fprintf(stderr, "kilnctl query: --group-by: a pprof file cannot carry groups; use "
				"--output=top, flame or folded\n");
		return 2;
	}
	bool single = strcmp(mode, "single") == 0;
	if (!single && strcmp(mode, "merge") != 0) {
		fprintf(stderr, "kilnctl query: --mode=%s: expected merge or single\n", mode);
		return 2;
	}
	if (single && !have_time) {
		fprintf(stderr, "kilnctl query: --mode=single needs --time=MS\n");
		return 2;
	}
	int64_t now = realtime_ms();
	if (!have_end)
		end = now;
	if (!have_start)
		start = end - since;

	/* Build the URL. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *esc = curl_easy_init();
	char *q = esc ? curl_easy_escape(esc, query, 0) : NULL;
	struct buf url = {0}, body = {0};
	int ret = 1;
	if (!q) {
		fprintf(stderr, "kilnctl: out of memory\n");
		goto out;
	}
	bool has_scheme =
	    strncmp(srv.address, "http://", 7) == 0 || strncmp(srv.address, "https://", 8) == 0;
	char base[1024], range[96];
	snprintf(base, sizeof(base), "%s%s", has_scheme ? "" : "http://", srv.address);
	if (single)
		snprintf(range, sizeof(range), "&mode=single&time=%lld&start=%lld&end=%lld",
			 (long long)at, (long long)at, (long long)at);
	else
		snprintf(range, sizeof(range), "&mode=merge&start=%lld&end=%lld", (long long)start,
			 (long long)end);
	buf_printf(&url, "%s/api/v1/query?report=pprof&query=%s%s", base, q, range);
	buf_terminate(&url);
	if (group_by) {
		if (cli_query_fetch_groups(&srv, base, query, group_by, range, &groups))
			goto out;
		if (groups.n == 0) {
			fprintf(stderr,
				"kilnctl: no samples match %s from %lld to %lld ms; try a longer "
				"--since, or check the profile type with the server's "
				"/api/v1/profile_types\n",
				query, (long long)start, (long long)end);
			goto out;
		}
	}

	long status = 0;
	if (cli_http_get((const char *)url.data, srv.token, &srv.tls, &body, &status))
		goto out;
	if (status != 200) {
		cli_print_server_error(status, &body, query);
		goto out;
	}
	struct pprof_profile *p = NULL;
	struct kiln_error err = {0};
	struct buf text = {0};
	int rc = pprof_decode(body.data, body.len, NULL, &p, &err);
	if (rc == 0 && pprof_sample_count(p) == 0) {
		fprintf(stderr,
			"kilnctl: no samples match %s from %lld to %lld ms; try a longer "
			"--since, or check the profile type with the server's "
			"/api/v1/profile_types\n",
			query, (long long)start, (long long)end);
		pprof_profile_free(p);
		goto out;
	}
	if (rc == 0 && strcmp(output, "pprof") == 0) {
		ret = cli_write_out(out_path, body.data, body.len);
		pprof_profile_free(p);
		goto out;
	}
	flame.width = flame.width ? flame.width : terminal_width(out_path);
	if (colour_mode == COLOUR_ALWAYS ||
	    (colour_mode == COLOUR_AUTO && colour_terminal(out_path)))
		flame.colour = QUERY_FLAME_COLOUR_PACKAGE;
	/* A sandwich without a side shows both halves, callers first, as the
	 * UI stacks them. */
	for (int half = 0; rc == 0 && half < 2; half++) {
		if (topts.sandwich && !have_side) {
			topts.sandwich_side =
			    half == 0 ? QUERY_SANDWICH_CALLERS : QUERY_SANDWICH_CALLEES;
			rc = buf_printf(&text, "%s%s of %s:\n", half ? "\n" : "",
					half == 0 ? "callers" : "callees", topts.sandwich);
		} else if (half) {
			break;
		}
		if (rc == 0)
			rc = render(p, group_by ? &groups : NULL, output, &topts, &flame, nodecount,
				    &text, &err);
	}
	if (rc)
		fprintf(stderr, "kilnctl: rendering the server's profile: %s\n",
			err.msg[0] ? err.msg : strerror(-rc));
	else
		ret = cli_write_out(out_path, text.data, text.len);
	buf_free(&text);
	pprof_profile_free(p);
out:
	cli_query_groups_release(&groups);
	curl_free(q);
	if (esc)
		curl_easy_cleanup(esc);
	buf_free(&url);
	buf_free(&body);
	curl_global_cleanup();
	return ret;
}
