/*
 * Artifact signing: the key pair's files and checks, the signed message's
 * encoding (built here independently), and sign/verify catching each kind
 * of change to the files or to manifest.json, on real directories.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/services/artifact.h"
#include "exec/sandbox/exec.h"

struct fixture {
	char root[64];
	char home[96];
	char dir[96];
	char outside[96];
	struct exec_key *key;
};

/* What a report callback saw: "kind name" lines. */
struct seen {
	char lines[64][256];
	size_t n;
};

static void
collect(void *arg, enum exec_artifact_kind kind, const char *name, const char *why)
{
	struct seen *s = arg;

	(void)why;
	if (s->n < 64)
		snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s %s",
		         exec_artifact_kind_name(kind), name);
}

static bool
saw(const struct seen *s, const char *line)
{
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->lines[i], line) == 0)
			return true;
	}
	return false;
}

static void
write_text(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	char err[512];

	assert_non_null(fx);
	snprintf(fx->root, sizeof(fx->root), "/tmp/tollgate-test-artifact.XXXXXX");
	assert_non_null(mkdtemp(fx->root));
	snprintf(fx->home, sizeof(fx->home), "%s/home", fx->root);
	snprintf(fx->dir, sizeof(fx->dir), "%s/out", fx->root);
	snprintf(fx->outside, sizeof(fx->outside), "%s/outside", fx->root);
	assert_int_equal(mkdir(fx->home, 0700), 0);
	assert_int_equal(mkdir(fx->dir, 0755), 0);
	assert_int_equal(mkdir(fx->outside, 0755), 0);
	assert_int_equal(exec_key_load_or_create(fx->home, &fx->key, err, sizeof(err)), 0);
	write_text(fx->dir, "a.txt", "hello\n");
	write_text(fx->dir, "b.bin", "");
	{
		char sub[160];

		snprintf(sub, sizeof(sub), "%s/sub", fx->dir);
		assert_int_equal(mkdir(sub, 0755), 0);
		write_text(sub, "c.txt", "nested\n");
	}
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	exec_key_free(fx->key);
	assert_int_equal(exec_remove_tree(fx->root), 0);
	free(fx);
	return 0;
}

static void
sign_ok(struct fixture *fx, struct exec_artifact_summary *sum)
{
	char err[512];
	int rc = exec_artifacts_sign(fx->dir, "sb-test1", fx->key, NULL, NULL, NULL, sum, err,
	                             sizeof(err));

	if (rc != 0)
		fail_msg("sign: %s", err);
}

/* Runs verify; returns its rc, fills seen. */
static int
verify(struct fixture *fx, const char *only, const struct exec_key *pub, struct seen *s,
       struct exec_artifact_summary *sum, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	return exec_artifacts_verify(fx->dir, only, pub != NULL ? pub : fx->key, NULL, collect, s,
	                             sum, err, errlen);
}

/* ---- keys ---------------------------------------------------------------- */

static void
test_key_files_and_modes(void **state)
{
	struct fixture *fx = *state;
	struct exec_key *again = NULL, *pub = NULL;
	char path[256], err[512], fp1[65], fp2[65];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", fx->home, EXEC_KEY_PRIVATE_NAME);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(exec_key_has_private(fx->key));
	/* Loading again gives the same key, not a new one. */
	assert_int_equal(exec_key_load_or_create(fx->home, &again, err, sizeof(err)), 0);
	assert_int_equal(exec_key_fingerprint(fx->key, fp1), 0);
	assert_int_equal(exec_key_fingerprint(again, fp2), 0);
	assert_string_equal(fp1, fp2);
	assert_int_equal(strlen(fp1), 64);
	exec_key_free(again);
	/* The public key file is the same key, and cannot sign. */
	snprintf(path, sizeof(path), "%s/%s", fx->home, EXEC_KEY_PUBLIC_NAME);
	assert_int_equal(exec_key_load_public(path, &pub, err, sizeof(err)), 0);
	assert_int_equal(exec_key_fingerprint(pub, fp2), 0);
	assert_string_equal(fp1, fp2);
	assert_false(exec_key_has_private(pub));
	{
		uint8_t sig[EXEC_SIG_LEN];

		assert_int_equal(exec_key_sign(pub, (const uint8_t *)"x", 1, sig), -EINVAL);
		assert_int_equal(exec_key_sign(fx->key, (const uint8_t *)"x", 1, sig), 0);
		assert_true(exec_key_verify(pub, (const uint8_t *)"x", 1, sig));
		assert_false(exec_key_verify(pub, (const uint8_t *)"y", 1, sig));
	}
	exec_key_free(pub);
}

