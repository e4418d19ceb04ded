/*
 * cmd_query.c — `kilnctl query`: ask a kiln server for a profile.
 *
 *   kilnctl query --address=HOST:PORT 'QUERY' [--since=1h | --start=MS --end=MS]
 *                 [--mode=merge|single --time=MS] [--output=top|folded|pprof]
 *                 [--nodecount=N] [-o FILE] [--bearer-token=T | --bearer-token-file=F]
 *
 * It fetches the merged (or single) profile as gzipped pprof from the HTTP
 * API (GET /api/v1/query?report=pprof, libcurl) and renders top and folded
 * output locally with the query module, so what it prints is computed from
 * exactly the bytes `--output=pprof` would save. Server errors are printed
 * with the query position they point at. A server that requires tokens
 * (docs/SECURITY.md) gets `Authorization: Bearer T`; queries need role read.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "common/duration.h"
#include "common/clock.h"
#include "cli/cli.h"
#include "client/client.h"
#include "common/buf.h"
#include "pprof/pprof.h"
#include "query/query.h"

#define MAX_RESPONSE (1u << 30)

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
		   "  --output=top|folded|pprof  (default top)\n"
		   "  --nodecount=N         rows of the top table (default 30, 0 = all)\n"
		   "  --bearer-token=T      sent as Authorization: Bearer T (role read)\n"
		   "  --bearer-token-file=F the same, read from F's first line\n"
		   "  --tls-ca-file=F       check an https server's certificate with these CAs\n"
		   "  --tls-cert-file=F --tls-key-file=F  client certificate (mTLS)\n"
		   "  -o FILE               write to FILE instead of stdout\n");
}

static int parse_ms(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	struct buf *b = ctx;
	if (b->len + size * n > MAX_RESPONSE || buf_append(b, data, size * n))
		return 0;
	return size * n;
}

/* Prints the server's JSON error ({"error":..,"position":N}) readably. */
static void print_server_error(long status, struct buf *body, const char *query)
{
	buf_terminate(body);
	const char *s = body->len ? (const char *)body->data : "";
	const char *e = strstr(s, "\"error\":\"");
	if (!e) {
		fprintf(stderr, "kilnctl: server answered HTTP %ld: %.300s\n", status, s);
		return;
	}
	e += 9;
	fprintf(stderr, "kilnctl: server error (HTTP %ld): ", status);
	for (; *e && *e != '"'; e++) {
		if (*e == '\\' && e[1]) {
			e++;
			if (*e == 'n')
				fputc('\n', stderr);
			else if (*e == 'u' && strncmp(e, "u000a", 5) == 0) {
				fputc('\n', stderr);
				e += 4;
			} else
				fputc(*e, stderr);
		} else {
			fputc(*e, stderr);
		}
	}
	fputc('\n', stderr);
	(void)query;
}

