/*
 * `tollgate image pull|import|ls|inspect|rm`: the image store from the command
 * line (docs/images.md). The store is $TOLLGATE_HOME/images.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/image/image.h"
#include "exec/services/vault.h"
#include "gateway/cli/cli.h"
#include "policy/audit.h"

extern const struct gw_command gw_command_image;

enum { OPT_NAME = 0x100, OPT_JSON, OPT_SECRET, OPT_CA, OPT_INSECURE };

static int run_pull(int argc, char **argv);
static int run_import(int argc, char **argv);
static int run_ls(int argc, char **argv);
static int run_inspect(int argc, char **argv);
static int run_rm(int argc, char **argv);

static const struct gw_command cmd_pull = {
    .name = "image pull",
    .run = run_pull,
    .usage =
        "usage: tollgate image pull REGISTRY/REPO[:TAG][@sha256:DIGEST] [--registry-secret NAME]\n"
        "                          [--registry-ca FILE] [--insecure-registry HOST:PORT]\n"
        "\n"
        "Fetches an image over the OCI distribution API (HTTPS) into the store: an\n"
        "index resolved to linux on this host's architecture, every manifest and\n"
        "blob checked against its digest, layers already stored not fetched again.\n"
        "Prints the image's digest. With a digest and no tag the image is stored\n"
        "without a name (run it as sha256:DIGEST).\n"
        "\n"
        "  --registry-secret NAME        the vault's secret NAME, USER:PASSWORD, for\n"
        "                                the registry's token endpoint (or basic auth)\n"
        "  --registry-ca FILE            trust this CA (PEM) for the registry and its\n"
        "                                token endpoint instead of the system's\n"
        "  --insecure-registry HOST:PORT plain HTTP to this registry, which REF must\n"
        "                                name (any other stays HTTPS)\n",
};

static const struct gw_command cmd_import = {
    .name = "image import",
    .run = run_import,
    .usage = "usage: tollgate image import oci:DIR[:TAG] [--name NAME[:TAG]]\n"
             "       tollgate image import docker-archive:FILE [--name NAME[:TAG]]\n"
             "\n"
             "Copies an image from an OCI layout or a docker-archive (docker save) into\n"
             "the store, checking every blob against its digest, and unpacks its root\n"
             "once. Prints the image's digest.\n"
             "\n"
             "  --name NAME[:TAG]  the name it is stored under (default: DIR's name and\n"
             "                     TAG; the archive's first RepoTags entry)\n",
};

static const struct gw_command cmd_ls = {
    .name = "image ls",
    .run = run_ls,
    .usage = "usage: tollgate image ls [--json]\n"
             "\n"
             "Lists the stored images: NAME:TAG and digest, one a line.\n"
             "\n"
             "  --json  one JSON object a line\n",
};

static const struct gw_command cmd_inspect = {
    .name = "image inspect",
    .run = run_inspect,
    .usage = "usage: tollgate image inspect REF [--json]\n"
             "\n"
             "Prints a stored image's digest, layers and the config a sandbox honours.\n"
             "REF: NAME[:TAG], NAME[:TAG]@sha256:DIGEST or sha256:DIGEST.\n"
             "\n"
             "  --json  one JSON object\n",
};

static const struct gw_command cmd_rm = {
    .name = "image rm",
    .run = run_rm,
    .usage = "usage: tollgate image rm REF\n"
             "\n"
             "Removes a name; the image goes with its last name (or at once when REF is\n"
             "sha256:DIGEST), and with it every blob no other image uses.\n",
};

static int
open_store(const char *cmd, bool create, struct exec_image_store **s)
{
	char home[PATH_MAX], dir[PATH_MAX + 16], err[PATH_MAX + 128];
	int rc = create ? gw_home_ensure(home, sizeof(home)) : gw_home_dir(home, sizeof(home));

	if (rc != 0)
		return gw_fail(cmd, "cannot find TOLLGATE_HOME: %s", strerror(-rc));
	snprintf(dir, sizeof(dir), "%s/images", home);
	if (exec_image_store_open(dir, create, s, err, sizeof(err)) != 0)
		return gw_fail(cmd, "%s", err);
	return 0;
}

/* Flags of a subcommand: --name (when name is not NULL) and --json; *pos
 * its one operand (NULL: none). */
