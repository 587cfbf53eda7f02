/*
 * The review page's gate: pure checks of the request headers a browser sends
 * (Host, Origin) and a constant-time token comparison. No sockets, so
 * they are table-tested and fuzzed (tests/fuzz/fuzz_ui_guard.c).
 */
#ifndef TOLLGATE_UI_GUARD_H
#define TOLLGATE_UI_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#define UI_HEADER_MAX 4096 /* a Host or Origin header longer than this is refused */

/*
 * Whether host (a Host header's value; NULL: absent) is exactly one of
 * allowed (a NULL-terminated list of "name:port" strings), ignoring ASCII
 * case. A page reached under another name (DNS rebinding) fails here.
 */
bool ui_guard_host_ok(const char *host, const char *const *allowed);

/*
 * Whether origin (an Origin header's value; NULL: absent) is
 * scheme "://" one of allowed, ignoring ASCII case. "null" and anything
 * with a path, user or query fail.
 */
bool ui_guard_origin_ok(const char *origin, const char *scheme, const char *const *allowed);

/* Whether two secrets are equal, in a time that does not depend on where they
 * differ (it depends only on the lengths). NULL is equal to nothing. */
bool ui_secret_equal(const char *a, const char *b);

#endif
