/*
 * Streaming redaction of secret values from a sandbox's output: every
 * occurrence of a value, or of its base64, hex or URL-encoded forms, becomes
 * REDACT_MARKER, also when it arrives split across reads.
 */
#ifndef TOLLGATE_EXEC_REDACT_H
#define TOLLGATE_EXEC_REDACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REDACT_MARKER "***REDACTED***"
/* Values shorter than this are redacted, but also hide unrelated output. */
#define REDACT_SHORT_LEN 4
/* An encoded form shorter than this is not searched for (docs/vault.md). */
#define REDACT_FORM_MIN 4
/* Hard caps on one set: what the automaton and each stream may hold. */
#define REDACT_VALUE_MAX (64 * 1024)
#define REDACT_PATTERNS_MAX 65536
#define REDACT_PATTERN_BYTES_MAX (4u * 1024 * 1024)

/* The forms redact_add_value searches for (a bit set; REDACT_FORMS_ALL: each). */
enum redact_form {
	REDACT_FORM_RAW = 1 << 0,
	REDACT_FORM_HEX = 1 << 1,       /* lower and upper case */
	REDACT_FORM_BASE64 = 1 << 2,    /* standard, padded or not, and the 3 alignments */
	REDACT_FORM_BASE64URL = 1 << 3, /* the URL-safe alphabet, the same way */
	REDACT_FORM_URL = 1 << 4,       /* percent-encoding, upper and lower case */
};
#define REDACT_FORMS_ALL 0x1f

struct redact;

struct redact *redact_new(void);
void redact_free(struct redact *r);
/*
 * Adds a value and its encoded forms. 0, -EINVAL (empty or longer than
 * REDACT_VALUE_MAX), -E2BIG (past a cap), -EBUSY (already compiled) or
 * -ENOMEM. The set keeps its copies and wipes them in redact_free.
 */
int redact_add_value(struct redact *r, const uint8_t *value, size_t len, unsigned forms);
/* Adds one literal pattern as it is. */
int redact_add_pattern(struct redact *r, const uint8_t *p, size_t len);
/* Builds the matcher; then streams can be made. 0 or -ENOMEM. */
int redact_compile(struct redact *r);

size_t redact_pattern_count(const struct redact *r);
const uint8_t *redact_pattern(const struct redact *r, size_t i, size_t *len);
/* The longest pattern: a stream holds back at most this many bytes. */
size_t redact_max_len(const struct redact *r);

/* Receives output; a negative return stops the stream with that error. */
typedef int (*redact_write_fn)(void *arg, const uint8_t *p, size_t n);

struct redact_stream;

/* r must be compiled and outlive the stream. 0 or -EINVAL/-ENOMEM. */
int redact_stream_new(const struct redact *r, redact_write_fn fn, void *arg,
                      struct redact_stream **out);
/*
 * Consumes n bytes and writes what can no longer be part of a match. Held
 * back: only the longest tail that is a prefix of some pattern. 0 or the
 * writer's error.
 */
int redact_stream_feed(struct redact_stream *s, const uint8_t *p, size_t n);
/* End of stream: writes what was held back. The stream may then be reused. */
int redact_stream_finish(struct redact_stream *s);
size_t redact_stream_held(const struct redact_stream *s);
/* Markers written so far. */
uint64_t redact_stream_redactions(const struct redact_stream *s);
void redact_stream_free(struct redact_stream *s);

/*
 * The relay `run --secret` puts between a sandbox and tollgate's own stdout
 * and stderr (exec/services/redact_relay.c): the sandbox inherits pipes, the loop
 * reads them and writes the redacted bytes to the original fds.
 */
struct event_base;
struct redact_relay;

/*
 * Before the sandbox starts: fds 1 and 2 become pipes (the sandbox inherits
 * them), the originals are kept aside. set must be compiled and outlive the
 * relay; NULL relays without redaction (only the output bound applies).
 * 0 or negative errno with err set; nothing swapped on failure.
 */
int redact_relay_prepare(const struct redact *set, struct redact_relay **out, char *err,
                         size_t errlen);
/*
 * The same with a pty (exec/sandbox/pty.h): master (lent; the relay reads a copy of
 * its own) is relayed to the first of fds 1, 2 and 0 that is a terminal,
 * and only a stream that is not a terminal gets a pipe (a terminal stream
 * of the sandbox is the pty's slave). -EINVAL without a master.
 */
int redact_relay_prepare_pty(const struct redact *set, int master, struct redact_relay **out,
                             char *err, size_t errlen);
/*
 * Holds the output (held) or lets it flow again: while held nothing is
 * written, what comes is kept as for a slow reader (and past the bound the
 * sandbox's writes block), so that tollgate can draw on the terminal alone.
 * Accepts NULL. redact_relay_finish lets everything out.
 */
void redact_relay_hold(struct redact_relay *rl, bool held);
/*
 * Right after the start (whether it succeeded or not): fds 1 and 2 are
 * tollgate's own again, and with base non-NULL the pipes are read on it.
 * Writes to the originals never block the loop: up to 256 KiB per stream
 * wait for a slow reader, and past that the pipe is not read, so the
 * sandbox's own write blocks (docs/runtimes.md).
 */
int redact_relay_attach(struct redact_relay *rl, struct event_base *base, char *err, size_t errlen);
/*
 * After the sandbox ended: reads the pipes to their end (each wait bounded
 * by timeout_ms) and writes everything still waiting, also what the
 * redactor held back. Waits for a slow reader as long as it takes (as a
 * blocking write would), except with timeout_ms 0: then nothing waits and
 * what the reader cannot take at once is dropped. Idempotent.
 */
void redact_relay_finish(struct redact_relay *rl, int timeout_ms);
/*
 * Bounds each stream to max bytes (0: unbounded, the default): past it one
 * "\n[tollgate: output truncated after MAX bytes]\n" is written on that
 * stream and the rest is read and dropped, so the sandbox never blocks.
 */
void redact_relay_set_max_output(struct redact_relay *rl, uint64_t max);
/* Bytes dropped past the bound on fd 1 or 2 (with a pty, its master's too). */
uint64_t redact_relay_dropped(const struct redact_relay *rl, int fd);
/* Markers written on both streams. */
uint64_t redact_relay_redactions(const struct redact_relay *rl);
/* Restores fds 1 and 2 if still swapped, finishes, closes. Accepts NULL. */
void redact_relay_free(struct redact_relay *rl);

#endif