static int
parse(int argc, char **argv, const struct gw_command *cmd, const char **name, bool *json,
      const char **pos)
{
	static const struct option longopts[] = {
	    {"name", required_argument, NULL, OPT_NAME},
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	int c;

	gw_getopt_reset();
	*pos = NULL;
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, cmd);
		/* One operand, before or after the flags. */
		if (c == -1 && optind < argc && *pos == NULL) {
			*pos = argv[optind++];
			continue;
		}
		if (c == -1 && optind < argc) {
			gw_fail(cmd->name, "unexpected %s", argv[optind]);
			return GW_OPT_ERROR;
		}
		if (c == -1)
			return 0;
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == OPT_NAME && name != NULL)
			*name = optarg;
		else if (c == OPT_JSON && json != NULL)
			*json = true;
		else {
			if (c != GW_OPT_ERROR)
				gw_fail(cmd->name, "%s takes no such flag", cmd->name);
			return GW_OPT_ERROR;
		}
	}
}

/* USER:PASSWORD from the file vault's default namespace; the read is an
 * audit row (its name, never its value), as a sandbox's is. */
static int
registry_credentials(struct audit *a, const char *secret, struct vault_secret **value, char **colon)
{
	struct vault *v = NULL;
	char home[PATH_MAX], err[512] = "";
	int rc;

	if (gw_home_dir(home, sizeof(home)) != 0)
		return gw_fail(cmd_pull.name, "cannot find TOLLGATE_HOME");
	rc = vault_open_file(home, &v, err, sizeof(err));
	if (rc == 0)
		rc = vault_get(v, VAULT_DEFAULT_NAMESPACE, secret, value, err, sizeof(err));
	vault_free(v);
	if (rc != 0)
		return gw_fail(cmd_pull.name, "--registry-secret %s: %s", secret, err);
	vault_audit(a, NULL, "read", "file", VAULT_DEFAULT_NAMESPACE, secret);
	*colon = strchr((char *)(*value)->data, ':');
	if (*colon == NULL || *colon == (char *)(*value)->data) {
		vault_secret_free(*value);
		*value = NULL;
		return gw_fail(cmd_pull.name, "--registry-secret %s: not USER:PASSWORD", secret);
	}
	return 0;
}

/*
 * A row of the pull in the audit log (docs/audit.md, `image.pull`): reason
 * "started" before its first request, then "pulled" with the digest or
 * "failed" with the error. host and port are the registry's API.
 */
static void
pull_row(struct audit *a, const char *host, int port, const char *ref, const char *reason,
         const char *digest, const char *error)
{
	struct audit_event ev = {
	    .kind = "image.pull", .host = host, .port = port, .reason = reason};
	json_t *detail;
	char *text;

	ev.decision = error != NULL ? "error" : "allow";
	detail = json_pack("{s:s}", "ref", ref);
	if (detail != NULL && digest != NULL)
		json_object_set_new(detail, "digest", json_string(digest));
	if (detail != NULL && error != NULL)
		json_object_set_new(detail, "error", json_string(error));
	text = detail != NULL ? json_dumps(detail, JSON_COMPACT) : NULL;
	ev.detail = text;
	(void)audit_append(a, &ev);
	free(text);
	json_decref(detail);
}

