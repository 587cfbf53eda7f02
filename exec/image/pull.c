/*
 * `tollgate image pull`: the OCI distribution API over HTTPS with libcurl
 * (docs/images.md, "Pulling"). A registry is hostile input: every answer is
 * bounded (manifests, tokens, error bodies, blobs by their descriptor's
 * size, redirects), every manifest and blob is hashed as it arrives and
 * stored only when it is the digest asked for.
 */
#include "exec/image/image.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "exec/image/libcurl.h"
#include "gateway/core/err.h"
#include "gateway/core/thread.h"

#define ACCEPT_MANIFESTS                                                                           \
	"Accept: application/vnd.oci.image.index.v1+json, "                                        \
	"application/vnd.oci.image.manifest.v1+json, "                                             \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                              \
	"application/vnd.docker.distribution.manifest.v2+json"
#define ERROR_BODY_MAX 4096
#define CONNECT_TIMEOUT_S 30L
#define STALL_BYTES 1024L   /* slower than this a second ... */
#define STALL_S 60L         /* ... for this long: a stalled registry */
#define SMALL_ANSWER_S 120L /* a manifest's or a token's whole answer */
#define RECV_BUFFER (512L << 10)
#define WRITEBACK_STEP (8u << 20) /* a blob's writeback started every 8 MiB */
#define WRITE_BATCH (1u << 20)    /* a blob written to its file 1 MiB at a time */

struct registry {
	const struct exec_image_pull_opts *o;
	CURLSH *share;
	char host[EXEC_IMAGE_NAME_MAX]; /* HOST[:PORT] */
	char repo[EXEC_IMAGE_NAME_MAX];
	char scheme[8];
	char *authz; /* "Authorization: ..." once a challenge was answered */
};

/*
 * A file's writer: a thread that hashes and writes one batch while libcurl
 * receives and decrypts the next (two buffers, handed over in turn), so
 * that a blob's SHA-256 and its copy into the page cache run beside the
 * TLS decryption rather than after it.
 */
struct writer {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *spare;     /* the buffer the thread does not hold */
	const char *job; /* handed over, not written yet: NULL when idle */
	size_t joblen;
	uint64_t ondisk; /* bytes written to the file */
	bool quit, failed;
};

/*
 * Where one answer goes: memory (bounded) or a file, hashed as it comes. A
 * file's bytes gather in buf (WRITE_BATCH) and go to it in one write: TLS
 * hands them over a record (8-16 KiB) at a time. With a writer (w), the
 * hashing and writing are its; without, they are done here.
 */
struct sink {
	CURL *curl;
	char *buf;
	size_t len, max; /* memory: at most max bytes; file: what buf holds */
	int fd;          /* file: -1 for memory */
	uint64_t written, limit;
	EVP_MD_CTX *md;
	struct writer *w;
	bool too_big, write_failed, error_cut;
	long status;
	char challenge[2048];
	char digest[80];
	char ctype[128];
	char errbody[ERROR_BODY_MAX + 1];
	size_t errlen;
};

static bool
write_all(int fd, const char *data, size_t n)
{
	for (size_t at = 0; at < n;) {
		ssize_t w = write(fd, data + at, n - at);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		at += (size_t)w;
	}
	return true;
}

