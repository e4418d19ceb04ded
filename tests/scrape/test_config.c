/*
 * test_config.c — scrape config loading: Parca's shape and defaults, errors
 * with FILE:LINE:COLUMN, and a round trip of a config using every field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "scrape/scrape.h"

static struct scrape_config *parse_ok(const char *text)
{
	struct scrape_config *c = NULL;
	struct kiln_error err = {0};
	int rc = scrape_config_parse(text, strlen(text), "t.yaml", &c, &err);
	if (rc != 0)
		fail_msg("parse failed: %s", err.msg);
	return c;
}

static void expect_error(const char *text, const char *where, const char *what)
{
	struct scrape_config *c = NULL;
	struct kiln_error err = {0};
	int rc = scrape_config_parse(text, strlen(text), "t.yaml", &c, &err);
	if (rc != -EINVAL)
		fail_msg("expected an error containing \"%s\", got rc %d", what, rc);
	assert_null(c);
	if (strncmp(err.msg, where, strlen(where)) != 0 || !strstr(err.msg, what))
		fail_msg("error \"%s\" does not start with \"%s\" or lacks \"%s\"", err.msg, where,
			 what);
}

static const struct pprof_endpoint_config *ep(const struct scrape_job_config *j, const char *n)
{
	for (size_t i = 0; i < j->n_endpoints; i++)
		if (strcmp(j->endpoints[i].name, n) == 0)
			return &j->endpoints[i];
	return NULL;
}

/* Parca's quickstart file: defaults for everything not given. */
static void test_parca_quickstart_defaults(void **state)
{
	struct scrape_config *c = parse_ok("object_storage:\n"
					   "  bucket:\n"
					   "    type: \"FILESYSTEM\"\n"
					   "    config:\n"
					   "      directory: \"./data\"\n"
					   "scrape_configs:\n"
					   "  - job_name: \"default\"\n"
					   "    static_configs:\n"
					   "      - targets: [ '127.0.0.1:7070' ]\n");
	(void)state;
	assert_string_equal(c->bucket_type, "FILESYSTEM");
	assert_string_equal(c->bucket_directory, "./data");
	assert_int_equal(c->n_jobs, 1);
	const struct scrape_job_config *j = &c->jobs[0];
	assert_string_equal(j->job_name, "default");
	assert_int_equal(j->interval_ms, 10000);
	assert_int_equal(j->timeout_ms, 13000);
	assert_string_equal(j->scheme, "http");
	assert_int_equal(j->n_endpoints, 5);
	assert_string_equal(ep(j, "memory")->path, "/debug/pprof/allocs");
	assert_true(ep(j, "process_cpu")->delta);
	assert_false(ep(j, "memory")->delta);
	assert_string_equal(ep(j, "mutex")->path, "/debug/pprof/mutex");
	assert_string_equal(j->static_configs[0].targets[0], "127.0.0.1:7070");
	scrape_config_free(c);
}

/* ${KILN_PORT} in targets (the shipped kiln.yaml): substituted in every
 * target; an unknown variable is refused naming job and target. */
static void test_substitute_self_port(void **state)
{
	struct kiln_error err = {0};
	struct scrape_config *c = parse_ok("scrape_configs:\n"
					   "  - job_name: \"kiln\"\n"
					   "    static_configs:\n"
					   "      - targets: ['127.0.0.1:${KILN_PORT}', 'h:1']\n"
					   "      - targets: ['[::1]:${KILN_PORT}']\n");
	(void)state;
	assert_int_equal(scrape_config_substitute(c, "KILN_PORT", "17070", &err), 0);
	assert_string_equal(c->jobs[0].static_configs[0].targets[0], "127.0.0.1:17070");
	assert_string_equal(c->jobs[0].static_configs[0].targets[1], "h:1");
	assert_string_equal(c->jobs[0].static_configs[1].targets[0], "[::1]:17070");
	scrape_config_free(c);

	c = parse_ok("scrape_configs:\n"
		     "  - job_name: \"x\"\n"
		     "    static_configs:\n"
		     "      - targets: ['127.0.0.1:${PORT}']\n");
	assert_int_equal(scrape_config_substitute(c, "KILN_PORT", "1", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "job \"x\": target \"127.0.0.1:${PORT}\" uses an unknown "
					"variable (only ${KILN_PORT} is defined)"));
	scrape_config_free(c);
}