static void
test_key_refuses_open_modes(void **state)
{
	struct fixture *fx = *state;
	struct exec_key *k = NULL;
	char path[256], err[512];
	static const mode_t bad[] = {0640, 0604, 0644, 0660, 0700};

	snprintf(path, sizeof(path), "%s/%s", fx->home, EXEC_KEY_PRIVATE_NAME);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(chmod(path, bad[i]), 0);
		err[0] = '\0';
		if (bad[i] & 077) {
			assert_int_equal(exec_key_load_or_create(fx->home, &k, err, sizeof(err)),
			                 -EPERM);
			assert_null(k);
			assert_non_null(strstr(err, "group or others"));
		} else {
			assert_int_equal(exec_key_load_or_create(fx->home, &k, err, sizeof(err)),
			                 0);
			exec_key_free(k);
			k = NULL;
		}
	}
	assert_int_equal(chmod(path, 0600), 0);
	/* A symbolic link in place of the key is not followed. */
	{
		char moved[256];

		snprintf(moved, sizeof(moved), "%s/moved.pem", fx->home);
		assert_int_equal(rename(path, moved), 0);
		assert_int_equal(symlink(moved, path), 0);
		assert_int_equal(exec_key_load_private(fx->home, &k, err, sizeof(err)), -ELOOP);
		assert_non_null(strstr(err, "symbolic link"));
		assert_int_equal(unlink(path), 0);
		assert_int_equal(rename(moved, path), 0);
	}
	/* No key and no creation: -ENOENT. */
	{
		char empty[160];

		snprintf(empty, sizeof(empty), "%s/nokey", fx->root);
		assert_int_equal(mkdir(empty, 0700), 0);
		assert_int_equal(exec_key_load_private(empty, &k, err, sizeof(err)), -ENOENT);
	}
}

static void
test_key_public_pem_garbage(void **state)
{
	struct exec_key *k = NULL;
	char err[256];
	static const char rsa_like[] =
	    "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n";

	(void)state;
	assert_int_equal(exec_key_public_from_pem("hello", 5, &k, err, sizeof(err)), -EINVAL);
	assert_null(k);
	assert_int_equal(exec_key_public_from_pem(rsa_like, strlen(rsa_like), &k, err, sizeof(err)),
	                 -EINVAL);
	assert_null(k);
}

/* ---- encodings ------------------------------------------------------------------ */

static void
test_message_encoding(void **state)
{
	uint8_t digest[32], buf[EXEC_ARTIFACT_MESSAGE_MAX], want[128];
	size_t len, at = 0;

	(void)state;
	for (int i = 0; i < 32; i++)
		digest[i] = (uint8_t)i;
	len = exec_artifact_message("sb-1", "d/x", 0x0102030405060708ULL, digest, buf, sizeof(buf));
	/* Built by hand from the description in artifact.h and docs/artifacts.md. */
	memcpy(want, "tollgate-artifact-v1", 20);
	at = 20;
	want[at++] = 0;
	memcpy(want + at, "\0\0\0\4sb-1", 8);
	at += 8;
	memcpy(want + at, "\0\0\0\3d/x", 7);
	at += 7;
	memcpy(want + at, "\1\2\3\4\5\6\7\10", 8);
	at += 8;
	memcpy(want + at, digest, 32);
	at += 32;
	assert_int_equal(len, at);
	assert_memory_equal(buf, want, at);
	/* Moving a byte between fields changes the message. */
	{
		uint8_t other[EXEC_ARTIFACT_MESSAGE_MAX];
		size_t olen = exec_artifact_message("sb-1d", "/x", 0x0102030405060708ULL, digest,
		                                    other, sizeof(other));

		assert_int_equal(olen, len);
		assert_memory_not_equal(buf, other, len);
	}
	assert_int_equal(exec_artifact_message("sb-1", "d/x", 1, digest, buf, 10), 0);
}

