/*
 * `tollgate vault add|list|delete`: the file vault from the command line.
 * A value is read from stdin only (never argv, where ps and shell history
 * would show it) and is never printed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "exec/services/redact.h"
#include "exec/services/vault.h"
#include "gateway/cli/cli.h"
#include "gateway/core/log.h"
#include "policy/audit.h"

extern const struct gw_command gw_command_vault;

enum {
	OPT_NAMESPACE = 0x100,
	OPT_REPLACE,
	OPT_AUDIT,
	OPT_BACKEND,
	OPT_JSON,
};

static int run_add(int argc, char **argv);
static int run_list(int argc, char **argv);
static int run_delete(int argc, char **argv);

static const struct gw_command cmd_add = {
    .name = "vault add",
    .run = run_add,
    .usage = "usage: tollgate vault add NAME [--namespace NS] [--replace] [--audit FILE]\n"
             "\n"
             "Stores the value read from stdin as secret NAME (one trailing newline is\n"
             "dropped; at most 65536 bytes; not empty; no NUL byte). On a terminal the value\n"
             "is asked for without echo. There is no flag for the value: argv is visible to\n"
             "every user through ps.\n"
             "\n"
             "  --namespace NS   the secret's namespace (default: default)\n"
             "  --replace        overwrite an existing secret of that name\n"
             "  --audit FILE     the audit database ($TOLLGATE_HOME/audit.db)\n"
             "\n"
             "NAME: A-Z a-z 0-9 _, 1 to 64, not starting with a digit (it becomes the\n"
             "variable's name in a sandbox). See docs/vault.md for the key.\n",
};

static const struct gw_command cmd_list = {
    .name = "vault list",
    .run = run_list,
    .usage = "usage: tollgate vault list [--namespace NS] [--backend file|env] [--json]\n"
             "\n"
             "Prints the names of the secrets in a namespace, one a line, sorted. Never\n"
             "values. --backend env lists TOLLGATE_SECRET_<NS>_<NAME> variables instead.\n"
             "\n"
             "  --namespace NS   the namespace (default: default)\n"
             "  --backend B      file (default) or env\n"
             "  --json           one JSON object: {\"namespace\", \"backend\", \"names\": [...]}\n",
};

static const struct gw_command cmd_delete = {
    .name = "vault delete",
    .run = run_delete,
    .usage = "usage: tollgate vault delete NAME [--namespace NS] [--audit FILE]\n"
             "\n"
             "Removes secret NAME from the file vault.\n",
};

struct vault_flags {
	const char *ns;
	const char *audit_path;
	const char *backend;
	bool replace;
	bool json;
	const char *name;
};

/* Parses the flags cmd allows; 0, GW_OPT_HELP or GW_EXIT_FAILURE. */
static int
parse(int argc, char **argv, const struct gw_command *cmd, const struct option *longopts,
      bool want_name, struct vault_flags *f)
{
	const char *operands[2];
	size_t nops = 0;
	int c;

	f->ns = VAULT_DEFAULT_NAMESPACE;
	/* gw_getopt names an unknown flag as given: `--value=hunter2` would put
	 * the value on stderr. Such a flag is refused here without echo. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *eq = strchr(argv[i], '=');
		bool known = false;

		if (strncmp(argv[i], "--", 2) != 0 || eq == NULL)
			continue;
		for (size_t k = 0; longopts[k].name != NULL; k++) {
			size_t n = strlen(longopts[k].name);

			if ((size_t)(eq - argv[i] - 2) == n &&
			    strncmp(argv[i] + 2, longopts[k].name, n) == 0)
				known = true;
		}
		if (!known)
			return gw_fail(cmd->name, "unknown flag (see 'tollgate %s --help')",
			               cmd->name);
	}
	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, cmd);
		/* Flags may follow NAME (`vault add NAME --namespace NS`): gw_getopt
		 * stops at the first operand, so step over it and go on. */
		if (c == -1 && optind < argc && strcmp(argv[optind - 1], "--") != 0) {
			if (nops < 2)
				operands[nops] = argv[optind];
			nops++;
			optind++;
			continue;
		}
		if (c == -1) {
			for (; optind < argc; optind++, nops++) {
				if (nops < 2)
					operands[nops] = argv[optind];
			}
			break;
		}
		if (c == GW_OPT_HELP)
			return GW_OPT_HELP;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		switch (c) {
		case OPT_NAMESPACE:
			f->ns = optarg;
			break;
		case OPT_REPLACE:
			f->replace = true;
			break;
		case OPT_AUDIT:
			f->audit_path = optarg;
			break;
		case OPT_BACKEND:
			f->backend = optarg;
			break;
		case OPT_JSON:
			f->json = true;
			break;
		default:
			return gw_fail(cmd->name, "unexpected flag");
		}
	}
	if (!vault_namespace_valid(f->ns))
		return gw_fail(cmd->name, "--namespace: expected 1 to %d of A-Z a-z 0-9 _",
		               VAULT_NAME_MAX);
	if (!want_name) {
		if (nops != 0)
			return gw_fail(cmd->name, "unexpected argument (see 'tollgate %s --help')",
			               cmd->name);
		return 0;
	}
	/* Operands are not echoed: a second one may be a value typed by mistake. */
	if (nops != 1)
		return gw_fail(cmd->name, "expected one NAME (see 'tollgate %s --help')",
		               cmd->name);
	f->name = operands[0];
	/* The name is echoed back only when it is valid: it may be a pasted value. */
	if (!vault_name_valid(f->name))
		return gw_fail(cmd->name,
		               "NAME: expected 1 to %d of A-Z a-z 0-9 _, not starting "
		               "with a digit",
		               VAULT_NAME_MAX);
	return 0;
}

