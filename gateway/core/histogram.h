/*
 * A fixed-bucket histogram for the metrics endpoint: the modules that time
 * something (proxy requests, approvals, audit batches) keep one, and
 * gateway/metrics.c writes it out. Plain memory: the owner decides the
 * locking (the loop's thread, or under the audit writer's lock).
 */
#ifndef TOLLGATE_CORE_HISTOGRAM_H
#define TOLLGATE_CORE_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>

#define GW_HIST_MAX_BOUNDS 16

struct gw_hist {
	const double *bounds; /* upper bounds, ascending; static storage, not owned */
	size_t nbounds;       /* at most GW_HIST_MAX_BOUNDS */
	/* Per bucket, not cumulative: counts[i] holds values in (bounds[i-1],
	 * bounds[i]], counts[nbounds] those above the last bound. */
	uint64_t counts[GW_HIST_MAX_BOUNDS + 1];
	uint64_t count;
	double sum;
};

/* Zeroes h and sets its bounds (nbounds is cut to GW_HIST_MAX_BOUNDS). */
void gw_hist_init(struct gw_hist *h, const double *bounds, size_t nbounds);
/* Counts one value (a few compares: fine on the hot path). */
void gw_hist_observe(struct gw_hist *h, double value);

#endif
