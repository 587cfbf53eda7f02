/*
 * libFuzzer harness for the parent proxy's answer to CONNECT
 * (proxy_parent_reply_parse): the bytes of a peer on the network, read in
 * pieces as they come. A head's length never exceeds what was given or the
 * cap, and a prefix of the input never finds another end than the whole.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int status = -1, pstatus = -1;
	size_t split;
	char *buf;
	long end, pend;

	/* An exact-size copy, no NUL after it: the parser must honour len. */
	buf = malloc(size > 0 ? size : 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	end = proxy_parent_reply_parse(buf, size, &status);
	if (end > 0 &&
	    ((size_t)end > size || end > PROXY_PARENT_REPLY_MAX || status < 100 || status > 999))
		abort();
	if (end < 0 && end != -EBADMSG && end != -E2BIG && end != -ENOMEM)
		abort();
	/* As upstream.c reads it: a first piece, then the whole. */
	split = size > 0 ? data[0] % (size + 1) : 0;
	pend = proxy_parent_reply_parse(buf, split, &pstatus);
	if (pend > 0 && (pend != end || pstatus != status))
		abort();
	free(buf);
	return 0;
}
