/*
 * ch_schema.c — the ClickHouse backend's tables, created at start-up, and
 * retention.
 *
 * Written for ClickHouse 18.16 (Debian 12's package): no column codecs, no
 * TTL, no query parameters. docs/SCALE-OUT.md says what a newer server
 * would do better.
 *
 * The 64-bit stack and location hashes are random bytes that no general
 * compressor shrinks, and they were most of the bytes on disk:
 * samples.stack_hash and stacks.locations are LowCardinality (18.16:
 * experimental, enabled per request by ch_http.c, one dictionary per
 * part), so a part stores each distinct hash once and each row an index
 * into its dictionary (bench-scaleout: samples 5.7 -> 3.9 bytes per row,
 * stacks 2.0 -> 1.6). Tables made by an earlier kiln keep plain UInt64,
 * which reads and writes the same (ALTER TABLE ... MODIFY COLUMN converts).
 *
 *   samples    one row per (series, profile time, stack) with the summed
 *              value, plus one totals row per (series, profile) with the
 *              profile's total (type hash CH_TOTALS_TYPE, ch.h) and one
 *              marker row per write (type and series hash 0: the write is
 *              complete, ch_write.c). MergeTree ordered by (profile type,
 *              series, time, stack): a query reads one type's series for a
 *              time range as contiguous ranges. Partitioned by day so that
 *              retention drops whole partitions (18.16 has no TTL).
 *   series     series hash -> profile type, name and labels.
 *   stacks, locations, functions, mappings
 *              the metastore, each keyed by its content hash
 *              (ReplacingMergeTree: two servers writing the same object
 *              leave one row after a merge; reads take any() per key, so
 *              they are right before the merge too). Strings are stored
 *              inline in functions and mappings rather than in a table of
 *              their own: each function row is written once, and a join
 *              per read would cost more than the bytes saved.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "store/ch.h"

#define DAY_MS		 86400000LL
#define RETENTION_PERIOD 300 /* seconds between retention passes */

