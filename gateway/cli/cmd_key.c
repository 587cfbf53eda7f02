/*
 * `tollgate key show [--pubkey-out FILE]`: the public half of the key pair
 * that signs artifacts, made on first use under TOLLGATE_HOME.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/services/artifact.h"
#include "gateway/cli/cli.h"
#include "gateway/core/err.h"
#include "gateway/core/fdio.h"
#include "gateway/core/safepath.h"

extern const struct gw_command gw_command_key;

static int run_show(int argc, char **argv);

static const struct gw_command cmd_show = {
    .name = "key show",
    .run = run_show,
    .usage = "usage: tollgate key show [--pubkey-out FILE] [--json]\n"
             "\n"
             "Prints the public key that signs artifacts (PEM) and, on a last line,\n"
             "'fingerprint: sha256:HEX', the SHA-256 of the key's DER form. The key pair is\n"
             "made on first use: $TOLLGATE_HOME/" EXEC_KEY_PRIVATE_NAME " (mode 0600) and\n"
             "$TOLLGATE_HOME/" EXEC_KEY_PUBLIC_NAME ". The private key is never printed.\n"
             "\n"
             "  --pubkey-out FILE   also write the public key (PEM) to FILE, for\n"
             "                      'tollgate verify --pubkey FILE' on another machine\n"
             "  --json              one JSON object: {\"public_key_pem\", \"fingerprint\"\n"
             "                      (\"sha256:HEX\"), \"key_sha256\" (HEX), \"public_key_file\"}\n",
};

enum { OPT_PUBKEY_OUT = 0x100, OPT_JSON };

/* As run's --json-status: another user's symlink on the way is refused. */
static int
write_file(const char *path, const char *text, size_t len, char *err, size_t errlen)
{
	int fd, rc;

	fd = gw_safepath_open_output(path, 0644, err, errlen);
	if (fd < 0)
		return fd;
	rc = gw_write_all(fd, text, len);
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc != 0)
		gw_set_err(err, errlen, "%s: %s", path, strerror(-rc));
	return rc;
}

static int
run_show(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"pubkey-out", required_argument, NULL, OPT_PUBKEY_OUT},
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	struct exec_key *key = NULL;
	const char *out_path = NULL;
	char home[PATH_MAX], err[PATH_MAX + 256], fp[EXEC_SHA256_HEX_LEN + 1], *pem = NULL;
	size_t len = 0;
	bool json = false;
	int c, rc = GW_EXIT_FAILURE;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &cmd_show);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c == OPT_JSON)
			json = true;
		else if (c == OPT_PUBKEY_OUT)
			out_path = optarg;
		else
			return GW_EXIT_FAILURE;
	}
	if (optind != argc)
		return gw_fail(cmd_show.name, "unexpected argument '%s'", argv[optind]);
	if (gw_home_ensure(home, sizeof(home)) != 0)
		return gw_fail(cmd_show.name, "cannot find or create TOLLGATE_HOME");
	if (exec_key_load_or_create(home, &key, err, sizeof(err)) != 0)
		return gw_fail(cmd_show.name, "%s", err);
	if (exec_key_public_pem(key, &pem, &len) != 0 || exec_key_fingerprint(key, fp) != 0) {
		gw_fail(cmd_show.name, "cannot encode the public key");
		goto out;
	}
	if (out_path != NULL) {
		if (write_file(out_path, pem, len, err, sizeof(err)) != 0) {
			gw_fail(cmd_show.name, "--pubkey-out: %s", err);
			goto out;
		}
	}
	if (json) {
		char file[PATH_MAX + 64];

		snprintf(file, sizeof(file), "%s/%s", home, EXEC_KEY_PUBLIC_NAME);
		rc = gw_print_json(cmd_show.name,
		                   json_pack("{s:s%, s:s+, s:s, s:s}", "public_key_pem", pem, len,
		                             "fingerprint", "sha256:", fp, "key_sha256", fp,
		                             "public_key_file", file));
		goto out;
	}
	fputs(pem, stdout);
	printf("fingerprint: sha256:%s\n", fp);
	rc = fflush(stdout) == 0 ? GW_EXIT_OK : GW_EXIT_FAILURE;
out:
	free(pem);
	exec_key_free(key);
	return rc;
}

static int
run_key(int argc, char **argv)
{
	static const struct gw_command *const subs[] = {&cmd_show, NULL};

	return gw_run_subcommand(argc, argv, &gw_command_key, subs);
}

const struct gw_command gw_command_key = {
    .name = "key",
    .summary = "show the public key that signs artifacts",
    .usage = "usage: tollgate key show [--pubkey-out FILE] [--json]\n"
             "\n"
             "  show   print the artifact-signing public key (PEM) and its SHA-256\n"
             "         fingerprint; the key pair is made on first use\n"
             "\n"
             "See 'tollgate key show --help' and docs/artifacts.md.\n",
    .run = run_key,
};
