/*
 * The image's User (exec/image/user.c), table-driven: the string's forms
 * and its refusals, the look-ups in /etc/passwd and /etc/group bytes
 * (hostile: broken lines, comments, no final newline), the ids a User
 * resolves to, and the resolver on a root made here (a name found, an
 * unknown one, root refused, a symbolic link not followed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/image/image.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                             "# a comment\n"
                             "broken line\n"
                             "bad:x:notanumber:5::/:/bin/sh\n"
                             "app:x:2345:2346::/work:/bin/sh\n"
                             "nobody:x:65534:65534::/:/bin/false\n"
                             "\n"
                             "last:x:77:78::/:/bin/sh"; /* no final newline */
static const char group[] = "root:x:0:\n"
                            "app:x:2346:\n"
                            "staff:x:50:app\n"
                            "weird:x:-1:\n"
                            "nogroup:x:65534:";

static void
test_parse(void **state)
{
	static const struct {
		const char *in;
		int rc;
		bool given, has_group, uid_numeric, gid_numeric;
		uint32_t uid, gid;
		const char *user, *group;
	} cases[] = {
	    {NULL, 0, false, false, false, false, 0, 0, "", ""},
	    {"", 0, false, false, false, false, 0, 0, "", ""},
	    {"1234", 0, true, false, true, false, 1234, 0, "", ""},
	    {"1234:1234", 0, true, true, true, true, 1234, 1234, "", ""},
	    {"app", 0, true, false, false, false, 0, 0, "app", ""},
	    {"app:staff", 0, true, true, false, false, 0, 0, "app", "staff"},
	    {"app:50", 0, true, true, false, true, 0, 50, "app", ""},
	    {"1234:staff", 0, true, true, true, false, 1234, 0, "", "staff"},
	    {"0", 0, true, false, true, false, 0, 0, "", ""},
	    {"4294967294", 0, true, false, true, false, 4294967294u, 0, "", ""},
	    {"4294967295", -EINVAL, true, false, false, false, 0, 0, "",
	     ""}, /* (uid_t)-1: a name? no, a bad number */
	    {"99999999999", -EINVAL, true, false, false, false, 0, 0, "",
	     ""}, /* too long for a number, digits only */
	    {":1234", -EINVAL, true, false, false, false, 0, 0, "", ""},
	    {"1234:", -EINVAL, true, false, false, false, 0, 0, "", ""},
	    {"a b", -EINVAL, true, false, false, false, 0, 0, "", ""},
	    {"app:staff:x", -EINVAL, true, false, false, false, 0, 0, "", ""},
	    {"app\n", -EINVAL, true, false, false, false, 0, 0, "", ""},
	    {"-1", 0, true, false, false, false, 0, 0, "-1", ""}, /* a name, if any has it */
	};
	struct exec_image_user u;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(exec_image_user_parse(cases[i].in, &u, err, sizeof(err)),
		                 cases[i].rc);
		if (cases[i].rc != 0) {
			assert_non_null(strstr(err, "User"));
			continue;
		}
		assert_int_equal(u.given, cases[i].given);
		assert_int_equal(u.has_group, cases[i].has_group);
		assert_int_equal(u.uid_numeric, cases[i].uid_numeric);
		assert_int_equal(u.gid_numeric, cases[i].gid_numeric);
		if (u.uid_numeric)
			assert_int_equal(u.uid, cases[i].uid);
		if (u.gid_numeric)
			assert_int_equal(u.gid, cases[i].gid);
		assert_string_equal(u.user, cases[i].user);
		assert_string_equal(u.group, cases[i].group);
	}
	/* A name as long as a name may be, and one byte more. */
	{
		char name[EXEC_IMAGE_USER_NAME_MAX + 1];

		memset(name, 'a', sizeof(name) - 1);
		name[EXEC_IMAGE_USER_NAME_MAX - 1] = '\0';
		assert_int_equal(exec_image_user_parse(name, &u, err, sizeof(err)), 0);
		name[EXEC_IMAGE_USER_NAME_MAX - 1] = 'a';
		name[EXEC_IMAGE_USER_NAME_MAX] = '\0';
		assert_int_equal(exec_image_user_parse(name, &u, err, sizeof(err)), -EINVAL);
	}
}

static void
test_find(void **state)
{
	uint32_t id = 0, gid = 0;

	(void)state;
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd), "app", 0, &id, &gid), 0);
	assert_int_equal(id, 2345);
	assert_int_equal(gid, 2346);
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd), "last", 0, &id, &gid), 0);
	assert_int_equal(id, 77);
	assert_int_equal(gid, 78);
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd), NULL, 65534, &id, &gid), 0);
	assert_int_equal(gid, 65534);
	/* Broken lines and comments never match. */
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd), "bad", 0, &id, &gid),
	                 -ENOENT);
	assert_int_equal(
	    exec_image_passwd_find(passwd, strlen(passwd), "broken line", 0, &id, &gid), -ENOENT);
	assert_int_equal(
	    exec_image_passwd_find(passwd, strlen(passwd), "# a comment", 0, &id, &gid), -ENOENT);
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd), "ap", 0, &id, &gid),
	                 -ENOENT);
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd), NULL, 4242, &id, &gid),
	                 -ENOENT);
	/* The bytes end where len says, not at a NUL: "last:x:77:" has no group. */
	assert_int_equal(exec_image_passwd_find(passwd, strlen(passwd) - strlen("78::/:/bin/sh"),
	                                        "last", 0, &id, &gid),
	                 -ENOENT);
	assert_int_equal(exec_image_passwd_find("", 0, "app", 0, &id, &gid), -ENOENT);

	assert_int_equal(exec_image_group_find(group, strlen(group), "staff", &gid), 0);
	assert_int_equal(gid, 50);
	assert_int_equal(exec_image_group_find(group, strlen(group), "nogroup", &gid), 0);
	assert_int_equal(gid, 65534);
	assert_int_equal(exec_image_group_find(group, strlen(group), "weird", &gid), -ENOENT);
	assert_int_equal(exec_image_group_find(group, strlen(group), "app:x", &gid), -ENOENT);
}

