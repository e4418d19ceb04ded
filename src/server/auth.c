/*
 * auth.c — the tokens file and the per-request check (contract: auth.h).
 *
 * The checker holds the current token set behind a read-write lock: every
 * request takes it shared for one pass over the digests, a reload builds the
 * new set outside the lock and swaps the pointer under it exclusively, then
 * frees the old one. Internal tokens (the server's own self-scrape) live in a
 * second set that reloads never touch.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/grow.h"
#include "common/buf.h"
#include "common/log.h"
#include "server/auth.h"

#define TOKENS_FILE_MAX (1u << 20)

const char *auth_role_name(enum auth_role r)
{
	switch (r) {
	case AUTH_OPEN:
		return "open";
	case AUTH_READ:
		return "read";
	case AUTH_WRITE:
		return "write";
	case AUTH_ADMIN:
		return "admin";
	case AUTH_METRICS:
		return "metrics";
	}
	return "?";
}

static void digest_of(const char *token, size_t len, unsigned char out[AUTH_DIGEST_LEN])
{
	unsigned int n = AUTH_DIGEST_LEN;

	if (EVP_Digest(token, len, out, &n, EVP_sha256(), NULL) != 1)
		memset(out, 0, AUTH_DIGEST_LEN); /* matches nothing: no token has this digest */
}

static void fingerprint_of(const unsigned char digest[AUTH_DIGEST_LEN], char out[9])
{
	snprintf(out, 9, "%02x%02x%02x%02x", digest[0], digest[1], digest[2], digest[3]);
}

/* RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

/* Returns NULL when tok[0..len) is a valid token, else what is wrong. */
static const char *token_problem(const char *tok, size_t len)
{
	size_t i = 0;

	while (i < len && token_char(tok[i]))
		i++;
	if (i == 0)
		return "the token must start with a letter, digit or one of - . _ ~ + /";
	while (i < len && tok[i] == '=')
		i++;
	if (i < len)
		return "the token holds a character outside letters, digits, - . _ ~ + / "
		       "and trailing =";
	if (len < AUTH_TOKEN_MIN)
		return "the token is shorter than 16 characters (use e.g. `openssl rand -hex 24`)";
	if (len > AUTH_TOKEN_MAX)
		return "the token is longer than 256 characters";
	return NULL;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static int tokens_add(struct auth_tokens *t, size_t *cap, const char *tok, size_t len,
		      enum auth_role role, int line)
{
	if (GROW_ARRAY(t->v, *cap, t->n + 1, 8))
		return -ENOMEM;
	struct auth_token *e = &t->v[t->n++];
	digest_of(tok, len, e->digest);
	fingerprint_of(e->digest, e->fingerprint);
	e->role = role;
	e->line = line;
	return 0;
}

int auth_tokens_parse(const char *text, size_t len, const char *name, struct auth_tokens **out,
		      struct kiln_error *err)
{
	struct auth_tokens *t = calloc(1, sizeof(*t));
	size_t cap = 0, pos = 0;
	int line = 0, rc = 0;

	*out = NULL;
	if (!t)
		return kiln_error_set(err, ENOMEM, "out of memory");
	if (memchr(text, '\0', len)) {
		rc = kiln_error_set(err, EINVAL, "%s: holds a NUL byte: not a tokens file", name);
		goto fail;
	}
	while (pos < len) {
		const char *l = text + pos, *nl = memchr(l, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - l) : len - pos;
		size_t i = 0, role_at, role_len, tok_at, tok_len;
		enum auth_role role;

		pos += ll + (nl ? 1 : 0);
		line++;
		while (i < ll && is_blank(l[i]))
			i++;
		if (i == ll || l[i] == '#')
			continue;
		/* ROLE */
		role_at = i;
		while (i < ll && !is_blank(l[i]))
			i++;
		role_len = i - role_at;
		if (role_len == 4 && strncmp(l + role_at, "read", 4) == 0)
			role = AUTH_READ;
		else if (role_len == 5 && strncmp(l + role_at, "write", 5) == 0)
			role = AUTH_WRITE;
		else if (role_len == 5 && strncmp(l + role_at, "admin", 5) == 0)
			role = AUTH_ADMIN;
		else {
			rc = kiln_error_set(err, EINVAL,
					    "%s:%d: unknown role \"%.*s\": expected read, write "
					    "or admin, then the token (ROLE TOKEN)",
					    name, line, (int)(role_len > 40 ? 40 : role_len),
					    l + role_at);
			goto fail;
		}
		/* TOKEN */
		while (i < ll && is_blank(l[i]))
			i++;
		tok_at = i;
		while (i < ll && !is_blank(l[i]))
			i++;
		tok_len = i - tok_at;
		if (tok_len == 0) {
			rc = kiln_error_set(err, EINVAL,
					    "%s:%d: role %s without a token (expected ROLE TOKEN)",
					    name, line, auth_role_name(role));
			goto fail;
		}
		const char *problem = token_problem(l + tok_at, tok_len);
		if (problem) {
			rc = kiln_error_set(err, EINVAL, "%s:%d: %s", name, line, problem);
			goto fail;
		}
		while (i < ll && is_blank(l[i]))
			i++;
		if (i < ll) {
			rc = kiln_error_set(err, EINVAL,
					    "%s:%d: unexpected text after the token (expected "
					    "ROLE TOKEN; comments go on lines of their own)",
					    name, line);
			goto fail;
		}
		if ((rc = tokens_add(t, &cap, l + tok_at, tok_len, role, line)) < 0) {
			kiln_error_set(err, ENOMEM, "out of memory");
			goto fail;
		}
		const struct auth_token *e = &t->v[t->n - 1];
		for (size_t k = 0; k + 1 < t->n; k++) {
			if (memcmp(t->v[k].digest, e->digest, AUTH_DIGEST_LEN) == 0) {
				rc = kiln_error_set(err, EINVAL,
						    "%s:%d: the same token as on line %d (one "
						    "role per token)",
						    name, line, t->v[k].line);
				goto fail;
			}
		}
	}
	if (t->n == 0) {
		rc = kiln_error_set(err, EINVAL,
				    "%s: no tokens (expected lines of ROLE TOKEN, ROLE one of "
				    "read, write, admin)",
				    name);
		goto fail;
	}
	*out = t;
	return 0;
fail:
	auth_tokens_free(t);
	return rc < 0 ? rc : -EINVAL;
}

int auth_tokens_load(const char *path, struct auth_tokens **out, struct kiln_error *err)
{
	struct buf b = {0};
	struct stat st;
	int rc;

	*out = NULL;
	rc = buf_read_file(&b, path, TOKENS_FILE_MAX);
	if (rc < 0) {
		buf_free(&b);
		return kiln_error_set(err, -rc, "%s: %s", path,
				      rc == -EFBIG ? "larger than 1 MiB" : strerror(-rc));
	}
	rc = auth_tokens_parse(b.len ? (const char *)b.data : "", b.len, path, out, err);
	/* The secrets are hashed; wipe the copy of the file. */
	if (b.data)
		OPENSSL_cleanse(b.data, b.len);
	buf_free(&b);
	if (rc == 0 && stat(path, &st) == 0 && (st.st_mode & 0077))
		log_warn("auth: %s is readable by other users (mode %03o); chmod 600 it", path,
			 (unsigned)(st.st_mode & 0777));
	return rc;
}

void auth_tokens_free(struct auth_tokens *t)
{
	if (!t)
		return;
	if (t->v)
		OPENSSL_cleanse(t->v, t->n * sizeof(*t->v));
	free(t->v);
	free(t);
}

enum auth_role auth_tokens_match(const struct auth_tokens *t, const char *token, size_t len)
{
	unsigned char d[AUTH_DIGEST_LEN];
	enum auth_role role = AUTH_OPEN;

	if (!t)
		return AUTH_OPEN;
	digest_of(token, len, d);
	/* Every entry is compared, whatever matched before. */
	for (size_t i = 0; i < t->n; i++) {
		int same = CRYPTO_memcmp(d, t->v[i].digest, AUTH_DIGEST_LEN) == 0;
		role = same ? t->v[i].role : role;
	}
	return role;
}

/* ---- the checker ------------------------------------------------------------ */

struct auth {
	char *tokens_file; /* NULL = authentication off */
	bool metrics_open;
	pthread_rwlock_t lock;
	struct auth_tokens *tokens;   /* from the file; guarded by lock */
	struct auth_tokens *internal; /* auth_add_internal; guarded by lock */
	size_t internal_cap;
};

static void log_token_set(const char *path, const struct auth_tokens *t)
{
	size_t n[AUTH_ADMIN + 1] = {0};

	for (size_t i = 0; i < t->n; i++)
		n[t->v[i].role]++;
	log_info("auth: %zu token(s) from %s: %zu read, %zu write, %zu admin", t->n, path,
		 n[AUTH_READ], n[AUTH_WRITE], n[AUTH_ADMIN]);
	for (size_t i = 0; i < t->n; i++)
		log_debug("auth: token %s (%s) from line %d", t->v[i].fingerprint,
			  auth_role_name(t->v[i].role), t->v[i].line);
}

int auth_new(const struct auth_config *c, struct auth **out, struct kiln_error *err)
{
	struct auth *a = calloc(1, sizeof(*a));
	int rc;

	*out = NULL;
	if (!a)
		return kiln_error_set(err, ENOMEM, "out of memory");
	pthread_rwlock_init(&a->lock, NULL);
	a->metrics_open = c->metrics_open;
	if (c->tokens_file) {
		if (!(a->tokens_file = strdup(c->tokens_file))) {
			auth_free(a);
			return kiln_error_set(err, ENOMEM, "out of memory");
		}
		rc = auth_tokens_load(a->tokens_file, &a->tokens, err);
		if (rc < 0) {
			kiln_error_prefix(err, "--auth-tokens-file: ");
			auth_free(a);
			return rc;
		}
		log_token_set(a->tokens_file, a->tokens);
	}
	*out = a;
	return 0;
}

void auth_free(struct auth *a)
{
	if (!a)
		return;
	auth_tokens_free(a->tokens);
	auth_tokens_free(a->internal);
	pthread_rwlock_destroy(&a->lock);
	free(a->tokens_file);
	free(a);
}

bool auth_enabled(const struct auth *a)
{
	return a && a->tokens_file;
}

int auth_reload(struct auth *a, struct kiln_error *err)
{
	struct auth_tokens *fresh = NULL, *old;
	int rc;

	if (!auth_enabled(a))
		return 0;
	rc = auth_tokens_load(a->tokens_file, &fresh, err);
	if (rc < 0)
		return rc;
	pthread_rwlock_wrlock(&a->lock);
	old = a->tokens;
	a->tokens = fresh;
	pthread_rwlock_unlock(&a->lock);
	auth_tokens_free(old);
	log_token_set(a->tokens_file, fresh);
	return 0;
}

int auth_add_internal(struct auth *a, const char *token, enum auth_role role)
{
	int rc;

	if (!a || strlen(token) < AUTH_TOKEN_MIN)
		return -EINVAL;
	pthread_rwlock_wrlock(&a->lock);
	if (!a->internal && !(a->internal = calloc(1, sizeof(*a->internal)))) {
		pthread_rwlock_unlock(&a->lock);
		return -ENOMEM;
	}
	rc = tokens_add(a->internal, &a->internal_cap, token, strlen(token), role, 0);
	pthread_rwlock_unlock(&a->lock);
	return rc;
}

/* The token of "Bearer TOKEN" (scheme case-insensitive, spaces around
 * allowed), or NULL. */
static const char *bearer_token(const char *h, size_t *len)
{
	while (*h == ' ' || *h == '\t')
		h++;
	if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
		return NULL;
	h += 6;
	while (*h == ' ' || *h == '\t')
		h++;
	size_t n = strlen(h);
	while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;
	*len = n;
	return n ? h : NULL;
}

int auth_check(struct auth *a, enum auth_role need, const char *authorization, const char *what,
	       char *why, size_t why_cap)
{
	const char *tok;
	size_t len = 0;
	enum auth_role have, r;

	if (!auth_enabled(a) || need == AUTH_OPEN || (need == AUTH_METRICS && a->metrics_open))
		return 0;
	if (!authorization || !*authorization) {
		snprintf(why, why_cap,
			 "%s needs a bearer token (authorization: Bearer TOKEN); see "
			 "docs/SECURITY.md",
			 what);
		return -EACCES;
	}
	if (!(tok = bearer_token(authorization, &len))) {
		snprintf(why, why_cap, "%s: the authorization header is not \"Bearer TOKEN\"",
			 what);
		return -EACCES;
	}
	pthread_rwlock_rdlock(&a->lock);
	have = auth_tokens_match(a->tokens, tok, len);
	r = auth_tokens_match(a->internal, tok, len);
	pthread_rwlock_unlock(&a->lock);
	if (r != AUTH_OPEN)
		have = r;
	if (have == AUTH_OPEN) {
		unsigned char d[AUTH_DIGEST_LEN];
		char fp[9];
		digest_of(tok, len, d);
		fingerprint_of(d, fp);
		log_debug("auth: %s: unknown token %s", what, fp);
		snprintf(why, why_cap, "%s: invalid bearer token", what);
		return -EACCES;
	}
	if (need == AUTH_METRICS)
		need = AUTH_READ;
	if (have == AUTH_ADMIN || have == need)
		return 0;
	if (need == AUTH_ADMIN)
		snprintf(why, why_cap, "%s needs a token with role admin; this one has role %s",
			 what, auth_role_name(have));
	else
		snprintf(why, why_cap,
			 "%s needs a token with role %s (or admin); this one has role %s", what,
			 auth_role_name(need), auth_role_name(have));
	return -EPERM;
}
