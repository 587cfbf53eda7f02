/*
 * The clock helpers of gateway/core/clock.h.
 */
#include "gateway/core/clock.h"

#include <math.h>

static double
read_seconds(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double
gw_clock_mono(void)
{
	return read_seconds(CLOCK_MONOTONIC);
}

double
gw_clock_real(void)
{
	return read_seconds(CLOCK_REALTIME);
}

int64_t
gw_clock_real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double
gw_clock_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

double
gw_clock_ms_since(const struct timespec *t0)
{
	return gw_clock_since(t0) * 1e3;
}

struct timeval
gw_clock_timeval(double secs)
{
	struct timeval tv;

	if (secs < 0)
		secs = 0;
	tv.tv_sec = (time_t)secs;
	tv.tv_usec = (suseconds_t)((secs - (double)tv.tv_sec) * 1e6);
	if (tv.tv_usec >= 1000000) {
		tv.tv_sec++;
		tv.tv_usec -= 1000000;
	}
	return tv;
}

double
gw_clock_round3(double v)
{
	if (isnan(v) || v > 1e12 || v < -1e12) /* past any duration: as it is */
		return v;
	return (double)(int64_t)(v * 1000 + (v < 0 ? -0.5 : 0.5)) / 1000;
}
