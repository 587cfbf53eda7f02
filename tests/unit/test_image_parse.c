/*
 * The image store's pure parsers (exec/image/ref.c, exec/image/manifest.c),
 * table-driven: references pinned and not, manifests and their media types,
 * an OCI layout's index, a config's fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "exec/image/image.h"

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void
test_refs(void **state)
{
	static const struct {
		const char *in;
		int rc;
		const char *name, *tag, *hex;
	} cases[] = {
	    {"busybox", 0, "busybox", "latest", ""},
	    {"busybox:1.36", 0, "busybox", "1.36", ""},
	    {"test/busybox:1@sha256:" HEX_A, 0, "test/busybox", "1", HEX_A},
	    {"sha256:" HEX_A, 0, "", "", HEX_A},
	    {"localhost:5000/a/b", 0, "localhost:5000/a/b", "latest", ""},
	    {"localhost:5000/a/b:v2@sha256:" HEX_B, 0, "localhost:5000/a/b", "v2", HEX_B},
	    {"Busybox", -22, NULL, NULL, NULL}, /* upper case */
	    {"a/../b", -22, NULL, NULL, NULL},  /* .. */
	    {"/abs", -22, NULL, NULL, NULL},
	    {"a:", -22, NULL, NULL, NULL},           /* empty tag */
	    {"a@sha256:abc", -22, NULL, NULL, NULL}, /* short digest */
	    {"a@sha512:" HEX_A, -22, NULL, NULL, NULL},
	    {"sha256:" HEX_A "a", -22, NULL, NULL, NULL},
	    {"", -22, NULL, NULL, NULL},
	    {"a:t@g", -22, NULL, NULL, NULL},
	};
	struct exec_image_ref ref;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = exec_image_ref_parse(cases[i].in, &ref, err, sizeof(err));

		if (rc != cases[i].rc)
			fail_msg("%s: rc %d, want %d", cases[i].in, rc, cases[i].rc);
		if (rc != 0)
			continue;
		assert_string_equal(ref.name, cases[i].name);
		assert_string_equal(ref.tag, cases[i].tag);
		assert_string_equal(ref.hex, cases[i].hex);
	}
}

static void
test_manifests(void **state)
{
	static const struct {
		const char *json;
		int rc;
		const char *err; /* a part of the message */
	} cases[] = {
	    {"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/"
	     "vnd.oci.image.config.v1+json\","
	     "\"digest\":\"sha256:" HEX_A "\",\"size\":3},\"layers\":[{\"mediaType\":"
	     "\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"sha256:" HEX_B
	     "\",\"size\":9}]}",
	     0, NULL},
	    {"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/"
	     "vnd.oci.image.config.v1+json\","
	     "\"digest\":\"sha256:" HEX_A "\",\"size\":3},\"layers\":[{\"mediaType\":"
	     "\"application/x-lz4\",\"digest\":\"sha256:" HEX_B "\",\"size\":9}]}",
	     -22, "layer 1: unknown media type application/x-lz4"},
	    {"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\"}", -22,
	     "unknown media type application/vnd.oci.image.index.v1+json for a manifest"},
	    {"{\"schemaVersion\":1}", -22, "not a schema 2 manifest"},
	    {"{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:abc\",\"size\":1},\"layers\":[]"
	     "}",
	     -22, "config: no sha256 digest"},
	    {"[1]", -22, "not a JSON object"},
	    {"{", -22, "not JSON"},
	};
	struct exec_image_manifest m;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		int rc = exec_image_manifest_parse(cases[i].json, strlen(cases[i].json), &m, err,
		                                   sizeof(err));

		if (rc != cases[i].rc)
			fail_msg("case %zu: rc %d (%s), want %d", i, rc, err, cases[i].rc);
		if (cases[i].err != NULL && strstr(err, cases[i].err) == NULL)
			fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].err);
	}
	assert_int_equal(
	    exec_image_manifest_parse(cases[0].json, strlen(cases[0].json), &m, err, sizeof(err)),
	    0);
	assert_int_equal(m.nlayers, 1);
	assert_int_equal(m.layers[0].compression, EXEC_IMAGE_ZSTD);
	assert_string_equal(m.config.hex, HEX_A);
}

static void
test_index(void **state)
{
	const char *idx =
	    "{\"schemaVersion\":2,\"manifests\":["
	    "{\"mediaType\":\"application/"
	    "vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:" HEX_A
	    "\",\"size\":1,\"annotations\":{\"org.opencontainers.image.ref.name\":\"one\"}},"
	    "{\"mediaType\":\"application/"
	    "vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:" HEX_B
	    "\",\"size\":1,\"annotations\":{\"org.opencontainers.image.ref.name\":\"two\"},"
	    "\"platform\":{\"os\":\"plan9\",\"architecture\":\"amd64\"}}]}";
	struct exec_image_desc d;
	char err[256];
	bool nested;

	(void)state;
	assert_int_equal(
	    exec_image_index_pick(idx, strlen(idx), "one", &d, &nested, err, sizeof(err)), 0);
	assert_string_equal(d.hex, HEX_A);
	assert_false(nested);
	/* Another OS's manifest is never picked. */
	assert_int_equal(
	    exec_image_index_pick(idx, strlen(idx), "two", &d, &nested, err, sizeof(err)), -2);
	assert_int_equal(
	    exec_image_index_pick(idx, strlen(idx), "three", &d, &nested, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "no manifest for tag three"));
}

static void
test_config(void **state)
{
	const char *cfg =
	    "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"A=1\","
	    "\"PATH=/bin\"],\"Entrypoint\":[\"/e\"],\"Cmd\":[\"x\",\"y\"],"
	    "\"WorkingDir\":\"/srv\",\"User\":\"1000\"}}";
	const char *bad_env = "{\"config\":{\"Env\":[\"NOEQUALS\"]}}";
	const char *bad_cwd = "{\"config\":{\"WorkingDir\":\"relative\"}}";
	const char *nul = "{\"config\":{\"Cmd\":[\"a\\u0000b\"]}}";
	struct exec_image_config c;
	char err[256];

	(void)state;
	assert_int_equal(exec_image_config_parse(cfg, strlen(cfg), &c, err, sizeof(err)), 0);
	assert_int_equal(c.nenv, 2);
	assert_string_equal(c.env[1], "PATH=/bin");
	assert_int_equal(c.nentrypoint, 1);
	assert_int_equal(c.ncmd, 2);
	assert_null(c.cmd[2]);
	assert_string_equal(c.workdir, "/srv");
	assert_string_equal(c.user, "1000");
	exec_image_config_clear(&c);
	assert_int_equal(exec_image_config_parse(bad_env, strlen(bad_env), &c, err, sizeof(err)),
	                 -22);
	assert_int_equal(exec_image_config_parse(bad_cwd, strlen(bad_cwd), &c, err, sizeof(err)),
	                 -22);
	assert_int_equal(exec_image_config_parse(nul, strlen(nul), &c, err, sizeof(err)), -22);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refs),
	    cmocka_unit_test(test_manifests),
	    cmocka_unit_test(test_index),
	    cmocka_unit_test(test_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
