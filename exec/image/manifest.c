/*
 * The JSON documents of an image: manifests, indexes (and an OCI layout's
 * index.json) and configs, OCI's and Docker's schema 2 alike. Pure code on
 * bytes that come from a layout, an archive or a registry: every field is
 * checked for its type, every media type against the known ones.
 */
#include "exec/image/image.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include <jansson.h>

#include "gateway/core/err.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

static const struct {
	const char *type;
	enum exec_image_compression compression;
} layer_types[] = {
    {"application/vnd.oci.image.layer.v1.tar", EXEC_IMAGE_TAR},
    {"application/vnd.oci.image.layer.v1.tar+gzip", EXEC_IMAGE_GZIP},
    {"application/vnd.oci.image.layer.v1.tar+zstd", EXEC_IMAGE_ZSTD},
    {"application/vnd.docker.image.rootfs.diff.tar.gzip", EXEC_IMAGE_GZIP},
    {"application/vnd.docker.image.rootfs.diff.tar", EXEC_IMAGE_TAR},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar", EXEC_IMAGE_TAR},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", EXEC_IMAGE_GZIP},
};

static json_t *
load(const char *buf, size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root;

	if (len > EXEC_IMAGE_JSON_MAX) {
		gw_set_err(err, errlen, "larger than %u bytes", EXEC_IMAGE_JSON_MAX);
		return NULL;
	}
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		gw_set_err(err, errlen, "not JSON: %s (at byte %d)", jerr.text, jerr.position);
		return NULL;
	}
	if (!json_is_object(root)) {
		gw_set_err(err, errlen, "not a JSON object");
		json_decref(root);
		return NULL;
	}
	return root;
}

/* A descriptor's digest and size. */
static int
desc_parse(json_t *d, const char *what, struct exec_image_desc *out, char *err, size_t errlen)
{
	json_t *digest = json_object_get(d, "digest"), *size = json_object_get(d, "size");

	memset(out, 0, sizeof(*out));
	if (!json_is_object(d) || !json_is_string(digest) ||
	    !exec_image_digest_parse(json_string_value(digest), out->hex)) {
		gw_set_err(err, errlen, "%s: no sha256 digest", what);
		return -EINVAL;
	}
	if (!json_is_integer(size) || json_integer_value(size) < 0) {
		gw_set_err(err, errlen, "%s: no size", what);
		return -EINVAL;
	}
	out->size = (int64_t)json_integer_value(size);
	return 0;
}

static const char *
str_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

