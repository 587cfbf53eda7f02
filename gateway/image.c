/*
 * --image for run, wrap and serve (gateway/image.h): the reference
 * resolved in the store, the image's config applied to a sandbox's
 * environment, command and spec.
 */
#include "gateway/image.h"

#include <stdio.h>
#include <string.h>

#include "exec/sandbox/exec.h"
#include "exec/sandbox/runsc.h"
#include "gateway/cli/cli.h"
#include "gateway/secrets.h"
#include "gateway/setup.h"

int
gw_image_open(const char *cmd, const char *flag, const char *ref, bool allow_unpinned,
              struct gw_image *img)
{
	struct exec_image_store *s = NULL;
	struct exec_image_ref r;
	char home[PATH_MAX], dir[PATH_MAX + 16], err[PATH_MAX + 512];
	int rc;

	if (exec_image_ref_parse(ref, &r, err, sizeof(err)) != 0)
		return gw_fail(cmd, "%s %s", flag, err);
	if (r.hex[0] == '\0' && !allow_unpinned)
		return gw_fail(cmd,
		               "%s %s: no digest; name it NAME@sha256:DIGEST (see 'tollgate "
		               "image ls'), or give --allow-unpinned",
		               flag, ref);
	if (gw_home_dir(home, sizeof(home)) != 0)
		return gw_fail(cmd, "%s: cannot find TOLLGATE_HOME", flag);
	snprintf(dir, sizeof(dir), "%s/images", home);
	rc = exec_image_store_open(dir, false, &s, err, sizeof(err));
	if (rc == 0)
		rc = exec_image_resolve(s, &r, img->hex, err, sizeof(err));
	if (rc == 0)
		rc = exec_image_config_load(s, img->hex, &img->cfg, err, sizeof(err));
	if (rc == 0)
		exec_image_root_path(s, img->hex, img->root, sizeof(img->root));
	if (rc == 0)
		rc = exec_image_user_resolve(img->root, img->cfg.user, &img->uid, &img->gid, err,
		                             sizeof(err));
	exec_image_store_free(s);
	if (rc != 0)
		return gw_fail(cmd, "%s %s: %s", flag, ref, err);
	if (r.hex[0] == '\0')
		fprintf(stderr, "tollgate: %s: image %s is sha256:%s; pin it\n", cmd, ref,
		        img->hex);
	return 0;
}

int
gw_image_env(const char *cmd, const struct gw_image *img, struct gw_sandbox_flags *sb)
{
	char name[256];

	for (size_t i = 0; i < img->cfg.nenv; i++) {
		const char *eq = strchr(img->cfg.env[i], '=');

		snprintf(name, sizeof(name), "%.*s", (int)(eq - img->cfg.env[i]), img->cfg.env[i]);
		if (exec_env_has(sb->nenv > 0 ? sb->env : NULL, name))
			continue;
		if (gw_sandbox_add_env(cmd, sb, img->cfg.env[i]) != 0)
			return GW_EXIT_FAILURE;
	}
	return 0;
}

int
gw_image_argv(const char *cmd, const char *ref, struct gw_image *img, char *const *argv)
{
	char *const *rest = argv != NULL ? argv : img->cfg.cmd;
	size_t n = 0, nrest;

	for (size_t i = 0; i < img->cfg.nentrypoint; i++)
		img->argv[n++] = img->cfg.entrypoint[i];
	for (nrest = 0; rest[nrest] != NULL && nrest < EXEC_IMAGE_ARGS_MAX; nrest++)
		img->argv[n++] = rest[nrest];
	if (rest[nrest] != NULL)
		return gw_fail(cmd, "--image: more than %d arguments", EXEC_IMAGE_ARGS_MAX);
	img->argv[n] = NULL;
	if (n == 0 || img->argv[0][0] == '\0')
		return gw_fail(cmd,
		               "--image %s: no command given, and the image has no Entrypoint "
		               "or Cmd",
		               ref);
	return 0;
}

void
gw_image_spec(const struct gw_image *img, struct exec_spec *spec)
{
	spec->image_root = img->root;
	spec->image_cwd = img->cfg.workdir;
	spec->image_uid = img->uid;
	spec->image_gid = img->gid;
	spec->runsc = img->runsc;
}

void
gw_image_detail(json_t *detail, const struct exec_spec *spec)
{
	const char *hex;

	if (detail == NULL || spec->image_root == NULL)
		return;
	hex = strrchr(spec->image_root, '/');
	hex = hex != NULL ? hex + 1 : spec->image_root;
	json_object_set_new(detail, "image", json_sprintf("sha256:%s", hex));
}

