/*
 * handlers_scrape.c — pull mode inside the server: the "scrape" extension
 * (loads --config-path, runs the scrape manager with the store as its ingest
 * target, reloads on SIGHUP) and the targets endpoints:
 * parca.scrape.v1alpha1.ScrapeService/Targets and GET /api/v1/targets.
 *
 * ${KILN_PORT} in a target is the server's own HTTP port (the shipped
 * kiln.yaml scrapes the server itself on whatever port it listens).
 *
 * SIGHUP: the server calls the extension's reload hook (server_reload, on
 * the accept thread). A config that does not load keeps the old one running
 * and the reason is logged; the targets that stay keep their delta
 * baselines and health (scrape_manager_apply).
 *
 * file_sd_configs and http_sd_configs run in src/scrape/discovery.c, which
 * re-applies the config with what it found whenever that changes; it asks
 * this file for the config as written (config_text: the file as read at
 * start or the last SIGHUP, so an edit without SIGHUP is not applied
 * behind the operator's back).
 *
 * When the server requires tokens, its scrapes of itself (a target at
 * 127.0.0.1, localhost or [::1] on the server's own port) send the server's
 * random internal token (server.c), so /debug/pprof/profile needs no token
 * in the config; no other target ever receives it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "parca/scrape/v1alpha1/scrape.pb-c.h"
#include "scrape/scrape.h"
#include "server/handlers.h"
#include "server/internal.h"
#include "store/store.h"

struct scrape_ext {
	struct server *srv;
	struct scrape_manager *manager;
	char *config_path;
	struct scrape_discovery *discovery;
	pthread_mutex_t text_mu; /* config_text: read by the discovery thread */
	struct buf config_text;
	char self_prefix[3][64]; /* "http://127.0.0.1:PORT/", ... */
	const char *self_prefixes[4];
	char self_authorization[80]; /* "Bearer <the server's internal token>" */
};

static int ingest_to_store(void *ctx, const struct label *labels, size_t n,
			   const struct pprof_profile *p, int64_t ts, bool delta,
			   struct kiln_error *err)
{
	struct scrape_ext *e = ctx;
	return store_write_profile(server_store(e->srv), labels, n, p, ts, delta, err);
}

/* Parses text with ${KILN_PORT} standing for the server's own HTTP port,
 * so that a config scraping the server itself follows --http-address. */
static int parse_config(struct server *s, const struct buf *text, const char *name,
			struct scrape_config **out, struct kiln_error *err)
{
	char port[16];
	int rc = scrape_config_parse((const char *)text->data, text->len, name, out, err);
	if (rc < 0)
		return rc;
	snprintf(port, sizeof(port), "%d", server_port(s));
	if ((rc = scrape_config_substitute(*out, "KILN_PORT", port, err)) < 0) {
		scrape_config_free(*out);
		*out = NULL;
	}
	return rc;
}

/* Reads the config file and parses it; on success its text becomes the
 * one discovery rebuilds from. */
static int load_config(struct scrape_ext *e, struct scrape_config **out, struct kiln_error *err)
{
	struct buf text = {0};
	int rc = buf_read_file(&text, e->config_path, 16u << 20);

	if (rc < 0) {
		buf_free(&text);
		return kiln_error_set(err, -rc, "%s: %s", e->config_path, strerror(-rc));
	}
	if ((rc = parse_config(e->srv, &text, e->config_path, out, err)) < 0) {
		buf_free(&text);
		return rc;
	}
	pthread_mutex_lock(&e->text_mu);
	buf_free(&e->config_text);
	e->config_text = text;
	pthread_mutex_unlock(&e->text_mu);
	return 0;
}

/* Discovery's loader: the config as last loaded. */
static int config_as_written(void *ctx, struct scrape_config **out, struct kiln_error *err)
{
	struct scrape_ext *e = ctx;
	int rc;

	pthread_mutex_lock(&e->text_mu);
	rc = parse_config(e->srv, &e->config_text, e->config_path, out, err);
	pthread_mutex_unlock(&e->text_mu);
	return rc;
}