static void test_endpoint_merge_and_alias(void **state)
{
	struct scrape_config *c = parse_ok("scrape_configs:\n"
					   "  - job_name: a\n"
					   "    scrape_interval: 1m30s\n"
					   "    profiling_config:\n"
					   "      path_prefix: /app\n"
					   "      pprof_config:\n"
					   "        memory_allocs:\n"
					   "          enabled: false\n"
					   "        fgprof:\n"
					   "          path: /debug/fgprof\n"
					   "          delta: true\n"
					   "          seconds: 5\n");
	(void)state;
	const struct scrape_job_config *j = &c->jobs[0];
	assert_int_equal(j->interval_ms, 90000);
	assert_int_equal(j->n_endpoints, 6);
	assert_false(ep(j, "memory")->enabled);
	assert_string_equal(ep(j, "memory")->path, "/debug/pprof/allocs");
	assert_true(ep(j, "fgprof")->delta);
	assert_int_equal(ep(j, "fgprof")->seconds, 5);
	assert_string_equal(j->path_prefix, "/app");
	scrape_config_free(c);
}

static void test_errors_name_line_and_column(void **state)
{
	(void)state;
	expect_error("scrape_configs:\n  - job_name: a\n    scrape_intervall: 10s\n",
		     "t.yaml:3:5:", "unknown field \"scrape_intervall\"");
	expect_error("scrape_configs:\n  - job_name: a\n    scrape_interval: soon\n",
		     "t.yaml:3:22:", "not a duration");
	expect_error("scrape_configs:\n  - static_configs: []\n",
		     "t.yaml:2:5:", "job_name is required");
	expect_error("scrape_configs:\n  - job_name: a\n  - job_name: a\n",
		     "t.yaml:3:5:", "used twice");
	expect_error("scrape_configs:\n  - job_name: a\n    static_configs:\n"
		     "      - targets: ['http://x:1/metrics']\n",
		     "t.yaml:4:19:", "not a valid host:port");
	expect_error("scrape_configs:\n  - job_name: a\n    relabel_configs:\n"
		     "      - source_labels: [x]\n        regex: '(unclosed'\n",
		     "t.yaml:5:16:", "regex \"(unclosed\"");
	expect_error("scrape_configs:\n  - job_name: a\n    relabel_configs:\n"
		     "      - action: explode\n",
		     "t.yaml:4:17:", "unknown relabel action \"explode\"");
	expect_error("scrape_configs:\n  - job_name: a\n    relabel_configs:\n"
		     "      - action: hashmod\n        target_label: s\n",
		     "t.yaml:4:17:", "requires modulus");
	expect_error("scrape_configs:\n  - job_name: a\n    scrape_interval: 10s\n"
		     "    scrape_timeout: 5s\n",
		     "t.yaml:4:21:", "must be longer than the 10s");
	expect_error("scrape_configs:\n  - job_name: a\n    profiling_config:\n"
		     "      pprof_config:\n        custom: {enabled: true}\n",
		     "t.yaml:5:9:", "custom profile \"custom\" needs a path");
	expect_error("scrape_configs:\n  - job_name: [a\n", "t.yaml:3:1:", "");
	expect_error("object_storage:\n  bucket:\n    type: S3\n",
		     "t.yaml:3:11:", "only FILESYSTEM");
	expect_error("scrape_configs:\n  - job_name: a\n    profiling_config:\n"
		     "      pprof_config:\n        memory: {enabled: maybe}\n",
		     "t.yaml:5:27:", "not a boolean");
}

static const char every_field[] =
    "object_storage:\n"
    "  bucket:\n"
    "    type: FILESYSTEM\n"
    "    config:\n"
    "      directory: /var/lib/kiln\n"
    "scrape_configs:\n"
    "  - job_name: app\n"
    "    scrape_interval: 15s\n"
    "    scrape_timeout: 20s\n"
    "    scheme: https\n"
    "    normalized_addresses: true\n"
    "    params:\n"
    "      debug: ['1']\n"
    "    profiling_config:\n"
    "      path_prefix: /prefix\n"
    "      pprof_config:\n"
    "        memory: {enabled: true, path: /debug/pprof/heap, keep_sample_type: [{type: "
    "alloc_space, unit: bytes}, {type: inuse_space}]}\n"
    "        block: {enabled: false}\n"
    "        mutex: {enabled: true}\n"
    "        goroutine: {enabled: true}\n"
    "        process_cpu: {enabled: true, delta: true, seconds: 10}\n"
    "        fgprof: {enabled: true, path: /debug/fgprof, delta: true}\n"
    "    static_configs:\n"
    "      - targets: ['a:1', 'b:2']\n"
    "        labels: {env: prod, team: \"q\\\"uote\"}\n"
    "      - targets: ['c:3']\n"
    "    relabel_configs:\n"
    "      - source_labels: [__address__, env]\n"
    "        separator: '|'\n"
    "        regex: '([^:]+):\\d+\\|(.*)'\n"
    "        target_label: host\n"
    "        replacement: '${1}-$2'\n"
    "        action: replace\n"
    "      - {source_labels: [env], regex: dev, action: drop}\n"
    "      - {source_labels: [env], regex: 'prod|stage', action: keep}\n"
    "      - {source_labels: [__address__], target_label: shard, modulus: 4, action: hashmod}\n"
    "      - {regex: '__meta_(.+)', replacement: 'm_$1', action: labelmap}\n"
    "      - {regex: tmp_.*, action: labeldrop}\n"
    "      - {regex: '.+', action: labelkeep}\n"
    "      - {source_labels: [env], target_label: ENV, action: uppercase}\n"
    "      - {source_labels: [env], target_label: env_l, action: lowercase}\n"
    "  - job_name: second\n";

