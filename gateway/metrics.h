/*
 * `tollgate proxy --metrics-listen`: GET /metrics in Prometheus's text
 * exposition format (0.0.4), served from the gateway's event loop. The
 * counters live in the modules that count them (proxy, dns, approvals,
 * audit); this file only reads and writes them out at scrape time.
 */
#ifndef TOLLGATE_METRICS_H
#define TOLLGATE_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/core/histogram.h"

struct event_base;
struct proxy;
struct dns_server;
struct approvals;
struct audit;
struct gw_metrics;

/* What a scrape reads; any may be NULL (its metrics are left out). Not
 * owned: each must outlive the gw_metrics. */
struct gw_metrics_sources {
	struct proxy *proxy;
	struct dns_server *dns;
	struct approvals *approvals;
	struct audit *audit;
};

/* A growing text buffer; on allocation failure failed is set and later
 * writes do nothing. buf is NUL-terminated when not NULL. */
struct gw_metrics_text {
	char *buf;
	size_t len, cap;
	bool failed;
};
void gw_metrics_text_free(struct gw_metrics_text *t);

/* One metric family's "# HELP" and "# TYPE" lines (type: counter, gauge,
 * histogram). help is escaped as the format wants. */
void gw_metrics_family(struct gw_metrics_text *t, const char *name, const char *type,
                       const char *help);
/*
 * One sample line. labels holds nlabels name/value pairs (2 * nlabels
 * strings); names are the caller's constants, values are escaped
 * (backslash, double quote, newline).
 */
void gw_metrics_sample(struct gw_metrics_text *t, const char *name, const char *const *labels,
                       size_t nlabels, double value);
/* A histogram's _bucket (cumulative, le="+Inf" last), _sum and _count lines. */
void gw_metrics_histogram(struct gw_metrics_text *t, const char *name, const char *const *labels,
                          size_t nlabels, const struct gw_hist *h);
/* The whole /metrics body for src. */
void gw_metrics_render(const struct gw_metrics_sources *src, struct gw_metrics_text *t);

/* src is copied. 0 or -ENOMEM. */
int gw_metrics_new(struct event_base *base, const struct gw_metrics_sources *src,
                   struct gw_metrics **out);
/* Listens on "ADDR:PORT" (an IP address, not a name). 0 or negative errno, err set. */
int gw_metrics_listen(struct gw_metrics *m, const char *addrport, char *err, size_t errlen);
/* Serves on a listening socket made elsewhere (socket activation); takes fd
 * on success. 0 or negative errno. */
int gw_metrics_listen_fd(struct gw_metrics *m, int fd);
/* Closes the listeners and the scrapes in flight. Accepts NULL. */
void gw_metrics_free(struct gw_metrics *m);

#endif
