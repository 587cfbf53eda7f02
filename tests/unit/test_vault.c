/*
 * Unit tests for the vault: names, key forms, the encrypted file (no
 * plaintext in it, a wrong key told as such, values bound to their names,
 * key file permissions, concurrent writers), the env and memory backends.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "exec/services/vault.h"

#define SECRET "correct-horse-battery-staple-9f3b"

static char home[128];

static int
setup(void **state)
{
	snprintf(home, sizeof(home), "/tmp/tollgate-test-vault.XXXXXX");
	if (mkdtemp(home) == NULL)
		return -1;
	unsetenv("TOLLGATE_VAULT_KEY");
	return 0;
}

static int
teardown(void **state)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
	unsetenv("TOLLGATE_VAULT_KEY");
	return system(cmd) == 0 ? 0 : -1;
}

static char *
slurp(const char *name, size_t *len)
{
	char path[256];
	FILE *f;
	char *buf = calloc(1, 1 << 20);

	snprintf(path, sizeof(path), "%s/%s", home, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	return buf;
}

static void
spill(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", home, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	fclose(f);
}

static struct vault *
file_vault(void)
{
	struct vault *v = NULL;
	char err[256];

	assert_int_equal(vault_open_file(home, &v, err, sizeof(err)), 0);
	return v;
}

static void
put(struct vault *v, const char *ns, const char *name, const char *value)
{
	char err[256] = "";
	int rc =
	    vault_put(v, ns, name, (const uint8_t *)value, strlen(value), true, err, sizeof(err));

	if (rc != 0)
		fail_msg("put %s/%s: %d %s", ns, name, rc, err);
}

static void
expect_secret(struct vault *v, const char *ns, const char *name, const char *want)
{
	struct vault_secret *s = NULL;
	char err[256] = "";

	assert_int_equal(vault_get(v, ns, name, &s, err, sizeof(err)), 0);
	assert_int_equal(s->len, strlen(want));
	assert_memory_equal(s->data, want, s->len);
	assert_int_equal(s->data[s->len], '\0');
	vault_secret_free(s);
}

static void
test_names(void **state)
{
	static const struct {
		const char *s;
		bool name, ns;
	} cases[] = {
	    {"API_KEY", true, true},
	    {"_x", true, true},
	    {"a1", true, true},
	    {"1a", false, true},
	    {"", false, false},
	    {"A-B", false, false},
	    {"A B", false, false},
	    {"A=B", false, false},
	    {"é", false, false},
	    {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", true, true},
	    {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", false, false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(vault_name_valid(cases[i].s), cases[i].name);
		assert_int_equal(vault_namespace_valid(cases[i].s), cases[i].ns);
	}
	assert_non_null(vault_value_why((const uint8_t *)"", 0));
	assert_non_null(vault_value_why((const uint8_t *)"a\0b", 3));
	assert_null(vault_value_why((const uint8_t *)"ab", 2));
}

static void
test_key_forms(void **state)
{
	uint8_t raw[32], key[32];
	char hex[65], b64[64];

	for (int i = 0; i < 32; i++)
		raw[i] = (uint8_t)(i * 37 + 11);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02X", raw[i]);
	assert_int_equal(vault_key_parse(hex, key), 0);
	assert_memory_equal(key, raw, 32);
	assert_int_equal(EVP_EncodeBlock((unsigned char *)b64, raw, 32), 44);
	memset(key, 0, sizeof(key));
	assert_int_equal(vault_key_parse(b64, key), 0);
	assert_memory_equal(key, raw, 32);
	b64[43] = '\0'; /* padding left off */
	memset(key, 0, sizeof(key));
	assert_int_equal(vault_key_parse(b64, key), 0);
	assert_memory_equal(key, raw, 32);
	assert_int_equal(vault_key_parse("abc", key), -EINVAL);
	hex[10] = 'g';
	assert_int_equal(vault_key_parse(hex, key), -EINVAL);
	hex[63] = '\0';
	assert_int_equal(vault_key_parse(hex, key), -EINVAL);
	assert_int_equal(vault_key_parse("", key), -EINVAL);
	memset(b64, '!', 43);
	assert_int_equal(vault_key_parse(b64, key), -EINVAL);
}