/* GETs url into out; token (NULL = none) goes out as a bearer token. */
static int fetch(const char *url, const char *token, const struct tls_client_files *tls,
		 struct buf *out, long *status)
{
	CURL *c = curl_easy_init();
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	struct buf auth = {0};
	if (!c)
		return -ENOMEM;
	if (token) {
		if (buf_printf(&auth, "Authorization: Bearer %s", token) < 0 ||
		    buf_terminate(&auth) < 0 ||
		    !(hdrs = curl_slist_append(NULL, (const char *)auth.data))) {
			buf_free(&auth);
			curl_easy_cleanup(c);
			return -ENOMEM;
		}
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	tls_client_files_apply(c, tls);
	CURLcode rc = curl_easy_perform(c);
	curl_slist_free_all(hdrs);
	buf_free(&auth);
	if (rc != CURLE_OK) {
		fprintf(stderr, "kilnctl: %s: %s\n", url,
			errbuf[0] ? errbuf : curl_easy_strerror(rc));
		curl_easy_cleanup(c);
		return -EIO;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(c);
	return 0;
}

static int write_out(const char *path, const void *data, size_t len)
{
	FILE *f = path ? fopen(path, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "kilnctl: %s: %s\n", path, strerror(errno));
		return 1;
	}
	size_t n = fwrite(data, 1, len, f);
	int bad = n != len || fflush(f) != 0;
	if (path)
		bad |= fclose(f) != 0;
	if (bad) {
		fprintf(stderr, "kilnctl: writing %s: %s\n", path ? path : "stdout",
			strerror(errno));
		return 1;
	}
	return 0;
}

int cmd_query(int argc, char **argv)
{
	const char *address = "127.0.0.1:7070", *mode = "merge", *output = "top";
	const char *out_path = NULL, *query = NULL, *token = NULL;
	static char token_buf[4096];
	struct kiln_error terr = {0};
	struct tls_client_files tls = {0};
	int64_t since = 3600000, start = 0, end = 0, at = 0;
	bool have_start = false, have_end = false, have_time = false;
	long nodecount = 30;
	enum {
		O_ADDR = 1,
		O_SINCE,
		O_START,
		O_END,
		O_MODE,
		O_TIME,
		O_OUTPUT,
		O_NODES,
		O_TOKEN,
		O_TOKEN_FILE,
		O_TLS_CA,
		O_TLS_CERT,
		O_TLS_KEY,
		O_HELP
	};
	static const struct option opts[] = {
	    {"address", required_argument, NULL, O_ADDR},
	    {"since", required_argument, NULL, O_SINCE},
	    {"start", required_argument, NULL, O_START},
	    {"end", required_argument, NULL, O_END},
	    {"mode", required_argument, NULL, O_MODE},
	    {"time", required_argument, NULL, O_TIME},
	    {"output", required_argument, NULL, O_OUTPUT},
	    {"nodecount", required_argument, NULL, O_NODES},
	    {"bearer-token", required_argument, NULL, O_TOKEN},
	    {"bearer-token-file", required_argument, NULL, O_TOKEN_FILE},
	    {"tls-ca-file", required_argument, NULL, O_TLS_CA},
	    {"tls-cert-file", required_argument, NULL, O_TLS_CERT},
	    {"tls-key-file", required_argument, NULL, O_TLS_KEY},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (o) {
		case O_ADDR:
			address = optarg;
			break;
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
			if (parse_ms(optarg, &v)) {
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
		case O_NODES:
			nodecount = strtol(optarg, NULL, 10);
			break;
		case 'o':
			out_path = optarg;
			break;
		case O_TOKEN:
			token = optarg;
			break;
		case O_TLS_CA:
			tls.ca_file = optarg;
			break;
		case O_TLS_CERT:
			tls.cert_file = optarg;
			break;
		case O_TLS_KEY:
			tls.key_file = optarg;
			break;
		case O_TOKEN_FILE:
			if (bearer_token_read_file(optarg, token_buf, sizeof(token_buf), &terr) <
			    0) {
				fprintf(stderr, "kilnctl query: --bearer-token-file: %s\n",
					terr.msg);
				return 2;
			}
			token = token_buf;
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
	if (strcmp(output, "top") && strcmp(output, "folded") && strcmp(output, "pprof")) {
		fprintf(stderr, "kilnctl query: --output=%s: expected top, folded or pprof\n",
			output);
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
	    strncmp(address, "http://", 7) == 0 || strncmp(address, "https://", 8) == 0;
	buf_printf(&url, "%s%s/api/v1/query?report=pprof&query=%s", has_scheme ? "" : "http://",
		   address, q);
	if (single)
		buf_printf(&url, "&mode=single&time=%lld", (long long)at);
	else
		buf_printf(&url, "&mode=merge&start=%lld&end=%lld", (long long)start,
			   (long long)end);
	buf_terminate(&url);

	long status = 0;
	if (fetch((const char *)url.data, token, &tls, &body, &status))
		goto out;
	if (status != 200) {
		print_server_error(status, &body, query);
		goto out;
	}
	if (strcmp(output, "pprof") == 0) {
		ret = write_out(out_path, body.data, body.len);
		goto out;
	}

	struct pprof_profile *p = NULL;
	struct query_tree *tree = NULL;
	struct query_top *top = NULL;
	struct kiln_error err = {0};
	struct buf text = {0};
	int rc = pprof_decode(body.data, body.len, NULL, &p, &err);
	if (rc == 0 && pprof_sample_count(p) == 0) {
		fprintf(stderr, "kilnctl: no samples match %s in the time range\n", query);
		ret = 0;
		pprof_profile_free(p);
		goto out;
	}
	if (rc == 0)
		rc = query_tree_build(p, -1, NULL, &tree, &err);
	if (rc == 0 && strcmp(output, "folded") == 0)
		rc = query_tree_write_folded(tree, &text);
	else if (rc == 0) {
		rc = query_top_build(tree, &top, &err);
		if (rc == 0)
			rc =
			    query_top_write_text(top, nodecount > 0 ? (size_t)nodecount : 0, &text);
	}
	if (rc)
		fprintf(stderr, "kilnctl: rendering the server's profile: %s\n",
			err.msg[0] ? err.msg : strerror(-rc));
	else
		ret = write_out(out_path, text.data, text.len);
	buf_free(&text);
	query_top_free(top);
	query_tree_free(tree);
	pprof_profile_free(p);
out:
	curl_free(q);
	if (esc)
		curl_easy_cleanup(esc);
	buf_free(&url);
	buf_free(&body);
	curl_global_cleanup();
	return ret;
}