void ext_scrape_reload(void *state)
{
	struct scrape_ext *e = state;
	struct kiln_error err = {0};
	struct scrape_config *cfg;
	if (load_config(e, &cfg, &err) < 0) {
		log_error("SIGHUP: config not reloaded, the old one stays in effect: %s", err.msg);
		return;
	}
	if (e->discovery) { /* it applies the new config with what it finds */
		scrape_config_free(cfg);
		scrape_discovery_reload(e->discovery);
		log_info("SIGHUP: reloaded %s", e->config_path);
		return;
	}
	if (scrape_manager_apply(e->manager, cfg, &err) < 0) {
		log_error("SIGHUP: config not reloaded, the old one stays in effect: %s", err.msg);
		scrape_config_free(cfg);
		return;
	}
	if (scrape_discovery_start(config_as_written, e, e->manager, &e->discovery, &err) < 0)
		log_error("SIGHUP: target discovery not started: %s", err.msg);
	log_info("SIGHUP: reloaded %s", e->config_path);
}

/* Fills the self-scrape prefixes and header when the server requires
 * tokens. */
static void set_self_auth(struct scrape_ext *e, struct scrape_manager_options *o)
{
	const char *tok = e->srv->self_token;
	static const char *const hosts[3] = {"127.0.0.1", "localhost", "[::1]"};

	if (!tok[0])
		return;
	for (size_t i = 0; i < 3; i++) {
		snprintf(e->self_prefix[i], sizeof(e->self_prefix[i]), "http://%s:%d/", hosts[i],
			 server_port(e->srv));
		e->self_prefixes[i] = e->self_prefix[i];
	}
	snprintf(e->self_authorization, sizeof(e->self_authorization), "Bearer %s", tok);
	o->self_url_prefixes = e->self_prefixes;
	o->self_authorization = e->self_authorization;
}

int ext_scrape_start(struct server *s, const char *config_path, void **state,
		     struct kiln_error *err)
{
	struct scrape_config *cfg = NULL;
	struct scrape_ext *e;
	int rc;

	*state = NULL;
	if (!config_path)
		return 0; /* no pull mode */

	/* One kept-alive connection per target (the scrape manager keeps up to
	 * half the descriptor limit): lift the soft limit to the hard one, as
	 * the Go runtime does for its programs. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!(e = calloc(1, sizeof(*e))) || !(e->config_path = strdup(config_path))) {
		free(e);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	e->srv = s;
	pthread_mutex_init(&e->text_mu, NULL);
	if ((rc = load_config(e, &cfg, err)) < 0) {
		ext_scrape_stop(e);
		return rc;
	}
	struct scrape_manager_options o = {
	    .ingest = ingest_to_store,
	    .ingest_ctx = e,
	    .max_body_bytes = server_config(s)->max_profile_inflate < (64u << 20)
				  ? server_config(s)->max_profile_inflate
				  : (64u << 20),
	};
	set_self_auth(e, &o);
	if ((rc = scrape_manager_new(&o, cfg, &e->manager, err)) < 0) {
		scrape_config_free(cfg);
		ext_scrape_stop(e);
		return rc;
	}
	/* file_sd / http_sd: the first round is applied before we return. */
	if ((rc = scrape_discovery_start(config_as_written, e, e->manager, &e->discovery, err)) <
	    0) {
		ext_scrape_stop(e);
		return rc;
	}
	*state = e;
	return 0;
}

void ext_scrape_stop(void *state)
{
	struct scrape_ext *e = state;
	if (!e)
		return;
	scrape_discovery_stop(e->discovery); /* it applies to the manager */
	scrape_manager_free(e->manager);
	pthread_mutex_destroy(&e->text_mu);
	buf_free(&e->config_text);
	free(e->config_path);
	free(e);
}