/* The file never holds the value, nor its hex or base64. */
static void
test_file_roundtrip_no_plaintext(void **state)
{
	struct vault *v = file_vault();
	char hex[2 * sizeof(SECRET) + 1], b64[128];
	struct stat st;
	char path[256];
	size_t len;
	char *text;

	put(v, "default", "API_KEY", SECRET);
	put(v, "other", "API_KEY", "a different one");
	expect_secret(v, "default", "API_KEY", SECRET);
	expect_secret(v, "other", "API_KEY", "a different one");
	vault_free(v);

	/* A second handle (another process, as it were) reads the same. */
	v = file_vault();
	expect_secret(v, "default", "API_KEY", SECRET);
	vault_free(v);

	text = slurp(VAULT_FILE_NAME, &len);
	assert_null(memmem(text, len, SECRET, strlen(SECRET)));
	assert_null(memmem(text, len, "a different one", 15));
	for (size_t i = 0; i < strlen(SECRET); i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)SECRET[i]);
	assert_null(memmem(text, len, hex, strlen(hex)));
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)SECRET, strlen(SECRET));
	assert_null(memmem(text, len, b64, 12));
	free(text);

	snprintf(path, sizeof(path), "%s/%s", home, VAULT_FILE_NAME);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/%s", home, VAULT_KEY_FILE_NAME);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* no temporary file left behind */
	snprintf(path, sizeof(path), "ls -a '%s' | grep -c 'vault.json.' >/dev/null", home);
	assert_int_not_equal(system(path), 0);
}

