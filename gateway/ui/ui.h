/*
 * `tollgate ui`: the review page. One libevent HTTP server that shows the
 * approvals running gateways wait for (and decides them), the audit log as a
 * timeline and a search, the hash chain's state and live counters.
 */
#ifndef TOLLGATE_UI_H
#define TOLLGATE_UI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define UI_AUDIT_MAX 8 /* --audit files one page shows */

struct ui_options {
	const char *listen;                    /* "ADDR:PORT"; NULL: 127.0.0.1:8080 */
	const char *audit_paths[UI_AUDIT_MAX]; /* the logs to read (borrowed) */
	size_t naudit;
	const char *control_dir;  /* where gateways' sockets are; NULL: gw_control_dir */
	const char *control_path; /* --control: this gateway's socket only; NULL: all found */
	const char *cert_path;    /* PEM certificate and key: serve HTTPS (both or neither) */
	const char *key_path;
	FILE *announce;    /* where the URL with the token is printed (stdout) */
	const char *fleet; /* --fleet URL: the fleet's nodes, requests and rows too */
};

/*
 * Serves until SIGINT or SIGTERM. Listening on an address that is not
 * loopback needs cert_path and key_path, or prints a loud warning on stderr
 * and serves plain HTTP. 0 after a signal, or negative errno with one line
 * in err (the address is taken, a certificate cannot be read, ...).
 */
int ui_run(const struct ui_options *o, char *err, size_t errlen);

#endif