/* Prometheus lines for the scrape manager (nothing when pull mode is off).
 * CPU by phase: schedule_http (scheduling, libcurl, sockets), decode
 * (gunzip, parse, validate), delta (deltas, projections, queueing), queue
 * (the ingest thread outside the store) — together the pull-mode overhead —
 * and ingest (store_write_profile on the ingest thread). */
void ext_scrape_metrics(struct server *s, struct buf *out)
{
	struct scrape_ext *e = server_extension_state(s, "scrape");
	struct scrape_stats st;
	if (!e)
		return;
	scrape_manager_get_stats(e->manager, &st);
	uint64_t sched = st.scheduler_cpu_ns, dec = st.decode_cpu_ns, del = st.delta_cpu_ns;
	uint64_t http = sched > dec + del ? sched - dec - del : 0;
	uint64_t queue =
	    st.ingest_cpu_ns > st.callback_cpu_ns ? st.ingest_cpu_ns - st.callback_cpu_ns : 0;
	const struct {
		const char *phase;
		uint64_t ns;
	} phases[] = {{"schedule_http", http},
		      {"decode", dec},
		      {"delta", del},
		      {"queue", queue},
		      {"ingest", st.callback_cpu_ns}};
	buf_printf(out, "# HELP kiln_scrape_cpu_seconds_total Pull-mode thread CPU by phase "
			"(all but ingest is scrape overhead).\n"
			"# TYPE kiln_scrape_cpu_seconds_total counter\n");
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
		buf_printf(out, "kiln_scrape_cpu_seconds_total{phase=\"%s\"} %.6f\n",
			   phases[i].phase, (double)phases[i].ns / 1e9);
	const struct {
		const char *name, *type, *help;
		uint64_t v;
	} c[] = {
	    {"kiln_scrape_scrapes_total", "counter", "Scrapes finished.", st.scrapes},
	    {"kiln_scrape_errors_total", "counter", "Scrapes that failed.", st.scrape_errors},
	    {"kiln_scrape_bytes_total", "counter", "Response bytes fetched.", st.bytes_fetched},
	    {"kiln_scrape_profiles_ingested_total", "counter", "Profiles handed to the store.",
	     st.profiles_ingested},
	    {"kiln_scrape_ingest_errors_total", "counter", "Profiles the store refused.",
	     st.ingest_errors},
	    {"kiln_scrape_active_targets", "gauge", "Active scrape units (target x kind).",
	     st.active_units},
	    {"kiln_scrape_ingest_queued", "gauge", "Profiles waiting for the store.",
	     st.ingest_queued},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", c[i].name, c[i].help,
			   c[i].name, c[i].type, c[i].name, (unsigned long long)c[i].v);
	buf_printf(out,
		   "# HELP kiln_scrape_ingest_lag_seconds Scrape finished -> stored.\n"
		   "# TYPE kiln_scrape_ingest_lag_seconds summary\n"
		   "kiln_scrape_ingest_lag_seconds_sum %.6f\n"
		   "kiln_scrape_ingest_lag_seconds_count %llu\n",
		   (double)st.ingest_lag_ns_total / 1e9,
		   (unsigned long long)(st.profiles_ingested + st.ingest_errors));
}

/* Snapshot of the targets; empty when pull mode is off. */
static int snapshot(struct server *s, struct scrape_target_info **t, size_t *n)
{
	struct scrape_ext *e = server_extension_state(s, "scrape");
	*t = NULL;
	*n = 0;
	return e ? scrape_manager_targets(e->manager, t, n) : 0;
}

/* ---- GET /api/v1/targets ------------------------------------------------------ */

static void json_labels(struct json_writer *w, const struct scrape_labels *l)
{
	json_begin_object(w);
	for (size_t i = 0; i < l->n; i++) {
		json_key(w, l->v[i].name);
		json_string(w, l->v[i].value);
	}
	json_end_object(w);
}

