/*
 * relabel.c — Prometheus relabeling on target label sets.
 *
 * Semantics follow Prometheus' relabel package: source label values joined
 * with the separator are matched against the regex anchored at both ends;
 * `replace` expands $1 / ${1} / ${name} in the replacement and sets
 * target_label (itself expanded) or, when the result is empty, deletes it;
 * a regex that does not match leaves the set unchanged. `hashmod` stores
 * md5(joined) mod modulus (the last 8 bytes of the digest, big-endian, as
 * Prometheus does, so shards agree with Prometheus-sharded setups).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labels.h"
#include "scrape/scrape.h"

int relabel_compile(struct relabel_config *rc, struct kiln_error *err)
{
	struct buf pat;
	int errcode;
	PCRE2_SIZE erroff;

	buf_init(&pat);
	if (buf_printf(&pat, "^(?:%s)$", rc->regex) < 0) {
		buf_free(&pat);
		return kiln_error_set(err, ENOMEM, "out of memory");
	}
	pcre2_code *re = pcre2_compile(pat.data, pat.len, PCRE2_UTF, &errcode, &erroff, NULL);
	buf_free(&pat);
	if (!re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(errcode, msg, sizeof(msg));
		/* erroff counts the "^(?:" prefix that we added. */
		size_t off = erroff >= 4 ? erroff - 4 : 0;
		return kiln_error_set(err, EINVAL, "regex \"%s\": %s at offset %zu", rc->regex,
				      (char *)msg, off);
	}
	rc->compiled = re;
	return 0;
}

void relabel_release(struct relabel_config *rc)
{
	pcre2_code_free(rc->compiled);
	rc->compiled = NULL;
}

/* Matches s; on success returns match data (caller frees), else NULL. */
static pcre2_match_data *match(const struct relabel_config *rc, const char *s)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(rc->compiled, NULL);
	if (!md)
		return NULL;
	if (pcre2_match(rc->compiled, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL) < 0) {
		pcre2_match_data_free(md);
		return NULL;
	}
	return md;
}

/* Expands $1, ${1}, $name, ${name} and $$ the way Go's Regexp.Expand does
 * (a name is the longest run of letters, digits and '_'; a missing group
 * expands to nothing). */
static int expand(const struct relabel_config *rc, pcre2_match_data *md, const char *subject,
		  const char *tmpl, struct buf *out)
{
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
	uint32_t ngroups = pcre2_get_ovector_count(md);
	int rc_ = 0;

	buf_reset(out);
	for (const char *p = tmpl; *p && rc_ == 0;) {
		if (*p != '$') {
			rc_ = buf_append(out, p++, 1);
			continue;
		}
		p++;
		if (*p == '$') {
			rc_ = buf_append(out, p++, 1);
			continue;
		}
		char name[64];
		size_t n = 0;
		bool braced = *p == '{';
		const char *q = braced ? p + 1 : p;
		while ((isalnum((unsigned char)*q) || *q == '_') && n < sizeof(name) - 1)
			name[n++] = *q++;
		name[n] = 0;
		if (n == 0 || (braced && *q != '}')) {
			rc_ = buf_append(out, "$", 1); /* not a reference: literal */
			continue;
		}
		p = braced ? q + 1 : q;
		int group = -1;
		bool numeric = true;
		for (size_t i = 0; i < n; i++)
			numeric = numeric && isdigit((unsigned char)name[i]);
		if (numeric)
			group = n < 6 ? atoi(name) : -1;
		else
			group = pcre2_substring_number_from_name(rc->compiled, (PCRE2_SPTR)name);
		if (group < 0 || (uint32_t)group >= ngroups || ov[2 * group] == PCRE2_UNSET)
			continue;
		rc_ = buf_append(out, subject + ov[2 * group], ov[2 * group + 1] - ov[2 * group]);
	}
	if (rc_ == 0)
		rc_ = buf_terminate(out);
	return rc_;
}