/* dump(parse(x)) parses back to a config whose dump is identical. */
static void test_every_field_round_trips(void **state)
{
	struct scrape_config *c = parse_ok(every_field), *c2;
	struct buf d1, d2;
	struct kiln_error err = {0};

	(void)state;
	buf_init(&d1);
	buf_init(&d2);
	assert_int_equal(scrape_config_dump(c, &d1), 0);
	assert_int_equal(buf_terminate(&d1), 0);
	if (scrape_config_parse((char *)d1.data, d1.len, "dump.yaml", &c2, &err) != 0)
		fail_msg("the dump does not parse: %s\n%s", err.msg, (char *)d1.data);
	assert_int_equal(scrape_config_dump(c2, &d2), 0);
	assert_int_equal(buf_terminate(&d2), 0);
	assert_string_equal((char *)d1.data, (char *)d2.data);
	/* Spot checks that the dump carries the values, not just the shape. */
	const char *s = (char *)d1.data;
	assert_non_null(strstr(s, "scrape_timeout: 20s"));
	assert_non_null(strstr(s, "scheme: \"https\""));
	assert_non_null(strstr(s, "team: \"q\\\"uote\""));
	assert_non_null(strstr(s, "replacement: \"${1}-$2\""));
	assert_non_null(strstr(s, "modulus: 4"));
	assert_non_null(strstr(s, "action: labelmap"));
	assert_non_null(strstr(s, "directory: \"/var/lib/kiln\""));
	assert_non_null(strstr(s, "- type: \"inuse_space\""));
	assert_non_null(strstr(s, "debug: [\"1\"]"));
	assert_non_null(strstr(s, "path_prefix: \"/prefix\""));
	assert_non_null(strstr(s, "normalized_addresses: true"));
	assert_int_equal(c2->jobs[0].n_relabel, 9);
	assert_int_equal(c2->jobs[0].endpoints[0].n_keep, 2);
	scrape_config_free(c);
	scrape_config_free(c2);
	buf_free(&d1);
	buf_free(&d2);
}