static void json_targets(struct json_writer *w, const struct scrape_target_info *t, size_t n,
			 bool active)
{
	json_begin_array(w);
	for (size_t i = 0; i < n; i++) {
		if (t[i].active != active)
			continue;
		json_begin_object(w);
		json_key(w, "job");
		json_string(w, t[i].job);
		json_key(w, "url");
		json_string(w, t[i].url);
		json_key(w, "labels");
		json_labels(w, &t[i].labels);
		json_key(w, "discovered_labels");
		json_labels(w, &t[i].discovered);
		json_key(w, "health");
		json_string(w, scrape_health_name(t[i].health));
		json_key(w, "last_scrape");
		json_int(w, t[i].last_scrape_ms);
		json_key(w, "last_scrape_duration_ms");
		json_int(w, t[i].last_duration_ms);
		json_key(w, "last_error");
		json_string(w, t[i].last_error);
		json_end_object(w);
	}
	json_end_array(w);
}

void http_targets(const struct http_request *req, struct http_response *resp)
{
	const char *state = http_arg(req, "state");
	struct scrape_target_info *t;
	size_t n;
	struct json_writer w;

	if (!state || !*state)
		state = "any";
	if (strcmp(state, "active") && strcmp(state, "dropped") && strcmp(state, "any"))
		return http_error(resp, 400, -1, "state: \"%s\" is not active, dropped or any",
				  state);
	if (snapshot(req->srv, &t, &n) < 0)
		return http_error(resp, 500, -1, "out of memory");
	json_writer_init(&w, &resp->body);
	json_begin_object(&w);
	if (strcmp(state, "dropped") != 0) {
		json_key(&w, "active");
		json_targets(&w, t, n, true);
	}
	if (strcmp(state, "active") != 0) {
		json_key(&w, "dropped");
		json_targets(&w, t, n, false);
	}
	json_end_object(&w);
	scrape_targets_free(t, n);
	if (json_writer_error(&w))
		return http_error(resp, 500, -1, "out of memory writing the response");
	buf_append_str(&resp->body, "\n");
	resp->content_type = "application/json";
}

/* ---- ScrapeService/Targets ------------------------------------------------------ */

/* A LabelSet in one allocation (the set, its pointer array, its items);
 * strings point into l. Free with free(). */
static Parca__Profilestore__V1alpha1__LabelSet *proto_labels(const struct scrape_labels *l)
{
	struct block {
		Parca__Profilestore__V1alpha1__LabelSet set;
		Parca__Profilestore__V1alpha1__Label *ptrs[];
	} *b = calloc(1, sizeof(*b) + l->n * (sizeof(b->ptrs[0]) +
					      sizeof(Parca__Profilestore__V1alpha1__Label)));
	if (!b)
		return NULL;
	Parca__Profilestore__V1alpha1__Label *items = (void *)&b->ptrs[l->n];
	parca__profilestore__v1alpha1__label_set__init(&b->set);
	for (size_t i = 0; i < l->n; i++) {
		parca__profilestore__v1alpha1__label__init(&items[i]);
		items[i].name = (char *)l->v[i].name;
		items[i].value = (char *)l->v[i].value;
		b->ptrs[i] = &items[i];
	}
	b->set.labels = b->ptrs;
	b->set.n_labels = l->n;
	return &b->set;
}

static bool wanted(const struct scrape_target_info *t, int state)
{
	return state == 0 || (state == 1 && t->active) || (state == 2 && !t->active);
}