static int join_sources(const struct relabel_config *rc, const struct scrape_labels *l,
			struct buf *out)
{
	int r = 0;
	buf_reset(out);
	for (size_t i = 0; i < rc->n_source_labels && r == 0; i++) {
		const char *v = scrape_labels_get(l, rc->source_labels[i]);
		if (i)
			r = buf_append_str(out, rc->separator);
		if (r == 0)
			r = buf_append_str(out, v ? v : "");
	}
	return r ? r : buf_terminate(out);
}

static int apply_one(const struct relabel_config *rc, struct scrape_labels *l, struct buf *val,
		     struct buf *tmp, struct buf *tmp2)
{
	pcre2_match_data *md;
	int r = join_sources(rc, l, val);
	if (r < 0)
		return r;
	const char *v = val->len ? (const char *)val->data : "";

	switch (rc->action) {
	case RELABEL_KEEP:
	case RELABEL_DROP:
		md = match(rc, v);
		pcre2_match_data_free(md);
		return (md != NULL) == (rc->action == RELABEL_KEEP);
	case RELABEL_REPLACE:
		if (!(md = match(rc, v)))
			return 1;
		r = expand(rc, md, v, rc->target_label, tmp);
		if (r == 0)
			r = expand(rc, md, v, rc->replacement, tmp2);
		pcre2_match_data_free(md);
		if (r < 0)
			return r;
		if (!tmp->len || !label_name_valid((const char *)tmp->data))
			return 1;
		r = scrape_labels_set(l, (const char *)tmp->data,
				      tmp2->len ? (const char *)tmp2->data : NULL);
		return r < 0 ? r : 1;
	case RELABEL_LOWERCASE:
	case RELABEL_UPPERCASE: {
		for (size_t i = 0; i < val->len; i++)
			val->data[i] = rc->action == RELABEL_LOWERCASE ? tolower(val->data[i])
								       : toupper(val->data[i]);
		r = scrape_labels_set(l, rc->target_label,
				      val->len ? (const char *)val->data : NULL);
		return r < 0 ? r : 1;
	}
	case RELABEL_HASHMOD: {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned int dl = 0;
		char num[32];
		if (!EVP_Digest(val->data ? val->data : (unsigned char *)"", val->len, d, &dl,
				EVP_md5(), NULL) ||
		    dl != 16)
			return -EIO;
		uint64_t h = 0;
		for (int i = 8; i < 16; i++)
			h = h << 8 | d[i];
		snprintf(num, sizeof(num), "%llu", (unsigned long long)(h % rc->modulus));
		r = scrape_labels_set(l, rc->target_label, num);
		return r < 0 ? r : 1;
	}
	case RELABEL_LABELMAP: {
		/* Iterate over a snapshot: adding labels must not feed back. */
		struct scrape_labels snap;
		if (scrape_labels_copy(&snap, l) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < snap.n && r == 0; i++) {
			if (!(md = match(rc, snap.v[i].name)))
				continue;
			r = expand(rc, md, snap.v[i].name, rc->replacement, tmp);
			pcre2_match_data_free(md);
			if (r == 0 && tmp->len && label_name_valid((const char *)tmp->data))
				r = scrape_labels_set(l, (const char *)tmp->data, snap.v[i].value);
		}
		scrape_labels_free(&snap);
		return r < 0 ? r : 1;
	}
	case RELABEL_LABELDROP:
	case RELABEL_LABELKEEP:
		for (size_t i = 0; i < l->n;) {
			md = match(rc, l->v[i].name);
			bool matched = md != NULL;
			pcre2_match_data_free(md);
			if (matched == (rc->action == RELABEL_LABELDROP)) {
				r = scrape_labels_set(l, l->v[i].name, NULL);
				if (r < 0)
					return r;
				continue; /* the last label moved into slot i */
			}
			i++;
		}
		return 1;
	}
	return 1;
}

int relabel_apply(const struct relabel_config *rules, size_t n, struct scrape_labels *l)
{
	struct buf val, tmp, tmp2;
	int r = 1;

	buf_init(&val);
	buf_init(&tmp);
	buf_init(&tmp2);
	for (size_t i = 0; i < n && r == 1; i++)
		r = apply_one(&rules[i], l, &val, &tmp, &tmp2);
	buf_free(&val);
	buf_free(&tmp);
	buf_free(&tmp2);
	return r;
}
