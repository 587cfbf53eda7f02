/*
 * The image store: OCI images kept by digest under $TOLLGATE_HOME/images,
 * each image's root unpacked once and never changed, and what a sandbox
 * needs to run one (docs/images.md). Pure parsers (references, manifests,
 * configs) sit beside the store that uses them.
 */
#ifndef TOLLGATE_EXEC_IMAGE_H
#define TOLLGATE_EXEC_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXEC_IMAGE_HEX_LEN 64          /* a SHA-256 in hex */
#define EXEC_IMAGE_NAME_MAX 256        /* NAME[:TAG] */
#define EXEC_IMAGE_JSON_MAX (4u << 20) /* a manifest, index or config */
#define EXEC_IMAGE_LAYERS_MAX 128
#define EXEC_IMAGE_ENTRIES_MAX 1000000 /* entries of one image's layers together */
#define EXEC_IMAGE_ARGS_MAX 64         /* Entrypoint and Cmd, each */
#define EXEC_IMAGE_ENV_MAX 128

/* ---- references (exec/image/ref.c) ---- */

/*
 * NAME[:TAG][@sha256:HEX] or sha256:HEX. name is "" for a bare digest; tag
 * is "latest" when a name has none; hex is "" when no digest was given
 * (an unpinned reference). NAME is lower-case letters, digits and . _ - /
 * (and one host:port before the first /). 0 or -EINVAL with err set.
 */
struct exec_image_ref {
	char name[EXEC_IMAGE_NAME_MAX];
	char tag[129];
	char hex[EXEC_IMAGE_HEX_LEN + 1];
};
int exec_image_ref_parse(const char *s, struct exec_image_ref *out, char *err, size_t errlen);
/* "sha256:" followed by 64 lower-case hex digits: copies the digits. */
bool exec_image_digest_parse(const char *s, char hex[EXEC_IMAGE_HEX_LEN + 1]);

/* ---- manifests, indexes, configs (exec/image/manifest.c) ---- */

enum exec_image_compression { EXEC_IMAGE_TAR, EXEC_IMAGE_GZIP, EXEC_IMAGE_ZSTD };

struct exec_image_desc {
	char hex[EXEC_IMAGE_HEX_LEN + 1];
	int64_t size;
	enum exec_image_compression compression; /* layers only */
};

struct exec_image_manifest {
	struct exec_image_desc config;
	struct exec_image_desc layers[EXEC_IMAGE_LAYERS_MAX];
	size_t nlayers;
};

/*
 * An image manifest (OCI or Docker schema 2). Every media type is checked:
 * an unknown one is an error naming it. 0 or -EINVAL with err set.
 */
int exec_image_manifest_parse(const char *buf, size_t len, struct exec_image_manifest *out,
                              char *err, size_t errlen);

/*
 * An index (OCI image index or Docker manifest list, or an OCI layout's
 * index.json): the manifest for linux on this host's architecture whose
 * ref.name annotation is tag (NULL: any; an index of one manifest takes
 * it). *is_index tells whether the entry chosen is itself an index. 0,
 * -ENOENT when none matches, -EINVAL for a bad document; err set.
 */
int exec_image_index_pick(const char *buf, size_t len, const char *tag, struct exec_image_desc *out,
                          bool *is_index, char *err, size_t errlen);

/* The parts of an image's config a sandbox honours. Strings are owned. */
struct exec_image_config {
	char *env[EXEC_IMAGE_ENV_MAX + 1];
	size_t nenv;
	char *entrypoint[EXEC_IMAGE_ARGS_MAX + 1];
	size_t nentrypoint;
	char *cmd[EXEC_IMAGE_ARGS_MAX + 1];
	size_t ncmd;
	char *workdir; /* NULL: none */
	char *user;    /* NULL: none */
	char *architecture, *os;
	char *diff_ids[EXEC_IMAGE_LAYERS_MAX];
	size_t ndiff_ids;
};
int exec_image_config_parse(const char *buf, size_t len, struct exec_image_config *out, char *err,
                            size_t errlen);
void exec_image_config_clear(struct exec_image_config *c);

/* ---- the image's User (exec/image/user.c) ---- */

#define EXEC_IMAGE_ID_MAX 4294967294u    /* (uid_t)-1 is no id */
#define EXEC_IMAGE_USER_NAME_MAX 256     /* a user or group name, with its NUL */
#define EXEC_IMAGE_IDFILE_MAX (1u << 20) /* the image's /etc/passwd or /etc/group */

