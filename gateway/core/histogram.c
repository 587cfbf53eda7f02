/*
 * Fixed-bucket histograms (histogram.h): counting is a short scan of the
 * bounds, so the loop can time every request.
 */
#include <string.h>

#include "gateway/core/histogram.h"

void
gw_hist_init(struct gw_hist *h, const double *bounds, size_t nbounds)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->nbounds = nbounds < GW_HIST_MAX_BOUNDS ? nbounds : GW_HIST_MAX_BOUNDS;
}

void
gw_hist_observe(struct gw_hist *h, double value)
{
	size_t i = 0;

	while (i < h->nbounds && value > h->bounds[i])
		i++;
	h->counts[i]++;
	h->count++;
	h->sum += value;
}