static void
test_ids(void **state)
{
	static const struct {
		const char *in;
		int rc;
		uint32_t uid, gid;
	} cases[] = {
	    {"1234:1234", 0, 1234, 1234},
	    {"1234", 0, 1234, 1234}, /* no passwd line: its own number */
	    {"2345", 0, 2345, 2346}, /* its passwd line's group */
	    {"app", 0, 2345, 2346},
	    {"app:staff", 0, 2345, 50},
	    {"app:99", 0, 2345, 99},
	    {"1234:staff", 0, 1234, 50},
	    {"root", 0, 0, 0}, /* resolved; exec_image_user_resolve refuses it */
	    {"nosuch", -ENOENT, 0, 0},
	    {"app:nosuch", -ENOENT, 0, 0},
	};
	struct exec_image_user u;
	uint32_t uid, gid;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(exec_image_user_parse(cases[i].in, &u, err, sizeof(err)), 0);
		err[0] = '\0';
		assert_int_equal(exec_image_user_ids(&u, passwd, strlen(passwd), group,
		                                     strlen(group), &uid, &gid, err, sizeof(err)),
		                 cases[i].rc);
		if (cases[i].rc != 0) {
			assert_non_null(strstr(err, "nosuch"));
			continue;
		}
		assert_int_equal(uid, cases[i].uid);
		assert_int_equal(gid, cases[i].gid);
	}
}

static void
put(const char *dir, const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
test_resolve(void **state)
{
	char root[] = "/tmp/tollgate-test-user.XXXXXX", path[512], err[256], big[4096];
	uint32_t uid = 7, gid = 7;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/etc", root);
	assert_int_equal(mkdir(path, 0755), 0);

	/* No User: nothing read, ids 0. */
	assert_int_equal(exec_image_user_resolve(root, NULL, &uid, &gid, err, sizeof(err)), 0);
	assert_int_equal(uid, 0);
	/* No /etc/passwd at all: numbers still work, names do not. */
	assert_int_equal(exec_image_user_resolve(root, "1234:1234", &uid, &gid, err, sizeof(err)),
	                 0);
	assert_int_equal(uid, 1234);
	assert_int_equal(gid, 1234);
	assert_int_equal(exec_image_user_resolve(root, "app", &uid, &gid, err, sizeof(err)),
	                 -ENOENT);
	assert_string_equal(err, "User 'app': no such user in the image's /etc/passwd");

	put(root, "etc/passwd", passwd);
	put(root, "etc/group", group);
	assert_int_equal(exec_image_user_resolve(root, "app:staff", &uid, &gid, err, sizeof(err)),
	                 0);
	assert_int_equal(uid, 2345);
	assert_int_equal(gid, 50);
	/* Root, by name or number, or group 0: refused. */
	assert_int_equal(exec_image_user_resolve(root, "root", &uid, &gid, err, sizeof(err)),
	                 -EPERM);
	assert_non_null(strstr(err, "is root (uid 0)"));
	assert_int_equal(exec_image_user_resolve(root, "0", &uid, &gid, err, sizeof(err)), -EPERM);
	assert_int_equal(exec_image_user_resolve(root, "app:root", &uid, &gid, err, sizeof(err)),
	                 -EPERM);
	assert_non_null(strstr(err, "(gid 0)"));
	assert_int_equal(exec_image_user_resolve(root, "1234:0", &uid, &gid, err, sizeof(err)),
	                 -EPERM);

	/* A symbolic link is not followed: not at the file, not on the way. */
	snprintf(path, sizeof(path), "%s/etc/passwd", root);
	unlink(path);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(exec_image_user_resolve(root, "app", &uid, &gid, err, sizeof(err)),
	                 -ELOOP);
	assert_non_null(strstr(err, "/etc/passwd"));
	unlink(path);
	/* Larger than the bound: refused, not read. */
	f = fopen(path, "w");
	assert_non_null(f);
	memset(big, '#', sizeof(big));
	for (size_t n = 0; n <= EXEC_IMAGE_IDFILE_MAX / sizeof(big); n++)
		fwrite(big, 1, sizeof(big), f);
	fclose(f);
	assert_int_equal(exec_image_user_resolve(root, "app", &uid, &gid, err, sizeof(err)),
	                 -EFBIG);
	assert_non_null(strstr(err, "larger than 1 MiB"));
	unlink(path);
	/* A directory where the file should be. */
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(exec_image_user_resolve(root, "app", &uid, &gid, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	rmdir(path);

	snprintf(path, sizeof(path), "%s/etc/group", root);
	unlink(path);
	snprintf(path, sizeof(path), "%s/etc", root);
	rmdir(path);
	/* /etc itself a link out of the root. */
	assert_int_equal(symlink("/etc", path), 0);
	assert_int_equal(exec_image_user_resolve(root, "root", &uid, &gid, err, sizeof(err)),
	                 -ELOOP);
	unlink(path);
	rmdir(root);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_find),
	    cmocka_unit_test(test_ids),
	    cmocka_unit_test(test_resolve),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
