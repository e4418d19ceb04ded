/*
 * cli_http.c — what kilnctl's server commands share: GET a URL of the HTTP
 * API with libcurl (bearer token, TLS files), print the server's JSON
 * error readably, parse durations and times, write a result out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/cli.h"

#define MAX_RESPONSE (1u << 30)

int cli_parse_ms(const char *s, int64_t *out)
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
void cli_print_server_error(long status, struct buf *body, const char *query)
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
int cli_http_get(const char *url, const char *token, const struct tls_client_files *tls,
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

int cli_write_out(const char *path, const void *data, size_t len)
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

int cli_server_opt(struct cli_server_opts *s, int o, const char *arg, const char *cmd)
{
	struct kiln_error err = {0};

	switch (o) {
	case CLI_OPT_ADDRESS:
		s->address = arg;
		return 1;
	case CLI_OPT_TOKEN:
		s->token = arg;
		return 1;
	case CLI_OPT_TOKEN_FILE:
		if (bearer_token_read_file(arg, s->token_buf, sizeof(s->token_buf), &err) < 0) {
			fprintf(stderr, "kilnctl %s: --bearer-token-file: %s\n", cmd, err.msg);
			return -1;
		}
		s->token = s->token_buf;
		return 1;
	case CLI_OPT_TLS_CA:
		s->tls.ca_file = arg;
		return 1;
	case CLI_OPT_TLS_CERT:
		s->tls.cert_file = arg;
		return 1;
	case CLI_OPT_TLS_KEY:
		s->tls.key_file = arg;
		return 1;
	default:
		return 0;
	}
}
