/*
 * Logging for every module: one line per message on stderr, either
 * "tollgate: message" or, with --log-format json, one JSON object per line.
 */
#ifndef TOLLGATE_LOG_H
#define TOLLGATE_LOG_H

#include <stdbool.h>

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

/* verbosity: LOG_LEVEL_INFO by default; json: one object per line. */
void log_init(enum log_level verbosity, bool json);
void log_set_verbosity(enum log_level verbosity);
/*
 * While stderr is a terminal in raw mode (run's pty relay), a bare "\n"
 * moves down without returning to the first column: then lines end in
 * "\r\n". log_eol() is the line end every stderr writer should use.
 */
void log_set_crlf(bool on);
const char *log_eol(void);
enum log_level log_get_verbosity(void);

/* log_warn appends ": strerror(errno)"; the x forms do not. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* For start-up only: log and exit 125 (tollgate's own failure). */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
