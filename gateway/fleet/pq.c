/*
 * libpq's table (gateway/fleet/pq.h): the names looked up in libpq.so.5 when
 * the fleet is first used.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "gateway/core/err.h"
#include "gateway/core/lazylib.h"
#include "gateway/fleet/pq.h"

struct fleet_pq_table fleet_pq;

static const struct gw_lazysym pq_syms[] = {
#define PQ_SYM(name) {#name, offsetof(struct fleet_pq_table, p_##name)},
    FLEET_PQ_FUNCS(PQ_SYM)
#undef PQ_SYM
};

static struct gw_lazylib pq_lib = GW_LAZYLIB_INIT("libpq.so.5", "libpq5", pq_syms, &fleet_pq);

int
fleet_pq_load(char *err, size_t errlen)
{
	return gw_lazylib_load(&pq_lib, err, errlen);
}

void
fleet_pg_err(PGconn *c, const char *what, char *err, size_t errlen)
{
	const char *m = c != NULL ? PQerrorMessage(c) : "out of memory";

	gw_set_err(err, errlen, "%s: %.*s", what, (int)strcspn(m, "\n"), m);
}

int
fleet_exec_ok(PGconn *c, const char *sql, const char *what, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(res);
	int rc = 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		fleet_pg_err(c, what, err, errlen);
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}