void rpc_scrape_targets(struct grpc_call *c)
{
	Parca__Scrape__V1alpha1__TargetsRequest *req =
	    parca__scrape__v1alpha1__targets_request__unpack(NULL, c->req_len, c->req);
	struct scrape_target_info *t = NULL;
	size_t n = 0;

	if (!req)
		return (void)grpc_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "malformed TargetsRequest");
	int state = req->state; /* 0 any, 1 active, 2 dropped */
	parca__scrape__v1alpha1__targets_request__free_unpacked(req, NULL);
	if (snapshot(c->srv, &t, &n) < 0)
		return (void)grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");

	Parca__Scrape__V1alpha1__Target *pt = calloc(n + 1, sizeof(*pt));
	Parca__Scrape__V1alpha1__Target **ptp = calloc(n + 1, sizeof(*ptp));
	Google__Protobuf__Timestamp *ts = calloc(n + 1, sizeof(*ts));
	Google__Protobuf__Duration *du = calloc(n + 1, sizeof(*du));
	Parca__Scrape__V1alpha1__TargetsResponse__TargetsEntry *entries =
	    calloc(n + 1, sizeof(*entries));
	Parca__Scrape__V1alpha1__TargetsResponse__TargetsEntry **entp =
	    calloc(n + 1, sizeof(*entp));
	Parca__Scrape__V1alpha1__Targets *groups = calloc(n + 1, sizeof(*groups));
	size_t n_entries = 0, k = 0;
	bool oom = !pt || !ptp || !ts || !du || !entries || !entp || !groups;

	/* The response is a map by job name: one entry per job, its targets
	 * contiguous in ptp. */
	for (size_t j = 0; !oom && j < n; j++) {
		if (!wanted(&t[j], state))
			continue;
		bool seen = false;
		for (size_t g = 0; g < n_entries && !seen; g++)
			seen = strcmp(entries[g].key, t[j].job) == 0;
		if (seen)
			continue;
		size_t g = n_entries++;
		parca__scrape__v1alpha1__targets_response__targets_entry__init(&entries[g]);
		parca__scrape__v1alpha1__targets__init(&groups[g]);
		entries[g].key = t[j].job;
		entries[g].value = &groups[g];
		entp[g] = &entries[g];
		groups[g].targets = &ptp[k];
		for (size_t i = j; i < n && !oom; i++) {
			if (!wanted(&t[i], state) || strcmp(t[i].job, t[j].job) != 0)
				continue;
			Parca__Scrape__V1alpha1__Target *x = &pt[k];
			parca__scrape__v1alpha1__target__init(x);
			google__protobuf__timestamp__init(&ts[k]);
			google__protobuf__duration__init(&du[k]);
			ts[k].seconds = t[i].last_scrape_ms / 1000;
			ts[k].nanos = (int32_t)(t[i].last_scrape_ms % 1000) * 1000000;
			du[k].seconds = t[i].last_duration_ms / 1000;
			du[k].nanos = (int32_t)(t[i].last_duration_ms % 1000) * 1000000;
			x->last_scrape = &ts[k];
			x->last_scrape_duration = &du[k];
			x->url = t[i].url;
			x->last_error = t[i].last_error;
			x->health =
			    t[i].health == SCRAPE_HEALTH_UP
				? PARCA__SCRAPE__V1ALPHA1__TARGET__HEALTH__HEALTH_GOOD
			    : t[i].health == SCRAPE_HEALTH_DOWN
				? PARCA__SCRAPE__V1ALPHA1__TARGET__HEALTH__HEALTH_BAD
				: PARCA__SCRAPE__V1ALPHA1__TARGET__HEALTH__HEALTH_UNKNOWN_UNSPECIFIED;
			x->labels = proto_labels(&t[i].labels);
			x->discovered_labels = proto_labels(&t[i].discovered);
			oom = !x->labels || !x->discovered_labels;
			ptp[k++] = x;
			groups[g].n_targets++;
		}
	}
	if (oom) {
		grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	} else {
		Parca__Scrape__V1alpha1__TargetsResponse resp =
		    PARCA__SCRAPE__V1ALPHA1__TARGETS_RESPONSE__INIT;
		resp.n_targets = n_entries;
		resp.targets = entp;
		size_t len = protobuf_c_message_get_packed_size(&resp.base);
		if (buf_reserve(&c->resp, len) < 0)
			grpc_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		else
			c->resp.len = protobuf_c_message_pack(&resp.base, c->resp.data);
	}
	for (size_t i = 0; pt && i < k; i++) {
		free(pt[i].labels);
		free(pt[i].discovered_labels);
	}
	free(pt);
	free(ptp);
	free(ts);
	free(du);
	free(entries);
	free(entp);
	free(groups);
	scrape_targets_free(t, n);
}
