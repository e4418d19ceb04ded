/*
 * ch_http.c — one statement sent to ClickHouse's HTTP interface with
 * libcurl, and the answer classified so that callers know whether the
 * statement may have run: ClickHouse's own error (HTTP status other than
 * 200: it did not run), unreachable (it did not run) or a transport failure
 * after sending (unknown: it may have run).
 *
 * Statements never carry user strings: every label value, name and symbol
 * travels in a RowBinary body, and the SQL holds only numbers and the
 * database name (checked to be an identifier), so there is nothing to
 * escape and nothing to inject.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "store/ch.h"

#define MAX_RESPONSE (1ull << 31) /* a bigger answer is treated as garbage */
#define RETRIES	     6

struct sink {
	struct buf *b;
	int rc;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct sink *k = arg;

	if (k->b->len + size * n > MAX_RESPONSE || buf_append(k->b, p, size * n)) {
		k->rc = -ENOMEM;
		return 0;
	}
	return size * n;
}

int ch_http(struct ch_conn *c, const char *sql, const void *data, size_t len, struct buf *out,
	    struct kiln_error *err)
{
	struct buf resp = {0}, url = {0};
	struct sink k = {.b = &resp};
	CURL *h = curl_easy_init();
	char *q = NULL;
	long status = 0;
	CURLcode cc;
	int rc;

	if (!h)
		return kiln_error_set(err, ENOMEM, "clickhouse: cannot create a curl handle");
	/* Inserts are one block whatever their size: a retry then finds all of a
	 * batch or none of it (ch_write.c). Reads name their series and stacks
	 * in IN lists longer than the default 256 KiB a query may have. The
	 * LowCardinality columns (ch_schema.c) need 18.16's experimental switch,
	 * and one dictionary per part rather than per 8,192 keys. */
	rc = buf_printf(&url,
			"%s/?database=%s&max_insert_block_size=100000000&max_query_size=67108864"
			"&max_ast_elements=10000000&max_expanded_ast_elements=10000000"
			"&allow_experimental_low_cardinality_type=1"
			"&low_cardinality_use_single_dictionary_for_part=1"
			"&low_cardinality_max_dictionary_size=4194304",
			c->url, c->database);
	if (!rc && data) {
		q = curl_easy_escape(h, sql, 0);
		rc = q ? buf_printf(&url, "&query=%s", q) : -ENOMEM;
	}
	rc = rc ?: buf_terminate(&url);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "clickhouse: out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, (char *)url.data);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, data ? data : sql);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(data ? len : strlen(sql)));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	if (c->user)
		curl_easy_setopt(h, CURLOPT_USERNAME, c->user);
	if (c->password)
		curl_easy_setopt(h, CURLOPT_PASSWORD, c->password);
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (k.rc) {
		rc = kiln_error_set(err, ENOMEM, "clickhouse: answer too large or out of memory");
	} else if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) {
		rc = kiln_error_set(err, ECONNREFUSED, "clickhouse at %s is unreachable: %s",
				    c->url, curl_easy_strerror(cc));
	} else if (cc == CURLE_OPERATION_TIMEDOUT) {
		rc = kiln_error_set(err, ETIMEDOUT, "clickhouse at %s: no answer in %ld ms", c->url,
				    c->timeout_ms);
	} else if (cc != CURLE_OK) {
		rc = kiln_error_set(err, EIO, "clickhouse at %s: %s", c->url,
				    curl_easy_strerror(cc));
	} else if (status != 200) {
		/* ClickHouse's message: the first line is enough ("Code: 60, e.displayText()..."). */
		size_t n = resp.len < 300 ? resp.len : 300;
		char *nl = n ? memchr(resp.data, '\n', n) : NULL;

		if (nl)
			n = (size_t)(nl - (char *)resp.data);
		/* A 5xx other than a query error (a proxy, a restart) is not
		 * ClickHouse refusing the statement: its outcome is unknown. */
		rc = kiln_error_set(err,
				    status == 500 || status == 400 || status == 404 ||
					    status == 401 || status == 403
					? EPROTO
					: EIO,
				    "clickhouse: HTTP %ld: %.*s", status, (int)n,
				    resp.data ? (char *)resp.data : "");
	} else {
		rc = 0;
		if (out) {
			buf_reset(out);
			rc = buf_append(out, resp.data, resp.len);
			if (rc)
				rc = kiln_error_set(err, ENOMEM, "clickhouse: out of memory");
		}
	}
out:
	curl_free(q);
	curl_easy_cleanup(h);
	buf_free(&resp);
	buf_free(&url);
	return rc;
}

int ch_http_retry(struct ch_conn *c, const char *sql, const void *data, size_t len, struct buf *out,
		  struct kiln_error *err)
{
	long delay_ms = 100;
	int rc;

	for (int attempt = 0;; attempt++) {
		struct kiln_error e = {0};

		rc = ch_http(c, sql, data, len, out, &e);
		if ((rc != -ECONNREFUSED && rc != -EIO && rc != -ETIMEDOUT) ||
		    attempt + 1 == RETRIES)
			return rc ? kiln_error_set(err, -rc, "%s", e.msg) : 0;
		log_warn("%s; retrying in %ld ms", e.msg, delay_ms);
		struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
		delay_ms *= 2;
	}
}
