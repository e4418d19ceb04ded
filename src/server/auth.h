/*
 * auth.h — who may call what: bearer tokens with a role each, checked for
 * every gRPC method and HTTP route before its handler runs.
 *
 * A route declares the role it needs in the tables of routes.c; a token
 * holds one role. `admin` may do everything, `read` and `write` only what
 * needs exactly their role, and AUTH_OPEN routes need no token at all. The
 * policy (which route needs which role, what stays open) is written down in
 * docs/SECURITY.md.
 *
 * The tokens file (--auth-tokens-file) holds one `ROLE TOKEN` per line:
 *
 *   # agents push with this one
 *   write 3q2+7w-Xk9bT_e4ZcR1vN0m
 *   read  ...
 *   admin ...
 *
 * Blank lines and lines starting with `#` are skipped. ROLE is read, write or
 * admin; TOKEN is 16..256 characters of RFC 6750's b64token alphabet
 * (letters, digits, - . _ ~ + / and trailing =). Anything else — an unknown
 * role, a short token, a third field, the same token twice, a file with no
 * token — refuses the whole file with FILE:LINE and what is wrong, so a
 * typo never silently drops a token. The file is reread on SIGHUP
 * (auth_reload); a file that does not load leaves the old tokens in force.
 *
 * Secrets are kept only as SHA-256 digests; a presented token is hashed and
 * compared with every stored digest in constant time (CRYPTO_memcmp, no
 * early exit), so neither timing nor a memory dump gives a token away. Logs
 * name a token by its fingerprint, the first 8 hex digits of its digest.
 */
#ifndef KILN_SERVER_AUTH_H
#define KILN_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* What a route needs (routes.c) and what a token grants. */
enum auth_role {
	AUTH_OPEN = 0, /* route: anyone; token: never */
	AUTH_READ,     /* queries, label names and values, targets, the UI's API */
	AUTH_WRITE,    /* WriteRaw, debuginfo upload */
	AUTH_ADMIN,    /* everything, and debuginfo deletion, /debug/pprof */
	AUTH_METRICS,  /* route only: read, or open with --auth-metrics-open */
};

/* "read", "write", "admin", "open", "metrics". */
const char *auth_role_name(enum auth_role r);

#define AUTH_TOKEN_MIN	16
#define AUTH_TOKEN_MAX	256
#define AUTH_DIGEST_LEN 32

/* A parsed tokens file: digests and roles, no secrets. */
struct auth_token {
	unsigned char digest[AUTH_DIGEST_LEN]; /* SHA-256 of the token */
	enum auth_role role;		       /* READ, WRITE or ADMIN */
	char fingerprint[9];		       /* 8 hex digits of the digest */
	int line;			       /* where it was read */
};

struct auth_tokens {
	struct auth_token *v;
	size_t n;
};

/* Parses a tokens file's text (len bytes; NUL bytes are refused). name is
 * the file name used in messages ("FILE:LINE: ..."). On success *out is a
 * new set (free with auth_tokens_free). Returns 0, -EINVAL with the first
 * bad line in err, or -ENOMEM. */
int auth_tokens_parse(const char *text, size_t len, const char *name, struct auth_tokens **out,
		      struct kiln_error *err);
/* Reads and parses path (at most 1 MiB). Same returns, plus -errno when the
 * file cannot be read. */
int auth_tokens_load(const char *path, struct auth_tokens **out, struct kiln_error *err);
/* NULL-safe. */
void auth_tokens_free(struct auth_tokens *t);
/* The role of token[0..len), or AUTH_OPEN when no token matches. Takes the
 * same time whichever token (if any) matches. */
enum auth_role auth_tokens_match(const struct auth_tokens *t, const char *token, size_t len);

/* ---- the server's checker ------------------------------------------------ */

struct auth;

struct auth_config {
	const char *tokens_file; /* NULL = no authentication */
	bool metrics_open;	 /* AUTH_METRICS routes need no token */
};

/* Loads the tokens file when one is configured. *out is NULL-free: with no
 * tokens file it is a checker that admits every request. Free with
 * auth_free. Returns 0 or a negative errno with err set. */
int auth_new(const struct auth_config *c, struct auth **out, struct kiln_error *err);
/* NULL-safe. */
void auth_free(struct auth *a);
/* Whether requests need a token at all. */
bool auth_enabled(const struct auth *a);
/* Rereads the tokens file and swaps it in; on failure the old tokens stay
 * and err says why. A no-op (0) without a tokens file. Thread-safe against
 * auth_check. */
int auth_reload(struct auth *a, struct kiln_error *err);
/* Registers a token that is never in the file: the server's own scrapes of
 * itself use it (routes.c's self-scrape, docs/SECURITY.md). It survives
 * reloads. token must be at least AUTH_TOKEN_MIN characters. */
int auth_add_internal(struct auth *a, const char *token, enum auth_role role);

/*
 * Decides one request. authorization is the raw `authorization` header or
 * metadata value (NULL when absent); what names the route for the message.
 * Returns 0 (admitted), -EACCES (no token, not a Bearer token, or a token
 * that no entry matches: HTTP 401, gRPC UNAUTHENTICATED) or -EPERM (a valid
 * token whose role may not call this route: 403, PERMISSION_DENIED), with a
 * message for the client in why (which never holds the token).
 */
int auth_check(struct auth *a, enum auth_role need, const char *authorization, const char *what,
	       char *why, size_t why_cap);

#endif
