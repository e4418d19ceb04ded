/*
 * test_conn_limits.c — the connection table (conn_limits.c): a client
 * address past its limit is refused; at the total limit the connection idle
 * the longest is closed (shut down: its peer sees EOF) to make room, or
 * one whose body trickles in, and a newcomer is refused only when none is; the reaper closes
 * libmicrohttpd's connections that stay idle past the header timeout or
 * whose body is too slow; the in-flight budget never overcommits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/internal.h"

struct pair {
	int server, peer;
};

static struct pair new_pair(void)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	return (struct pair){sv[0], sv[1]};
}

/* Whether the table shut the server side down: the peer reads EOF. */
static bool was_shut(struct pair p)
{
	char c;
	return recv(p.peer, &c, 1, MSG_DONTWAIT) == 0;
}

static struct sockaddr_storage addr4(const char *ip)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;
	a->sin_family = AF_INET;
	inet_pton(AF_INET, ip, &a->sin_addr);
	return ss;
}

static void close_pair(struct pair p)
{
	close(p.server);
	close(p.peer);
}

static void test_per_client_and_eviction(void **state)
{
	struct server_config cfg;
	server_config_defaults(&cfg);
	cfg.max_connections = 4;
	cfg.max_connections_per_client = 2;
	struct conn_table *t = conn_table_new(&cfg);
	struct sockaddr_storage a = addr4("10.0.0.1"), b = addr4("10.0.0.2"), c = addr4("10.0.0.3");
	struct pair p[8];
	struct conn_entry *e[8];
	uint64_t evicted = 0;
	char why[160];

	for (int i = 0; i < 8; i++)
		p[i] = new_pair();
	/* Two from a, the third refused. */
	e[0] = conn_table_admit(t, p[0].server, &a, &evicted, why, sizeof(why));
	e[1] = conn_table_admit(t, p[1].server, &a, &evicted, why, sizeof(why));
	assert_non_null(e[0]);
	assert_non_null(e[1]);
	assert_null(conn_table_admit(t, p[2].server, &a, &evicted, why, sizeof(why)));
	assert_non_null(strstr(why, "--max-connections-per-client"));
	/* Two from b fill the table; e[0] is the idlest, but busy. */
	conn_entry_set_busy(e[0], true);
	usleep(2000);
	e[3] = conn_table_admit(t, p[3].server, &b, &evicted, why, sizeof(why));
	e[4] = conn_table_admit(t, p[4].server, &b, &evicted, why, sizeof(why));
	assert_non_null(e[3]);
	assert_non_null(e[4]);
	assert_int_equal(evicted, 0);
	usleep(1100000);
	/* Full: c gets in by closing the one idle the longest (e[1]). */
	e[5] = conn_table_admit(t, p[5].server, &c, &evicted, why, sizeof(why));
	assert_non_null(e[5]);
	assert_int_equal(evicted, 1);
	assert_true(was_shut(p[1]));
	assert_false(was_shut(p[0]));
	assert_false(was_shut(p[3]));
	/* Every live one busy: the next newcomer is refused... */
	for (int i = 3; i <= 5; i++)
		conn_entry_set_busy(e[i], true);
	assert_null(conn_table_admit(t, p[6].server, &c, &evicted, why, sizeof(why)));
	assert_non_null(strstr(why, "--max-connections"));
	/* ... unless one's body has been trickling in for seconds: it goes.
	 * A fast upload stays. */
	conn_entry_body_progress(e[3], mono_ns() - 3000000000LL, 10);
	conn_entry_body_progress(e[4], mono_ns() - 3000000000LL, 100 << 20);
	e[6] = conn_table_admit(t, p[6].server, &c, &evicted, why, sizeof(why));
	assert_non_null(e[6]);
	assert_int_equal(evicted, 2);
	assert_true(was_shut(p[3]));
	assert_false(was_shut(p[4]));
	/* An evicted connection still closing is still in the table. */
	assert_int_equal(conn_table_count(t), 6);
	for (int i = 0; i <= 6; i++)
		if (i != 2)
			conn_table_remove(t, e[i]);
	assert_int_equal(conn_table_count(t), 0);
	for (int i = 0; i < 8; i++)
		close_pair(p[i]);
	conn_table_free(t);
}

static void test_reap_idle_and_slow_mhd(void **state)
{
	struct server_config cfg;
	server_config_defaults(&cfg);
	cfg.header_timeout_s = 1;
	cfg.body_min_rate = 1000;
	struct conn_table *t = conn_table_new(&cfg);
	struct sockaddr_storage a = addr4("10.0.0.1");
	struct pair idle = new_pair(), slow = new_pair(), h2 = new_pair(), fast = new_pair();
	uint64_t ev = 0;
	char why[160];
	struct conn_entry *ei = conn_table_admit(t, idle.server, &a, &ev, why, sizeof(why));
	struct conn_entry *es = conn_table_admit(t, slow.server, &a, &ev, why, sizeof(why));
	struct conn_entry *eh = conn_table_admit(t, h2.server, &a, &ev, why, sizeof(why));
	struct conn_entry *ef = conn_table_admit(t, fast.server, &a, &ev, why, sizeof(why));

	/* Three go to libmicrohttpd; the HTTP/2 one stays its thread's. */
	conn_entry_set_mhd_fd(t, ei, idle.server, true);
	conn_entry_set_mhd_fd(t, es, slow.server, true);
	conn_entry_set_mhd_fd(t, ef, fast.server, true);
	assert_ptr_equal(conn_table_mhd_started(t, idle.server), ei);
	assert_ptr_equal(conn_table_mhd_started(t, slow.server), es);
	assert_ptr_equal(conn_table_mhd_started(t, fast.server), ef);
	int64_t now = mono_ns();
	conn_entry_set_busy(es, true);
	conn_entry_set_busy(ef, true);
	conn_entry_body_progress(es, now, 10);
	conn_entry_body_progress(ef, now, 100000);
	/* Within the header timeout nothing is reaped. */
	assert_int_equal(conn_table_reap(t, now + 500000000LL), 0);
	/* 3 s on: the idle one (past 1 s) and the slow body (10 bytes in 2 s
	 * past the grace, under 1000/s) go; the fast body and HTTP/2 stay. */
	assert_int_equal(conn_table_reap(t, now + 3000000000LL), 2);
	assert_true(was_shut(idle));
	assert_true(was_shut(slow));
	assert_false(was_shut(fast));
	assert_false(was_shut(h2));
	conn_table_mhd_closed(t, ei);
	conn_table_mhd_closed(t, es);
	conn_table_mhd_closed(t, ef);
	conn_table_remove(t, eh);
	assert_int_equal(conn_table_count(t), 0);
	close_pair(idle);
	close_pair(slow);
	close_pair(h2);
	close_pair(fast);
	conn_table_free(t);
}

static void test_inflight_budget(void **state)
{
	_Atomic uint64_t used = 0;
	assert_true(inflight_reserve(&used, 100, 60));
	assert_false(inflight_reserve(&used, 100, 41));
	assert_true(inflight_reserve(&used, 100, 40));
	assert_false(inflight_reserve(&used, 100, UINT64_MAX));
	inflight_release(&used, 60);
	assert_true(inflight_reserve(&used, 100, 60));
	inflight_release(&used, 100);
	assert_int_equal(atomic_load(&used), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_per_client_and_eviction),
	    cmocka_unit_test(test_reap_idle_and_slow_mhd),
	    cmocka_unit_test(test_inflight_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