static int
run_pull(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"registry-secret", required_argument, NULL, OPT_SECRET},
	    {"registry-ca", required_argument, NULL, OPT_CA},
	    {"insecure-registry", required_argument, NULL, OPT_INSECURE},
	    {NULL, 0, NULL, 0},
	};
	struct exec_image_pull_opts o = {0};
	struct exec_image_store *s = NULL;
	struct vault_secret *cred = NULL;
	struct audit *a = NULL;
	const char *ref = NULL, *secret = NULL;
	char err[PATH_MAX + 1024] = "", hex[EXEC_IMAGE_HEX_LEN + 1] = "", *colon = NULL;
	char host[EXEC_IMAGE_NAME_MAX], path[PATH_MAX], digest[EXEC_IMAGE_HEX_LEN + 8];
	int c, rc, port;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_pull);
		if (c == -1 && optind < argc && ref == NULL) {
			ref = argv[optind++];
			continue;
		}
		if (c == -1 && optind < argc)
			return gw_fail(cmd_pull.name, "unexpected %s", argv[optind]);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c == OPT_SECRET)
			secret = optarg;
		else if (c == OPT_CA)
			o.ca_file = optarg;
		else if (c == OPT_INSECURE)
			o.insecure = optarg;
		else
			return GW_EXIT_FAILURE;
	}
	if (ref == NULL)
		return gw_fail(cmd_pull.name, "expected one REF (see --help)");
	if (o.ca_file != NULL && access(o.ca_file, R_OK) != 0)
		return gw_fail(cmd_pull.name, "--registry-ca %s: %s", o.ca_file, strerror(errno));
	if (o.insecure != NULL && (strchr(o.insecure, '/') != NULL || o.insecure[0] == '\0'))
		return gw_fail(cmd_pull.name, "--insecure-registry %s: expected HOST:PORT",
		               o.insecure);
	if (exec_image_pull_target(ref, &o, host, &port, err, sizeof(err)) != 0)
		return gw_fail(cmd_pull.name, "%s", err);
	/* No request goes out unrecorded: the log first, or no pull. */
	if (gw_default_audit_path(path, sizeof(path), true) != 0 ||
	    audit_open(path, &a, err, sizeof(err)) != 0)
		return gw_fail(cmd_pull.name, "audit log: %s", err);
	if (secret != NULL) {
		if (registry_credentials(a, secret, &cred, &colon) != 0) {
			audit_free(a);
			return GW_EXIT_FAILURE;
		}
		*colon = '\0';
		o.user = (const char *)cred->data;
		o.password = colon + 1;
	}
	pull_row(a, host, port, ref, "started", NULL, NULL);
	rc = audit_flush(a) != 0 ? -EIO : 0;
	if (rc != 0)
		snprintf(err, sizeof(err), "audit log: cannot write its row");
	if (rc == 0 && open_store(cmd_pull.name, true, &s) != 0)
		rc = -EIO;
	else if (rc == 0)
		rc = exec_image_pull(s, ref, &o, hex, err, sizeof(err));
	exec_image_store_free(s);
	if (cred != NULL) {
		*colon = ':'; /* the whole value wiped */
		vault_secret_free(cred);
	}
	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	pull_row(a, host, port, ref, rc == 0 ? "pulled" : "failed", rc == 0 ? digest : NULL,
	         rc == 0          ? NULL
	         : err[0] != '\0' ? err
	                          : "cannot open the store");
	audit_free(a);
	if (rc != 0)
		return err[0] != '\0' ? gw_fail(cmd_pull.name, "%s", err) : GW_EXIT_FAILURE;
	printf("%s\n", digest);
	return GW_EXIT_OK;
}

static int
run_import(int argc, char **argv)
{
	const char *arg = NULL;
	struct exec_image_store *s = NULL;
	char src[PATH_MAX], def[EXEC_IMAGE_NAME_MAX + 140], err[PATH_MAX + 512];
	char hex[EXEC_IMAGE_HEX_LEN + 1];
	const char *name = NULL, *tag = NULL;
	char *colon, *base;
	enum exec_image_source kind;
	int rc;

	rc = parse(argc, argv, &cmd_import, &name, NULL, &arg);
	if (rc != 0)
		return rc == GW_OPT_HELP ? GW_EXIT_OK : GW_EXIT_FAILURE;
	if (arg == NULL)
		return gw_fail(cmd_import.name, "expected one SOURCE (see --help)");
	if (strncmp(arg, "oci:", 4) == 0) {
		kind = EXEC_IMAGE_OCI_DIR;
		snprintf(src, sizeof(src), "%s", arg + 4);
		colon = strrchr(src, ':');
		if (colon != NULL && strchr(colon, '/') == NULL) {
			*colon = '\0';
			tag = colon + 1;
		}
	} else if (strncmp(arg, "docker-archive:", 15) == 0) {
		kind = EXEC_IMAGE_DOCKER_ARCHIVE;
		snprintf(src, sizeof(src), "%s", arg + 15);
	} else {
		return gw_fail(cmd_import.name, "%s: expected oci:DIR[:TAG] or docker-archive:FILE",
		               arg);
	}
	if (src[0] == '\0')
		return gw_fail(cmd_import.name, "%s: no path", arg);
	if (name == NULL && kind == EXEC_IMAGE_OCI_DIR) {
		char copy[PATH_MAX];

		snprintf(copy, sizeof(copy), "%s", src);
		base = basename(copy);
		snprintf(def, sizeof(def), "%s:%s", base, tag != NULL ? tag : "latest");
		for (char *p = def; *p != ':' && *p != '\0'; p++) {
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		}
		name = def;
	}
	if (open_store(cmd_import.name, true, &s) != 0)
		return GW_EXIT_FAILURE;
	rc = exec_image_import(s, kind, src, tag, name, hex, err, sizeof(err));
	exec_image_store_free(s);
	if (rc != 0)
		return gw_fail(cmd_import.name, "%s", err);
	printf("sha256:%s\n", hex);
	return GW_EXIT_OK;
}

