/*
 * `tollgate verify DIR|FILE [--pubkey FILE]`: checks signed artifacts
 * against their manifest.json and names every changed, added or removed file.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "exec/services/artifact.h"
#include "gateway/cli/cli.h"

extern const struct gw_command gw_command_verify;

#define CMD "verify"
/* Exit status when something does not match or cannot be checked. */
#define VERIFY_FAILED 1

enum { OPT_PUBKEY = 0x100, OPT_JSON };

/* arg: the JSON array of problems, or NULL for lines. */
static void
print_problem(void *arg, enum exec_artifact_kind kind, const char *name, const char *why)
{
	char esc[4 * EXEC_ARTIFACT_NAME_MAX + 1];

	/* Escaped in JSON too: a name is the sandbox's choice, and may not be UTF-8. */
	exec_artifact_escape(name, esc, sizeof(esc));
	if (arg != NULL) {
		json_array_append_new(arg, json_pack("{s:s, s:s, s:s}", "kind",
		                                     exec_artifact_kind_name(kind), "name", esc,
		                                     "why", why));
		return;
	}
	printf("%s: %s: %s\n", exec_artifact_kind_name(kind), esc, why);
}

/* --json: the answer both ways; error is NULL or why nothing could be compared. */
static void
print_json(const char *target, const struct exec_artifact_summary *sum, json_t *problems,
           const char *error)
{
	bool ok = error == NULL && json_array_size(problems) == 0;
	json_t *o = json_pack("{s:s, s:b, s:O}", "target", target, "ok", ok, "problems", problems);

	if (o != NULL && error != NULL)
		json_object_set_new(o, "error", json_string(error));
	if (o != NULL && error == NULL) {
		json_object_set_new(o, "files", json_integer((json_int_t)sum->files));
		json_object_set_new(o, "sandbox_id", json_string(sum->sandbox_id));
	}
	gw_print_json(CMD, o);
}

static int
load_pubkey(const char *path, struct exec_key **key)
{
	char home[PATH_MAX], file[PATH_MAX + 64], err[PATH_MAX + 256];
	int rc;

	if (path != NULL) {
		rc = exec_key_load_public(path, key, err, sizeof(err));
		if (rc != 0)
			return gw_fail(CMD, "--pubkey %s", err);
		return 0;
	}
	if (gw_home_dir(home, sizeof(home)) != 0)
		return gw_fail(CMD, "cannot find TOLLGATE_HOME (give --pubkey FILE)");
	snprintf(file, sizeof(file), "%s/%s", home, EXEC_KEY_PUBLIC_NAME);
	rc = exec_key_load_public(file, key, err, sizeof(err));
	/* The public file removed: the private key (never made here) still says. */
	if (rc == -ENOENT && exec_key_load_private(home, key, err, sizeof(err)) == 0)
		return 0;
	if (rc == -ENOENT)
		return gw_fail(CMD,
		               "no signing key in %s: nothing was signed with this TOLLGATE_HOME "
		               "(give --pubkey FILE)",
		               home);
	if (rc != 0)
		return gw_fail(CMD, "%s", err);
	return 0;
}

/*
 * FILE: the nearest directory at or above FILE's that holds a manifest,
 * and FILE's name relative to it. 0, or -ENOENT when there is none.
 */
static int
find_manifest_dir(const char *path, char *dir, size_t dirlen, char *rel, size_t rellen)
{
	char copy[PATH_MAX], real[PATH_MAX], probe[PATH_MAX + 64], tmp[PATH_MAX];
	const char *base;
	struct stat st;
	char *slash;
	int n;

	if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy))
		return -ENAMETOOLONG;
	base = basename(copy);
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
	    strcmp(base, "/") == 0)
		return -EINVAL;
	if (snprintf(rel, rellen, "%s", base) >= (int)rellen)
		return -ENAMETOOLONG;
	if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy))
		return -ENAMETOOLONG;
	if (realpath(dirname(copy), real) == NULL)
		return -errno;
	for (int depth = 0; depth <= EXEC_ARTIFACT_MAX_DEPTH; depth++) {
		n = snprintf(probe, sizeof(probe), "%s/%s", strcmp(real, "/") == 0 ? "" : real,
		             EXEC_ARTIFACT_MANIFEST);
		if (n < 0 || (size_t)n >= sizeof(probe))
			return -ENAMETOOLONG;
		if (lstat(probe, &st) == 0) {
			if (snprintf(dir, dirlen, "%s", real) >= (int)dirlen)
				return -ENAMETOOLONG;
			return 0;
		}
		if (strcmp(real, "/") == 0)
			break;
		slash = strrchr(real, '/');
		n = snprintf(tmp, sizeof(tmp), "%s/%s", slash + 1, rel);
		if (n < 0 || (size_t)n >= sizeof(tmp) || (size_t)n >= rellen)
			return -ENAMETOOLONG;
		memcpy(rel, tmp, (size_t)n + 1);
		if (slash == real)
			real[1] = '\0';
		else
			*slash = '\0';
	}
	return -ENOENT;
}