static void
test_name_rules(void **state)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
	    {"a.txt", true},         {"dir/sub/file", true}, {"ünïcode/名前", true},
	    {".hidden", true},       {"a..b", true},         {"", false},
	    {"/abs", false},         {"a//b", false},        {"a/", false},
	    {"./a", false},          {"a/../b", false},      {"..", false},
	    {"a/.", false},          {"tab\there", false},   {"nl\nx", false},
	    {"del\x7f", false},      {"\xff\xfe", false},    {"\xc0\xaf", false}, /* overlong '/' */
	    {"\xed\xa0\x80", false},                                              /* a surrogate */
	    {"\xc2\x85", false}, /* U+0085, a C1 control */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = exec_artifact_name_why(cases[i].name, strlen(cases[i].name));

		if (cases[i].ok != (why == NULL))
			fail_msg("name #%zu '%s': %s", i, cases[i].name, why != NULL ? why : "ok");
	}
	{
		char longname[EXEC_ARTIFACT_NAME_MAX + 2];

		memset(longname, 'a', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		assert_non_null(exec_artifact_name_why(longname, strlen(longname)));
		longname[EXEC_ARTIFACT_NAME_MAX] = '\0';
		assert_null(exec_artifact_name_why(longname, strlen(longname)));
	}
	assert_true(exec_artifact_id_valid("sb-1234abcd"));
	assert_false(exec_artifact_id_valid(""));
	assert_false(exec_artifact_id_valid("a b"));
	assert_false(exec_artifact_id_valid("a\nb"));
}

static void
test_escape(void **state)
{
	char buf[64];

	(void)state;
	exec_artifact_escape("plain/名", buf, sizeof(buf));
	assert_string_equal(buf, "plain/名");
	exec_artifact_escape("a\x1b[2Jb\\", buf, sizeof(buf));
	assert_string_equal(buf, "a\\x1b[2Jb\\x5c");
	exec_artifact_escape("\xff\xc2\x85", buf, sizeof(buf));
	assert_string_equal(buf, "\\xff\\xc2\\x85");
	exec_artifact_escape("abcdef", buf, 4);
	assert_string_equal(buf, "abc");
}

/* ---- sign and verify ------------------------------------------------------------ */

static void
test_sign_verify_ok(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum, vsum;
	struct seen s;
	char err[512], fp[65];

	sign_ok(fx, &sum);
	assert_int_equal(sum.files, 3);
	assert_int_equal(sum.bytes, 6 + 0 + 7);
	assert_int_equal(sum.problems, 0);
	assert_int_equal(verify(fx, NULL, NULL, &s, &vsum, err, sizeof(err)), 0);
	assert_int_equal(vsum.problems, 0);
	assert_int_equal(vsum.files, 3);
	assert_string_equal(vsum.sandbox_id, "sb-test1");
	assert_int_equal(exec_key_fingerprint(fx->key, fp), 0);
	assert_string_equal(vsum.key_sha256, fp);
	/* Signing again replaces the manifest; it still verifies. */
	sign_ok(fx, &sum);
	assert_int_equal(verify(fx, NULL, NULL, &s, &vsum, err, sizeof(err)), 0);
	assert_int_equal(vsum.problems, 0);
	/* One file alone, nested too. */
	assert_int_equal(verify(fx, "sub/c.txt", NULL, &s, &vsum, err, sizeof(err)), 0);
	assert_int_equal(vsum.problems, 0);
	assert_int_equal(vsum.files, 1);
}