int
exec_image_manifest_parse(const char *buf, size_t len, struct exec_image_manifest *out, char *err,
                          size_t errlen)
{
	json_t *root, *layers, *l;
	const char *mt, *cmt;
	char what[32];
	size_t i;
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	root = load(buf, len, err, errlen);
	if (root == NULL)
		return -EINVAL;
	mt = str_of(root, "mediaType");
	if (mt != NULL && strcmp(mt, MT_OCI_MANIFEST) != 0 && strcmp(mt, MT_DOCKER_MANIFEST) != 0) {
		gw_set_err(err, errlen, "unknown media type %.100s for a manifest", mt);
		goto out;
	}
	if (!json_is_integer(json_object_get(root, "schemaVersion")) ||
	    json_integer_value(json_object_get(root, "schemaVersion")) != 2) {
		gw_set_err(err, errlen, "not a schema 2 manifest");
		goto out;
	}
	if (desc_parse(json_object_get(root, "config"), "config", &out->config, err, errlen) != 0)
		goto out;
	cmt = str_of(json_object_get(root, "config"), "mediaType");
	if (cmt == NULL ||
	    (strcmp(cmt, MT_OCI_CONFIG) != 0 && strcmp(cmt, MT_DOCKER_CONFIG) != 0)) {
		gw_set_err(err, errlen, "unknown media type %.100s for a config",
		           cmt != NULL ? cmt : "(none)");
		goto out;
	}
	layers = json_object_get(root, "layers");
	if (!json_is_array(layers)) {
		gw_set_err(err, errlen, "no layers");
		goto out;
	}
	if (json_array_size(layers) > EXEC_IMAGE_LAYERS_MAX) {
		gw_set_err(err, errlen, "more than %d layers", EXEC_IMAGE_LAYERS_MAX);
		goto out;
	}
	json_array_foreach(layers, i, l)
	{
		struct exec_image_desc *d = &out->layers[i];
		const char *lmt = str_of(l, "mediaType");
		size_t k;

		snprintf(what, sizeof(what), "layer %zu", i + 1);
		if (desc_parse(l, what, d, err, errlen) != 0)
			goto out;
		for (k = 0; lmt != NULL && k < sizeof(layer_types) / sizeof(layer_types[0]); k++) {
			if (strcmp(lmt, layer_types[k].type) == 0)
				break;
		}
		if (lmt == NULL || k == sizeof(layer_types) / sizeof(layer_types[0])) {
			gw_set_err(err, errlen, "%s: unknown media type %.100s", what,
			           lmt != NULL ? lmt : "(none)");
			goto out;
		}
		d->compression = layer_types[k].compression;
		out->nlayers++;
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* This host's architecture as OCI names it. */
static const char *
host_arch(void)
{
	static struct utsname u;

	if (uname(&u) != 0)
		return "";
	if (strcmp(u.machine, "x86_64") == 0)
		return "amd64";
	if (strcmp(u.machine, "aarch64") == 0)
		return "arm64";
	return u.machine;
}

int
exec_image_index_pick(const char *buf, size_t len, const char *tag, struct exec_image_desc *out,
                      bool *is_index, char *err, size_t errlen)
{
	json_t *root, *list, *m;
	const char *mt;
	size_t i, found = 0;
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	*is_index = false;
	root = load(buf, len, err, errlen);
	if (root == NULL)
		return -EINVAL;
	mt = str_of(root, "mediaType");
	if (mt != NULL && strcmp(mt, MT_OCI_INDEX) != 0 && strcmp(mt, MT_DOCKER_LIST) != 0) {
		gw_set_err(err, errlen, "unknown media type %.100s for an index", mt);
		goto out;
	}
	list = json_object_get(root, "manifests");
	if (!json_is_array(list)) {
		gw_set_err(err, errlen, "an index without manifests");
		goto out;
	}
	json_array_foreach(list, i, m)
	{
		const char *mmt = str_of(m, "mediaType");
		const char *name =
		    str_of(json_object_get(m, "annotations"), "org.opencontainers.image.ref.name");
		json_t *plat = json_object_get(m, "platform");
		struct exec_image_desc d;
		bool nested;

		if (mmt == NULL ||
		    (strcmp(mmt, MT_OCI_MANIFEST) != 0 && strcmp(mmt, MT_DOCKER_MANIFEST) != 0 &&
		     strcmp(mmt, MT_OCI_INDEX) != 0 && strcmp(mmt, MT_DOCKER_LIST) != 0)) {
			gw_set_err(err, errlen, "manifest %zu: unknown media type %.100s", i + 1,
			           mmt != NULL ? mmt : "(none)");
			goto out;
		}
		if (desc_parse(m, "manifest", &d, err, errlen) != 0)
			goto out;
		nested = strcmp(mmt, MT_OCI_INDEX) == 0 || strcmp(mmt, MT_DOCKER_LIST) == 0;
		if (tag != NULL && (name == NULL || strcmp(name, tag) != 0))
			continue;
		if (json_is_object(plat)) {
			const char *os = str_of(plat, "os"), *arch = str_of(plat, "architecture");

			if (os == NULL || arch == NULL || strcmp(os, "linux") != 0 ||
			    strcmp(arch, host_arch()) != 0)
				continue;
		}
		if (found++ == 0) {
			*out = d;
			*is_index = nested;
		}
	}
	if (found == 0) {
		gw_set_err(err, errlen, "no manifest for %s%s linux/%s", tag != NULL ? "tag " : "",
		           tag != NULL ? tag : "", host_arch());
		rc = -ENOENT;
		goto out;
	}
	if (found > 1 && tag == NULL) {
		gw_set_err(err, errlen, "%zu manifests fit: name one with :TAG", found);
		goto out;
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

static int
strings_take(json_t *arr, char **dst, size_t *n, size_t max, const char *what, char *err,
             size_t errlen)
{
	json_t *v;
	size_t i;

	*n = 0;
	if (arr == NULL || json_is_null(arr))
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > max) {
		gw_set_err(err, errlen, "config %s: not an array of at most %zu strings", what,
		           max);
		return -EINVAL;
	}
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			gw_set_err(err, errlen, "config %s: an entry is not a string", what);
			return -EINVAL;
		}
		dst[i] = strdup(json_string_value(v));
		if (dst[i] == NULL)
			return -ENOMEM;
		(*n)++;
		dst[*n] = NULL;
	}
	return 0;
}

static int
string_take(json_t *o, const char *key, char **dst, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	*dst = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
		gw_set_err(err, errlen, "config %s: not a string", key);
		return -EINVAL;
	}
	if (json_string_length(v) == 0)
		return 0;
	*dst = strdup(json_string_value(v));
	return *dst != NULL ? 0 : -ENOMEM;
}

