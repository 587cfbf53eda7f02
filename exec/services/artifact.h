/*
 * Artifact signing: the Ed25519 key pair under TOLLGATE_HOME (exec/services/keys.c),
 * SHA-256 digests and signatures of the files a sandbox left in its output
 * directory, DIR/manifest.json, and checking a directory against it.
 */
#ifndef TOLLGATE_EXEC_ARTIFACT_H
#define TOLLGATE_EXEC_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec/common/priv_checks.h" /* EXEC_ARTIFACT_ID_MAX, exec_artifact_id_valid */

/* ---- the key pair (exec/services/keys.c) ------------------------------------------ */

/* File names under TOLLGATE_HOME. */
#define EXEC_KEY_PRIVATE_NAME "signing-key.pem"
#define EXEC_KEY_PUBLIC_NAME "signing-key.pub.pem"
/* A key file larger than this is not a key. */
#define EXEC_KEY_FILE_MAX 16384
#define EXEC_SHA256_LEN 32
#define EXEC_SHA256_HEX_LEN 64
#define EXEC_SIG_LEN 64

/* An Ed25519 key: a private one signs and verifies, a public one verifies. */
struct exec_key;

/*
 * The signing key under home: loaded, or made on first use (private key
 * mode 0600 written without a window where it is readable, public key
 * beside it). A private key file readable by group or others, not owned by
 * this user, or not a regular file is refused. 0 or negative errno, err set.
 */
int exec_key_load_or_create(const char *home, struct exec_key **out, char *err, size_t errlen);
/* home's private key without creating one: -ENOENT when there is none. */
int exec_key_load_private(const char *home, struct exec_key **out, char *err, size_t errlen);
/* A public key PEM (SubjectPublicKeyInfo), e.g. from `key show --pubkey-out`. */
int exec_key_load_public(const char *path, struct exec_key **out, char *err, size_t errlen);
/* The same from memory (tests, fuzzing). */
int exec_key_public_from_pem(const char *pem, size_t len, struct exec_key **out, char *err,
                             size_t errlen);
void exec_key_free(struct exec_key *k);
bool exec_key_has_private(const struct exec_key *k);
/* The public key as PEM, NUL-terminated, malloc'd. 0 or -ENOMEM/-EIO. */
int exec_key_public_pem(const struct exec_key *k, char **pem, size_t *len);
/* SHA-256 of the DER SubjectPublicKeyInfo, lower-case hex: the same as
 * `openssl pkey -pubin -outform DER | sha256sum`. */
int exec_key_fingerprint(const struct exec_key *k, char hex[EXEC_SHA256_HEX_LEN + 1]);
/* Ed25519 over msg. 0, -EINVAL (a public key only) or -EIO. */
int exec_key_sign(const struct exec_key *k, const uint8_t *msg, size_t len,
                  uint8_t sig[EXEC_SIG_LEN]);
/* true when sig is k's signature of msg. */
bool exec_key_verify(const struct exec_key *k, const uint8_t *msg, size_t len,
                     const uint8_t sig[EXEC_SIG_LEN]);

/* ---- artifacts (exec/services/artifact.c) ----------------------------------------- */

#define EXEC_ARTIFACT_MANIFEST "manifest.json"
#define EXEC_ARTIFACT_VERSION 1
/* Default bounds of what a sign or verify reads (docs/artifacts.md). */
#define EXEC_ARTIFACT_MAX_ENTRIES 10000        /* files, directories and others */
#define EXEC_ARTIFACT_MAX_BYTES (4ULL << 30)   /* file contents read, in all */
#define EXEC_ARTIFACT_MAX_DEPTH 32             /* directories below DIR */
#define EXEC_ARTIFACT_NAME_MAX 1024            /* a relative name, in bytes */
#define EXEC_ARTIFACT_MANIFEST_MAX (16u << 20) /* manifest.json, in bytes */

struct exec_artifact_limits {
	size_t max_entries;
	uint64_t max_bytes;
};
void exec_artifact_limits_default(struct exec_artifact_limits *l);

