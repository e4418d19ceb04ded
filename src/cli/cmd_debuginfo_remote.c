/*
 * cmd_debuginfo_remote.c — `kilnctl debuginfo upload` and `ls`.
 *
 * upload follows Parca's protocol, so it works against Kiln and Parca alike:
 * ShouldInitiateUpload (does the server want this build ID?), InitiateUpload
 * (size and hash; the server answers with an upload ID and the gRPC
 * strategy), the client-streaming Upload (an UploadInfo, then chunks), and
 * MarkUploadFinished. What is sent is the extracted debug-only file, not the
 * whole binary (the protocol lives in src/client/debuginfo_upload.c, shared
 * with the agent). ls reads GET /api/v1/debuginfo (Parca has no list RPC).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "client/client.h"
#include "common/buf.h"
#include "symbols/symbols.h"

struct remote_opts {
	const char *address, *token;
	bool insecure, skip_verify, force;
	int timeout_s;
	struct tls_client_files tls;
};

static void remote_usage(FILE *f, const char *cmd)
{
	fprintf(
	    f,
	    "Usage: kilnctl debuginfo %s --store-address=HOST:PORT [flags]%s\n"
	    "\n"
	    "Flags:\n"
	    "  --store-address=HOST:PORT  kiln (or Parca) server; http:// or https:// prefix ok\n"
	    "  --insecure                 cleartext HTTP/2 instead of TLS\n"
	    "  --insecure-skip-verify     TLS without certificate checks\n"
	    "  --tls-ca-file=FILE         check the server's certificate with these CAs\n"
	    "  --tls-cert-file=FILE       client certificate (mTLS), with --tls-key-file\n"
	    "  --tls-key-file=FILE\n"
	    "  --bearer-token=T           sent as authorization metadata\n"
	    "  --bearer-token-file=FILE   the same, read from FILE\n"
	    "  --timeout=SECONDS          per request (default 60)\n"
	    "%s",
	    cmd, strcmp(cmd, "upload") == 0 ? " PATH..." : "",
	    strcmp(cmd, "upload") == 0
		? "  --force                    upload even if the server has it\n"
		: "");
}

/* Parses the shared flags; returns optind of the first operand, or -2/-1
 * for usage errors / --help. */
static int parse_remote(int argc, char **argv, const char *cmd, struct remote_opts *o,
			struct buf *token)
{
	static const struct option opts[] = {
	    {"store-address", required_argument, NULL, 'a'},
	    {"insecure", no_argument, NULL, 'i'},
	    {"insecure-skip-verify", no_argument, NULL, 'k'},
	    {"bearer-token", required_argument, NULL, 't'},
	    {"bearer-token-file", required_argument, NULL, 'T'},
	    {"force", no_argument, NULL, 'f'},
	    {"timeout", required_argument, NULL, 'o'},
	    {"tls-ca-file", required_argument, NULL, 'C'},
	    {"tls-cert-file", required_argument, NULL, 'c'},
	    {"tls-key-file", required_argument, NULL, 'K'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	*o = (struct remote_opts){.timeout_s = 60};
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'a':
			o->address = optarg;
			break;
		case 'i':
			o->insecure = true;
			break;
		case 'k':
			o->skip_verify = true;
			break;
		case 't':
			o->token = optarg;
			break;
		case 'T': {
			struct kiln_error e = {0};
			if (buf_reserve(token, 4096) < 0 ||
			    bearer_token_read_file(optarg, (char *)token->data, 4096, &e) < 0) {
				fprintf(stderr, "kilnctl debuginfo %s: --bearer-token-file: %s\n",
					cmd, e.msg[0] ? e.msg : "out of memory");
				return -2;
			}
			o->token = (const char *)token->data;
			break;
		}
		case 'f':
			o->force = true;
			break;
		case 'C':
			o->tls.ca_file = optarg;
			break;
		case 'c':
			o->tls.cert_file = optarg;
			break;
		case 'K':
			o->tls.key_file = optarg;
			break;
		case 'o':
			o->timeout_s = atoi(optarg);
			break;
		case 'h':
			remote_usage(stdout, cmd);
			return -1;
		default:
			remote_usage(stderr, cmd);
			return -2;
		}
	}
	if (!o->address) {
		fprintf(stderr, "kilnctl debuginfo %s: --store-address is required\n", cmd);
		return -2;
	}
	return optind;
}

/* Uploads one file; returns 0 on success or skip, 1 on failure. */
static int upload_one(struct grpc_client *c, const struct remote_opts *o, const char *path)
{
	struct debuginfo_upload_opts uo = {.force = o->force};
	struct debuginfo_upload_result r;
	struct kiln_error e = {0};

	if (debuginfo_upload_file(c, path, NULL, &uo, &r, &e) < 0) {
		fprintf(stderr, "kilnctl debuginfo upload: %s: %s\n", path, e.msg);
		return 1;
	}
	if (r.outcome == DEBUGINFO_NOT_WANTED)
		printf("%s\t%s\tskipped: %s\n", path, r.build_id, r.reason);
	else
		printf("%s\t%s\tuploaded %llu bytes\n", path, r.build_id,
		       (unsigned long long)r.bytes);
	return 0;
}