static int
run_verify(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"pubkey", required_argument, NULL, OPT_PUBKEY},
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	struct exec_artifact_summary sum = {0};
	json_t *problems = NULL;
	struct exec_key *key = NULL;
	const char *pubkey = NULL, *target, *only = NULL, *dir;
	char err[PATH_MAX + 512], why[2 * PATH_MAX + 600], mdir[PATH_MAX], rel[PATH_MAX];
	struct stat st;
	bool json = false;
	int c, rc;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &gw_command_verify);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c == OPT_JSON)
			json = true;
		else if (c == OPT_PUBKEY)
			pubkey = optarg;
		else
			return GW_EXIT_FAILURE;
	}
	if (argc - optind != 1)
		return gw_fail(CMD, "expected one DIR or FILE (see 'tollgate verify --help')");
	target = argv[optind];
	if (json && (problems = json_array()) == NULL)
		return gw_fail(CMD, "out of memory");
	if (load_pubkey(pubkey, &key) != 0) {
		rc = GW_EXIT_FAILURE;
		goto out;
	}

	dir = target;
	/* The user's own path: a link to a directory is followed. */
	if (stat(target, &st) != 0 || !S_ISDIR(st.st_mode)) {
		/* A file (or a name that was one): its nearest manifest decides. */
		if (lstat(target, &st) != 0 && errno != ENOENT) {
			snprintf(why, sizeof(why), "%s: %s", target, strerror(errno));
			goto failed;
		}
		rc = find_manifest_dir(target, mdir, sizeof(mdir), rel, sizeof(rel));
		if (rc != 0) {
			snprintf(why, sizeof(why), "%s: %s", target,
			         rc == -ENOENT ? "no " EXEC_ARTIFACT_MANIFEST
			                         " in its directory or above"
			                       : strerror(-rc));
			goto failed;
		}
		dir = mdir;
		only = rel;
	}
	rc = exec_artifacts_verify(dir, only, key, NULL, print_problem, problems, &sum, err,
	                           sizeof(err));
	fflush(stdout);
	if (rc != 0) {
		snprintf(why, sizeof(why), "%s: %s", dir, err);
		goto failed;
	}
	if (problems != NULL)
		print_json(target, &sum, problems, NULL);
	if (sum.problems > 0) {
		gw_fail(CMD, "%s: %zu file%s changed, added or removed since signing", target,
		        sum.problems, sum.problems == 1 ? "" : "s");
		rc = VERIFY_FAILED;
		goto out;
	}
	if (!json && only != NULL)
		printf("%s: ok (signed by sandbox %s)\n", target, sum.sandbox_id);
	else if (!json)
		printf("%s: ok (%zu file%s, sandbox %s)\n", target, sum.files,
		       sum.files == 1 ? "" : "s", sum.sandbox_id);
	rc = fflush(stdout) == 0 ? GW_EXIT_OK : GW_EXIT_FAILURE;
	goto out;
failed:
	/* Nothing could be compared: the line on stderr, and in JSON the same reason. */
	gw_fail(CMD, "%s", why);
	if (problems != NULL)
		print_json(target, &sum, problems, why);
	rc = VERIFY_FAILED;
out:
	json_decref(problems);
	exec_key_free(key);
	return rc;
}

const struct gw_command gw_command_verify = {
    .name = "verify",
    .summary = "check signed artifacts against their manifest",
    .usage = "usage: tollgate verify [--pubkey FILE] [--json] DIR|FILE\n"
             "\n"
             "Checks DIR against DIR/" EXEC_ARTIFACT_MANIFEST " (written by 'tollgate run --out\n"
             "DIR'): the manifest's signature, each entry's signature, and each file's size\n"
             "and SHA-256. Prints one line per file that was changed, added or removed:\n"
             "'changed: NAME: why', 'added: NAME: why', 'removed: NAME: why'.\n"
             "FILE: checks that one file against the nearest manifest in its directory or\n"
             "above.\n"
             "\n"
             "  --pubkey FILE   the signer's public key (PEM, from 'tollgate key show\n"
             "                  --pubkey-out'); default: the one under TOLLGATE_HOME\n"
             "  --json          one JSON object: {\"target\", \"ok\", \"files\", \"sandbox_id\",\n"
             "                  \"problems\": [{\"kind\", \"name\", \"why\"}], \"error\"}\n"
             "\n"
             "Exit status: 0 when everything matches; 1 when a file differs, or the manifest\n"
             "is missing, malformed or signed by another key; 125 for bad usage or an\n"
             "unreadable public key. See docs/artifacts.md.\n",
    .run = run_verify,
};
