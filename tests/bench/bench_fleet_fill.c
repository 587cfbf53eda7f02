/*
 * The local logs tests/bench/bench_fleet.sh ships: writes ROWS chained audit
 * rows (the shape of a proxy's connection row, about 200 bytes) into a new
 * log at PATH through audit_append, as a gateway would, so that a gateway
 * started on a copy has a backlog to ship and the fleet's ingest rate is the
 * shipper's and the database's, not the load client's.
 *
 *   bench_fleet_fill PATH ROWS
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/audit.h"
#include "tests/bench/bench_row.h"

int
main(int argc, char **argv)
{
	struct audit_options o;
	struct audit *a = NULL;
	char err[512], host[64], detail[128], *end;
	long rows;
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: bench_fleet_fill PATH ROWS\n");
		return 2;
	}
	errno = 0;
	rows = strtol(argv[2], &end, 10);
	if (errno != 0 || *end != '\0' || rows <= 0) {
		fprintf(stderr, "bench_fleet_fill: ROWS '%s': want a positive number\n", argv[2]);
		return 2;
	}
	audit_options_default(&o);
	o.queue_max = (size_t)rows; /* room for every row: nothing dropped */
	if (audit_open_with(argv[1], &o, &a, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_fleet_fill: %s\n", err);
		return 1;
	}
	for (long i = 0; i < rows; i++) {
		struct audit_event ev;

		bench_row(i, "127.0.0.1", host, sizeof(host), detail, sizeof(detail), &ev);
		rc = audit_append(a, &ev);
		if (rc != 0) {
			fprintf(stderr, "bench_fleet_fill: append: %s\n", strerror(-rc));
			audit_free(a);
			return 1;
		}
	}
	rc = audit_flush(a);
	audit_free(a);
	if (rc != 0) {
		fprintf(stderr, "bench_fleet_fill: flush failed\n");
		return 1;
	}
	return 0;
}
