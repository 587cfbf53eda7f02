/*
 * Clock readings in the units tollgate's parts use: seconds as a double for
 * timers and durations, milliseconds for audit and event timestamps. The one
 * place that calls clock_gettime for them (the bottom layer: no includes from
 * above).
 */
#ifndef TOLLGATE_CORE_CLOCK_H
#define TOLLGATE_CORE_CLOCK_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

/* CLOCK_MONOTONIC in seconds: for deadlines and durations. */
double gw_clock_mono(void);
/* CLOCK_REALTIME in seconds since the Unix epoch. */
double gw_clock_real(void);
/* CLOCK_REALTIME in milliseconds since the Unix epoch (audit rows, events). */
int64_t gw_clock_real_ms(void);
/* Seconds from a CLOCK_MONOTONIC reading t0 to now. */
double gw_clock_since(const struct timespec *t0);
/* The same in milliseconds. */
double gw_clock_ms_since(const struct timespec *t0);
/* A libevent timer's timeval for secs (>= 0). */
struct timeval gw_clock_timeval(double secs);
/*
 * A duration as people and clients read it: rounded to 3 decimals
 * (seconds to milliseconds, milliseconds to microseconds). Printed by
 * jansson with JSON_REAL_PRECISION(15), it reads 0.062, never
 * 0.061909502999999980; its default precision (17) shows the double's
 * error again.
 */
double gw_clock_round3(double v);

#endif