static int
open_file_vault(const char *cmd, struct vault **v)
{
	char home[PATH_MAX], err[512];
	int rc;

	rc = gw_home_ensure(home, sizeof(home));
	if (rc != 0)
		return gw_fail(cmd, "TOLLGATE_HOME: %s", strerror(-rc));
	rc = vault_open_file(home, v, err, sizeof(err));
	if (rc != 0)
		return gw_fail(cmd, "%s", err);
	return 0;
}

/* Opens the audit log for an add or a delete; a failure is reported. */
static int
open_audit(const char *cmd, const char *path, struct audit **a)
{
	char buf[PATH_MAX], err[512];

	if (path == NULL) {
		if (gw_default_audit_path(buf, sizeof(buf), true) != 0)
			return gw_fail(cmd,
			               "cannot find TOLLGATE_HOME for the audit log (use --audit)");
		path = buf;
	}
	if (audit_open(path, a, err, sizeof(err)) != 0)
		return gw_fail(cmd, "audit log %s: %s", path, err);
	return 0;
}

/*
 * Reads the value: all of stdin, at most VAULT_VALUE_MAX bytes after one
 * trailing newline is dropped. On a terminal, one line without echo.
 */
static int
read_value(const char *name, uint8_t *buf, size_t cap, size_t *len)
{
	struct termios old, quiet;
	bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
	size_t got = 0;
	ssize_t n;
	int rc = 0;

	if (tty) {
		fprintf(stderr, "value for %s (not echoed): ", name);
		fflush(stderr);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	for (;;) {
		if (got == cap) {
			rc = -EFBIG;
			break;
		}
		n = read(STDIN_FILENO, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (tty && buf[got - 1] == '\n')
			break;
	}
	if (tty) {
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (rc == 0 && got > 0 && buf[got - 1] == '\n')
		got--;
	*len = got;
	return rc;
}

static int
run_add(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"namespace", required_argument, NULL, OPT_NAMESPACE},
	    {"replace", no_argument, NULL, OPT_REPLACE},
	    {"audit", required_argument, NULL, OPT_AUDIT},
	    {NULL, 0, NULL, 0},
	};
	/* Room for the largest value, its newline, and one byte to see "too long". */
	uint8_t value[VAULT_VALUE_MAX + 2];
	struct vault_flags f = {0};
	struct vault *v = NULL;
	struct audit *a = NULL;
	const char *why;
	char err[512];
	size_t len = 0;
	int rc;

	rc = parse(argc, argv, &cmd_add, longopts, true, &f);
	if (rc == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (rc != 0)
		return rc;
	rc = read_value(f.name, value, sizeof(value), &len);
	if (rc != 0) {
		rc = gw_fail(cmd_add.name, "stdin: %s",
		             rc == -EFBIG ? "the value is longer than 65536 bytes" : strerror(-rc));
		goto out;
	}
	why = vault_value_why(value, len);
	if (why != NULL) {
		rc = gw_fail(cmd_add.name, "%s", why);
		goto out;
	}
	rc = open_audit(cmd_add.name, f.audit_path, &a);
	if (rc != 0)
		goto out;
	rc = open_file_vault(cmd_add.name, &v);
	if (rc != 0)
		goto out;
	rc = vault_put(v, f.ns, f.name, value, len, f.replace, err, sizeof(err));
	if (rc == -EEXIST) {
		rc = gw_fail(cmd_add.name, "%s (use --replace)", err);
		goto out;
	}
	if (rc != 0) {
		rc = gw_fail(cmd_add.name, "%s", err);
		goto out;
	}
	vault_audit(a, NULL, f.replace ? "replace" : "add", "file", f.ns, f.name);
	if (len < REDACT_SHORT_LEN)
		log_warnx("vault add: %s is shorter than %d bytes: redacting it from a sandbox's "
		          "output will also hide unrelated text",
		          f.name, REDACT_SHORT_LEN);
	rc = GW_EXIT_OK;
out:
	OPENSSL_cleanse(value, sizeof(value));
	vault_free(v);
	audit_free(a);
	return rc;
}

/* arg: the JSON array of names, or NULL for lines. */
static int
print_name(const char *name, void *arg)
{
	if (arg != NULL)
		return json_array_append_new(arg, json_string(name)) == 0 ? 0 : -ENOMEM;
	return puts(name) < 0 ? -EIO : 0;
}

static int
run_list(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"namespace", required_argument, NULL, OPT_NAMESPACE},
	    {"backend", required_argument, NULL, OPT_BACKEND},
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	struct vault_flags f = {0};
	struct vault *v = NULL;
	json_t *names = NULL;
	char err[512];
	int rc;

	rc = parse(argc, argv, &cmd_list, longopts, false, &f);
	if (rc == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (rc != 0)
		return rc;
	if (f.backend == NULL || strcmp(f.backend, "file") == 0) {
		rc = open_file_vault(cmd_list.name, &v);
		if (rc != 0)
			return rc;
	} else if (strcmp(f.backend, "env") == 0) {
		if (vault_open_env(&v) != 0)
			return gw_fail(cmd_list.name, "out of memory");
	} else {
		return gw_fail(cmd_list.name, "--backend: '%s': expected file or env", f.backend);
	}
	err[0] = '\0';
	if (f.json) {
		names = json_array();
		if (names == NULL) {
			rc = gw_fail(cmd_list.name, "out of memory");
			goto out;
		}
	}
	rc = vault_list(v, f.ns, print_name, names, err, sizeof(err));
	if (rc != 0)
		rc = gw_fail(cmd_list.name, "%s", err[0] != '\0' ? err : strerror(-rc));
	else if (names != NULL)
		rc = gw_print_json(cmd_list.name,
		                   json_pack("{s:s, s:s, s:O}", "namespace", f.ns, "backend",
		                             f.backend != NULL ? f.backend : "file", "names",
		                             names));
	else if (fflush(stdout) != 0)
		rc = gw_fail(cmd_list.name, "stdout: %s", strerror(errno));
out:
	json_decref(names);
	vault_free(v);
	return rc;
}

static int
run_delete(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"namespace", required_argument, NULL, OPT_NAMESPACE},
	    {"audit", required_argument, NULL, OPT_AUDIT},
	    {NULL, 0, NULL, 0},
	};
	struct vault_flags f = {0};
	struct vault *v = NULL;
	struct audit *a = NULL;
	char err[512];
	int rc;

	rc = parse(argc, argv, &cmd_delete, longopts, true, &f);
	if (rc == GW_OPT_HELP)
		return GW_EXIT_OK;
	if (rc != 0)
		return rc;
	rc = open_audit(cmd_delete.name, f.audit_path, &a);
	if (rc == 0)
		rc = open_file_vault(cmd_delete.name, &v);
	if (rc != 0)
		goto out;
	rc = vault_delete(v, f.ns, f.name, err, sizeof(err));
	if (rc != 0) {
		rc = gw_fail(cmd_delete.name, "%s", err);
		goto out;
	}
	vault_audit(a, NULL, "delete", "file", f.ns, f.name);
	rc = GW_EXIT_OK;
out:
	vault_free(v);
	audit_free(a);
	return rc;
}

static int
run_vault(int argc, char **argv)
{
	static const struct gw_command *const subs[] = {&cmd_add, &cmd_list, &cmd_delete, NULL};

	return gw_run_subcommand(argc, argv, &gw_command_vault, subs);
}

const struct gw_command gw_command_vault = {
    .name = "vault",
    .summary = "store secrets for sandboxes (add, list, delete)",
    .usage = "usage: tollgate vault add NAME [--namespace NS] [--replace] [--audit FILE]\n"
             "       tollgate vault list [--namespace NS] [--backend file|env] [--json]\n"
             "       tollgate vault delete NAME [--namespace NS] [--audit FILE]\n"
             "\n"
             "  add      store the value read from stdin (never from argv)\n"
             "  list     print the names in a namespace (never the values)\n"
             "  delete   remove a secret\n"
             "\n"
             "Secrets live in $TOLLGATE_HOME/vault.json, each sealed with AES-256-GCM under\n"
             "the key in TOLLGATE_VAULT_KEY (64 hex digits or base64 of 32 bytes) or else\n"
             "$TOLLGATE_HOME/vault.key (0600, made on first use). `tollgate run --secret\n"
             "NAME` gives one to a sandbox. See docs/vault.md.\n",
    .run = run_vault,
};
