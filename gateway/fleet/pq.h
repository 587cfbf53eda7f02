/*
 * libpq, opened when the fleet is first used (gateway/core/lazylib.h): the
 * fleet's files include this header instead of <libpq-fe.h>, whose types
 * they keep, and call libpq's functions by their own names, which map to a
 * table filled by fleet_pq_load. fleet_url_check and fleet_passfile_lookup,
 * the first calls of every fleet path, load it.
 */
#ifndef TOLLGATE_FLEET_PQ_H
#define TOLLGATE_FLEET_PQ_H

#include <stddef.h>

#include <libpq-fe.h>

/* Every libpq function tollgate calls: a new one is a line here and below. */
#define FLEET_PQ_FUNCS(X)                                                                          \
	X(PQclear)                                                                                 \
	X(PQcmdTuples)                                                                             \
	X(PQconndefaults)                                                                          \
	X(PQconnectdbParams)                                                                       \
	X(PQconninfoFree)                                                                          \
	X(PQconninfoParse)                                                                         \
	X(PQconsumeInput)                                                                          \
	X(PQerrorMessage)                                                                          \
	X(PQexec)                                                                                  \
	X(PQexecParams)                                                                            \
	X(PQfinish)                                                                                \
	X(PQfreemem)                                                                               \
	X(PQgetResult)                                                                             \
	X(PQgetisnull)                                                                             \
	X(PQgetlength)                                                                             \
	X(PQgetvalue)                                                                              \
	X(PQnotifies)                                                                              \
	X(PQntuples)                                                                               \
	X(PQputCopyData)                                                                           \
	X(PQputCopyEnd)                                                                            \
	X(PQresultErrorField)                                                                      \
	X(PQresultStatus)                                                                          \
	X(PQsendQuery)                                                                             \
	X(PQsendQueryParams)                                                                       \
	X(PQsetNoticeProcessor)                                                                    \
	X(PQsetSingleRowMode)                                                                      \
	X(PQsocket)                                                                                \
	X(PQstatus)

struct fleet_pq_table {
#define FLEET_PQ_SLOT(name) __typeof__(name) *p_##name;
	FLEET_PQ_FUNCS(FLEET_PQ_SLOT)
#undef FLEET_PQ_SLOT
};

extern struct fleet_pq_table fleet_pq;

/*
 * Opens libpq.so.5 once; 0, or -ENOENT with err "cannot load libpq.so.5:
 * WHY; install libpq5". No libpq function may be called before it succeeds.
 */
int fleet_pq_load(char *err, size_t errlen);

/* "WHAT: " and libpq's last error on c as one line, into err (c NULL: out of
 * memory, as PQconnectdbParams says by returning NULL). */
void fleet_pg_err(PGconn *c, const char *what, char *err, size_t errlen);

/* Runs sql (a command or a query, no parameters) on c: 0, or -EIO with err
 * set by fleet_pg_err under WHAT. */
int fleet_exec_ok(PGconn *c, const char *sql, const char *what, char *err, size_t errlen);

#define PQclear (fleet_pq.p_PQclear)
#define PQcmdTuples (fleet_pq.p_PQcmdTuples)
#define PQconndefaults (fleet_pq.p_PQconndefaults)
#define PQconnectdbParams (fleet_pq.p_PQconnectdbParams)
#define PQconninfoFree (fleet_pq.p_PQconninfoFree)
#define PQconninfoParse (fleet_pq.p_PQconninfoParse)
#define PQconsumeInput (fleet_pq.p_PQconsumeInput)
#define PQerrorMessage (fleet_pq.p_PQerrorMessage)
#define PQexec (fleet_pq.p_PQexec)
#define PQexecParams (fleet_pq.p_PQexecParams)
#define PQfinish (fleet_pq.p_PQfinish)
#define PQfreemem (fleet_pq.p_PQfreemem)
#define PQgetResult (fleet_pq.p_PQgetResult)
#define PQgetisnull (fleet_pq.p_PQgetisnull)
#define PQgetlength (fleet_pq.p_PQgetlength)
#define PQgetvalue (fleet_pq.p_PQgetvalue)
#define PQnotifies (fleet_pq.p_PQnotifies)
#define PQntuples (fleet_pq.p_PQntuples)
#define PQputCopyData (fleet_pq.p_PQputCopyData)
#define PQputCopyEnd (fleet_pq.p_PQputCopyEnd)
#define PQresultErrorField (fleet_pq.p_PQresultErrorField)
#define PQresultStatus (fleet_pq.p_PQresultStatus)
#define PQsendQuery (fleet_pq.p_PQsendQuery)
#define PQsendQueryParams (fleet_pq.p_PQsendQueryParams)
#define PQsetNoticeProcessor (fleet_pq.p_PQsetNoticeProcessor)
#define PQsetSingleRowMode (fleet_pq.p_PQsetSingleRowMode)
#define PQsocket (fleet_pq.p_PQsocket)
#define PQstatus (fleet_pq.p_PQstatus)

#endif