/* `User` split: each part a number or a name (given: User was not empty). */
struct exec_image_user {
	bool given, has_group, uid_numeric, gid_numeric;
	uint32_t uid, gid;
	char user[EXEC_IMAGE_USER_NAME_MAX];
	char group[EXEC_IMAGE_USER_NAME_MAX];
};
/* "UID", "UID:GID", "NAME", "NAME:GROUP" (or mixed); NULL or "": not
 * given. A number is decimal, at most EXEC_IMAGE_ID_MAX; a name has no
 * space, colon or control byte. 0 or -EINVAL with err set. */
int exec_image_user_parse(const char *s, struct exec_image_user *out, char *err, size_t errlen);
/*
 * Pure look-ups in the bytes of an /etc/passwd (NAME:x:UID:GID:...) and an
 * /etc/group (NAME:x:GID:...): by name, or (passwd, name NULL) by uid. A
 * line that is not well formed is skipped. 0 or -ENOENT.
 */
int exec_image_passwd_find(const char *buf, size_t len, const char *name, uint32_t uid,
                           uint32_t *out_uid, uint32_t *out_gid);
int exec_image_group_find(const char *buf, size_t len, const char *name, uint32_t *out_gid);
/*
 * u's ids against those files' bytes: a name must be there; a number
 * alone takes its passwd line's group, or its own number when it has no
 * line. 0 or -ENOENT with err naming the unknown user or group.
 */
int exec_image_user_ids(const struct exec_image_user *u, const char *passwd, size_t plen,
                        const char *group, size_t glen, uint32_t *uid, uint32_t *gid, char *err,
                        size_t errlen);
/*
 * The image's User resolved against root's etc/passwd and etc/group (read
 * below root without following a link, regular files of at most
 * EXEC_IMAGE_IDFILE_MAX bytes; a missing one is empty). *uid and *gid stay
 * 0 when user is NULL or "". Root (uid or gid 0) is refused with -EPERM.
 * 0 or negative errno with err set.
 */
int exec_image_user_resolve(const char *root, const char *user, uint32_t *uid, uint32_t *gid,
                            char *err, size_t errlen);

/* ---- layers (exec/image/unpack.c) ---- */

/*
 * Applies one layer (tar, gzip or zstd: told by its bytes) from fd onto the
 * directory rootfd: whiteouts and opaque directories, hard links; no entry
 * may leave the root (openat2 RESOLVE_BENEATH), device nodes and FIFOs are
 * skipped, set-id bits dropped, ownership not kept (the store's user owns
 * every file). *entries counts entries against EXEC_IMAGE_ENTRIES_MAX. 0
 * or a negative errno with err naming the entry and why.
 */
int exec_image_unpack_layer(int fd, int rootfd, size_t *entries, char *err, size_t errlen);

/* ---- the store (exec/image/store.c) ---- */

struct exec_image_store;

/* Opens (creating when create is set) the store at dir. */
int exec_image_store_open(const char *dir, bool create, struct exec_image_store **out, char *err,
                          size_t errlen);
void exec_image_store_free(struct exec_image_store *s);

enum exec_image_source { EXEC_IMAGE_OCI_DIR, EXEC_IMAGE_DOCKER_ARCHIVE };

/*
 * Imports an OCI layout (path, tag or NULL) or a docker-archive (path) and
 * names it name[:tag] (name NULL: the layout's basename, or the archive's
 * RepoTags). Every blob checked against its digest, the root unpacked into
 * a temporary directory renamed into place once whole: nothing partial is
 * ever used. hex receives the manifest's digest. 0 or -errno, err set.
 */
int exec_image_import(struct exec_image_store *s, enum exec_image_source kind, const char *path,
                      const char *tag, const char *name, char hex[EXEC_IMAGE_HEX_LEN + 1],
                      char *err, size_t errlen);

/*
 * A reference resolved to a stored image: its manifest digest. An unpinned
 * reference resolves by name; a pinned one must be stored with that digest
 * (and, when it names one, under that name). -ENOENT when not stored.
 */
int exec_image_resolve(struct exec_image_store *s, const struct exec_image_ref *ref,
                       char hex[EXEC_IMAGE_HEX_LEN + 1], char *err, size_t errlen);

/* The unpacked root of a stored image, and its config. */
int exec_image_root_path(struct exec_image_store *s, const char *hex, char *buf, size_t len);
int exec_image_config_load(struct exec_image_store *s, const char *hex,
                           struct exec_image_config *out, char *err, size_t errlen);
/* The manifest, for inspect (malloc'd, *len set). */
int exec_image_manifest_load(struct exec_image_store *s, const char *hex, char **buf, size_t *len,
                             char *err, size_t errlen);