/* One batch hashed and written; *ondisk counts what the file holds. */
static bool
batch_out(struct sink *k, const char *data, size_t n, uint64_t *ondisk)
{
	uint64_t before = *ondisk;

	EVP_DigestUpdate(k->md, data, n);
	if (!write_all(k->fd, data, n))
		return false;
	*ondisk += n;
	/* Start the disk writing what came so far, so that the fsync before the
	 * blob's rename waits for the last few MiB only. */
	if (*ondisk / WRITEBACK_STEP != before / WRITEBACK_STEP)
		(void)sync_file_range(k->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return true;
}

static void *
writer_main(void *arg)
{
	struct sink *k = arg;
	struct writer *w = k->w;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		const char *job;
		size_t len;
		bool ok;

		while (w->job == NULL && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->job == NULL)
			break;
		job = w->job;
		len = w->joblen;
		pthread_mutex_unlock(&w->mu);
		ok = batch_out(k, job, len, &w->ondisk);
		pthread_mutex_lock(&w->mu);
		if (!ok)
			w->failed = true;
		w->spare = (char *)job;
		w->job = NULL;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Waits until the writer holds no batch; false when one failed. */
static bool
writer_idle(struct writer *w)
{
	bool ok;

	pthread_mutex_lock(&w->mu);
	while (w->job != NULL)
		pthread_cond_wait(&w->cv, &w->mu);
	ok = !w->failed;
	pthread_mutex_unlock(&w->mu);
	return ok;
}

/*
 * A file sink's gathered bytes hashed and written out (by the writer, which
 * takes them as they are while buf becomes its other buffer); wait: until
 * they are on their way to the disk. false when the store refused them.
 */
static bool
sink_flush(struct sink *k, bool wait)
{
	struct writer *w = k->w;
	bool ok = true;

	if (k->len > 0 && w == NULL) {
		ok = batch_out(k, k->buf, k->len, &(uint64_t){k->written - k->len});
	} else if (k->len > 0) {
		pthread_mutex_lock(&w->mu);
		while (w->job != NULL)
			pthread_cond_wait(&w->cv, &w->mu);
		ok = !w->failed;
		if (ok) {
			w->job = k->buf;
			w->joblen = k->len;
			k->buf = w->spare;
			w->spare = NULL;
			pthread_cond_broadcast(&w->cv);
		}
		pthread_mutex_unlock(&w->mu);
	}
	k->len = 0;
	if (ok && wait && w != NULL)
		ok = writer_idle(w);
	if (!ok)
		k->write_failed = true;
	return ok;
}

static int
sink_reset(struct sink *k)
{
	k->len = 0;
	k->written = 0;
	k->too_big = k->write_failed = k->error_cut = false;
	k->challenge[0] = k->digest[0] = k->ctype[0] = '\0';
	k->errlen = 0;
	k->errbody[0] = '\0';
	if (k->w != NULL) {
		(void)writer_idle(k->w);
		k->w->ondisk = 0;
		k->w->failed = false;
	}
	if (k->fd >= 0 && (ftruncate(k->fd, 0) != 0 || lseek(k->fd, 0, SEEK_SET) != 0))
		return -errno;
	return EVP_DigestInit_ex(k->md, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
}

/*
 * A writer for the file sink k, whose buf is the first of its two buffers
 * (WRITE_BATCH each, spare the second); without one (no thread to be had),
 * k hashes and writes by itself.
 */
static void
writer_start(struct sink *k, struct writer *w, char *spare)
{
	memset(w, 0, sizeof(*w));
	w->spare = spare;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	k->w = w;
	if (gw_thread_start(&w->thread, writer_main, k) != 0) {
		k->w = NULL;
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
	}
}

static void
writer_stop(struct sink *k)
{
	struct writer *w = k->w;

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	while (w->job != NULL)
		pthread_cond_wait(&w->cv, &w->mu);
	w->quit = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	k->w = NULL;
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct sink *k = arg;
	size_t n = size * nmemb;
	long status = 0;

	curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		/* An error's body: its first bytes, for its message; the rest is
		 * not read (the transfer ends there). */
		size_t room = ERROR_BODY_MAX - k->errlen;

		memcpy(k->errbody + k->errlen, data, n < room ? n : room);
		k->errlen += n < room ? n : room;
		k->errbody[k->errlen] = '\0';
		if (n >= room) {
			k->error_cut = true;
			return 0;
		}
		return n;
	}
	if (k->written + n > k->limit) {
		k->too_big = true;
		return 0;
	}
	k->written += n;
	if (k->fd < 0) {
		EVP_DigestUpdate(k->md, data, n);
		memcpy(k->buf + k->len, data, n);
		k->len += n;
		return n;
	}
	for (size_t left = n; left > 0;) {
		size_t c = WRITE_BATCH - k->len < left ? WRITE_BATCH - k->len : left;

		memcpy(k->buf + k->len, data, c);
		k->len += c;
		data += c;
		left -= c;
		if (k->len == WRITE_BATCH && !sink_flush(k, false))
			return 0;
	}
	return n;
}

/* Copies a header's value (trimmed) into dst. */
static void
header_value(const char *line, size_t n, size_t namelen, char *dst, size_t cap)
{
	const char *v = line + namelen, *end = line + n;

	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	if ((size_t)(end - v) >= cap)
		end = v + cap - 1;
	memcpy(dst, v, (size_t)(end - v));
	dst[end - v] = '\0';
}

static size_t
on_header(char *line, size_t size, size_t nmemb, void *arg)
{
	struct sink *k = arg;
	size_t n = size * nmemb;

	/* A redirect's headers are followed by the next answer's: keep the last. */
	if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		k->challenge[0] = k->digest[0] = k->ctype[0] = '\0';
	} else if (n > 17 && strncasecmp(line, "WWW-Authenticate:", 17) == 0) {
		if (k->challenge[0] == '\0')
			header_value(line, n, 17, k->challenge, sizeof(k->challenge));
	} else if (n > 22 && strncasecmp(line, "Docker-Content-Digest:", 22) == 0) {
		header_value(line, n, 22, k->digest, sizeof(k->digest));
	} else if (n > 13 && strncasecmp(line, "Content-Type:", 13) == 0) {
		header_value(line, n, 13, k->ctype, sizeof(k->ctype));
	}
	return n;
}

/*
 * One GET of url into k. Registry URLs take the scheme chosen for the
 * registry; the token endpoint's must be https (http only at the registry
 * named --insecure-registry). 0 with k->status set, or -errno with err.
 */
static int
http_get(struct registry *r, const char *url, const char *accept, const char *authz, bool basic,
         struct sink *k, char *err, size_t errlen)
{
	char curlerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	CURLcode cc;
	CURL *c = curl_easy_init();
	bool plain = strcmp(r->scheme, "http") == 0;
	int rc = 0;

	if (c == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	k->curl = c;
	rc = sink_reset(k);
	if (rc != 0) {
		gw_set_err(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	if (accept != NULL)
		hdrs = curl_slist_append(hdrs, accept);
	if (authz != NULL)
		hdrs = curl_slist_append(hdrs, authz);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_SHARE, r->share);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, plain ? "http,https" : "https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, plain ? "http,https" : "https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)EXEC_IMAGE_REDIRECTS_MAX);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, STALL_BYTES);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, STALL_S);
	if (k->fd < 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT, SMALL_ANSWER_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, RECV_BUFFER);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "tollgate/" TOLLGATE_VERSION);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curlerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, k);
	/* Never the proxy variables: a pull goes where its REF says. */
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	if (r->o->ca_file != NULL)
		curl_easy_setopt(c, CURLOPT_CAINFO, r->o->ca_file);
	if (basic) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, r->o->user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, r->o->password);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &k->status);
	/* A file's last batch written (a failed transfer's dropped), and the
	 * writer idle again: the hash and the file are whole. */
	if (k->fd >= 0) {
		if (cc != CURLE_OK)
			k->len = 0;
		(void)sink_flush(k, true);
	}
	if (k->too_big) {
		rc = -EFBIG;
		gw_set_err(err, errlen, "%s: the registry sent more than %llu bytes", url,
		           (unsigned long long)k->limit);
	} else if (k->write_failed) {
		rc = -EIO;
		gw_set_err(err, errlen, "%s: cannot write it to the store", url);
	} else if (cc == CURLE_TOO_MANY_REDIRECTS) {
		rc = -ELOOP;
		gw_set_err(err, errlen, "%s: more than %d redirects", url,
		           EXEC_IMAGE_REDIRECTS_MAX);
	} else if (cc == CURLE_UNSUPPORTED_PROTOCOL) {
		rc = -EPROTO;
		gw_set_err(err, errlen, "%s: refused: %s", url,
		           plain ? "not an http or https URL"
		                 : "plain HTTP (name the registry with --insecure-registry)");
	} else if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && k->error_cut)) {
		rc = -EIO;
		gw_set_err(err, errlen, "%s: %s", url,
		           curlerr[0] != '\0' ? curlerr : curl_easy_strerror(cc));
	}
out:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	k->curl = NULL;
	return rc;
}

/* A token endpoint's answer: {"token": ...} or {"access_token": ...}. */
static int
fetch_token(struct registry *r, const struct exec_image_challenge *ch, char *err, size_t errlen)
{
	char url[2048], scope[600], *esc_service = NULL, *esc_scope = NULL;
	struct sink k = {.fd = -1, .max = EXEC_IMAGE_TOKEN_MAX, .limit = EXEC_IMAGE_TOKEN_MAX};
	json_t *doc = NULL, *tok;
	CURL *c = curl_easy_init();
	bool https = strncmp(ch->realm, "https://", 8) == 0;
	int rc = -EACCES;

	k.buf = malloc(EXEC_IMAGE_TOKEN_MAX + 1);
	k.md = EVP_MD_CTX_new();
	if (c == NULL || k.buf == NULL || k.md == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	/* The realm is where the credentials go: https, unless it is the
	 * registry --insecure-registry named. */
	if (!https) {
		size_t hl = strlen(r->host);

		if (strcmp(r->scheme, "http") != 0 || strncmp(ch->realm, "http://", 7) != 0 ||
		    strncmp(ch->realm + 7, r->host, hl) != 0 ||
		    (ch->realm[7 + hl] != '/' && ch->realm[7 + hl] != '\0')) {
			gw_set_err(err, errlen, "the registry's token realm %.200s is not https",
			           ch->realm);
			goto out;
		}
	}
	if (ch->scope[0] != '\0')
		snprintf(scope, sizeof(scope), "%s", ch->scope);
	else
		snprintf(scope, sizeof(scope), "repository:%s:pull", r->repo);
	esc_service = curl_easy_escape(c, ch->service, 0);
	esc_scope = curl_easy_escape(c, scope, 0);
	if (esc_service == NULL || esc_scope == NULL ||
	    snprintf(url, sizeof(url), "%s%cservice=%s&scope=%s", ch->realm,
	             strchr(ch->realm, '?') != NULL ? '&' : '?', esc_service,
	             esc_scope) >= (int)sizeof(url)) {
		gw_set_err(err, errlen, "the registry's token realm is too long");
		goto out;
	}
	rc = http_get(r, url, NULL, NULL, r->o->user != NULL, &k, err, errlen);
	if (rc != 0)
		goto out;
	rc = -EACCES;
	if (k.status != 200) {
		gw_set_err(err, errlen, "the token endpoint %.200s answered %ld%s", ch->realm,
		           k.status,
		           k.status == 401 ? (r->o->user != NULL ? " (the credentials were refused)"
		                                                 : " (give --registry-secret)")
		                           : "");
		goto out;
	}
	doc = json_loadb(k.buf, k.len, JSON_REJECT_DUPLICATES, NULL);
	tok = json_object_get(doc, "token");
	if (!json_is_string(tok))
		tok = json_object_get(doc, "access_token");
	if (!json_is_string(tok) || json_string_length(tok) == 0 ||
	    json_string_length(tok) > EXEC_IMAGE_TOKEN_MAX ||
	    strspn(json_string_value(tok), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                                   "0123456789-._~+/=") != json_string_length(tok)) {
		gw_set_err(err, errlen, "the token endpoint %.200s sent no usable token",
		           ch->realm);
		goto out;
	}
	free(r->authz);
	if (asprintf(&r->authz, "Authorization: Bearer %s", json_string_value(tok)) < 0) {
		r->authz = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = 0;
out:
	json_decref(doc);
	curl_free(esc_service);
	curl_free(esc_scope);
	curl_easy_cleanup(c);
	EVP_MD_CTX_free(k.md);
	free(k.buf);
	return rc;
}

/* Basic credentials as a header, for a registry that asks for them itself. */
static int
basic_authz(struct registry *r)
{
	unsigned char in[1024];
	char out[1400];
	int n = snprintf((char *)in, sizeof(in), "%s:%s", r->o->user, r->o->password);

	if (n < 0 || n >= (int)sizeof(in))
		return -EINVAL;
	EVP_EncodeBlock((unsigned char *)out, in, n);
	OPENSSL_cleanse(in, sizeof(in));
	free(r->authz);
	if (asprintf(&r->authz, "Authorization: Basic %s", out) < 0) {
		r->authz = NULL;
		return -ENOMEM;
	}
	return 0;
}

/*
 * GET path (below /v2/REPO/) with the registry's auth: on a 401, its
 * challenge is answered once (a bearer token, or basic credentials) and
 * the request made again. 0 only for a 200.
 */
static int
registry_get(struct registry *r, const char *path, const char *accept, struct sink *k, char *err,
             size_t errlen)
{
	struct exec_image_challenge ch;
	char url[EXEC_IMAGE_NAME_MAX * 2 + 200];
	int rc;

	snprintf(url, sizeof(url), "%s://%s/v2/%s/%s", r->scheme, r->host, r->repo, path);
	for (int attempt = 0;; attempt++) {
		rc = http_get(r, url, accept, r->authz, false, k, err, errlen);
		if (rc != 0)
			return rc;
		if (k->status != 401 || attempt > 0)
			break;
		if (exec_image_challenge_parse(k->challenge, strlen(k->challenge), &ch) != 0) {
			gw_set_err(err, errlen, "%s: 401 with no challenge tollgate can answer",
			           url);
			return -EACCES;
		}
		if (strcmp(ch.scheme, "bearer") == 0 && ch.realm[0] != '\0') {
			rc = fetch_token(r, &ch, err, errlen);
		} else if (strcmp(ch.scheme, "basic") == 0 && r->o->user != NULL) {
			rc = basic_authz(r);
			if (rc != 0)
				gw_set_err(err, errlen, "the registry credentials are too long");
		} else {
			gw_set_err(err, errlen, "%s: 401, asking for %s credentials%s", url,
			           ch.scheme,
			           r->o->user == NULL ? " (give --registry-secret)" : "");
			return -EACCES;
		}
		if (rc != 0)
			return rc;
	}
	if (k->status == 200)
		return 0;
	/* The distribution API's errors: {"errors":[{"code":...,"message":...}]}. */
	{
		json_t *doc = json_loadb(k->errbody, k->errlen, 0, NULL);
		json_t *e = json_array_get(json_object_get(doc, "errors"), 0);
		const char *code = json_string_value(json_object_get(e, "code"));
		char safe[128] = "";

		for (size_t i = 0; code != NULL && code[i] != '\0' && i + 1 < sizeof(safe); i++)
			safe[i] =
			    (code[i] >= 'A' && code[i] <= 'Z') || code[i] == '_' ? code[i] : '?';
		gw_set_err(err, errlen, "%s: the registry answered %ld%s%s%s", url, k->status,
		           safe[0] != '\0' ? " (" : "", safe, safe[0] != '\0' ? ")" : "");
		json_decref(doc);
	}
	return k->status == 404 ? -ENOENT : k->status == 401 || k->status == 403 ? -EACCES : -EIO;
}

static void
md_hex(EVP_MD_CTX *md, char hex[EXEC_IMAGE_HEX_LEN + 1])
{
	unsigned char d[32];
	unsigned int n = 0;

	EVP_DigestFinal_ex(md, d, &n);
	for (size_t i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/*
 * The manifest or index reference (a tag or sha256:HEX) names, into k->buf.
 * want: the digest it must have ("" for a tag: its own digest, checked
 * against Docker-Content-Digest when the registry sends one). got: its
 * digest.
 */
static int
fetch_manifest(struct registry *r, const char *reference, const char *want, struct sink *k,
               char got[EXEC_IMAGE_HEX_LEN + 1], char *err, size_t errlen)
{
	char path[200], claimed[EXEC_IMAGE_HEX_LEN + 1];
	int rc;

	snprintf(path, sizeof(path), "manifests/%s", reference);
	rc = registry_get(r, path, ACCEPT_MANIFESTS, k, err, errlen);
	if (rc != 0)
		return rc;
	md_hex(k->md, got);
	if (want[0] != '\0' && strcmp(want, got) != 0) {
		gw_set_err(err, errlen,
		           "manifest sha256:%s: digest mismatch (its content is sha256:%s)", want,
		           got);
		return -EBADMSG;
	}
	if (k->digest[0] != '\0' && exec_image_digest_parse(k->digest, claimed) &&
	    strcmp(claimed, got) != 0) {
		gw_set_err(err, errlen,
		           "manifest %s: the registry says sha256:%s, its content is sha256:%s",
		           reference, claimed, got);
		return -EBADMSG;
	}
	return 0;
}

/* An index, told by its Content-Type or, failing that, by its manifests list. */
static bool
is_index(const struct sink *k)
{
	json_t *doc;
	bool yes;

	if (strncmp(k->ctype, "application/vnd.oci.image.index.v1+json", 39) == 0 ||
	    strncmp(k->ctype, "application/vnd.docker.distribution.manifest.list.v2+json", 57) == 0)
		return true;
	doc = json_loadb(k->buf, k->len, 0, NULL);
	yes = json_is_array(json_object_get(doc, "manifests")) &&
	      json_object_get(doc, "layers") == NULL;
	json_decref(doc);
	return yes;
}

struct blob_job {
	struct registry *r;
	const struct exec_image_desc *d;
	const char *what;
};

static int
blob_into(void *arg, int fd, char got[EXEC_IMAGE_HEX_LEN + 1], char *err, size_t errlen)
{
	struct blob_job *j = arg;
	struct sink k = {.fd = fd, .limit = (uint64_t)j->d->size};
	struct writer w;
	char path[100], *bufs = malloc(2 * (size_t)WRITE_BATCH);
	int rc;

	k.md = EVP_MD_CTX_new();
	if (k.md == NULL || bufs == NULL) {
		EVP_MD_CTX_free(k.md);
		free(bufs);
		return -ENOMEM;
	}
	k.buf = bufs;
	writer_start(&k, &w, bufs + WRITE_BATCH);
	snprintf(path, sizeof(path), "blobs/sha256:%s", j->d->hex);
	rc = registry_get(j->r, path, NULL, &k, err, errlen);
	if (rc == -EFBIG)
		gw_set_err(err, errlen, "%s sha256:%s: the registry sent more than its %lld bytes",
		           j->what, j->d->hex, (long long)j->d->size);
	if (rc == 0 && k.written != (uint64_t)j->d->size) {
		rc = -EBADMSG;
		gw_set_err(err, errlen, "%s sha256:%s: %llu bytes of %lld (truncated)", j->what,
		           j->d->hex, (unsigned long long)k.written, (long long)j->d->size);
	}
	writer_stop(&k);
	if (rc == 0)
		md_hex(k.md, got);
	EVP_MD_CTX_free(k.md);
	free(bufs);
	return rc;
}

/* Splits NAME into its registry (the host its API answers on) and its
 * repository; the registry is required. */
static int
split_name(const char *refstr, const char *name, struct registry *r, char *err, size_t errlen)
{
	const char *slash = strchr(name, '/');
	size_t hl = slash != NULL ? (size_t)(slash - name) : 0;

	if (slash == NULL || hl >= sizeof(r->host) ||
	    (memchr(name, '.', hl) == NULL && memchr(name, ':', hl) == NULL &&
	     strncmp(name, "localhost", hl) != 0)) {
		gw_set_err(err, errlen,
		           "%s: name the registry (REGISTRY/REPO[:TAG][@sha256:DIGEST])", refstr);
		return -EINVAL;
	}
	memcpy(r->host, name, hl);
	r->host[hl] = '\0';
	snprintf(r->repo, sizeof(r->repo), "%s", slash + 1);
	/* Docker Hub's name is not its API's host. */
	if (strcmp(r->host, "docker.io") == 0 || strcmp(r->host, "index.docker.io") == 0)
		snprintf(r->host, sizeof(r->host), "registry-1.docker.io");
	return 0;
}

/* REF parsed, its registry and repository split, and the scheme o gives it:
 * what a pull asks, before anything is asked. 0 or -EINVAL with err. */
static int
pull_target(const char *refstr, const struct exec_image_pull_opts *o, struct exec_image_ref *ref,
            struct registry *r, char *err, size_t errlen)
{
	int rc;

	rc = exec_image_ref_parse(refstr, ref, err, errlen);
	if (rc != 0)
		return rc;
	if (ref->name[0] == '\0') {
		gw_set_err(err, errlen,
		           "%s: name the registry (REGISTRY/REPO[:TAG][@sha256:DIGEST])", refstr);
		return -EINVAL;
	}
	rc = split_name(refstr, ref->name, r, err, errlen);
	if (rc != 0)
		return rc;
	snprintf(r->scheme, sizeof(r->scheme), "%s",
	         o->insecure != NULL && strcmp(o->insecure, r->host) == 0 ? "http" : "https");
	return 0;
}

int
exec_image_pull_target(const char *refstr, const struct exec_image_pull_opts *o,
                       char host[EXEC_IMAGE_NAME_MAX], int *port, char *err, size_t errlen)
{
	struct exec_image_ref ref;
	struct registry r = {.o = o};
	char *colon;
	int rc;

	rc = pull_target(refstr, o, &ref, &r, err, errlen);
	if (rc != 0)
		return rc;
	memcpy(host, r.host, sizeof(r.host));
	*port = strcmp(r.scheme, "http") == 0 ? 80 : 443;
	/* The reference's grammar allows one ":PORT" in the registry, digits only. */
	colon = strrchr(host, ':');
	if (colon != NULL) {
		long p = strtol(colon + 1, NULL, 10);

		*port = p > 0 && p <= 65535 ? (int)p : 0;
		*colon = '\0';
	}
	return 0;
}

/* Whether REF names a tag itself (a digest alone does not). */
static bool
names_tag(const char *refstr)
{
	const char *at = strchr(refstr, '@'), *slash = strrchr(refstr, '/'), *end;

	end = at != NULL ? at : refstr + strlen(refstr);
	if (slash == NULL || slash > end)
		return false;
	return memchr(slash, ':', (size_t)(end - slash)) != NULL;
}

static int
pull_locked(struct exec_image_store *s, struct registry *r, const struct exec_image_ref *ref,
            bool tagged, char hex[EXEC_IMAGE_HEX_LEN + 1], char *err, size_t errlen)
{
	struct exec_image_manifest m;
	struct exec_image_desc d;
	struct sink k = {.fd = -1, .max = EXEC_IMAGE_JSON_MAX, .limit = EXEC_IMAGE_JSON_MAX};
	char reference[200], name[EXEC_IMAGE_NAME_MAX + 140], why[512];
	bool nested;
	int rc;

	k.buf = malloc(EXEC_IMAGE_JSON_MAX + 1);
	k.md = EVP_MD_CTX_new();
	if (k.buf == NULL || k.md == NULL) {
		rc = -ENOMEM;
		gw_set_err(err, errlen, "out of memory");
		goto out;
	}
	if (ref->hex[0] != '\0')
		snprintf(reference, sizeof(reference), "sha256:%s", ref->hex);
	else
		snprintf(reference, sizeof(reference), "%s", ref->tag);
	rc = fetch_manifest(r, reference, ref->hex, &k, hex, err, errlen);
	/* An index, then at most one nested index: to this host's manifest. */
	for (int depth = 0; rc == 0 && is_index(&k); depth++) {
		if (depth > 1) {
			rc = -EINVAL;
			gw_set_err(err, errlen, "%s: an index inside an index inside an index",
			           reference);
			break;
		}
		rc = exec_image_index_pick(k.buf, k.len, NULL, &d, &nested, why, sizeof(why));
		if (rc != 0) {
			gw_set_err(err, errlen, "index sha256:%.12s: %s", hex, why);
			break;
		}
		snprintf(reference, sizeof(reference), "sha256:%s", d.hex);
		rc = fetch_manifest(r, reference, d.hex, &k, hex, err, errlen);
	}
	if (rc != 0)
		goto out;
	if (exec_image_manifest_parse(k.buf, k.len, &m, why, sizeof(why)) != 0) {
		rc = -EINVAL;
		gw_set_err(err, errlen, "manifest sha256:%.12s: %s", hex, why);
		goto out;
	}
	if (m.config.size > (int64_t)EXEC_IMAGE_JSON_MAX) {
		rc = -EFBIG;
		gw_set_err(err, errlen, "config sha256:%.12s: larger than %u bytes", m.config.hex,
		           EXEC_IMAGE_JSON_MAX);
		goto out;
	}
	for (size_t i = 0; i < m.nlayers; i++) {
		if ((uint64_t)m.layers[i].size > EXEC_IMAGE_BLOB_MAX) {
			rc = -EFBIG;
			gw_set_err(err, errlen, "layer %zu: larger than %llu bytes", i + 1,
			           EXEC_IMAGE_BLOB_MAX);
			goto out;
		}
	}
	rc = exec_image_blob_put(s, k.buf, k.len, hex, err, errlen);
	{
		struct blob_job j = {.r = r, .d = &m.config, .what = "config"};

		if (rc == 0)
			rc = exec_image_blob_fetch(s, m.config.hex, blob_into, &j, err, errlen);
		j.what = "layer";
		for (size_t i = 0; rc == 0 && i < m.nlayers; i++) {
			j.d = &m.layers[i];
			rc = exec_image_blob_fetch(s, m.layers[i].hex, blob_into, &j, err, errlen);
		}
	}
	if (rc != 0)
		goto out;
	/* A digest alone names no tag: the image is stored by its digest. */
	snprintf(name, sizeof(name), "%s:%s", ref->name, ref->tag);
	rc = exec_image_commit(s, hex, ref->hex[0] == '\0' || tagged ? name : NULL, err, errlen);
out:
	EVP_MD_CTX_free(k.md);
	free(k.buf);
	return rc;
}

int
exec_image_pull(struct exec_image_store *s, const char *refstr,
                const struct exec_image_pull_opts *o, char hex[EXEC_IMAGE_HEX_LEN + 1], char *err,
                size_t errlen)
{
	static bool curl_ready;
	struct exec_image_ref ref;
	struct registry r = {.o = o};
	int rc;

	rc = pull_target(refstr, o, &ref, &r, err, errlen);
	if (rc != 0)
		return rc;
	rc = exec_image_curl_load(err, errlen);
	if (rc != 0)
		return rc;
	if (!curl_ready && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		gw_set_err(err, errlen, "libcurl: cannot start");
		return -ENOMEM;
	}
	curl_ready = true;
	/* One connection cache and TLS session cache for every request of the pull. */
	r.share = curl_share_init();
	if (r.share == NULL) {
		gw_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	curl_share_setopt(r.share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(r.share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(r.share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	rc = exec_image_store_lock(s, err, errlen);
	if (rc == 0) {
		rc = pull_locked(s, &r, &ref, names_tag(refstr), hex, err, errlen);
		exec_image_store_unlock(s, rc != 0);
	}
	if (r.authz != NULL) {
		OPENSSL_cleanse(r.authz, strlen(r.authz));
		free(r.authz);
	}
	curl_share_cleanup(r.share);
	return rc;
}