static void
print_one(void *arg, const char *name, const char *hex)
{
	if (arg != NULL) {
		json_array_append_new(
		    arg, json_pack("{s:s, s:s+}", "name", name, "digest", "sha256:", hex));
		return;
	}
	printf("%-40s sha256:%s\n", name[0] != '\0' ? name : "<none>", hex);
}

static int
run_ls(int argc, char **argv)
{
	const char *arg = NULL;
	struct exec_image_store *s = NULL;
	char err[PATH_MAX + 128], home[PATH_MAX], lock[PATH_MAX + 16];
	json_t *arr = NULL, *v;
	size_t i;
	bool json = false;
	int rc;

	rc = parse(argc, argv, &cmd_ls, NULL, &json, &arg);
	if (rc != 0)
		return rc == GW_OPT_HELP ? GW_EXIT_OK : GW_EXIT_FAILURE;
	if (arg != NULL)
		return gw_fail(cmd_ls.name, "takes no argument");
	if (json)
		arr = json_array();
	/* No store yet: no image, nothing to list. */
	if (gw_home_dir(home, sizeof(home)) == 0 &&
	    snprintf(lock, sizeof(lock), "%s/images/lock", home) < (int)sizeof(lock) &&
	    access(lock, F_OK) != 0 && errno == ENOENT) {
		json_decref(arr);
		return GW_EXIT_OK;
	}
	if (open_store(cmd_ls.name, false, &s) != 0) {
		json_decref(arr);
		return GW_EXIT_FAILURE;
	}
	rc = exec_image_list(s, print_one, arr, err, sizeof(err));
	exec_image_store_free(s);
	if (rc != 0) {
		json_decref(arr);
		return gw_fail(cmd_ls.name, "%s", err);
	}
	json_array_foreach(arr, i, v)
	{
		json_incref(v);
		if (gw_print_json(cmd_ls.name, v) != 0)
			break;
	}
	json_decref(arr);
	return GW_EXIT_OK;
}

