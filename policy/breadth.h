/*
 * How broad a host pattern is: whether it names the hosts of at most one
 * registrable domain (public-suffix aware, libpsl), for patterns proposed by
 * someone who may only ask, never widen (`serve`'s model). Pure logic.
 */
#ifndef TOLLGATE_POLICY_BREADTH_H
#define TOLLGATE_POLICY_BREADTH_H

#include <stddef.h>

/*
 * Checks a HOST[:PORT] pattern as policy_add_rule takes it. 0 with its
 * normalised form in norm (len bytes, NUL-terminated) when it names one
 * host, or every name below one registrable domain or below a name under
 * one ("example.com", "*.example.com", "*.api.example.co.uk", with or
 * without a port). -EINVAL (malformed) or -EPERM (too broad: "*", a public
 * suffix bare or under a wildcard such as "com", "*.com", "*.co.uk",
 * "*.github.io"; an IP literal or a CIDR block) with one line in err. A name
 * whose last label no list knows counts as under a public suffix of its own
 * ("test" in "origin.test"). -ENOENT when no public suffix list can be
 * loaded (fails closed). norm may be NULL.
 */
int policy_breadth_check(const char *pattern, char *norm, size_t len, char *err, size_t errlen);

/*
 * The registrable domain of a lower-case host name ("a.b.example.co.uk" ->
 * "example.co.uk") by the same public suffix list. 0, or -ENOENT when the
 * name has none (a public suffix itself, an unknown last label) or no list
 * can be loaded.
 */
int policy_registrable_domain(const char *name, char *out, size_t len);

#endif