static const char *const schema[] = {
    "CREATE TABLE IF NOT EXISTS samples (type_hash UInt64, series_hash UInt64, "
    "timestamp_ms Int64, stack_hash LowCardinality(UInt64), value Int64, batch_id UInt64) "
    "ENGINE = MergeTree() PARTITION BY intDiv(timestamp_ms, 86400000) "
    "ORDER BY (type_hash, series_hash, timestamp_ms, stack_hash)",
    "CREATE TABLE IF NOT EXISTS series (series_hash UInt64, type_hash UInt64, "
    "profile_type String, name String, sample_type String, sample_unit String, "
    "period_type String, period_unit String, period Int64, delta UInt8, "
    "label_names Array(String), label_values Array(String)) "
    "ENGINE = ReplacingMergeTree() ORDER BY series_hash",
    "CREATE TABLE IF NOT EXISTS stacks (stack_hash UInt64, "
    "locations Array(LowCardinality(UInt64))) "
    "ENGINE = ReplacingMergeTree() ORDER BY stack_hash",
    "CREATE TABLE IF NOT EXISTS locations (location_hash UInt64, mapping_hash UInt64, "
    "address UInt64, line_functions Array(UInt64), line_numbers Array(Int64)) "
    "ENGINE = ReplacingMergeTree() ORDER BY location_hash",
    "CREATE TABLE IF NOT EXISTS functions (function_hash UInt64, name String, "
    "system_name String, filename String, start_line Int64) "
    "ENGINE = ReplacingMergeTree() ORDER BY function_hash",
    "CREATE TABLE IF NOT EXISTS mappings (mapping_hash UInt64, memory_start UInt64, "
    "memory_limit UInt64, file_offset UInt64, filename String, build_id String, "
    "flags UInt32, elf_type UInt32, load_offset UInt64, load_vaddr UInt64) "
    "ENGINE = ReplacingMergeTree() ORDER BY mapping_hash",
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ch_apply_retention(struct store *s, struct kiln_error *err)
{
	struct ch_store *ch = s->ch;
	struct buf out = {0}, sql = {0};
	int rc;

	if (ch->retention_ms <= 0)
		return 0;
	/* Days that end before the cutoff hold nothing to keep. */
	int64_t last_day = (wall_ms() - ch->retention_ms) / DAY_MS - 1;
	rc = buf_printf(&sql,
			"SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND "
			"table = 'samples' AND active FORMAT TabSeparated",
			ch->conn.database);
	rc = rc ?: buf_terminate(&sql);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ch_http_retry(&ch->conn, (char *)sql.data, NULL, 0, &out, err);
	rc = rc ?: buf_terminate(&out);
	for (char *line = (char *)out.data, *next; !rc && line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *end;
		long long day = strtoll(line, &end, 10);
		if (*end || day > last_day)
			continue;
		buf_reset(&sql);
		rc = buf_printf(&sql, "ALTER TABLE samples DROP PARTITION %lld", day);
		rc = rc ?: buf_terminate(&sql);
		rc = rc ?: ch_http_retry(&ch->conn, (char *)sql.data, NULL, 0, NULL, err);
		if (!rc)
			log_info("store: clickhouse: retention dropped day %lld of samples", day);
	}
out:
	buf_free(&out);
	buf_free(&sql);
	return rc;
}

static void *retention_main(void *arg)
{
	struct store *s = arg;
	struct ch_store *ch = s->ch;

	pthread_mutex_lock(&ch->stop_mu);
	while (!ch->stop) {
		struct kiln_error err = {0};
		struct timespec until;

		pthread_mutex_unlock(&ch->stop_mu);
		if (ch_apply_retention(s, &err))
			log_warn("store: clickhouse retention: %s", err.msg);
		pthread_mutex_lock(&ch->stop_mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += RETENTION_PERIOD;
		while (!ch->stop &&
		       pthread_cond_timedwait(&ch->stop_cond, &ch->stop_mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&ch->stop_mu);
	return NULL;
}

static bool is_identifier(const char *s)
{
	if (!*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

struct ch_store *ch_store_new(void)
{
	struct ch_store *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	pthread_mutex_init(&ch->mu, NULL);
	pthread_mutex_init(&ch->stop_mu, NULL);
	pthread_cond_init(&ch->stop_cond, NULL);
	pthread_mutex_init(&ch->gc_mu, NULL);
	ch->gc_tail = &ch->gc_head;
	return ch;
}

int ch_store_open(struct store *s, const struct store_clickhouse_options *o, int64_t retention_ms,
		  struct kiln_error *err)
{
	struct ch_store *ch;
	const char *db = o->database && *o->database ? o->database : "kiln";
	struct buf sql = {0};
	int rc;

	if (!o->url || (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8)))
		return kiln_error_set(err, EINVAL,
				      "--clickhouse-url=%s: expected http://HOST:PORT (the HTTP "
				      "interface, usually port 8123)",
				      o->url ? o->url : "");
	if (!is_identifier(db))
		return kiln_error_set(err, EINVAL,
				      "--clickhouse-database=%s: letters, digits and _ only", db);
	if (!(ch = ch_store_new()))
		return kiln_error_set(err, ENOMEM, "out of memory");
	s->ch = ch;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ch->retention_ms = retention_ms;
	ch->conn.timeout_ms = 30000;
	ch->conn.url = strdup(o->url);
	ch->conn.database = strdup("default"); /* until ours exists */
	ch->conn.user = o->user && *o->user ? strdup(o->user) : NULL;
	ch->conn.password = o->password ? strdup(o->password) : NULL;
	if (!ch->conn.url || !ch->conn.database || (o->user && *o->user && !ch->conn.user) ||
	    (o->password && !ch->conn.password))
		return kiln_error_set(err, ENOMEM, "out of memory");
	size_t ul = strlen(ch->conn.url);
	while (ul > 0 && ch->conn.url[ul - 1] == '/')
		ch->conn.url[--ul] = '\0';

	rc = buf_printf(&sql, "CREATE DATABASE IF NOT EXISTS %s", db);
	rc = rc ?: buf_terminate(&sql);
	if (rc) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ch_http_retry(&ch->conn, (char *)sql.data, NULL, 0, NULL, err);
	if (rc)
		goto out;
	free(ch->conn.database);
	if (!(ch->conn.database = strdup(db))) {
		rc = kiln_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]) && !rc; i++)
		rc = ch_http_retry(&ch->conn, schema[i], NULL, 0, NULL, err);
	if (rc)
		goto out;
	if (pthread_create(&ch->retention_thread, NULL, retention_main, s)) {
		rc = kiln_error_set(err, EAGAIN, "cannot start the retention thread");
		goto out;
	}
	ch->thread_started = true;
	log_info("store: clickhouse %s, database %s", ch->conn.url, db);
out:
	buf_free(&sql);
	if (rc)
		kiln_error_prefix(err, "clickhouse %s: ", o->url);
	return rc;
}

void ch_store_close(struct store *s)
{
	struct ch_store *ch = s->ch;

	if (!ch)
		return;
	if (ch->thread_started) {
		pthread_mutex_lock(&ch->stop_mu);
		ch->stop = true;
		pthread_cond_signal(&ch->stop_cond);
		pthread_mutex_unlock(&ch->stop_mu);
		pthread_join(ch->retention_thread, NULL);
	}
	for (int k = 0; k < CH_N_KINDS; k++)
		ch_memo_free(&ch->memo[k]);
	pthread_mutex_destroy(&ch->mu);
	pthread_mutex_destroy(&ch->stop_mu);
	pthread_cond_destroy(&ch->stop_cond);
	pthread_mutex_destroy(&ch->gc_mu);
	free(ch->conn.url);
	free(ch->conn.database);
	free(ch->conn.user);
	free(ch->conn.password);
	free(ch);
	s->ch = NULL;
}