static void
test_changed_added_removed(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum;
	struct seen s;
	char err[512], path[256];

	sign_ok(fx, &sum);
	/* One byte changed, same size. */
	write_text(fx->dir, "a.txt", "hellO\n");
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
	assert_int_equal(sum.problems, 1);
	assert_true(saw(&s, "changed a.txt"));
	write_text(fx->dir, "a.txt", "hello\n");
	/* Size changed. */
	write_text(fx->dir, "b.bin", "x");
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
	assert_true(saw(&s, "changed b.bin"));
	assert_int_equal(sum.problems, 1);
	write_text(fx->dir, "b.bin", "");
	/* Added, at the top and nested. */
	write_text(fx->dir, "new.txt", "x");
	write_text(fx->dir, "sub/new2", "y");
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
	assert_int_equal(sum.problems, 2);
	assert_true(saw(&s, "added new.txt"));
	assert_true(saw(&s, "added sub/new2"));
	snprintf(path, sizeof(path), "%s/new.txt", fx->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/sub/new2", fx->dir);
	unlink(path);
	/* Removed. */
	snprintf(path, sizeof(path), "%s/sub/c.txt", fx->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
	assert_int_equal(sum.problems, 1);
	assert_true(saw(&s, "removed sub/c.txt"));
	/* The one file alone: removed, and an unsigned one is added. */
	assert_int_equal(verify(fx, "sub/c.txt", NULL, &s, &sum, err, sizeof(err)), 0);
	assert_true(saw(&s, "removed sub/c.txt"));
	write_text(fx->dir, "later", "z");
	assert_int_equal(verify(fx, "later", NULL, &s, &sum, err, sizeof(err)), 0);
	assert_true(saw(&s, "added later"));
	assert_int_equal(verify(fx, "nothing-here", NULL, &s, &sum, err, sizeof(err)), -ENOENT);
	assert_int_equal(verify(fx, "../outside", NULL, &s, &sum, err, sizeof(err)), -EINVAL);
	assert_int_equal(verify(fx, EXEC_ARTIFACT_MANIFEST, NULL, &s, &sum, err, sizeof(err)),
	                 -EEXIST);
	/* A file replaced by a link to an identical file outside: changed. */
	write_text(fx->outside, "a.txt", "hello\n");
	snprintf(path, sizeof(path), "%s/a.txt", fx->dir);
	assert_int_equal(unlink(path), 0);
	{
		char target[256];

		snprintf(target, sizeof(target), "%s/a.txt", fx->outside);
		assert_int_equal(symlink(target, path), 0);
	}
	assert_int_equal(verify(fx, "a.txt", NULL, &s, &sum, err, sizeof(err)), 0);
	assert_true(saw(&s, "changed a.txt"));
}

static void
test_symlinks_not_followed(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum;
	struct seen s;
	char err[512], path[256], target[256];
	json_t *root;
	json_error_t jerr;

	/* A link to a file outside and a link to a directory outside. */
	write_text(fx->outside, "secret", "do not sign me\n");
	snprintf(target, sizeof(target), "%s/secret", fx->outside);
	snprintf(path, sizeof(path), "%s/esc", fx->dir);
	assert_int_equal(symlink(target, path), 0);
	snprintf(path, sizeof(path), "%s/escdir", fx->dir);
	assert_int_equal(symlink(fx->outside, path), 0);
	snprintf(path, sizeof(path), "%s/fifo", fx->dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(exec_artifacts_sign(fx->dir, "sb-test1", fx->key, NULL, collect, &s, &sum,
	                                     err, sizeof(err)),
	                 0);
	assert_int_equal(sum.files, 3);
	assert_int_equal(sum.problems, 3);
	assert_true(saw(&s, "skipped esc"));
	assert_true(saw(&s, "skipped escdir"));
	assert_true(saw(&s, "skipped fifo"));
	/* Nothing of outside/ is in the manifest. */
	snprintf(path, sizeof(path), "%s/%s", fx->dir, EXEC_ARTIFACT_MANIFEST);
	root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	assert_int_equal(json_array_size(json_object_get(root, "files")), 3);
	json_decref(root);
	/* Verify names them: never signed. */
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
	assert_int_equal(sum.problems, 3);
	assert_true(saw(&s, "added esc"));
	assert_true(saw(&s, "added escdir"));
	assert_true(saw(&s, "added fifo"));
	/* manifest.json as a link: sign replaces the link, not its target. */
	snprintf(path, sizeof(path), "%s/%s", fx->dir, EXEC_ARTIFACT_MANIFEST);
	assert_int_equal(unlink(path), 0);
	snprintf(target, sizeof(target), "%s/secret", fx->outside);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "symbolic link"));
	assert_int_equal(exec_artifacts_sign(fx->dir, "sb-test1", fx->key, NULL, NULL, NULL, &sum,
	                                     err, sizeof(err)),
	                 0);
	{
		char buf[64] = {0};
		FILE *f = fopen(target, "r");

		assert_non_null(f);
		assert_non_null(fgets(buf, sizeof(buf), f));
		fclose(f);
		assert_string_equal(buf, "do not sign me\n");
	}
}

/* Loads the manifest, lets edit change it, writes it back. */
static void
edit_manifest(struct fixture *fx, void (*edit)(json_t *root))
{
	char path[256];
	json_error_t jerr;
	json_t *root;

	snprintf(path, sizeof(path), "%s/%s", fx->dir, EXEC_ARTIFACT_MANIFEST);
	root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	edit(root);
	assert_int_equal(json_dump_file(root, path, JSON_INDENT(2)), 0);
	json_decref(root);
}

static json_t *
first_file(json_t *root)
{
	return json_array_get(json_object_get(root, "files"), 0);
}

static void
edit_size(json_t *root)
{
	json_object_set_new(first_file(root), "size", json_integer(7));
}

static void
edit_digest(json_t *root)
{
	json_object_set_new(
	    first_file(root), "sha256",
	    json_string("0000000000000000000000000000000000000000000000000000000000000000"));
}

static void
edit_signature(json_t *root)
{
	json_t *f = first_file(root);
	char sig[128];

	snprintf(sig, sizeof(sig), "%s", json_string_value(json_object_get(f, "signature")));
	sig[0] = sig[0] == 'A' ? 'B' : 'A';
	json_object_set_new(f, "signature", json_string(sig));
}

static void
edit_drop_entry(json_t *root)
{
	json_array_remove(json_object_get(root, "files"), 0);
}

static void
edit_sandbox(json_t *root)
{
	json_object_set_new(root, "sandbox_id", json_string("sb-other"));
}

static void
test_manifest_edits(void **state)
{
	struct fixture *fx = *state;
	static void (*const edits[])(json_t *) = {edit_size, edit_digest, edit_signature,
	                                          edit_sandbox};
	struct exec_artifact_summary sum;
	struct seen s;
	char err[512], path[256];

	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		sign_ok(fx, &sum);
		edit_manifest(fx, edits[i]);
		assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
		if (!saw(&s, "changed a.txt"))
			fail_msg("edit #%zu: a.txt not named", i);
		/* The list's signature covers names, sizes and digests, not signatures. */
		if (edits[i] != edit_signature)
			assert_true(saw(&s, "changed " EXEC_ARTIFACT_MANIFEST));
	}
	/* An entry dropped together with its file: the list's signature tells. */
	sign_ok(fx, &sum);
	edit_manifest(fx, edit_drop_entry);
	snprintf(path, sizeof(path), "%s/a.txt", fx->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), 0);
	assert_int_equal(sum.problems, 1);
	assert_true(saw(&s, "changed " EXEC_ARTIFACT_MANIFEST));
}

