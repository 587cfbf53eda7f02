/*
 * Logging to stderr. Plain lines read "tollgate: <what>: <why>" (one line each);
 * JSON lines carry ts, level and msg so that a collector can parse them.
 */
#include "gateway/core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/core/exit.h"
#include "gateway/core/textsafe.h"

static enum log_level log_verbosity = LOG_LEVEL_INFO;
static bool log_json;
static bool log_crlf; /* stderr is a raw terminal: log_set_crlf */

void
log_init(enum log_level verbosity, bool json)
{
	log_verbosity = verbosity;
	log_json = json;
}

/* SIGHUP on loop 0 while the proxy's other loops log: one atomic word. */
void
log_set_verbosity(enum log_level verbosity)
{
	__atomic_store_n(&log_verbosity, verbosity, __ATOMIC_RELAXED);
}

void
log_set_crlf(bool on)
{
	log_crlf = on;
}

const char *
log_eol(void)
{
	return log_crlf ? "\r\n" : "\n";
}

enum log_level
log_get_verbosity(void)
{
	return __atomic_load_n(&log_verbosity, __ATOMIC_RELAXED);
}

static const char *
level_name(enum log_level level)
{
	switch (level) {
	case LOG_LEVEL_ERROR:
		return "error";
	case LOG_LEVEL_WARN:
		return "warn";
	case LOG_LEVEL_INFO:
		return "info";
	case LOG_LEVEL_DEBUG:
		return "debug";
	}
	return "?";
}

/* Escapes msg as the body of a JSON string. */
static void
put_json_string(FILE *f, const char *msg)
{
	for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
}

static void vlog(enum log_level level, int errnum, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void
vlog(enum log_level level, int errnum, const char *fmt, va_list ap)
{
	char raw[2048], msg[sizeof(raw) * GW_TEXT_SAFE_GROWTH];
	size_t len;

	if (level > __atomic_load_n(&log_verbosity, __ATOMIC_RELAXED))
		return;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	if (errnum != 0) {
		len = strlen(raw);
		snprintf(raw + len, sizeof(raw) - len, ": %s", strerror(errnum));
	}
	/* A line may quote the guarded side (a host, a name, a reason): one
	 * line, and nothing a terminal or a log viewer would obey. */
	gw_text_safe(msg, sizeof(msg), raw, strlen(raw));
	if (log_json) {
		struct timespec ts;
		struct tm tm;
		char when[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":\"", when,
		        ts.tv_nsec / 1000000, level_name(level));
		put_json_string(stderr, msg);
		fprintf(stderr, "\"}%s", log_eol());
	} else {
		fprintf(stderr, "tollgate: %s%s", msg, log_eol());
	}
}

void
log_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_WARN, saved, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_WARN, 0, fmt, ap);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_INFO, 0, fmt, ap);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_DEBUG, 0, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, saved, fmt, ap);
	va_end(ap);
	exit(GW_EXIT_FAILURE);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_LEVEL_ERROR, 0, fmt, ap);
	va_end(ap);
	exit(GW_EXIT_FAILURE);
}