/*
 * The message a file's signature covers: the tag "tollgate-artifact-v1" and
 * a NUL, then the sandbox id and the name each as a 4-byte big-endian length
 * and its bytes, the size as 8 bytes big-endian, the 32-byte SHA-256. Each
 * field's extent is fixed or prefixed, so no two different tuples share a
 * message. Returns its length, or 0 when buf is too small.
 */
size_t exec_artifact_message(const char *sandbox_id, const char *name, uint64_t size,
                             const uint8_t sha256[EXEC_SHA256_LEN], uint8_t *buf, size_t cap);
/* Room exec_artifact_message needs at most. */
#define EXEC_ARTIFACT_MESSAGE_MAX                                                                  \
	(21 + 4 + EXEC_ARTIFACT_ID_MAX + 4 + EXEC_ARTIFACT_NAME_MAX + 8 + 32)

/* Whether a name can be signed: relative, '/'-separated, no empty, "." or
 * ".." component, valid UTF-8 without control characters, at most
 * EXEC_ARTIFACT_NAME_MAX bytes. NULL when it can, else why not. */
const char *exec_artifact_name_why(const char *name, size_t len);

/* Something below DIR that was not signed (sign) or does not match (verify). */
enum exec_artifact_kind {
	EXEC_ARTIFACT_SKIPPED, /* sign: not a regular file, or a name JSON cannot carry */
	EXEC_ARTIFACT_CHANGED,
	EXEC_ARTIFACT_ADDED,
	EXEC_ARTIFACT_REMOVED,
};
const char *exec_artifact_kind_name(enum exec_artifact_kind k);
/* name may hold any byte but NUL (it comes from the disk): escape it before
 * printing (exec_artifact_escape). */
typedef void (*exec_artifact_report_fn)(void *arg, enum exec_artifact_kind kind, const char *name,
                                        const char *why);

/* A name for a terminal: control characters, backslashes and bytes that are
 * not UTF-8 become \xNN. Always NUL-terminates. */
void exec_artifact_escape(const char *name, char *buf, size_t cap);

struct exec_artifact_summary {
	size_t files;    /* signed (sign) or checked and matching (verify) */
	uint64_t bytes;  /* their contents */
	size_t problems; /* sign: skipped; verify: changed, added and removed */
	char sandbox_id[EXEC_ARTIFACT_ID_MAX + 1];
	char key_sha256[EXEC_SHA256_HEX_LEN + 1];
};

/*
 * Signs every regular file below dir (never following a symbolic link;
 * manifest.json at the top excluded) and writes dir/manifest.json by
 * replacing it atomically. Symbolic links, special files and names JSON
 * cannot carry are left out and reported (EXEC_ARTIFACT_SKIPPED), which
 * verify then names as added. limits may be NULL (the defaults). 0 or
 * negative errno with err set (-E2BIG past a limit).
 */
int exec_artifacts_sign(const char *dir, const char *sandbox_id, const struct exec_key *key,
                        const struct exec_artifact_limits *limits, exec_artifact_report_fn report,
                        void *arg, struct exec_artifact_summary *sum, char *err, size_t errlen);

/*
 * Checks dir against dir/manifest.json and pub: every entry's signature,
 * the manifest's own signature, and each file's size and SHA-256. Reports
 * every changed, added and removed file. only: a relative name to check
 * alone (a file's verify), or NULL for the whole directory.
 * 0 when it ran (sum->problems counts what was reported); -EBADMSG for a
 * malformed manifest, -EKEYREJECTED for one made with another key, another
 * negative errno when dir or its manifest cannot be read; err set.
 */
int exec_artifacts_verify(const char *dir, const char *only, const struct exec_key *pub,
                          const struct exec_artifact_limits *limits, exec_artifact_report_fn report,
                          void *arg, struct exec_artifact_summary *sum, char *err, size_t errlen);

