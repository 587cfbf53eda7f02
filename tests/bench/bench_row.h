/*
 * The audit row the audit benchmarks write: the shape of a proxy's connection
 * row, about 200 bytes, its host and detail varied by the row's number so that
 * nothing compresses. host and detail are the caller's buffers, which ev
 * points into.
 */
#ifndef TOLLGATE_BENCH_ROW_H
#define TOLLGATE_BENCH_ROW_H

#include <stdio.h>

#include "policy/audit.h"

static inline void
bench_row(long i, const char *sandbox, char *host, size_t hostlen, char *detail, size_t detaillen,
          struct audit_event *ev)
{
	snprintf(host, hostlen, "h%ld.pypi.example.org", i % 5000);
	snprintf(detail, detaillen,
	         "{\"upstream\":\"192.0.2.%ld:443\",\"bytes_up\":%ld,\"bytes_down\":%ld}", i % 250,
	         i * 7 % 100000, i * 13 % 1000000);
	*ev = (struct audit_event){
	    .kind = "connection",
	    .sandbox = sandbox,
	    .host = host,
	    .port = 443,
	    .decision = i % 10 ? "allow" : "deny",
	    .reason = "allow *.example.org (policy.json:4:7)",
	    .detail = detail,
	};
}

#endif
