/*
 * --image for run, wrap and serve: a stored image (exec/image/) named by a
 * reference, pinned by digest unless the operator allows otherwise, made a
 * sandbox's root (docs/images.md).
 */
#ifndef TOLLGATE_GATEWAY_IMAGE_H
#define TOLLGATE_GATEWAY_IMAGE_H

#include <limits.h>
#include <stdbool.h>

#include <jansson.h>

#include "exec/image/image.h"
#include "exec/services/runtime.h"

struct exec_spec;
struct gw_sandbox_flags;
struct gw_secrets;
struct gw_setup_flags;

/* All zero to start with; gw_image_clear frees it. */
struct gw_image {
	char hex[EXEC_IMAGE_HEX_LEN + 1]; /* the manifest's digest */
	char root[PATH_MAX];              /* its unpacked root in the store */
	struct exec_image_config cfg;     /* Env, WorkingDir, Entrypoint, Cmd */
	uint32_t uid, gid;                /* User resolved in the root; 0: none */
	/* gw_image_argv's: the Entrypoint, then the command or the Cmd */
	char *argv[2 * EXEC_IMAGE_ARGS_MAX + 2];
	/* --runtime runsc: the binary its sandboxes run their command in
	 * (exec/sandbox/runsc.h); NULL: tollgate's containment alone. */
	const char *runsc;
};

/*
 * ref resolved in $TOLLGATE_HOME/images: refused without a digest unless
 * allow_unpinned, which prints "tollgate: CMD: image REF is sha256:...; pin
 * it" on stderr. flag names the flag in messages ("--image"). 0 or
 * GW_EXIT_FAILURE after printing one line.
 */
int gw_image_open(const char *cmd, const char *flag, const char *ref, bool allow_unpinned,
                  struct gw_image *img);
/* The image's Env into env's list, a name env already has (--env's) left
 * as it is. 0 or GW_EXIT_FAILURE after printing. */
int gw_image_env(const char *cmd, const struct gw_image *img, struct gw_sandbox_flags *sb);
/*
 * img->argv: the Entrypoint followed by argv, or by the Cmd when argv is
 * NULL. 0 or GW_EXIT_FAILURE after printing (no command at all, too many
 * words).
 */
int gw_image_argv(const char *cmd, const char *ref, struct gw_image *img, char *const *argv);
/* The sandbox's / is the image's; it starts in its WorkingDir (else /work),
 * under the image's runsc when --runtime runsc. */
void gw_image_spec(const struct gw_image *img, struct exec_spec *spec);
/*
 * A sandbox start's audit detail names the image spec runs: "image":
 * "sha256:..." (an image's root in the store is named by its digest). No
 * change without an image, or when out of memory.
 */
void gw_image_detail(json_t *detail, const struct exec_spec *spec);
void gw_image_clear(struct gw_image *img);

/*
 * serve --image LANG=REF (repeatable): execute_code and validate_code in
 * LANG run in REF's root. All zero to start with.
 */
struct gw_image_langs {
	const char *ref[EXEC_LANG_COUNT]; /* NULL: this host's root */
	bool allow_unpinned;
	struct gw_image img[EXEC_LANG_COUNT];
	const char *roots[EXEC_LANG_COUNT + 1]; /* the privileged parent's, NULL-ended */
};
/* One --image LANG=REF. 0 or GW_EXIT_FAILURE after printing. */
int gw_image_lang_flag(const char *cmd, struct gw_image_langs *l, const char *value);
/* Each REF resolved (gw_image_open). 0 or GW_EXIT_FAILURE after printing. */
int gw_image_langs_open(const char *cmd, struct gw_image_langs *l);
/* LANG's image, or NULL (none given, or not opened). */
const struct gw_image *gw_image_lang(const struct gw_image_langs *l, enum exec_lang lang);
void gw_image_langs_clear(struct gw_image_langs *l);

/* ---- --secret, --image, --allow-unpinned, --runtime: run, wrap, serve ---- */

/* getopt values: above the sandbox flags' (gateway/setup.h), below 0x300. */
enum {
	GW_IMAGE_OPT_BASE = 0x2c0,
	GW_IMAGE_OPT_SECRET = GW_IMAGE_OPT_BASE,
	GW_IMAGE_OPT_IMAGE,
	GW_IMAGE_OPT_ALLOW_UNPINNED,
	GW_IMAGE_OPT_RUNTIME,
};

/* clang-format off */
#define GW_IMAGE_OPTIONS \
	{"secret", required_argument, NULL, GW_IMAGE_OPT_SECRET}, \
	{"image", required_argument, NULL, GW_IMAGE_OPT_IMAGE}, \
	{"allow-unpinned", no_argument, NULL, GW_IMAGE_OPT_ALLOW_UNPINNED}, \
	{"runtime", required_argument, NULL, GW_IMAGE_OPT_RUNTIME}
/* clang-format on */

/* What those flags said. All zero to start with, but langs (below). */
struct gw_image_flags {
	struct gw_secrets *secrets; /* --secret goes there (gw_secrets_flag) */
	/* serve: --image LANG=REF goes there; NULL: --image REF, once */
	struct gw_image_langs *langs;
	const char *image; /* --image REF (run, wrap) */
	bool allow_unpinned;
	const char *runtime; /* --runtime as given; NULL: native */
	char runsc[PATH_MAX]; /* --runtime runsc: the binary found; "": none */
};

/*
 * One getopt result, as gw_sandbox_flag: 0, GW_SETUP_NOT_MINE or
 * GW_EXIT_FAILURE after printing "tollgate: CMD: ...".
 */
int gw_image_flag(const char *cmd, struct gw_image_flags *f, struct gw_setup_flags *gw, int c,
                  const char *value);
/*
 * Once every flag is read: --runtime checked ("native", or "runsc" with an
 * --image and a runsc on PATH, which becomes the privileged parent's
 * ceiling in gw). 0 or GW_EXIT_FAILURE after printing.
 */
int gw_image_flags_check(const char *cmd, struct gw_image_flags *f, struct gw_setup_flags *gw);
/* The runsc binary --runtime runsc chose, or NULL. */
const char *gw_image_flags_runsc(const struct gw_image_flags *f);

#endif
