/*
 * targets.c — from a config to scrape units: one per static target and
 * enabled profile kind, labeled and relabeled the way Parca does it (see
 * scrape.h), with the final URL and an identity key that survives reloads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"
#include "scrape/scrape_internal.h"

void scrape_unit_free(struct scrape_unit *u)
{
	if (!u)
		return;
	free(u->key);
	free(u->job);
	free(u->url);
	scrape_labels_free(&u->labels);
	scrape_labels_free(&u->discovered);
	if (u->easy)
		curl_easy_cleanup(u->easy);
	buf_free(&u->body);
	scrape_baseline_free(u->base);
	if (u->ht)
		http_target_release(u->ht);
	free(u->ht);
	http_response_release(&u->resp);
	if (u->conn_open) /* the manager forgets it first (http_forget) */
		close(u->fd);
	free(u);
}

static enum unit_kind kind_of(const struct pprof_endpoint_config *e)
{
	if (e->delta)
		return UNIT_REMOTE_DELTA;
	if (!strcmp(e->name, "memory") || !strcmp(e->name, "block") || !strcmp(e->name, "mutex"))
		return UNIT_CUMULATIVE;
	return UNIT_GAUGE;
}

/* host:port, adding the scheme's port when there is none. */
static int with_port(const char *addr, const char *scheme, struct buf *out)
{
	const char *colon = strrchr(addr, ':');
	const char *bracket = strrchr(addr, ']');
	bool has_port = colon && (!bracket || colon > bracket) &&
			(addr[0] == '[' || strchr(addr, ':') == colon);
	buf_reset(out);
	int rc = buf_append_str(out, addr);
	if (rc == 0 && !has_port)
		rc = buf_append_str(out, strcmp(scheme, "https") == 0 ? ":443" : ":80");
	return rc ? rc : buf_terminate(out);
}

static int build_url(const struct scrape_job_config *j, const struct pprof_endpoint_config *e,
		     const struct scrape_labels *l, struct buf *url)
{
	const char *scheme = scrape_labels_get(l, "__scheme__");
	const char *addr = scrape_labels_get(l, "__address__");
	const char *path = scrape_labels_get(l, "__profile_path__");
	char sep = '?';
	int rc;

	buf_reset(url);
	rc = buf_printf(url, "%s://%s%s", scheme ? scheme : j->scheme, addr, path ? path : e->path);
	for (size_t i = 0; i < l->n && rc == 0; i++) {
		if (strncmp(l->v[i].name, "__param_", 8) != 0)
			continue;
		char *esc = curl_easy_escape(NULL, l->v[i].value, 0);
		if (!esc)
			return -ENOMEM;
		rc = buf_printf(url, "%c%s=%s", sep, l->v[i].name + 8, esc);
		curl_free(esc);
		sep = '&';
	}
	if (rc == 0 && e->delta)
		rc = buf_printf(url, "%cseconds=%lld", sep,
				(long long)(e->seconds ? e->seconds : j->interval_ms / 1000));
	return rc ? rc : buf_terminate(url);
}

static int build_one(const struct scrape_job_config *j, const struct static_config *s,
		     const char *target, const struct pprof_endpoint_config *e,
		     struct scrape_unit **out, struct kiln_error *err)
{
	struct scrape_unit *u = calloc(1, sizeof(*u));
	struct scrape_labels l = {0};
	struct buf tmp, path;
	int rc = -ENOMEM;

	buf_init(&tmp);
	buf_init(&path);
	*out = NULL;
	if (!u)
		goto out;
	/* Discovered labels: target, static labels, then what the job adds. */
	if (scrape_labels_set(&l, "__address__", target) < 0)
		goto out;
	for (size_t i = 0; i < s->labels.n; i++)
		if (scrape_labels_set(&l, s->labels.v[i].name, s->labels.v[i].value) < 0)
			goto out;
	if (!scrape_labels_get(&l, "job") && scrape_labels_set(&l, "job", j->job_name) < 0)
		goto out;
	if (scrape_labels_set(&l, "__scheme__", j->scheme) < 0 ||
	    scrape_labels_set(&l, "__name__", e->name) < 0)
		goto out;
	if (buf_printf(&path, "%s%s", j->path_prefix ? j->path_prefix : "", e->path) < 0 ||
	    buf_terminate(&path) < 0)
		goto out;
	/* "/prefix/" + "/debug/..." must not give "//". */
	char *p = (char *)path.data;
	for (char *q = p; *q; q++)
		if (q[0] == '/' && q[1] == '/')
			memmove(q, q + 1, strlen(q));
	if (scrape_labels_set(&l, "__profile_path__", p) < 0)
		goto out;
	for (size_t i = 0; i < j->params.n; i++) {
		if (buf_printf(&tmp, "__param_%s", j->params.v[i].name) < 0 ||
		    buf_terminate(&tmp) < 0 ||
		    scrape_labels_set(&l, (char *)tmp.data, j->params.v[i].value) < 0)
			goto out;
		buf_reset(&tmp);
	}
	if (scrape_labels_copy(&u->discovered, &l) < 0)
		goto out;
	scrape_labels_sort(&u->discovered);
	if (!(u->job = strdup(j->job_name)))
		goto out;
	u->ep = e;
	u->kind = kind_of(e);
	u->interval_ms = j->interval_ms;
	u->timeout_ms = j->timeout_ms;
	u->health = SCRAPE_HEALTH_UNKNOWN;