static void
test_another_key(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum;
	struct exec_key *other = NULL;
	struct seen s;
	char err[512], home2[160];

	snprintf(home2, sizeof(home2), "%s/home2", fx->root);
	assert_int_equal(mkdir(home2, 0700), 0);
	assert_int_equal(exec_key_load_or_create(home2, &other, err, sizeof(err)), 0);
	sign_ok(fx, &sum);
	assert_int_equal(verify(fx, NULL, other, &s, &sum, err, sizeof(err)), -EKEYREJECTED);
	assert_non_null(strstr(err, "another key"));
	/* The fingerprint edited to match the other key: the signatures fail. */
	{
		char fp[65];
		json_t *root;
		json_error_t jerr;
		char path[256];

		assert_int_equal(exec_key_fingerprint(other, fp), 0);
		snprintf(path, sizeof(path), "%s/%s", fx->dir, EXEC_ARTIFACT_MANIFEST);
		root = json_load_file(path, 0, &jerr);
		assert_non_null(root);
		json_object_set_new(root, "key_sha256", json_string(fp));
		assert_int_equal(json_dump_file(root, path, 0), 0);
		json_decref(root);
		assert_int_equal(verify(fx, NULL, other, &s, &sum, err, sizeof(err)), 0);
		assert_int_equal(sum.problems, 4); /* the list and its three entries */
	}
	exec_key_free(other);
}