int cmd_debuginfo_upload(int argc, char **argv)
{
	struct remote_opts o;
	struct buf token = {0};
	struct kiln_error e = {0};
	int first = parse_remote(argc, argv, "upload", &o, &token), failed = 0;

	if (first < 0) {
		buf_free(&token);
		return first == -1 ? 0 : 2;
	}
	if (first >= argc) {
		fprintf(stderr, "kilnctl debuginfo upload: no PATH given\n");
		buf_free(&token);
		return 2;
	}
	struct grpc_client_config cfg = {.address = o.address,
					 .insecure = o.insecure,
					 .skip_verify = o.skip_verify,
					 .tls = o.tls,
					 .bearer_token = o.token,
					 .timeout_ms = o.timeout_s * 1000};
	struct grpc_client *c = grpc_client_new(&cfg, &e);
	if (!c) {
		fprintf(stderr, "kilnctl debuginfo upload: %s\n", e.msg);
		buf_free(&token);
		return 1;
	}
	for (int i = first; i < argc; i++)
		failed += upload_one(c, &o, argv[i]);
	grpc_client_free(c);
	buf_free(&token);
	return failed ? 1 : 0;
}

static size_t collect(char *ptr, size_t size, size_t nmemb, void *arg)
{
	return buf_append(arg, ptr, size * nmemb) == 0 ? size * nmemb : 0;
}

/* The value after "key": in s (a number or the start of a string), or NULL. */
static const char *json_field(const char *s, const char *end, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = s; p && p + kl + 3 < end; p++) {
		p = memchr(p, '"', (size_t)(end - p));
		if (!p || p + kl + 2 >= end)
			return NULL;
		if (strncmp(p + 1, key, kl) == 0 && p[kl + 1] == '"') {
			p += kl + 2;
			while (p < end && (*p == ':' || *p == ' '))
				p++;
			return p;
		}
	}
	return NULL;
}

int cmd_debuginfo_ls(int argc, char **argv)
{
	struct remote_opts o;
	struct buf token = {0}, body = {0};
	char url[1024], auth[1100];
	struct curl_slist *hdrs = NULL;
	long status = 0;
	int first = parse_remote(argc, argv, "ls", &o, &token), rc = 1;
	CURL *curl;

	if (first < 0) {
		buf_free(&token);
		return first == -1 ? 0 : 2;
	}
	if (strncmp(o.address, "http://", 7) == 0 || strncmp(o.address, "https://", 8) == 0)
		snprintf(url, sizeof(url), "%s/api/v1/debuginfo", o.address);
	else
		snprintf(url, sizeof(url), "%s://%s/api/v1/debuginfo",
			 o.insecure ? "http" : "https", o.address);
	curl = curl_easy_init();
	if (!curl)
		goto out;
	if (o.token) {
		snprintf(auth, sizeof(auth), "authorization: Bearer %.1000s", o.token);
		hdrs = curl_slist_append(hdrs, auth);
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)o.timeout_s);
	if (o.skip_verify) {
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	tls_client_files_apply(curl, &o.tls);
	CURLcode cc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (cc != CURLE_OK || status != 200 || buf_terminate(&body) < 0) {
		fprintf(stderr, "kilnctl debuginfo ls: %s: %s (HTTP %ld)\n", url,
			cc != CURLE_OK ? curl_easy_strerror(cc) : "request failed", status);
		goto out;
	}
	/* {"debuginfo":[{"build_id":"..","size":n,"uploaded_at":ms},...]} */
	printf("%-42s %12s  %s\n", "BUILD_ID", "SIZE", "UPLOADED_AT");
	const char *end = (const char *)body.data + body.len;
	for (const char *p = strchr((const char *)body.data, '{'); p && (p = strchr(p + 1, '{'));) {
		const char *close = strchr(p, '}');
		const char *id = json_field(p, close ? close : end, "build_id");
		const char *size = json_field(p, close ? close : end, "size");
		const char *at = json_field(p, close ? close : end, "uploaded_at");
		char when[64] = "-";

		if (!id || *id != '"')
			continue;
		if (at) {
			time_t t = (time_t)(strtoll(at, NULL, 10) / 1000);
			struct tm tm;

			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
		}
		printf("%-42.*s %12lld  %s\n", (int)strcspn(id + 1, "\""), id + 1,
		       size ? strtoll(size, NULL, 10) : 0LL, when);
	}
	rc = 0;
out:
	curl_slist_free_all(hdrs);
	if (curl)
		curl_easy_cleanup(curl);
	buf_free(&body);
	buf_free(&token);
	return rc;
}
