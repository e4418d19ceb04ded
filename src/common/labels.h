/*
 * labels.h — the vocabulary of labels that every module shares: a label
 * (name and value, borrowed strings), the order of a label set, and
 * Prometheus's rules for what a name may be.
 *
 * The rules are Prometheus's data model, which Parca and Kiln follow:
 *   label name   [a-zA-Z_][a-zA-Z0-9_]*
 *   metric name  [a-zA-Z_:][a-zA-Z0-9_:]*  (a profile's __name__ on ingest)
 * Names are ASCII: the checks do not depend on the locale. Who owns a
 * label's strings is the owner of the array's business (scrape's label
 * sets own theirs; the store copies what it keeps).
 */
#ifndef KILN_COMMON_LABELS_H
#define KILN_COMMON_LABELS_H

#include <stdbool.h>
#include <stddef.h>

struct label {
	const char *name;
	const char *value;
};

/* A valid label name; false for NULL or "". */
bool label_name_valid(const char *s);
/* A valid metric name (label name characters plus ':'); false for NULL or "". */
bool metric_name_valid(const char *s);
/* qsort comparator of struct label by name (strcmp order). */
int label_cmp(const void *a, const void *b);
/* Sorts v[0..n) by name; equal names keep no particular order. */
void labels_sort(struct label *v, size_t n);

#endif
