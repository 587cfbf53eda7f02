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

/* All zero to start with; gw_image_clear frees it. */
struct gw_image {
	char hex[EXEC_IMAGE_HEX_LEN + 1]; /* the manifest's digest */
	char root[PATH_MAX];              /* its unpacked root in the store */
	struct exec_image_config cfg;     /* Env, WorkingDir, Entrypoint, Cmd */
	uint32_t uid, gid;                /* User resolved in the root; 0: none */
	/* gw_image_argv's: the Entrypoint, then the command or the Cmd */
	char *argv[2 * EXEC_IMAGE_ARGS_MAX + 2];
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
/* The sandbox's / is the image's; it starts in its WorkingDir (else /work). */
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

#endif