/* A parsed manifest.json (untrusted until its signatures are checked). */
struct exec_manifest_file {
	char *name;
	uint64_t size;
	uint8_t sha256[EXEC_SHA256_LEN];
	uint8_t sig[EXEC_SIG_LEN];
};
struct exec_manifest {
	int version;
	char sandbox_id[EXEC_ARTIFACT_ID_MAX + 1];
	char created[40];
	char key_sha256[EXEC_SHA256_HEX_LEN + 1];
	uint8_t sig[EXEC_SIG_LEN]; /* over the whole list */
	size_t nfiles;
	struct exec_manifest_file *files; /* strictly ascending by name (bytes) */
};

/*
 * Parses manifest.json's text: the fields and their forms only (no
 * signature checked). At most max_files entries. 0 or -EBADMSG/-ENOMEM
 * with one line in err.
 */
int exec_manifest_parse(const char *text, size_t len, size_t max_files, struct exec_manifest **out,
                        char *err, size_t errlen);
void exec_manifest_free(struct exec_manifest *m);
/* ---- run --out DIR (gateway/cli/cmd_run.c) -------------------------------- */

struct exec_artifact_out;
/*
 * Before the run: makes DIR when missing (mode 0755), refuses one that is
 * not empty, not owned by this user, or inside home (which holds the key),
 * and loads or makes the signing key. *path is DIR's real path, for
 * exec_spec.outdir. 0 or negative errno, err set.
 */
int exec_artifact_out_prepare(const char *dir, const char *home, struct exec_artifact_out **out,
                              const char **path, char *err, size_t errlen);
/* After the run: signs DIR through the fd prepare opened, then gives it
 * back to its owner (skipped entries are logged). detail: the audit row's
 * JSON (valid until free). */
int exec_artifact_out_sign(struct exec_artifact_out *o, const char *sandbox_id,
                           struct exec_artifact_summary *sum, const char **detail, char *err,
                           size_t errlen);
/* Gives DIR back to its owner if sign did not. Accepts NULL. */
void exec_artifact_out_free(struct exec_artifact_out *o);
/*
 * The gate's signing of --out by the privileged parent, which gives DIR
 * back, signs it with the key only it holds and writes the manifest: on
 * success *detail is the artifact row's JSON and *pub_pem the key's public
 * half (both malloc'd) and *manifest_fd a read-only fd of manifest.json.
 * Installed once, at the split, in the gate. 0 or -errno with err set.
 */
typedef int (*exec_artifact_remote_sign_fn)(const char *sandbox_id,
                                            struct exec_artifact_summary *sum, char **detail,
                                            char **pub_pem, int *manifest_fd, char *err,
                                            size_t errlen);
void exec_artifact_remote_install(exec_artifact_remote_sign_fn fn);
/*
 * Split (exec_artifact_remote_install), prepare in the gate makes and
 * checks DIR but loads no key, and sign is the privileged parent's
 * (EXEC_PRIV_SIGN_OUT), which gives DIR back and signs it itself.
 *
 * After a sign: a new read-only fd of DIR/manifest.json (the caller closes
 * it), which the gate can read where it may not search DIR's parents.
 * Negative errno when there is none.
 */
int exec_artifact_out_manifest_open(const struct exec_artifact_out *o);
/* The signing key's public PEM (valid until free), or NULL before a sign
 * in the gate (split) or when out of memory. */
const char *exec_artifact_out_public_pem(struct exec_artifact_out *o);
/*
 * The privileged parent's prepare (exec/priv/priv_parent.c): DIR must already
 * belong to owner (root for run's --out, the gate's uid for serve's), which
 * gets it back after the sign. Otherwise as exec_artifact_out_prepare.
 */
int exec_artifact_out_prepare_owned(const char *dir, const char *home, uid_t owner,
                                    struct exec_artifact_out **out, const char **path, char *err,
                                    size_t errlen);

/* Whether m's signature over its whole list is pub's. */
bool exec_manifest_list_ok(const struct exec_manifest *m, const struct exec_key *pub);
/* Whether entry i's signature is pub's. */
bool exec_manifest_entry_ok(const struct exec_manifest *m, size_t i, const struct exec_key *pub);

#endif
