/*
 * A `wrap` or `serve` that cannot start still answers its MCP client: the
 * clients show an initialize error to the person but hide the server's
 * stderr, where the one-line reason went. What the client sent is read,
 * bounded in bytes and time, and each request in it is answered with a
 * JSON-RPC error carrying that line, until initialize has been answered.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/core/clock.h"
#include "gateway/mcp/mcp.h"

#define START_FAIL_WAIT_MS 10000       /* for the client's initialize to arrive */
#define START_FAIL_READ_MAX (1u << 20) /* what is read of it, at most */

bool
mcp_start_failure_wanted(int in_fd)
{
	struct stat st;

	/* A client's pipe or socket; not a terminal (a person who can read
	 * stderr) nor /dev/null or a file (nothing will ask). */
	return fstat(in_fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

/* Writes all of buf to a descriptor that may be non-blocking. 0 or -errno. */
static int
write_all(int fd, const char *buf, size_t len, double deadline)
{
	while (len > 0) {
		struct pollfd pfd = {fd, POLLOUT, 0};
		double left = deadline - gw_clock_mono();
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return -errno;
		n = write(fd, buf, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int
mcp_start_failure_reply(int out_fd, const json_t *id, const char *message)
{
	json_t *err = mcp_error_new(id, MCP_ERR_INTERNAL, message, NULL);
	char *text = err != NULL ? json_dumps(err, JSON_COMPACT) : NULL;
	int rc = -ENOMEM;

	if (text != NULL) {
		double deadline = gw_clock_mono() + START_FAIL_WAIT_MS / 1000.0;

		rc = write_all(out_fd, text, strlen(text), deadline);
		if (rc == 0)
			rc = write_all(out_fd, "\n", 1, deadline);
	}
	free(text);
	json_decref(err);
	return rc;
}

/* One line from the client: answered when a request. true once it was initialize. */
static bool
answer_line(int out_fd, const char *line, size_t len, const char *message)
{
	enum mcp_kind kind;
	const char *method;
	json_t *msg = NULL;
	bool init = false;

	if (mcp_parse_line(line, len, &msg, &kind) == 0 && kind == MCP_KIND_REQUEST) {
		method = json_string_value(json_object_get(msg, "method"));
		init = method != NULL && strcmp(method, "initialize") == 0;
		if (mcp_start_failure_reply(out_fd, json_object_get(msg, "id"), message) != 0)
			init = true; /* nobody reads: nothing more to say */
	}
	json_decref(msg);
	return init;
}

int
mcp_start_failure_answer(int in_fd, int out_fd, const char *message)
{
	double deadline = gw_clock_mono() + START_FAIL_WAIT_MS / 1000.0;
	size_t len = 0, start = 0;
	char *buf;
	int rc = 0;

	if (!mcp_start_failure_wanted(in_fd))
		return 0;
	buf = malloc(START_FAIL_READ_MAX);
	if (buf == NULL)
		return -ENOMEM;
	while (len < START_FAIL_READ_MAX) {
		struct pollfd pfd = {in_fd, POLLIN, 0};
		double left = deadline - gw_clock_mono();
		char *nl;
		ssize_t n;

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		n = read(in_fd, buf + len, START_FAIL_READ_MAX - len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0; /* the client's input ended */
			break;
		}
		len += (size_t)n;
		while ((nl = memchr(buf + start, '\n', len - start)) != NULL) {
			size_t end = (size_t)(nl - buf);

			if (answer_line(out_fd, buf + start, end - start, message))
				goto out;
			start = end + 1;
		}
	}
out:
	free(buf);
	return rc;
}
