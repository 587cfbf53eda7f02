/*
 * Image references as the command line gives them: NAME[:TAG][@sha256:HEX]
 * or sha256:HEX alone. Pure: no store is read here.
 */
#include "exec/image/image.h"

#include <errno.h>
#include <string.h>

#include "gateway/core/err.h"

bool
exec_image_digest_parse(const char *s, char hex[EXEC_IMAGE_HEX_LEN + 1])
{
	if (strncmp(s, "sha256:", 7) != 0)
		return false;
	s += 7;
	for (size_t i = 0; i < EXEC_IMAGE_HEX_LEN; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	if (s[EXEC_IMAGE_HEX_LEN] != '\0')
		return false;
	memcpy(hex, s, EXEC_IMAGE_HEX_LEN + 1);
	return true;
}

static bool
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-' || c == '/';
}

static bool
tag_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

int
exec_image_ref_parse(const char *s, struct exec_image_ref *out, char *err, size_t errlen)
{
	const char *at, *colon, *slash, *end;
	size_t nlen;

	memset(out, 0, sizeof(*out));
	if (exec_image_digest_parse(s, out->hex))
		return 0;
	/* Never read as NAME "sha256" with a tag: a digest typed wrong. */
	if (strncmp(s, "sha256:", 7) == 0) {
		gw_set_err(err, errlen,
		           "%s: the digest is not sha256: and 64 lower-case hex digits", s);
		return -EINVAL;
	}
	at = strchr(s, '@');
	end = at != NULL ? at : s + strlen(s);
	if (at != NULL && !exec_image_digest_parse(at + 1, out->hex)) {
		gw_set_err(err, errlen,
		           "%s: the digest is not sha256: and 64 lower-case hex digits", s);
		return -EINVAL;
	}
	/* The tag's colon is the last one after the last slash (a registry's
	 * host:port comes before the first). */
	slash = NULL;
	for (const char *p = s; p < end; p++) {
		if (*p == '/')
			slash = p;
	}
	colon = NULL;
	for (const char *p = slash != NULL ? slash : s; p < end; p++) {
		if (*p == ':')
			colon = p;
	}
	nlen = (size_t)((colon != NULL ? colon : end) - s);
	if (nlen == 0 || nlen >= sizeof(out->name)) {
		gw_set_err(err, errlen, "%s: no image name, or one too long", s);
		return -EINVAL;
	}
	for (size_t i = 0; i < nlen; i++) {
		char c = s[i];
		/* host:port before the first slash */
		bool port = c == ':' && memchr(s + i, '/', nlen - i) != NULL && i > 0;

		if (!name_char(c) && !port) {
			gw_set_err(
			    err, errlen,
			    "%s: an image name has lower-case letters, digits and . _ - / only", s);
			return -EINVAL;
		}
	}
	if (s[0] == '/' || s[nlen - 1] == '/' || memmem(s, nlen, "//", 2) != NULL ||
	    memmem(s, nlen, "..", 2) != NULL) {
		gw_set_err(err, errlen, "%s: not an image name", s);
		return -EINVAL;
	}
	memcpy(out->name, s, nlen);
	out->name[nlen] = '\0';
	if (colon == NULL) {
		memcpy(out->tag, "latest", 7);
		return 0;
	}
	colon++;
	if (colon == end || (size_t)(end - colon) >= sizeof(out->tag)) {
		gw_set_err(err, errlen, "%s: an empty tag, or one too long", s);
		return -EINVAL;
	}
	for (const char *p = colon; p < end; p++) {
		if (!tag_char(*p)) {
			gw_set_err(err, errlen, "%s: a tag has letters, digits and . _ - only", s);
			return -EINVAL;
		}
	}
	memcpy(out->tag, colon, (size_t)(end - colon));
	out->tag[end - colon] = '\0';
	return 0;
}