void
gw_image_clear(struct gw_image *img)
{
	exec_image_config_clear(&img->cfg);
}

int
gw_image_lang_flag(const char *cmd, struct gw_image_langs *l, const char *value)
{
	const char *eq = strchr(value, '=');
	char name[32];
	enum exec_lang lang;

	if (eq == NULL || eq == value || eq[1] == '\0' || (size_t)(eq - value) >= sizeof(name))
		return gw_fail(cmd, "--image '%s': expected LANG=REF (python, node or sh)", value);
	snprintf(name, sizeof(name), "%.*s", (int)(eq - value), value);
	if (exec_runtime_lang_parse(name, &lang) != 0)
		return gw_fail(cmd, "--image '%s': %s is not one of python, node, sh", value, name);
	if (l->ref[lang] != NULL)
		return gw_fail(cmd, "--image: %s has an image already (%s)",
		               exec_runtime_lang_name(lang), l->ref[lang]);
	l->ref[lang] = eq + 1;
	return 0;
}

int
gw_image_langs_open(const char *cmd, struct gw_image_langs *l)
{
	size_t n = 0;

	for (int i = 0; i < EXEC_LANG_COUNT; i++) {
		if (l->ref[i] == NULL)
			continue;
		if (gw_image_open(cmd, "--image", l->ref[i], l->allow_unpinned, &l->img[i]) != 0)
			return GW_EXIT_FAILURE;
		l->roots[n++] = l->img[i].root;
	}
	l->roots[n] = NULL;
	return 0;
}

const struct gw_image *
gw_image_lang(const struct gw_image_langs *l, enum exec_lang lang)
{
	if (l == NULL || (int)lang < 0 || lang >= EXEC_LANG_COUNT || l->ref[lang] == NULL ||
	    l->img[lang].root[0] == '\0')
		return NULL;
	return &l->img[lang];
}

void
gw_image_langs_clear(struct gw_image_langs *l)
{
	for (int i = 0; i < EXEC_LANG_COUNT; i++)
		gw_image_clear(&l->img[i]);
}

int
gw_image_flag(const char *cmd, struct gw_image_flags *f, struct gw_setup_flags *gw, int c,
              const char *value)
{
	switch (c) {
	case GW_IMAGE_OPT_SECRET:
		return gw_secrets_flag(f->secrets, gw, value) != 0 ? GW_EXIT_FAILURE : 0;
	case GW_IMAGE_OPT_IMAGE:
		if (f->langs != NULL)
			return gw_image_lang_flag(cmd, f->langs, value);
		if (f->image != NULL)
			return gw_fail(cmd, "--image: given twice (%s, %s)", f->image, value);
		f->image = value;
		return 0;
	case GW_IMAGE_OPT_ALLOW_UNPINNED:
		f->allow_unpinned = true;
		if (f->langs != NULL)
			f->langs->allow_unpinned = true;
		return 0;
	case GW_IMAGE_OPT_RUNTIME:
		f->runtime = value;
		return 0;
	default:
		return GW_SETUP_NOT_MINE;
	}
}

/*
 * "runsc" runs an image's command in gVisor inside the sandbox
 * (docs/images.md, "gVisor"), found on PATH now, so that a missing runsc is
 * a flag's error and not a failed start; "native" is tollgate's own
 * containment alone, the default.
 */
int
gw_image_flags_check(const char *cmd, struct gw_image_flags *f, struct gw_setup_flags *gw)
{
	bool images = f->image != NULL;

	for (int i = 0; f->langs != NULL && i < EXEC_LANG_COUNT; i++)
		images = images || f->langs->ref[i] != NULL;
	if (f->runtime == NULL || strcmp(f->runtime, "native") == 0)
		return 0;
	if (strcmp(f->runtime, "runsc") != 0)
		return gw_fail(cmd, "--runtime: '%s' is not native or runsc", f->runtime);
	if (!images)
		return gw_fail(cmd, "--runtime runsc runs an image: give --image %s",
		               f->langs != NULL ? "LANG=REF" : "REF");
	if (exec_runsc_find(f->runsc, sizeof(f->runsc)) != 0)
		return gw_fail(cmd, "--runtime runsc: runsc is not installed (Debian's runsc "
		                    "package; see 'tollgate runtimes')");
	gw->sandbox_runsc = f->runsc;
	return 0;
}

const char *
gw_image_flags_runsc(const struct gw_image_flags *f)
{
	return f->runsc[0] != '\0' ? f->runsc : NULL;
}
