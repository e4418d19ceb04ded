/*
 * htab.h — a hash table from byte-string keys to 64-bit values.
 *
 * The workhorse behind interning (strings, functions, locations, stacks,
 * label sets): keys are arbitrary bytes, copied into the table's own arena
 * on insert, and hashed with XXH3. Open addressing with linear probing and the
 * full hash stored beside each slot, so most mismatches never touch the key.
 * Not thread-safe; callers lock.
 */
#ifndef KILN_COMMON_HTAB_H
#define KILN_COMMON_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct htab;

/* Returns NULL on out-of-memory. hint: expected number of keys (0 is fine). */
struct htab *htab_new(size_t hint);
void htab_free(struct htab *h);
/* Empties h for reuse, keeping its memory: no malloc for the next user.
 * A table grown past max_keys is shrunk back to hold that many, so that
 * one large use does not make every later clear a large memset (if that
 * malloc fails it stays large, still correct). Key pointers handed out
 * before are invalid after. */
void htab_clear(struct htab *h, size_t max_keys);

uint64_t htab_hash(const void *key, size_t len);

/* Looks key up. If present, stores its value in *value and returns 1. If
 * absent, inserts it with *value as the value and returns 0. -ENOMEM on
 * allocation failure. This is "intern": the caller passes the id it would
 * assign and learns whether an older one exists. */
int htab_intern(struct htab *h, const void *key, size_t len, uint64_t *value);
/* Inserts or replaces. Returns 0 or -ENOMEM. */
int htab_put(struct htab *h, const void *key, size_t len, uint64_t value);
bool htab_get(const struct htab *h, const void *key, size_t len, uint64_t *value);
/* Pointer to the stored value (valid until the next insert), or NULL. */
uint64_t *htab_lookup(struct htab *h, const void *key, size_t len);
size_t htab_count(const struct htab *h);
/* The same with the hash already computed by htab_hash, for callers that
 * probe and then insert the same key (one hash instead of two). */
uint64_t *htab_lookup_hashed(struct htab *h, uint64_t hash, const void *key, size_t len);
/* Inserts a key known to be absent; returns the table's own copy of the key
 * (valid until htab_free, so callers may keep pointers into it instead of a
 * second copy), or NULL on out-of-memory. */
const void *htab_insert_hashed(struct htab *h, uint64_t hash, const void *key, size_t len,
			       uint64_t value);
/* Makes room for n more keys without rehashing. Returns 0 or -ENOMEM. */
int htab_reserve(struct htab *h, size_t n);

/* Iterates: start with *iter = 0; returns false when done. Order is
 * unspecified. The key pointer stays valid until htab_free. */
bool htab_next(const struct htab *h, size_t *iter, const void **key, size_t *len, uint64_t *value);

#endif
