/*
 * The bearer token of `serve --listen` and `wrap --listen`, read from (or
 * made in) the operator's --token-file as the user who started tollgate.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "gateway/cli/cli.h"
#include "gateway/core/safepath.h"
#include "gateway/mcp/http_guard.h"

#define TOKEN_MIN 16

static bool
token_char_ok(char c)
{
	/* RFC 6750's b64token */
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

/*
 * The bearer token of --listen: read from path when it exists (a regular
 * file of this user's that no one else may read: one line of 16 to 256
 * b64token characters), else a fresh one (32 random bytes in hex) written
 * there 0600. The token goes to no log and no stdout; stderr says where
 * it is. 0 or -1 after saying why.
 */
int
gw_http_token(const char *cmd, const char *path, char *token, size_t len)
{
	unsigned char raw[32];
	char buf[MCP_HTTP_TOKEN_MAX + 2], why[PATH_MAX + 128];
	struct stat sb;
	ssize_t n;
	size_t tlen;
	int fd, rc = -1;

	/* No other user's link anywhere on the way (gw_safepath_open), read
	 * or made, and never a link at the end. */
	fd = gw_safepath_open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, why, sizeof(why));
	if (fd < 0)
		errno = -fd;
	if (fd < 0 && errno == ENOENT) {
		fd = gw_safepath_open(path, O_WRONLY | O_CREAT | O_EXCL, 0600, why, sizeof(why));
		if (fd < 0) {
			gw_fail(cmd, "--token-file %s: cannot create it: %s", path, strerror(-fd));
			return -1;
		}
		if (RAND_bytes(raw, sizeof(raw)) != 1) {
			close(fd);
			unlink(path);
			gw_fail(cmd, "--token-file %s: no randomness for a token", path);
			return -1;
		}
		for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < len; i++)
			snprintf(token + 2 * i, 3, "%02x", raw[i]);
		OPENSSL_cleanse(raw, sizeof(raw));
		tlen = strlen(token);
		token[tlen] = '\n';
		n = write(fd, token, tlen + 1);
		token[tlen] = '\0';
		if (n != (ssize_t)(tlen + 1) || fsync(fd) != 0) {
			gw_fail(cmd, "--token-file %s: cannot write it: %s", path, strerror(errno));
			close(fd);
			unlink(path);
			OPENSSL_cleanse(token, len);
			return -1;
		}
		close(fd);
		fprintf(stderr, "tollgate: %s: a new bearer token for --listen is in %s\n", cmd,
		        path);
		return 0;
	}
	if (fd < 0) {
		gw_fail(cmd, "--token-file %s", why);
		return -1;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		gw_fail(cmd, "--token-file %s: not a regular file", path);
		goto out;
	}
	if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0) {
		gw_fail(cmd,
		        "--token-file %s: must be this user's and readable by no one else "
		        "(chmod 600)",
		        path);
		goto out;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		gw_fail(cmd, "--token-file %s: %s", path, strerror(errno));
		goto out;
	}
	buf[n] = '\0';
	tlen = strcspn(buf, "\r\n");
	buf[tlen] = '\0';
	if (tlen < TOKEN_MIN || tlen > MCP_HTTP_TOKEN_MAX || tlen + 1 > len) {
		gw_fail(cmd, "--token-file %s: the token must be one line of %d to %d characters",
		        path, TOKEN_MIN, MCP_HTTP_TOKEN_MAX);
		goto out;
	}
	for (size_t i = 0; i < tlen; i++) {
		if (!token_char_ok(buf[i])) {
			gw_fail(cmd,
			        "--token-file %s: the token may hold only letters, digits and "
			        "-._~+/=",
			        path);
			goto out;
		}
	}
	memcpy(token, buf, tlen + 1);
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return rc;
}