	rc = relabel_apply(j->relabel, j->n_relabel, &l);
	if (rc < 0)
		goto out;
	u->active = rc == 1 && scrape_labels_get(&l, "__address__");
	if (!u->active) {
		/* Dropped: listed with its discovered labels only. */
		if (build_url(j, e, &u->discovered, &tmp) < 0 ||
		    !(u->url = strdup((char *)tmp.data)))
			goto nomem;
	} else {
		const char *scheme = scrape_labels_get(&l, "__scheme__");
		if (with_port(scrape_labels_get(&l, "__address__"), scheme ? scheme : j->scheme,
			      &tmp) < 0 ||
		    scrape_labels_set(&l, "__address__", (char *)tmp.data) < 0)
			goto nomem;
		if (!scrape_labels_get(&l, "instance") &&
		    scrape_labels_set(&l, "instance", scrape_labels_get(&l, "__address__")) < 0)
			goto nomem;
		if (build_url(j, e, &l, &tmp) < 0 || !(u->url = strdup((char *)tmp.data)))
			goto nomem;
		for (size_t i = 0; i < l.n; i++) {
			const char *n = l.v[i].name;
			if (n[0] == '_' && n[1] == '_' && strcmp(n, "__name__") != 0)
				continue;
			if (scrape_labels_set(&u->labels, n, l.v[i].value) < 0)
				goto nomem;
		}
		if (!scrape_labels_get(&u->labels, "__name__")) {
			rc = kiln_error_set(err, EINVAL,
					    "job %s, target %s: relabeling removed __name__",
					    j->job_name, target);
			goto out;
		}
		scrape_labels_sort(&u->labels);
	}
	buf_reset(&tmp);
	if (buf_printf(&tmp, "%s\n%s\n%d\n", u->job, u->url, u->active) < 0 ||
	    scrape_labels_format(u->active ? &u->labels : &u->discovered, &tmp) < 0 ||
	    buf_terminate(&tmp) < 0 || !(u->key = strdup((char *)tmp.data)))
		goto nomem;
	*out = u;
	u = NULL;
	rc = 0;
	goto out;
nomem:
	rc = -ENOMEM;
out:
	if (rc == -ENOMEM)
		kiln_error_set(err, ENOMEM, "building scrape targets: out of memory");
	scrape_unit_free(u);
	scrape_labels_free(&l);
	buf_free(&tmp);
	buf_free(&path);
	return rc;
}

static int unit_cmp(const void *a, const void *b)
{
	const struct scrape_unit *x = *(struct scrape_unit *const *)a;
	const struct scrape_unit *y = *(struct scrape_unit *const *)b;
	if (x->active != y->active)
		return x->active ? -1 : 1;
	int c = strcmp(x->job, y->job);
	return c ? c : strcmp(x->key, y->key);
}

int scrape_units_build(const struct scrape_config *cfg, struct scrape_unit ***out, size_t *n,
		       struct kiln_error *err)
{
	struct scrape_unit **v = NULL;
	size_t cnt = 0, cap = 0;
	int rc = 0;

	for (size_t ji = 0; cfg && ji < cfg->n_jobs && rc == 0; ji++) {
		const struct scrape_job_config *j = &cfg->jobs[ji];
		for (size_t si = 0; si < j->n_static_configs && rc == 0; si++) {
			const struct static_config *s = &j->static_configs[si];
			for (size_t ti = 0; ti < s->n_targets && rc == 0; ti++) {
				for (size_t ei = 0; ei < j->n_endpoints && rc == 0; ei++) {
					struct scrape_unit *u;
					if (!j->endpoints[ei].enabled)
						continue;
					rc = build_one(j, s, s->targets[ti], &j->endpoints[ei], &u,
						       err);
					if (rc < 0)
						break;
					if (GROW_ARRAY(v, cap, cnt + 1, 16)) {
						scrape_unit_free(u);
						rc = kiln_error_set(err, ENOMEM, "out of memory");
						break;
					}
					v[cnt++] = u;
				}
			}
		}
	}
	if (rc < 0) {
		for (size_t i = 0; i < cnt; i++)
			scrape_unit_free(v[i]);
		free(v);
		return rc;
	}
	if (cnt > 1)
		qsort(v, cnt, sizeof(*v), unit_cmp);
	/* The same target listed twice would be scraped twice: keep one. */
	size_t w = 0;
	for (size_t i = 0; i < cnt; i++) {
		if (w > 0 && strcmp(v[w - 1]->key, v[i]->key) == 0) {
			scrape_unit_free(v[i]);
			continue;
		}
		v[w++] = v[i];
	}
	*out = v;
	*n = w;
	return 0;
}
