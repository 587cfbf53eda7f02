/*
 * Exit statuses (the conventions of env(1), timeout(1) and container
 * runtimes; docs/contributing.md). In the bottom layer because fatal() exits with one.
 */
#ifndef TOLLGATE_CORE_EXIT_H
#define TOLLGATE_CORE_EXIT_H

#define GW_EXIT_OK 0
#define GW_EXIT_TIMEOUT 124
#define GW_EXIT_FAILURE 125 /* tollgate itself failed: bad flag, privilege, policy */
#define GW_EXIT_CANNOT_EXEC 126
#define GW_EXIT_NOT_FOUND 127

#endif
