/*
 * test_relabel.c — Prometheus relabel actions on target label sets, and the
 * labels a scrape unit ends up with (job, instance, __name__, URL).
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

#include "scrape/scrape.h"
#include "scrape/scrape_internal.h"

static struct relabel_config rule(enum relabel_action a, const char *src, const char *regex,
				  const char *target, const char *repl)
{
	static char *srcs[8][4];
	static int next;
	struct relabel_config r = {0};
	r.action = a;
	r.separator = ";";
	r.regex = (char *)(regex ? regex : "(.*)");
	r.target_label = (char *)target;
	r.replacement = (char *)(repl ? repl : "$1");
	if (src) {
		char **v = srcs[next++ % 8];
		char buf[128];
		snprintf(buf, sizeof(buf), "%s", src);
		size_t n = 0;
		for (char *tok = strtok(buf, ","); tok && n < 4; tok = strtok(NULL, ","))
			v[n++] = strdup(tok);
		r.source_labels = v;
		r.n_source_labels = n;
	}
	struct kiln_error err = {0};
	if (relabel_compile(&r, &err) != 0)
		fail_msg("compile: %s", err.msg);
	return r;
}

static void release(struct relabel_config *r)
{
	relabel_release(r);
	for (size_t i = 0; i < r->n_source_labels; i++)
		free(r->source_labels[i]);
}

static void base(struct scrape_labels *l)
{
	memset(l, 0, sizeof(*l));
	scrape_labels_set(l, "__address__", "web-1.prod:8080");
	scrape_labels_set(l, "env", "Prod");
	scrape_labels_set(l, "__meta_zone", "eu");
	scrape_labels_set(l, "tmp_x", "1");
}

static void test_replace_with_groups(void **state)
{
	struct scrape_labels l;
	(void)state;
	base(&l);
	struct relabel_config r = rule(RELABEL_REPLACE, "__address__,env",
				       "([^.]+)\\.[^:]+:(\\d+);(.*)", "host", "${1}_$2");
	assert_int_equal(relabel_apply(&r, 1, &l), 1);
	assert_string_equal(scrape_labels_get(&l, "host"), "web-1_8080");
	release(&r);
	/* Anchored: a partial match does not count. */
	r = rule(RELABEL_REPLACE, "env", "rod", "partial", "yes");
	assert_int_equal(relabel_apply(&r, 1, &l), 1);
	assert_null(scrape_labels_get(&l, "partial"));
	release(&r);
	/* An empty result deletes the target label; $1x is the group "1x". */
	r = rule(RELABEL_REPLACE, "nothing", "(.*)", "env", "$1x");
	assert_int_equal(relabel_apply(&r, 1, &l), 1);
	assert_null(scrape_labels_get(&l, "env"));
	release(&r);
	scrape_labels_free(&l);
}

static void test_keep_and_drop(void **state)
{
	struct scrape_labels l;
	(void)state;
	base(&l);
	struct relabel_config keep = rule(RELABEL_KEEP, "env", "Prod|Stage", NULL, NULL);
	struct relabel_config drop = rule(RELABEL_DROP, "env", "Prod", NULL, NULL);
	assert_int_equal(relabel_apply(&keep, 1, &l), 1);
	assert_int_equal(relabel_apply(&drop, 1, &l), 0);
	scrape_labels_set(&l, "env", "dev");
	assert_int_equal(relabel_apply(&keep, 1, &l), 0);
	assert_int_equal(relabel_apply(&drop, 1, &l), 1);
	release(&keep);
	release(&drop);
	scrape_labels_free(&l);
}

