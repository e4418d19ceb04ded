/*
 * test_pools.c — a slow query never stalls ingestion: writes and reads run on
 * separate worker pools, so with every query thread busy (here: blocked until
 * the test releases them) a write still runs to completion; and the route
 * table sends every write to the ingest pool and every query to the query
 * pool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "server/internal.h"

struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int blocked;   /* query jobs running and waiting */
	bool release;  /* lets them finish */
	bool ingested; /* the ingest job ran */
	int finished;  /* query jobs done */
};

static void slow_query(void *arg)
{
	struct gate *g = arg;
	pthread_mutex_lock(&g->mu);
	g->blocked++;
	pthread_cond_broadcast(&g->cond);
	while (!g->release)
		pthread_cond_wait(&g->cond, &g->mu);
	g->finished++;
	pthread_mutex_unlock(&g->mu);
}

static void write_job(void *arg)
{
	struct gate *g = arg;
	pthread_mutex_lock(&g->mu);
	g->ingested = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->mu);
}

/* Waits until pred holds; false after a minute (a generous bound that only
 * turns a hang into a failure, never measures speed). */
static bool wait_for(struct gate *g, bool (*pred)(const struct gate *))
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	bool ok = true;
	pthread_mutex_lock(&g->mu);
	while (!pred(g) && ok)
		ok = pthread_cond_timedwait(&g->cond, &g->mu, &until) == 0 || pred(g);
	ok = pred(g);
	pthread_mutex_unlock(&g->mu);
	return ok;
}

static bool all_blocked(const struct gate *g)
{
	return g->blocked == 2;
}

static bool ingested(const struct gate *g)
{
	return g->ingested;
}

static void test_busy_query_pool_does_not_stall_writes(void **state)
{
	(void)state;
	struct gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct pool *query = pool_new("query", 2), *ingest = pool_new("ingest", 2);
	assert_non_null(query);
	assert_non_null(ingest);
	/* Six slow queries: two occupy both query threads, four wait in line. */
	for (int i = 0; i < 6; i++)
		pool_submit(query, slow_query, &g);
	assert_true(wait_for(&g, all_blocked));
	pool_submit(ingest, write_job, &g);
	assert_true(wait_for(&g, ingested));
	pthread_mutex_lock(&g.mu);
	assert_int_equal(g.finished, 0); /* every query still held */
	g.release = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.mu);
	pool_free(query); /* drains the queue */
	pool_free(ingest);
	assert_int_equal(g.finished, 6);
}

static void test_routes_split_writes_and_reads(void **state)
{
	(void)state;
	size_t writes = 0, queries = 0;
	for (size_t i = 0; i < server_n_grpc_methods; i++) {
		const struct grpc_method *m = &server_grpc_methods[i];
		if (strstr(m->path, "ProfileStoreService/") ||
		    strstr(m->path, "ProfilesService/")) {
			assert_int_equal(m->pool, POOL_INGEST);
			writes++;
		} else if (strstr(m->path, "QueryService/")) {
			assert_int_equal(m->pool, POOL_QUERY);
			queries++;
		}
	}
	assert_true(writes >= 1);
	assert_true(queries >= 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_busy_query_pool_does_not_stall_writes),
	    cmocka_unit_test(test_routes_split_writes_and_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