/* Each name with its digest, sorted by name (one callback a name; an
 * image without a name is listed once with name ""). */
typedef void (*exec_image_list_fn)(void *arg, const char *name, const char *hex);
int exec_image_list(struct exec_image_store *s, exec_image_list_fn fn, void *arg, char *err,
                    size_t errlen);

/*
 * Removes a name (the image stays while another name keeps it) or, given
 * a digest, the image and every name of it; blobs and roots no image uses
 * any more go too. -ENOENT when nothing matched.
 */
int exec_image_remove(struct exec_image_store *s, const struct exec_image_ref *ref, char *err,
                      size_t errlen);

/* ---- what a pull adds to the store (exec/image/store.c) ---- */

/*
 * A pull holds the store's lock from its first blob to its name, as an
 * import does: a second pull of the same image waits, then finds every blob
 * stored and fetches none. lock empties tmp/ (what an interrupted pull
 * left); unlock with failed set collects the blobs no image uses.
 */
int exec_image_store_lock(struct exec_image_store *s, char *err, size_t errlen);
void exec_image_store_unlock(struct exec_image_store *s, bool failed);
bool exec_image_blob_stored(struct exec_image_store *s, const char *hex);
/* len bytes stored as blob hex: -EBADMSG when they are not its digest. */
int exec_image_blob_put(struct exec_image_store *s, const void *buf, size_t len, const char *hex,
                        char *err, size_t errlen);
/*
 * Blob hex written by fn into fd, a new file under tmp/; fn hashes what it
 * writes and sets got. Renamed into blobs/ only when got is hex: a partial
 * or wrong blob is never used. A blob already stored is not fetched.
 */
typedef int (*exec_image_blob_fn)(void *arg, int fd, char got[EXEC_IMAGE_HEX_LEN + 1], char *err,
                                  size_t errlen);
int exec_image_blob_fetch(struct exec_image_store *s, const char *hex, exec_image_blob_fn fn,
                          void *arg, char *err, size_t errlen);
/* The stored manifest hex (its config and layers stored) made an image:
 * config checked, root unpacked, named name[:tag] (NULL: no name). */
int exec_image_commit(struct exec_image_store *s, const char *hex, const char *name, char *err,
                      size_t errlen);

/* ---- pulls from a registry (exec/image/pull.c, exec/image/challenge.c) ---- */

#define EXEC_IMAGE_REDIRECTS_MAX 5
#define EXEC_IMAGE_TOKEN_MAX (64u << 10) /* a token endpoint's answer */
#define EXEC_IMAGE_BLOB_MAX (16ull << 30)

/*
 * A WWW-Authenticate challenge: scheme (lower-cased: "bearer", "basic")
 * and the realm, service and scope parameters ("" when absent). Quoted
 * strings with backslash escapes; other parameters skipped. 0 or -EINVAL.
 */
struct exec_image_challenge {
	char scheme[16];
	char realm[1024];
	char service[256];
	char scope[512];
};
int exec_image_challenge_parse(const char *s, size_t len, struct exec_image_challenge *out);

struct exec_image_pull_opts {
	const char *ca_file;  /* --registry-ca: trust this CA (NULL: the system's) */
	const char *insecure; /* --insecure-registry HOST:PORT: plain HTTP to it alone */
	const char *user;     /* basic credentials for the token endpoint (NULL: none) */
	const char *password;
};

/*
 * REGISTRY/REPO[:TAG][@sha256:HEX] pulled into the store over the OCI
 * distribution API: the manifest (an index resolved to linux on this
 * host's architecture), its config and layers, each checked against its
 * digest, then committed as an import is. hex receives the manifest's
 * digest. 0 or -errno with one line in err.
 */
int exec_image_pull(struct exec_image_store *s, const char *ref,
                    const struct exec_image_pull_opts *o, char hex[EXEC_IMAGE_HEX_LEN + 1],
                    char *err, size_t errlen);

/* The host and port a pull of ref with o asks: its registry's API (Docker
 * Hub's names become registry-1.docker.io), the reference's port, else 443
 * (80 for the --insecure-registry one). 0 or -EINVAL with one line in err,
 * the pull's own for that ref. */
int exec_image_pull_target(const char *ref, const struct exec_image_pull_opts *o,
                           char host[EXEC_IMAGE_NAME_MAX], int *port, char *err, size_t errlen);

/* SHA-256 of len bytes, in hex. */
void exec_image_sha256_hex(const void *buf, size_t len, char hex[EXEC_IMAGE_HEX_LEN + 1]);

#endif