static void
test_file_wrong_key(void **state)
{
	struct vault *v = file_vault();
	struct vault_secret *s = NULL;
	char err[256] = "";

	put(v, "default", "TOKEN", SECRET);
	vault_free(v);

	setenv("TOLLGATE_VAULT_KEY",
	       "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 1);
	v = file_vault();
	assert_int_equal(vault_get(v, "default", "TOKEN", &s, err, sizeof(err)), -EACCES);
	assert_null(s);
	assert_non_null(strstr(err, "wrong vault key"));
	assert_null(strstr(err, SECRET));
	/* A wrong key cannot add a value the right key could not read. */
	assert_int_equal(
	    vault_put(v, "default", "MORE", (const uint8_t *)"xxxx", 4, false, err, sizeof(err)),
	    -EACCES);
	vault_free(v);

	setenv("TOLLGATE_VAULT_KEY", "not a key", 1);
	v = file_vault();
	assert_int_equal(vault_get(v, "default", "TOKEN", &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "TOLLGATE_VAULT_KEY"));
	vault_free(v);
	unsetenv("TOLLGATE_VAULT_KEY");

	/* The key file gone: a clear error, and no new key is made over the vault. */
	{
		char path[256];

		snprintf(path, sizeof(path), "%s/%s", home, VAULT_KEY_FILE_NAME);
		assert_int_equal(unlink(path), 0);
		v = file_vault();
		assert_int_equal(vault_put(v, "default", "X", (const uint8_t *)"yyyy", 4, false,
		                           err, sizeof(err)),
		                 -EACCES);
		assert_non_null(strstr(err, "no vault key"));
		vault_free(v);
		assert_int_not_equal(access(path, F_OK), 0);
	}
}

static void
test_key_env_forms_open_the_vault(void **state)
{
	static const char hexkey[] =
	    "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";
	uint8_t raw[32];
	char b64[64];
	struct vault *v;
	char path[256];

	setenv("TOLLGATE_VAULT_KEY", hexkey, 1);
	v = file_vault();
	put(v, "default", "K", SECRET);
	vault_free(v);
	/* No key file was made: the key came from the environment. */
	snprintf(path, sizeof(path), "%s/%s", home, VAULT_KEY_FILE_NAME);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(vault_key_parse(hexkey, raw), 0);
	EVP_EncodeBlock((unsigned char *)b64, raw, 32);
	setenv("TOLLGATE_VAULT_KEY", b64, 1);
	v = file_vault();
	expect_secret(v, "default", "K", SECRET);
	vault_free(v);
}

static void
test_key_file_permissions(void **state)
{
	struct vault *v = file_vault();
	struct vault_secret *s = NULL;
	char err[256] = "", path[256];

	put(v, "default", "K", SECRET);
	vault_free(v);
	snprintf(path, sizeof(path), "%s/%s", home, VAULT_KEY_FILE_NAME);
	assert_int_equal(chmod(path, 0640), 0);
	v = file_vault();
	assert_int_equal(vault_get(v, "default", "K", &s, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "chmod 600"));
	vault_free(v);
	assert_int_equal(chmod(path, 0600), 0);
	v = file_vault();
	expect_secret(v, "default", "K", SECRET);
	vault_free(v);
}

/* Sealed values swapped between two names no longer authenticate. */
static void
test_values_bound_to_names(void **state)
{
	struct vault *v = file_vault();
	struct vault_secret *s = NULL;
	char err[256] = "";
	char *text, *a, *b, *a_end, *b_end, tmp[512];
	size_t len, alen, blen;

	put(v, "default", "AAAA", "value-of-a");
	put(v, "default", "BBBB", "value-of-b");
	vault_free(v);
	text = slurp(VAULT_FILE_NAME, &len);
	a = strstr(text, "\"AAAA\": \"") + 9;
	b = strstr(text, "\"BBBB\": \"") + 9;
	a_end = strchr(a, '"');
	b_end = strchr(b, '"');
	alen = (size_t)(a_end - a);
	blen = (size_t)(b_end - b);
	assert_int_equal(alen, blen);
	memcpy(tmp, a, alen);
	memcpy(a, b, blen);
	memcpy(b, tmp, alen);
	spill(VAULT_FILE_NAME, text);
	free(text);
	v = file_vault();
	assert_int_equal(vault_get(v, "default", "AAAA", &s, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "altered"));
	assert_null(strstr(err, "value-of"));
	vault_free(v);
}

static void
test_damaged_file(void **state)
{
	struct vault *v = file_vault();
	struct vault_secret *s = NULL;
	char err[256] = "", path[256];

	put(v, "default", "K", SECRET);
	vault_free(v);
	spill(VAULT_FILE_NAME, "{\"version\": 1, \"secrets\": ");
	v = file_vault();
	assert_int_equal(vault_get(v, "default", "K", &s, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "damaged"));
	vault_free(v);
	/* A vault file others can read is refused too. */
	spill(VAULT_FILE_NAME, "{}");
	snprintf(path, sizeof(path), "%s/%s", home, VAULT_FILE_NAME);
	assert_int_equal(chmod(path, 0644), 0);
	v = file_vault();
	assert_int_equal(vault_get(v, "default", "K", &s, err, sizeof(err)), -EACCES);
	vault_free(v);
}

struct names {
	char all[4096];
	int n;
};

static int
collect(const char *name, void *arg)
{
	struct names *c = arg;
	size_t used = strlen(c->all);

	snprintf(c->all + used, sizeof(c->all) - used, "%s,", name);
	c->n++;
	return 0;
}

static void
test_list_delete_replace(void **state)
{
	struct vault *v = file_vault();
	struct names c = {0};
	char err[256] = "";

	/* An empty vault lists nothing and needs no key. */
	assert_int_equal(vault_list(v, "default", collect, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 0);
	put(v, "default", "ZETA", "zzzz-value");
	put(v, "default", "ALPHA", "aaaa-value");
	put(v, "ns2", "OTHER", "oooo-value");
	assert_int_equal(vault_list(v, "default", collect, &c, err, sizeof(err)), 0);
	assert_string_equal(c.all, "ALPHA,ZETA,");
	assert_int_equal(vault_put(v, "default", "ALPHA", (const uint8_t *)"new-value", 9, false,
	                           err, sizeof(err)),
	                 -EEXIST);
	expect_secret(v, "default", "ALPHA", "aaaa-value");
	put(v, "default", "ALPHA", "new-value");
	expect_secret(v, "default", "ALPHA", "new-value");
	assert_int_equal(vault_delete(v, "default", "ALPHA", err, sizeof(err)), 0);
	assert_int_equal(vault_delete(v, "default", "ALPHA", err, sizeof(err)), -ENOENT);
	memset(&c, 0, sizeof(c));
	assert_int_equal(vault_list(v, "default", collect, &c, err, sizeof(err)), 0);
	assert_string_equal(c.all, "ZETA,");
	memset(&c, 0, sizeof(c));
	assert_int_equal(vault_list(v, "ns2", collect, &c, err, sizeof(err)), 0);
	assert_string_equal(c.all, "OTHER,");
	assert_int_equal(
	    vault_put(v, "bad-ns", "X", (const uint8_t *)"v", 1, true, err, sizeof(err)), -EINVAL);
	assert_int_equal(
	    vault_put(v, "default", "9X", (const uint8_t *)"v", 1, true, err, sizeof(err)),
	    -EINVAL);
	vault_free(v);
}

/* Writers in several processes at once: the lock keeps every one. */
static void
test_concurrent_writers(void **state)
{
	enum { WRITERS = 8, EACH = 10 };
	struct vault *v;
	struct names c = {0};
	char err[256];
	pid_t pids[WRITERS];
	int status;

	/* The key exists before the writers race. */
	v = file_vault();
	put(v, "default", "FIRST", "first-value");
	vault_free(v);
	for (int w = 0; w < WRITERS; w++) {
		pids[w] = fork();
		assert_true(pids[w] >= 0);
		if (pids[w] == 0) {
			struct vault *cv = NULL;
			char name[32];

			if (vault_open_file(home, &cv, err, sizeof(err)) != 0)
				_exit(1);
			for (int i = 0; i < EACH; i++) {
				snprintf(name, sizeof(name), "W%d_%d", w, i);
				if (vault_put(cv, "default", name, (const uint8_t *)name,
				              strlen(name), false, err, sizeof(err)) != 0)
					_exit(2);
			}
			vault_free(cv);
			_exit(0);
		}
	}
	for (int w = 0; w < WRITERS; w++) {
		assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	v = file_vault();
	assert_int_equal(vault_list(v, "default", collect, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, WRITERS * EACH + 1);
	expect_secret(v, "default", "W3_7", "W3_7");
	vault_free(v);
}

static void
test_env_backend(void **state)
{
	struct vault *v = NULL;
	struct vault_secret *s = NULL;
	struct names c = {0};
	char err[256] = "";

	setenv("TOLLGATE_SECRET_default_GH_TOKEN", "ghp_envvalue123", 1);
	setenv("TOLLGATE_SECRET_default_AWS", "aws-value", 1);
	setenv("TOLLGATE_SECRET_team_AWS", "team-aws", 1);
	assert_int_equal(vault_open_env(&v), 0);
	assert_int_equal(vault_backend_of(v), VAULT_BACKEND_ENV);
	expect_secret(v, "default", "GH_TOKEN", "ghp_envvalue123");
	expect_secret(v, "team", "AWS", "team-aws");
	assert_int_equal(vault_get(v, "default", "NOPE", &s, err, sizeof(err)), -ENOENT);
	assert_int_equal(vault_list(v, "default", collect, &c, err, sizeof(err)), 0);
	assert_string_equal(c.all, "AWS,GH_TOKEN,");
	assert_int_equal(
	    vault_put(v, "default", "X", (const uint8_t *)"v", 1, true, err, sizeof(err)), -EROFS);
	assert_int_equal(vault_delete(v, "default", "AWS", err, sizeof(err)), -EROFS);
	vault_free(v);
	assert_int_equal(vault_get_env_var("TOLLGATE_SECRET_team_AWS", &s, err, sizeof(err)), 0);
	assert_memory_equal(s->data, "team-aws", 8);
	vault_secret_free(s);
	unsetenv("TOLLGATE_SECRET_default_GH_TOKEN");
	unsetenv("TOLLGATE_SECRET_default_AWS");
	unsetenv("TOLLGATE_SECRET_team_AWS");
}

static void
test_memory_backend(void **state)
{
	struct vault *v = NULL;
	struct vault_secret *s = NULL;
	struct names c = {0};
	char err[256] = "";

	assert_int_equal(vault_open_memory(&v), 0);
	for (int i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof(name), "N%02d", i);
		put(v, "default", name, name);
	}
	put(v, "default", "N07", "replaced");
	expect_secret(v, "default", "N07", "replaced");
	expect_secret(v, "default", "N39", "N39");
	assert_int_equal(vault_delete(v, "default", "N00", err, sizeof(err)), 0);
	assert_int_equal(vault_get(v, "default", "N00", &s, err, sizeof(err)), -ENOENT);
	assert_int_equal(vault_list(v, "default", collect, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 39);
	assert_int_equal(strncmp(c.all, "N01,N02,", 8), 0);
	vault_free(v);
}

/* `run --secret` specs: parsing, loading, the sandbox's variables, conflicts. */
static void
test_inject(void **state)
{
	struct vault_inject *list = NULL;
	char *const *env;
	char *const other_env[] = {"PLAIN=1", "FROMENV=x", NULL};
	struct vault *v = file_vault();
	char err[256] = "";

	put(v, "default", "API_KEY", SECRET);
	put(v, "other", "ONLY_THERE", "elsewhere");
	vault_free(v);
	setenv("INJECT_TEST_VAR", "env-held-value", 1);
	assert_int_equal(vault_inject_add(&list, "API_KEY", err, sizeof(err)), 0);
	assert_int_equal(vault_inject_add(&list, "FROMENV=env:INJECT_TEST_VAR", err, sizeof(err)),
	                 0);
	assert_int_equal(vault_inject_add(&list, "API_KEY", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "given twice"));
	assert_int_equal(vault_inject_add(&list, "X=file:Y", err, sizeof(err)), -EINVAL);
	assert_int_equal(vault_inject_add(&list, "X=env:", err, sizeof(err)), -EINVAL);
	assert_int_equal(vault_inject_add(&list, "=env:Y", err, sizeof(err)), -EINVAL);
	/* A bad spec is not echoed: it may be a value. */
	assert_int_equal(vault_inject_add(&list, "hunter2 pasted", err, sizeof(err)), -EINVAL);
	assert_null(strstr(err, "hunter2"));
	assert_int_equal(vault_inject_count(list), 2);

	assert_int_equal(vault_inject_load(list, home, err, sizeof(err)), 0);
	env = vault_inject_env(list);
	assert_string_equal(env[0], "API_KEY=" SECRET);
	assert_string_equal(env[1], "FROMENV=env-held-value");
	assert_null(env[2]);
	assert_string_equal(vault_inject_conflict(list, other_env), "FROMENV");
	assert_null(vault_inject_conflict(list, other_env + 2));
	vault_inject_free(list);

	/* Only the default namespace is read; a missing one is named. */
	list = NULL;
	assert_int_equal(vault_inject_add(&list, "ONLY_THERE", err, sizeof(err)), 0);
	assert_int_equal(vault_inject_load(list, home, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "--secret ONLY_THERE: no secret default/ONLY_THERE");
	vault_inject_free(list);
	list = NULL;
	assert_int_equal(vault_inject_add(&list, "V=env:INJECT_TEST_UNSET", err, sizeof(err)), 0);
	assert_int_equal(vault_inject_load(list, home, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "INJECT_TEST_UNSET is not set"));
	vault_inject_free(list);
	unsetenv("INJECT_TEST_VAR");
	assert_null(vault_inject_env(NULL)[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_key_forms),
	    cmocka_unit_test_setup_teardown(test_file_roundtrip_no_plaintext, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_file_wrong_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_env_forms_open_the_vault, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_file_permissions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_values_bound_to_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_damaged_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_delete_replace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
	    cmocka_unit_test(test_env_backend),
	    cmocka_unit_test(test_memory_backend),
	    cmocka_unit_test_setup_teardown(test_inject, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