static json_t *
strings_json(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a != NULL && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static int
run_inspect(int argc, char **argv)
{
	const char *arg = NULL;
	struct exec_image_store *s = NULL;
	struct exec_image_ref ref;
	struct exec_image_manifest m;
	struct exec_image_config cfg;
	char err[PATH_MAX + 512], hex[EXEC_IMAGE_HEX_LEN + 1], root[PATH_MAX];
	char *buf = NULL;
	size_t len;
	json_t *o, *layers;
	bool json = false;
	int rc;

	rc = parse(argc, argv, &cmd_inspect, NULL, &json, &arg);
	if (rc != 0)
		return rc == GW_OPT_HELP ? GW_EXIT_OK : GW_EXIT_FAILURE;
	if (arg == NULL)
		return gw_fail(cmd_inspect.name, "expected one REF");
	if (exec_image_ref_parse(arg, &ref, err, sizeof(err)) != 0)
		return gw_fail(cmd_inspect.name, "%s", err);
	if (open_store(cmd_inspect.name, false, &s) != 0)
		return GW_EXIT_FAILURE;
	rc = exec_image_resolve(s, &ref, hex, err, sizeof(err));
	if (rc == 0)
		rc = exec_image_manifest_load(s, hex, &buf, &len, err, sizeof(err));
	if (rc == 0)
		rc = exec_image_manifest_parse(buf, len, &m, err, sizeof(err));
	if (rc == 0)
		rc = exec_image_config_load(s, hex, &cfg, err, sizeof(err));
	free(buf);
	exec_image_root_path(s, hex, root, sizeof(root));
	exec_image_store_free(s);
	if (rc != 0)
		return gw_fail(cmd_inspect.name, "%s", err);
	layers = json_array();
	for (size_t i = 0; i < m.nlayers; i++)
		json_array_append_new(layers,
		                      json_pack("{s:s+, s:I}", "digest", "sha256:", m.layers[i].hex,
		                                "size", (json_int_t)m.layers[i].size));
	o = json_pack("{s:s+, s:s+, s:o, s:o, s:o, s:o, s:s?, s:s?, s:s?, s:s?, s:s}", "digest",
	              "sha256:", hex, "config", "sha256:", m.config.hex, "layers", layers, "env",
	              strings_json(cfg.env, cfg.nenv), "entrypoint",
	              strings_json(cfg.entrypoint, cfg.nentrypoint), "cmd",
	              strings_json(cfg.cmd, cfg.ncmd), "workdir", cfg.workdir, "user", cfg.user,
	              "os", cfg.os, "architecture", cfg.architecture, "root", root);
	exec_image_config_clear(&cfg);
	if (json)
		return gw_print_json(cmd_inspect.name, o) == 0 ? GW_EXIT_OK : GW_EXIT_FAILURE;
	if (o == NULL)
		return gw_fail(cmd_inspect.name, "out of memory");
	{
		char *text = json_dumps(o, JSON_INDENT(2));

		if (text != NULL)
			printf("%s\n", text);
		free(text);
	}
	json_decref(o);
	return GW_EXIT_OK;
}

static int
run_rm(int argc, char **argv)
{
	const char *arg = NULL;
	struct exec_image_store *s = NULL;
	struct exec_image_ref ref;
	char err[PATH_MAX + 512];
	int rc;

	rc = parse(argc, argv, &cmd_rm, NULL, NULL, &arg);
	if (rc != 0)
		return rc == GW_OPT_HELP ? GW_EXIT_OK : GW_EXIT_FAILURE;
	if (arg == NULL)
		return gw_fail(cmd_rm.name, "expected one REF");
	if (exec_image_ref_parse(arg, &ref, err, sizeof(err)) != 0)
		return gw_fail(cmd_rm.name, "%s", err);
	if (open_store(cmd_rm.name, false, &s) != 0)
		return GW_EXIT_FAILURE;
	rc = exec_image_remove(s, &ref, err, sizeof(err));
	exec_image_store_free(s);
	if (rc != 0)
		return gw_fail(cmd_rm.name, "%s", err);
	return GW_EXIT_OK;
}

static int
run_image(int argc, char **argv)
{
	static const struct gw_command *const subs[] = {&cmd_pull,    &cmd_import, &cmd_ls,
	                                                &cmd_inspect, &cmd_rm,     NULL};

	return gw_run_subcommand(argc, argv, &gw_command_image, subs);
}

const struct gw_command gw_command_image = {
    .name = "image",
    .summary = "the image store (pull, import, ls, inspect, rm)",
    .usage = "usage: tollgate image pull REGISTRY/REPO[:TAG][@sha256:DIGEST] [FLAGS]\n"
             "       tollgate image import oci:DIR[:TAG] [--name NAME[:TAG]]\n"
             "       tollgate image import docker-archive:FILE [--name NAME[:TAG]]\n"
             "       tollgate image ls [--json]\n"
             "       tollgate image inspect REF [--json]\n"
             "       tollgate image rm REF\n"
             "\n"
             "Images kept by digest under $TOLLGATE_HOME/images (docs/images.md).\n"
             "'tollgate image SUBCOMMAND --help' says more.\n",
    .run = run_image,
};