static void test_label_actions(void **state)
{
	struct scrape_labels l;
	(void)state;
	base(&l);
	struct relabel_config map = rule(RELABEL_LABELMAP, NULL, "__meta_(.+)", NULL, "m_$1");
	assert_int_equal(relabel_apply(&map, 1, &l), 1);
	assert_string_equal(scrape_labels_get(&l, "m_zone"), "eu");
	assert_string_equal(scrape_labels_get(&l, "__meta_zone"), "eu");
	struct relabel_config ldrop = rule(RELABEL_LABELDROP, NULL, "tmp_.*|__meta_.*", NULL, NULL);
	assert_int_equal(relabel_apply(&ldrop, 1, &l), 1);
	assert_null(scrape_labels_get(&l, "tmp_x"));
	assert_null(scrape_labels_get(&l, "__meta_zone"));
	struct relabel_config lkeep = rule(RELABEL_LABELKEEP, NULL, "__address__|env", NULL, NULL);
	assert_int_equal(relabel_apply(&lkeep, 1, &l), 1);
	assert_int_equal(l.n, 2);
	struct relabel_config lower = rule(RELABEL_LOWERCASE, "env", NULL, "env_l", NULL);
	assert_int_equal(relabel_apply(&lower, 1, &l), 1);
	assert_string_equal(scrape_labels_get(&l, "env_l"), "prod");
	release(&map);
	release(&ldrop);
	release(&lkeep);
	release(&lower);
	scrape_labels_free(&l);
}

/* Prometheus: md5 of the value, last 8 bytes big-endian, mod modulus. */
static void test_hashmod_matches_prometheus(void **state)
{
	struct scrape_labels l = {0};
	(void)state;
	scrape_labels_set(&l, "__address__", "foo");
	struct relabel_config r = rule(RELABEL_HASHMOD, "__address__", NULL, "shard", NULL);
	r.modulus = 1000;
	assert_int_equal(relabel_apply(&r, 1, &l), 1);
	/* md5("foo") = acbd18db4cc2f85c edef654fccc4a4d8 (md5sum) */
	unsigned long long h = 0xedef654fccc4a4d8ULL;
	char want[32];
	snprintf(want, sizeof(want), "%llu", h % 1000);
	assert_string_equal(scrape_labels_get(&l, "shard"), want);
	release(&r);
	scrape_labels_free(&l);
}

static void test_units_from_config(void **state)
{
	const char *y = "scrape_configs:\n"
			"  - job_name: app\n"
			"    scrape_interval: 5s\n"
			"    params: {debug: ['1']}\n"
			"    profiling_config:\n"
			"      pprof_config:\n"
			"        block: {enabled: false}\n"
			"        mutex: {enabled: false}\n"
			"        goroutine: {enabled: false}\n"
			"    static_configs:\n"
			"      - targets: ['a:1', 'b']\n"
			"        labels: {env: prod}\n"
			"    relabel_configs:\n"
			"      - {source_labels: [__address__, __name__], regex: 'b;memory', "
			"action: drop}\n";
	struct scrape_config *c;
	struct kiln_error err = {0};
	struct scrape_unit **u;
	size_t n;
	(void)state;
	assert_int_equal(scrape_config_parse(y, strlen(y), "t.yaml", &c, &err), 0);
	assert_int_equal(scrape_units_build(c, &u, &n, &err), 0);
	assert_int_equal(n, 4);
	/* Active first, sorted by URL; the dropped one last. */
	assert_true(u[0]->active && u[1]->active && u[2]->active);
	assert_false(u[3]->active);
	assert_string_equal(u[0]->url, "http://a:1/debug/pprof/allocs?debug=1");
	assert_string_equal(u[1]->url, "http://a:1/debug/pprof/profile?debug=1&seconds=5");
	assert_string_equal(u[2]->url, "http://b:80/debug/pprof/profile?debug=1&seconds=5");
	assert_string_equal(scrape_labels_get(&u[0]->labels, "__name__"), "memory");
	assert_string_equal(scrape_labels_get(&u[0]->labels, "job"), "app");
	assert_string_equal(scrape_labels_get(&u[0]->labels, "instance"), "a:1");
	assert_string_equal(scrape_labels_get(&u[0]->labels, "env"), "prod");
	assert_null(scrape_labels_get(&u[0]->labels, "__address__"));
	assert_int_equal(u[0]->labels.n, 4);
	assert_string_equal(scrape_labels_get(&u[3]->discovered, "__address__"), "b");
	for (size_t i = 0; i < n; i++)
		scrape_unit_free(u[i]);
	free(u);
	scrape_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replace_with_groups),
	    cmocka_unit_test(test_keep_and_drop),
	    cmocka_unit_test(test_label_actions),
	    cmocka_unit_test(test_hashmod_matches_prometheus),
	    cmocka_unit_test(test_units_from_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
