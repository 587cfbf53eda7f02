/*
 * libFuzzer harness for the review page's request handling: the input is
 * what a browser would send on one connection, fed through libevent's HTTP
 * parser into the page's own routing, guards and API (gateway/ui/). "@T@",
 * "@C@" and "@X@" in the input become the page's token, a live session key
 * (X-Tollgate-Session) and its CSRF token, so that the paths behind the
 * login are reached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>

#include "gateway/ui/server.h"

#define INPUT_MAX 65536
#define LOOP_TURNS 64 /* loop passes per input: bounded, never a wait */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ui_options opts;
static struct ui_page *page;
static char session_key[128], csrf[80];

/* The page listens on a unix socket of its own (evhttp has no public call
 * that serves a connected descriptor); this is its address. */
static struct sockaddr_un listen_addr;

/* Sends req on a new connection and returns what came back (NUL-ended, capped). */
static size_t
exchange(const char *req, size_t len, char *out, size_t outlen)
{
	size_t got = 0, sent = 0;
	int sv[2] = {-1, -1};

	sv[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (sv[1] < 0 || connect(sv[1], (struct sockaddr *)&listen_addr, sizeof(listen_addr)) != 0)
		abort();
	for (int turn = 0; turn < LOOP_TURNS; turn++) {
		ssize_t n;

		if (sent < len) {
			n = write(sv[1], req + sent, len - sent);
			if (n > 0)
				sent += (size_t)n;
			if (sent == len)
				shutdown(sv[1], SHUT_WR);
		}
		event_base_loop(ui_page_base(page), EVLOOP_NONBLOCK);
		while (got + 1 < outlen && (n = read(sv[1], out + got, outlen - 1 - got)) > 0)
			got += (size_t)n;
		if (got + 1 >= outlen) {
			char sink[4096];

			while (read(sv[1], sink, sizeof(sink)) > 0)
				;
		}
	}
	close(sv[1]);
	/* Let the page see the close and free the connection. */
	for (int turn = 0; turn < 4; turn++)
		event_base_loop(ui_page_base(page), EVLOOP_NONBLOCK);
	out[got] = '\0';
	return got;
}

/* Copies the value after "key" up to one of stop (exclusive) into buf. */
static void
copy_after(const char *text, const char *key, const char *stop, char *buf, size_t len)
{
	const char *p = strstr(text, key);
	size_t n;

	buf[0] = '\0';
	if (p == NULL)
		return;
	p += strlen(key);
	n = strcspn(p, stop);
	if (n >= len)
		n = len - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
}

static void
login(void)
{
	char req[512], reply[8192];

	snprintf(req, sizeof(req),
	         "POST /api/login HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nOrigin: "
	         "http://127.0.0.1:8080\r\nX-Tollgate-Token: %s\r\nContent-Length: 0\r\n\r\n",
	         ui_page_token(page));
	exchange(req, strlen(req), reply, sizeof(reply));
	copy_after(reply, "\"key\":\"", "\"", session_key, sizeof(session_key));
	copy_after(reply, "\"csrf\":\"", "\"", csrf, sizeof(csrf));
	if (session_key[0] == '\0' || csrf[0] == '\0')
		abort();
}

static void
remove_socket(void)
{
	unlink(listen_addr.sun_path);
}

static void
setup(void)
{
	char err[256];
	int fd;

	opts.listen = "127.0.0.1:8080";
	opts.audit_paths[0] = "/nonexistent/tollgate-fuzz/audit.db";
	opts.naudit = 1;
	opts.control_dir = "/nonexistent/tollgate-fuzz/run";
	if (ui_page_new(&opts, &page, err, sizeof(err)) != 0)
		abort();
	listen_addr.sun_family = AF_UNIX;
	snprintf(listen_addr.sun_path, sizeof(listen_addr.sun_path), "/tmp/tollgate-fuzz-ui.%d",
	         (int)getpid());
	unlink(listen_addr.sun_path);
	atexit(remove_socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) != 0 ||
	    listen(fd, 16) != 0 || evhttp_accept_socket(ui_page_http(page), fd) != 0)
		abort();
	login();
}

/* The input with its markers replaced; NULL when out of memory. */
static char *
expand(const uint8_t *data, size_t size, size_t *outlen)
{
	const char *tok = ui_page_token(page);
	size_t cap = size * 2 + 256, n = 0;
	char *out = malloc(cap);

	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < size; i++) {
		const char *v = NULL;

		if (i + 3 <= size && data[i] == '@' && data[i + 2] == '@') {
			if (data[i + 1] == 'T')
				v = tok;
			else if (data[i + 1] == 'C')
				v = session_key;
			else if (data[i + 1] == 'X')
				v = csrf;
		}
		if (v != NULL) {
			size_t vl = strlen(v);

			if (n + vl >= cap) {
				char *bigger = realloc(out, cap * 2 + vl);

				if (bigger == NULL) {
					free(out);
					return NULL;
				}
				out = bigger;
				cap = cap * 2 + vl;
			}
			memcpy(out + n, v, vl);
			n += vl;
			i += 2;
			continue;
		}
		if (n + 1 >= cap) {
			char *bigger = realloc(out, cap * 2);

			if (bigger == NULL) {
				free(out);
				return NULL;
			}
			out = bigger;
			cap *= 2;
		}
		out[n++] = (char)data[i];
	}
	*outlen = n;
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char reply[65536];
	char *req;
	size_t len;

	if (size > INPUT_MAX)
		return 0;
	if (page == NULL)
		setup();
	req = expand(data, size, &len);
	if (req == NULL)
		return 0;
	exchange(req, len, reply, sizeof(reply));
	free(req);
	return 0;
}