static void
write_manifest_text(struct fixture *fx, const char *text)
{
	write_text(fx->dir, EXEC_ARTIFACT_MANIFEST, text);
}

static void
test_garbage_manifest(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum;
	struct seen s;
	char err[512];
	static const char *const garbage[] = {
	    "",
	    "not json",
	    "[]",
	    "{}",
	    "{\"version\":2}",
	    "\x00\x01\x02",
	    "{\"version\":1,\"sandbox_id\":\"x\"}",
	};

	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		write_manifest_text(fx, garbage[i]);
		err[0] = '\0';
		assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), -EBADMSG);
		assert_true(strncmp(err, EXEC_ARTIFACT_MANIFEST ": ", 15) == 0);
		assert_null(strchr(err, '\n'));
	}
	/* One byte past the cap: refused before any of it is parsed. */
	{
		char *big = malloc(EXEC_ARTIFACT_MANIFEST_MAX + 2);

		assert_non_null(big);
		memset(big, ' ', EXEC_ARTIFACT_MANIFEST_MAX + 1);
		big[EXEC_ARTIFACT_MANIFEST_MAX + 1] = '\0';
		write_manifest_text(fx, big);
		free(big);
		assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "larger than"));
	}
	/* No manifest at all. */
	{
		char path[256];

		snprintf(path, sizeof(path), "%s/%s", fx->dir, EXEC_ARTIFACT_MANIFEST);
		unlink(path);
		assert_int_equal(verify(fx, NULL, NULL, &s, &sum, err, sizeof(err)), -ENOENT);
	}
}

