/*
 * `tollgate runtimes [--json]`: the interpreters `run --lang` and `validate`
 * would use (exec_runtime_describe, as serve's list_runtimes), found on PATH,
 * with the first line of their --version.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "exec/sandbox/runsc.h"
#include "exec/services/runtime.h"
#include "gateway/cli/cli.h"

extern const struct gw_command gw_command_runtimes;

#define CMD "runtimes"
/* A --version that takes longer than this is reported as unknown. */
#define RUNTIMES_VERSION_TIMEOUT_MS 5000

enum { OPT_JSON = 0x100 };

/* The sandbox runtime `--runtime runsc` (run, wrap, serve) would use, or that there is none. */
static void
print_runsc(void)
{
	char path[PATH_MAX], version[128];

	printf("\n%-8s %-32s %-9s %s\n", "RUNTIME", "PROGRAM", "PLATFORM", "VERSION");
	if (exec_runsc_find(path, sizeof(path)) != 0) {
		printf("%-8s %s\n", "runsc", "not on PATH (Debian's runsc package)");
		return;
	}
	exec_runsc_version(path, version, sizeof(version));
	printf("%-8s %-32s %-9s %s\n", "runsc", path, EXEC_RUNSC_PLATFORM, version);
}

static int
run_runtimes(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, OPT_JSON},
	    {NULL, 0, NULL, 0},
	};
	struct exec_runtime_info info;
	json_t *arr = NULL;
	bool json = false;
	int c, rc = GW_EXIT_OK, found = 0;

	gw_getopt_reset();
	for (;;) {
		c = gw_getopt(argc, argv, "", longopts, &gw_command_runtimes);
		if (c == -1)
			break;
		if (c == GW_OPT_HELP)
			return GW_EXIT_OK;
		if (c == GW_OPT_ERROR)
			return GW_EXIT_FAILURE;
		if (c == OPT_JSON)
			json = true;
	}
	if (optind < argc)
		return gw_fail(CMD, "unexpected argument '%s'", argv[optind]);
	if (json) {
		arr = json_array();
		if (arr == NULL)
			return gw_fail(CMD, "out of memory");
	} else {
		printf("%-8s %-32s %s\n", "LANG", "PROGRAM", "VERSION");
	}
	for (int i = 0; i < EXEC_LANG_COUNT; i++) {
		enum exec_lang lang = (enum exec_lang)i;

		if (exec_runtime_describe(lang, RUNTIMES_VERSION_TIMEOUT_MS, &info) != 0)
			continue;
		found++;
		if (info.version[0] == '\0')
			snprintf(info.version, sizeof(info.version), "unknown");
		if (arr == NULL) {
			printf("%-8s %-32s %s\n", exec_runtime_lang_name(lang), info.path,
			       info.version);
			continue;
		}
		if (json_array_append_new(
		        arr, json_pack("{s:s, s:s, s:s}", "lang", exec_runtime_lang_name(lang),
		                       "path", info.path, "version", info.version)) != 0) {
			rc = gw_fail(CMD, "out of memory");
			goto out;
		}
	}
	if (arr != NULL) {
		if (json_dumpf(arr, stdout, JSON_COMPACT) != 0) {
			rc = gw_fail(CMD, "cannot write the list");
			goto out;
		}
		putchar('\n');
	} else {
		if (found == 0)
			fprintf(stderr,
			        "tollgate: %s: none of python3, node, bash or sh is on PATH\n",
			        CMD);
		print_runsc();
	}
out:
	json_decref(arr);
	return rc;
}

const struct gw_command gw_command_runtimes = {
    .name = "runtimes",
    .summary = "list the language runtimes found on PATH",
    .usage = "usage: tollgate runtimes [--json]\n"
             "\n"
             "Lists the interpreters that 'run --lang' and 'validate' use: python3\n"
             "(python), node (node) and bash, else sh (sh), each the first on PATH that\n"
             "the sandbox sees at the same path (under /usr, /bin, /etc, /opt, ...: the\n"
             "path shown is the one the sandbox runs), with the first line of its\n"
             "--version ('unknown' when that fails or takes over 5 s). Languages with\n"
             "nothing on PATH are left out. Then gVisor's runsc, which '--runtime runsc'\n"
             "of run, wrap and serve would use with --image (the first on PATH), with\n"
             "the platform tollgate gives it, or that it is not on PATH. --json lists\n"
             "the languages only.\n"
             "\n"
             "  --json    one JSON array of {\"lang\", \"path\", \"version\"}\n",
    .run = run_runtimes,
};
