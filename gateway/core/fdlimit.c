/*
 * Connection caps from the file limit (gateway/core/fdlimit.h): pure
 * arithmetic on the limit, so the figures are the same for every listener.
 */
#include "gateway/core/fdlimit.h"

#include <sys/resource.h>

unsigned long
gw_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (unsigned long)rl.rlim_cur;
}

unsigned int
gw_fd_conn_cap(unsigned long limit, unsigned int wanted, unsigned int fds_each,
               unsigned int share_percent)
{
	unsigned long reserve, room, cap;

	if (limit == 0 || fds_each == 0)
		return wanted;
	reserve = limit / 4 < GW_FD_RESERVE ? limit / 4 : GW_FD_RESERVE;
	room = limit - reserve;
	cap = room / 100 * share_percent + room % 100 * share_percent / 100;
	cap /= fds_each;
	if (cap < 1)
		cap = 1;
	return cap < wanted ? (unsigned int)cap : wanted;
}

unsigned int
gw_fd_per_client_cap(unsigned int wanted, unsigned int max_conns)
{
	unsigned int cap = max_conns / GW_FD_PER_CLIENT_DIVISOR;

	if (cap < 1)
		cap = 1;
	return wanted < cap ? wanted : cap;
}