/* A valid manifest's text with one substitution, for the parser's rules. */
static void
test_parser_rules(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum;
	struct exec_manifest *m = NULL;
	char err[512], path[256], *text;
	json_t *root, *files, *f;
	json_error_t jerr;

	sign_ok(fx, &sum);
	snprintf(path, sizeof(path), "%s/%s", fx->dir, EXEC_ARTIFACT_MANIFEST);
	root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)), 0);
	assert_int_equal(m->nfiles, 3);
	assert_string_equal(m->files[0].name, "a.txt");
	assert_true(exec_manifest_list_ok(m, fx->key));
	assert_true(exec_manifest_entry_ok(m, 2, fx->key));
	exec_manifest_free(m);
	m = NULL;
	/* Past max_files. */
	assert_int_equal(exec_manifest_parse(text, strlen(text), 2, &m, err, sizeof(err)),
	                 -EBADMSG);
	free(text);

	files = json_object_get(root, "files");
	/* Out of order. */
	json_array_append(files, json_array_get(files, 0));
	json_array_remove(files, 0);
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	assert_non_null(strstr(err, "order"));
	free(text);
	/* A duplicate name. */
	json_array_insert(files, 0, json_array_get(files, 0));
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	free(text);
	json_array_remove(files, 0);
	/* Names that point out of the directory. */
	f = json_array_get(files, 0);
	json_object_set_new(f, "name", json_string("../escape"));
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	free(text);
	json_object_set_new(f, "name", json_string("/etc/passwd"));
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	free(text);
	json_object_set_new(f, "name", json_string("zz"));
	/* A negative size, a float size, an unknown member, base64 not canonical. */
	json_object_set_new(f, "size", json_integer(-1));
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	free(text);
	json_object_set_new(f, "size", json_real(1.5));
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	free(text);
	json_object_set_new(f, "size", json_integer(1));
	json_object_set_new(f, "extra", json_true());
	text = json_dumps(root, 0);
	assert_int_equal(exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)),
	                 -EBADMSG);
	assert_non_null(strstr(err, "unknown member"));
	free(text);
	json_object_del(f, "extra");
	{
		char sig[128];
		size_t n;

		snprintf(sig, sizeof(sig), "%s",
		         json_string_value(json_object_get(f, "signature")));
		n = strlen(sig);
		/* The last data character carries 2 unused bits: set one. */
		sig[n - 3] = sig[n - 3] == 'A' ? 'B' : (sig[n - 3] == 'B' ? 'A' : sig[n - 3] ^ 1);
		json_object_set_new(f, "signature", json_string(sig));
	}
	text = json_dumps(root, 0);
	/* Either not canonical or a different signature: never accepted as the same. */
	if (exec_manifest_parse(text, strlen(text), 100, &m, err, sizeof(err)) == 0) {
		assert_false(exec_manifest_entry_ok(m, 0, fx->key));
		exec_manifest_free(m);
		m = NULL;
	}
	free(text);
	json_decref(root);
}

static void
test_limits(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_limits lim;
	struct exec_artifact_summary sum;
	char err[512];

	exec_artifact_limits_default(&lim);
	lim.max_entries = 3; /* a.txt, b.bin, sub, sub/c.txt: four */
	assert_int_equal(exec_artifacts_sign(fx->dir, "sb-test1", fx->key, &lim, NULL, NULL, &sum,
	                                     err, sizeof(err)),
	                 -E2BIG);
	assert_non_null(strstr(err, "limit"));
	exec_artifact_limits_default(&lim);
	lim.max_bytes = 12; /* 13 bytes in all */
	assert_int_equal(exec_artifacts_sign(fx->dir, "sb-test1", fx->key, &lim, NULL, NULL, &sum,
	                                     err, sizeof(err)),
	                 -E2BIG);
	lim.max_bytes = 13;
	assert_int_equal(exec_artifacts_sign(fx->dir, "sb-test1", fx->key, &lim, NULL, NULL, &sum,
	                                     err, sizeof(err)),
	                 0);
	/* A bad sandbox id and a public key are refused. */
	assert_int_equal(exec_artifacts_sign(fx->dir, "bad id", fx->key, NULL, NULL, NULL, &sum,
	                                     err, sizeof(err)),
	                 -EINVAL);
}

static void
test_deep_nesting_refused(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_summary sum;
	char err[512], path[4096];
	size_t at;

	at = (size_t)snprintf(path, sizeof(path), "%s", fx->dir);
	for (int i = 0; i <= EXEC_ARTIFACT_MAX_DEPTH; i++) {
		at += (size_t)snprintf(path + at, sizeof(path) - at, "/d");
		assert_int_equal(mkdir(path, 0755), 0);
	}
	assert_int_equal(exec_artifacts_sign(fx->dir, "sb-test1", fx->key, NULL, NULL, NULL, &sum,
	                                     err, sizeof(err)),
	                 -E2BIG);
	assert_non_null(strstr(err, "deeper"));
}