static void test_durations(void **state)
{
	int64_t ms;
	(void)state;
	assert_int_equal(duration_parse_ms("1h30m", 0, &ms), 0);
	assert_int_equal(ms, 5400000);
	assert_int_equal(duration_parse_ms("500ms", 0, &ms), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(duration_parse_ms("2m", 0, &ms), 0);
	assert_int_equal(ms, 120000);
	assert_int_equal(duration_parse_ms("1d", 0, &ms), 0);
	assert_int_equal(ms, 86400000);
	assert_true(duration_parse_ms("10", 0, &ms) < 0);
	assert_true(duration_parse_ms("s", 0, &ms) < 0);
	assert_true(duration_parse_ms("-1s", 0, &ms) < 0);
	/* Overflow is an error, not wrap-around (found by fuzz_scrape_config). */
	assert_int_equal(duration_parse_ms("6666666666y", 0, &ms), -ERANGE);
	assert_int_equal(duration_parse_ms("99999999999999999999ms", 0, &ms), -ERANGE);
	assert_int_equal(duration_parse_ms("9223372036854775s", 0, &ms), 0);
	assert_int_equal(ms, 9223372036854775000);
}

static void test_load_file_missing(void **state)
{
	struct scrape_config *c;
	struct kiln_error err = {0};
	(void)state;
	assert_int_equal(scrape_config_load_file("/nonexistent/kiln.yaml", &c, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/kiln.yaml"));
}

/* file_sd_configs and http_sd_configs: defaults, relative paths resolved
 * against the config's directory, the checks Prometheus makes, and a round
 * trip through the dump. */
static void test_sd_configs(void **state)
{
	const char *text = "scrape_configs:\n"
			   "  - job_name: a\n"
			   "    file_sd_configs:\n"
			   "      - files: ['t/*.json', '/abs/x.yml']\n"
			   "    http_sd_configs:\n"
			   "      - url: http://sd:8080/targets\n"
			   "        refresh_interval: 15s\n";
	struct scrape_config *c = NULL, *c2 = NULL;
	struct kiln_error err = {0};
	struct buf d1 = {0}, d2 = {0};

	(void)state;
	assert_int_equal(scrape_config_parse(text, strlen(text), "/etc/kiln/kiln.yaml", &c, &err),
			 0);
	assert_int_equal(c->jobs[0].n_file_sd, 1);
	assert_string_equal(c->jobs[0].file_sd[0].files[0], "/etc/kiln/t/*.json");
	assert_string_equal(c->jobs[0].file_sd[0].files[1], "/abs/x.yml");
	assert_int_equal(c->jobs[0].file_sd[0].refresh_ms, 300000);
	assert_string_equal(c->jobs[0].http_sd[0].url, "http://sd:8080/targets");
	assert_int_equal(c->jobs[0].http_sd[0].refresh_ms, 15000);
	assert_int_equal(scrape_config_dump(c, &d1), 0);
	assert_int_equal(scrape_config_parse((const char *)d1.data, d1.len, "d.yaml", &c2, &err),
			 0);
	assert_int_equal(scrape_config_dump(c2, &d2), 0);
	assert_int_equal(d1.len, d2.len);
	assert_memory_equal(d1.data, d2.data, d1.len);
	scrape_config_free(c);
	scrape_config_free(c2);
	buf_free(&d1);
	buf_free(&d2);
	expect_error("scrape_configs:\n  - job_name: a\n    file_sd_configs:\n      - files: "
		     "['t/x.txt']\n",
		     "t.yaml:4:17:", "must end in .json, .yml or .yaml");
	expect_error("scrape_configs:\n  - job_name: a\n    file_sd_configs:\n      - files: "
		     "['*/x.json']\n",
		     "t.yaml:4:17:", "only be in the last path element");
	expect_error("scrape_configs:\n  - job_name: a\n    file_sd_configs:\n      - {}\n",
		     "t.yaml:4:9:", "files is required");
	expect_error("scrape_configs:\n  - job_name: a\n    http_sd_configs:\n      - url: "
		     "ftp://x/y\n",
		     "t.yaml:4:14:", "not an http or https URL");
	expect_error("scrape_configs:\n  - job_name: a\n    http_sd_configs:\n      - url: "
		     "http://x/\n        refresh_interval: 10ms\n",
		     "t.yaml:5:27:", "at least 1s");
}

/* Target groups as files and HTTP bodies hold them, JSON and YAML. */
static void test_target_groups(void **state)
{
	const char *json = "[{\"targets\": [\"a:1\", \"b:2\"], \"labels\": {\"env\": \"x\"}},"
			   " {\"targets\": [\"c:3\"]}]";
	const char *yaml = "- targets: ['d:4']\n  labels: {zone: z}\n";
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"{\"targets\": []}", "b.json:1:1:"},
	    {"[{\"targets\": [\"http://x/\"]}]", "not a valid host:port"},
	    {"[{\"targets\": [\"a:1\"", "b.json:"},
	    {"[{\"targets\": [\"a:1\"], \"labels\": {\"1x\": \"v\"}}]", "not a valid label name"},
	    {"[{\"targetz\": [\"a:1\"]}]", "unknown field"},
	};
	struct static_config *g = NULL;
	struct kiln_error err = {0};
	size_t n = 0;

	(void)state;
	assert_int_equal(scrape_target_groups_parse(json, strlen(json), "g.json", &g, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(g[0].n_targets, 2);
	assert_string_equal(g[0].targets[1], "b:2");
	assert_string_equal(scrape_labels_get(&g[0].labels, "env"), "x");
	assert_string_equal(g[1].targets[0], "c:3");
	for (size_t i = 0; i < n; i++)
		scrape_static_config_release(&g[i]);
	free(g);
	assert_int_equal(scrape_target_groups_parse(yaml, strlen(yaml), "g.yaml", &g, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(scrape_labels_get(&g[0].labels, "zone"), "z");
	scrape_static_config_release(&g[0]);
	free(g);
	assert_int_equal(scrape_target_groups_parse("", 0, "e.json", &g, &n, &err), 0);
	assert_int_equal(n, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct kiln_error){0}; /* the first error set is kept */
		assert_int_equal(scrape_target_groups_parse(bad[i].text, strlen(bad[i].text),
							    "b.json", &g, &n, &err),
				 -EINVAL);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("\"%s\": error \"%s\" lacks \"%s\"", bad[i].text, err.msg,
				 bad[i].msg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parca_quickstart_defaults),
	    cmocka_unit_test(test_endpoint_merge_and_alias),
	    cmocka_unit_test(test_substitute_self_port),
	    cmocka_unit_test(test_errors_name_line_and_column),
	    cmocka_unit_test(test_every_field_round_trips),
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_load_file_missing),
	    cmocka_unit_test(test_sd_configs),
	    cmocka_unit_test(test_target_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
