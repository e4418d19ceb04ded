/*
 * utf8.h — the one UTF-8 check for label values and other strings that
 * clients send: every lead byte followed by its continuation bytes, as
 * Prometheus requires of label values. Overlong forms and surrogates are
 * not looked for (Parca accepts them too).
 */
#ifndef KILN_COMMON_UTF8_H
#define KILN_COMMON_UTF8_H

#include <stdbool.h>

/* Whether the NUL-terminated s is well-formed UTF-8. */
bool utf8_valid_str(const char *s);

#endif