static void
test_out_prepare(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_out *o = NULL;
	struct exec_artifact_summary sum;
	const char *path = NULL, *detail = NULL;
	char err[512], dir[160];
	struct seen s;

	/* Not empty, or inside TOLLGATE_HOME: refused. */
	assert_int_equal(exec_artifact_out_prepare(fx->dir, fx->home, &o, &path, err, sizeof(err)),
	                 -ENOTEMPTY);
	assert_null(o);
	snprintf(dir, sizeof(dir), "%s/inhome", fx->home);
	assert_int_equal(exec_artifact_out_prepare(dir, fx->home, &o, &path, err, sizeof(err)),
	                 -EINVAL);
	assert_null(o);
	/* A new one: made, signed, with the audit detail. */
	snprintf(dir, sizeof(dir), "%s/fresh", fx->root);
	assert_int_equal(exec_artifact_out_prepare(dir, fx->home, &o, &path, err, sizeof(err)), 0);
	assert_non_null(path);
	write_text(dir, "result", "42\n");
	assert_int_equal(exec_artifact_out_sign(o, "sb-out", &sum, &detail, err, sizeof(err)), 0);
	assert_non_null(detail);
	assert_non_null(strstr(detail, "\"files\":1"));
	exec_artifact_out_free(o);
	memset(&s, 0, sizeof(s));
	assert_int_equal(
	    exec_artifacts_verify(dir, NULL, fx->key, NULL, collect, &s, &sum, err, sizeof(err)),
	    0);
	assert_int_equal(sum.problems, 0);
	assert_int_equal(sum.files, 1);
	exec_artifact_out_free(NULL);
}

/*
 * The parent's prepare (exec/priv/priv_parent.c): DIR must be the owner's it
 * names; signing goes through the directory opened then, so one swapped in
 * at the name afterwards (the gate owns serve's parent directory) is not
 * what is signed; the manifest and the public key are handed over.
 */
static void
test_out_prepare_owned(void **state)
{
	struct fixture *fx = *state;
	struct exec_artifact_out *o = NULL;
	struct exec_artifact_summary sum;
	const char *path = NULL, *detail = NULL, *pem;
	char err[512], dir[160], moved[160], planted[192], buf[64];
	struct seen s;
	ssize_t n;
	int fd;

	snprintf(dir, sizeof(dir), "%s/owned", fx->root);
	snprintf(moved, sizeof(moved), "%s/owned.real", fx->root);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(exec_artifact_out_prepare_owned(dir, fx->home, geteuid() + 1, &o, &path,
	                                                 err, sizeof(err)),
	                 -EPERM);
	assert_null(o);
	assert_int_equal(
	    exec_artifact_out_prepare_owned(dir, fx->home, geteuid(), &o, &path, err, sizeof(err)),
	    0);
	assert_int_equal(exec_artifact_out_manifest_open(o), -ENOENT);
	write_text(dir, "mine", "1\n");
	assert_int_equal(rename(dir, moved), 0);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_text(dir, "planted", "2\n");
	assert_int_equal(exec_artifact_out_sign(o, "sb-owned", &sum, &detail, err, sizeof(err)), 0);
	assert_int_equal(sum.files, 1);
	fd = exec_artifact_out_manifest_open(o);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	pem = exec_artifact_out_public_pem(o);
	assert_non_null(pem);
	assert_non_null(strstr(pem, "BEGIN PUBLIC KEY"));
	exec_artifact_out_free(o);
	memset(&s, 0, sizeof(s));
	assert_int_equal(
	    exec_artifacts_verify(moved, NULL, fx->key, NULL, collect, &s, &sum, err, sizeof(err)),
	    0);
	assert_int_equal(sum.problems, 0);
	assert_int_equal(sum.files, 1);
	/* Nothing signed or written at the name the directory had. */
	snprintf(planted, sizeof(planted), "%s/manifest.json", dir);
	assert_int_equal(access(planted, F_OK), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_key_files_and_modes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_out_prepare_owned, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_refuses_open_modes, setup, teardown),
	    cmocka_unit_test(test_key_public_pem_garbage),
	    cmocka_unit_test(test_message_encoding),
	    cmocka_unit_test(test_name_rules),
	    cmocka_unit_test(test_escape),
	    cmocka_unit_test_setup_teardown(test_sign_verify_ok, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_changed_added_removed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_symlinks_not_followed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_manifest_edits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_another_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_manifest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_parser_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deep_nesting_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_out_prepare, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