int
exec_image_config_parse(const char *buf, size_t len, struct exec_image_config *out, char *err,
                        size_t errlen)
{
	json_t *root, *cfg, *rootfs;
	int rc;

	memset(out, 0, sizeof(*out));
	root = load(buf, len, err, errlen);
	if (root == NULL)
		return -EINVAL;
	cfg = json_object_get(root, "config");
	rootfs = json_object_get(root, "rootfs");
	rc = string_take(root, "architecture", &out->architecture, err, errlen);
	if (rc == 0)
		rc = string_take(root, "os", &out->os, err, errlen);
	if (rc == 0 && cfg != NULL && !json_is_null(cfg) && !json_is_object(cfg)) {
		gw_set_err(err, errlen, "config: not an object");
		rc = -EINVAL;
	}
	if (rc == 0 && json_is_object(cfg)) {
		rc = strings_take(json_object_get(cfg, "Env"), out->env, &out->nenv,
		                  EXEC_IMAGE_ENV_MAX, "Env", err, errlen);
		for (size_t i = 0; rc == 0 && i < out->nenv; i++) {
			if (strchr(out->env[i], '=') == NULL || out->env[i][0] == '=') {
				gw_set_err(err, errlen, "config Env: an entry is not NAME=VALUE");
				rc = -EINVAL;
			}
		}
		if (rc == 0)
			rc = strings_take(json_object_get(cfg, "Entrypoint"), out->entrypoint,
			                  &out->nentrypoint, EXEC_IMAGE_ARGS_MAX, "Entrypoint", err,
			                  errlen);
		if (rc == 0)
			rc = strings_take(json_object_get(cfg, "Cmd"), out->cmd, &out->ncmd,
			                  EXEC_IMAGE_ARGS_MAX, "Cmd", err, errlen);
		if (rc == 0)
			rc = string_take(cfg, "WorkingDir", &out->workdir, err, errlen);
		if (rc == 0)
			rc = string_take(cfg, "User", &out->user, err, errlen);
		if (rc == 0 && out->workdir != NULL && out->workdir[0] != '/') {
			gw_set_err(err, errlen, "config WorkingDir: not an absolute path");
			rc = -EINVAL;
		}
	}
	if (rc == 0 && json_is_object(rootfs))
		rc = strings_take(json_object_get(rootfs, "diff_ids"), out->diff_ids,
		                  &out->ndiff_ids, EXEC_IMAGE_LAYERS_MAX - 1, "diff_ids", err,
		                  errlen);
	json_decref(root);
	if (rc == -ENOMEM)
		gw_set_err(err, errlen, "config: out of memory");
	if (rc != 0)
		exec_image_config_clear(out);
	return rc;
}

void
exec_image_config_clear(struct exec_image_config *c)
{
	for (size_t i = 0; i < c->nenv; i++)
		free(c->env[i]);
	for (size_t i = 0; i < c->nentrypoint; i++)
		free(c->entrypoint[i]);
	for (size_t i = 0; i < c->ncmd; i++)
		free(c->cmd[i]);
	for (size_t i = 0; i < c->ndiff_ids; i++)
		free(c->diff_ids[i]);
	free(c->workdir);
	free(c->user);
	free(c->architecture);
	free(c->os);
	memset(c, 0, sizeof(*c));
}
