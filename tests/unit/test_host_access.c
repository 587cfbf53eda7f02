/*
 * serve --host-access's pure parts and its path walk, table-driven: the
 * file's parser (errors at FILE:LINE:COL), the command matcher (full paths,
 * the directory it runs in, one pattern per argument, options only by
 * patterns that are options, "..." and "-..." last), path normalising and prefixes, and
 * exec_host_walk over a real tree with symlinks of root, of the person and
 * of a stranger.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/services/host.h"
#include "policy/host_access.h"

static struct policy_host_access *
parse_ok(const char *text)
{
	struct policy_host_access *h = NULL;
	char err[512];

	if (policy_host_access_parse(text, strlen(text), "f.json", &h, err, sizeof(err)) != 0)
		fail_msg("%s: %s", text, err);
	return h;
}

static void
test_parse_errors(void **state)
{
	static const struct {
		const char *text;
		const char *err; /* a part of the message, with its position */
	} cases[] = {
	    {"[]", "f.json:1:1: expected an object"},
	    {"{\"command\": []}", "f.json:1:2: unknown key \"command\""},
	    {"{\n \"commands\": {}\n}", "f.json:2:14: \"commands\": expected an array"},
	    {"{\"commands\": [\n  {\"program\": \"id\"}\n]}",
	     "f.json:2:15: \"program\" 'id' is not a full path"},
	    {"{\"commands\": [{\"args\": []}]}", "f.json:1:15: a command needs \"program\""},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"arg\": []}]}",
	     "f.json:1:37: unknown member \"arg\""},
	    {"{\"commands\": [{\"program\": \"/bin/../bin/sh\"}]}", "'..' is not allowed"},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"args\": [\"...\", \"a\"]}]}",
	     "f.json:1:46: \"...\" (any further arguments) may only be the last"},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"args\": [\"a\", 3]}]}",
	     "f.json:1:51: expected a string"},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"args\": \"-u\"}]}",
	     "f.json:1:45: \"args\" must be an array"},
	    /* Where a command may run is part of it. */
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"args\": []}]}",
	     "f.json:1:15: a command needs \"cwd\""},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"cwd\": []}]}",
	     "f.json:1:44: a command needs \"cwd\""},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"cwd\": \"/srv\"}]}",
	     "f.json:1:44: a command needs \"cwd\""},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"cwd\": [\"/srv\", \"src\"]}]}",
	     "f.json:1:53: 'src' is not an absolute path"},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"cwd\": [\"/a/../b\"]}]}",
	     "f.json:1:45: '/a/../b': '..' is not allowed"},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"cwd\": [2]}]}",
	     "f.json:1:45: expected a string"},
	    {"{\"commands\": [{\"program\": \"/bin/x\", \"args\": [\"-...\", \"a\"], \"cwd\": "
	     "[\"/\"]}]}",
	     "f.json:1:46: \"-...\" (any further arguments) may only be the last"},
	    {"{\"read\": [\"relative/dir\"]}",
	     "f.json:1:11: 'relative/dir' is not an absolute path"},
	    {"{\"write\": [\"/a/../etc\"]}", "f.json:1:12: '/a/../etc': '..' is not allowed"},
	    {"{\"read\": \"/etc\"}", "f.json:1:10: \"read\": expected an array"},
	    {"{\"read\": [1]}", "f.json:1:11: expected a string"},
	    {"{\"read\": [\"/a\"],}", "f.json:1:"},
	    {"{\"read\": [], \"read\": []}", "f.json:1:"},
	};
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct policy_host_access *h = NULL;
		int rc;

		err[0] = '\0';
		rc = policy_host_access_parse(cases[i].text, strlen(cases[i].text), "f.json", &h,
		                              err, sizeof(err));
		if (rc != -EINVAL || h != NULL || strstr(err, cases[i].err) == NULL)
			fail_msg("case %zu: rc %d, err '%s', want '%s'", i, rc, err, cases[i].err);
	}
}

static void
test_parse_good(void **state)
{
	struct policy_host_access *h;

	(void)state;
	h = parse_ok("{\"comment\": \"x\", \"commands\": [{\"program\": \"//usr/bin/./id\", "
	             "\"args\": [\"-u\"], \"cwd\": [\"/\"], \"comment\": \"c\"}, {\"program\": "
	             "\"/bin/echo\", \"args\": [\"...\"], \"cwd\": [\"/srv//a/\", \"/b\"]}, "
	             "{\"program\": \"/bin/ls\", \"args\": [\"-...\"], \"cwd\": [\"/\"]}], "
	             "\"read\": [\"/srv/data/\", \"/\"], \"write\": []}");
	assert_int_equal(h->ncommands, 3);
	assert_string_equal(h->commands[0].program, "/usr/bin/id");
	assert_int_equal(h->commands[0].nargs, 1);
	assert_false(h->commands[0].more);
	assert_int_equal(h->commands[0].ncwd, 1);
	assert_string_equal(h->commands[0].cwd[0], "/");
	assert_int_equal(h->commands[1].nargs, 0);
	assert_true(h->commands[1].more);
	assert_false(h->commands[1].more_options);
	assert_int_equal(h->commands[1].ncwd, 2);
	assert_string_equal(h->commands[1].cwd[0], "/srv/a");
	assert_string_equal(h->commands[1].cwd[1], "/b");
	assert_true(h->commands[2].more);
	assert_true(h->commands[2].more_options);
	assert_int_equal(h->nread, 2);
	assert_string_equal(h->read[0], "/srv/data");
	assert_string_equal(h->read[1], "/");
	assert_int_equal(h->nwrite, 0);
	policy_host_access_free(h);
	/* Nothing allowed: every call asks a person. */
	h = parse_ok("{}");
	assert_int_equal(h->ncommands + h->nread + h->nwrite, 0);
	policy_host_access_free(h);
}

static void
test_command_match(void **state)
{
	static const struct {
		const char *args[4];
		const char *program;
		const char *cwd;
		const char *argv[5]; /* NULL-ended */
		bool match;
	} cases[] = {
	    {{"-u", NULL}, "/usr/bin/id", "/", {"-u", NULL}, true},
	    {{"-u", NULL}, "/usr/bin/id", "/", {NULL}, false}, /* one argument, exactly */
	    {{"-u", NULL}, "/usr/bin/id", "/", {"-u", "root", NULL}, false},
	    {{"-u", NULL}, "/bin/id", "/", {"-u", NULL}, false}, /* another file */
	    {{"-u", NULL}, "id", "/", {"-u", NULL}, false},      /* never a basename */
	    {{NULL}, "/usr/bin/id", "/", {NULL}, true},          /* no args: none allowed */
	    {{NULL}, "/usr/bin/id", "/", {"-a", NULL}, false},
	    {{"status", "...", NULL}, "/usr/bin/git", "/srv/repo", {"status", NULL}, true},
	    {{"status", "...", NULL},
	     "/usr/bin/git",
	     "/srv/repo",
	     {"status", "x", "y", NULL},
	     true},
	    {{"status", "...", NULL}, "/usr/bin/git", "/srv/repo", {"push", NULL}, false},
	    /* "..." takes no option; "-..." does. */
	    {{"status", "...", NULL}, "/usr/bin/git", "/srv/repo", {"status", "-s", NULL}, false},
	    {{"status", "...", NULL},
	     "/usr/bin/git",
	     "/srv/repo",
	     {"status", "x", "--", NULL},
	     false},
	    {{"status", "-...", NULL},
	     "/usr/bin/git",
	     "/srv/repo",
	     {"status", "-s", "x", NULL},
	     true},
	    {{"status", "-...", NULL}, "/usr/bin/git", "/srv/repo", {"status", NULL}, true},
	    /* The directory: the prefix itself or below it, never beside or above. */
	    {{"status", "...", NULL}, "/usr/bin/git", "/srv/repo/sub", {"status", NULL}, true},
	    {{"status", "...", NULL}, "/usr/bin/git", "/srv/repository", {"status", NULL}, false},
	    {{"status", "...", NULL}, "/usr/bin/git", "/srv", {"status", NULL}, false},
	    {{"status", "...", NULL}, "/usr/bin/git", "/tmp/evil", {"status", NULL}, false},
	    {{"status", "...", NULL}, "/usr/bin/git", "/", {"status", NULL}, false},
	    {{"status", "...", NULL}, "/usr/bin/git", NULL, {"status", NULL}, false},
	    {{"*.txt", NULL}, "/usr/bin/cat", "/", {"notes.txt", NULL}, true},
	    {{"*.txt", NULL},
	     "/usr/bin/cat",
	     "/",
	     {"/etc/x.txt", NULL},
	     true}, /* '*' crosses '/' */
	    {{"*.txt", NULL}, "/usr/bin/cat", "/", {"notes.md", NULL}, false},
	    /* '*' (or '?', '[') never stands for an option... */
	    {{"*", NULL}, "/usr/bin/cat", "/", {"-", NULL}, false},
	    {{"*", NULL}, "/usr/bin/cat", "/", {"--help", NULL}, false},
	    {{"*.txt", NULL}, "/usr/bin/cat", "/", {"-v.txt", NULL}, false},
	    {{"?v", NULL}, "/usr/bin/cat", "/", {"-v", NULL}, false},
	    {{"[-a]v", NULL}, "/usr/bin/cat", "/", {"-v", NULL}, false},
	    /* ... but a pattern starting with '-' names options. */
	    {{"-*", NULL}, "/usr/bin/cat", "/", {"--help", NULL}, true},
	    {{"-*", NULL}, "/usr/bin/cat", "/", {"x", NULL}, false},
	    {{"-[nv]", NULL}, "/bin/echo", "/", {"-n", NULL}, true},
	    {{"-[nv]", NULL}, "/bin/echo", "/", {"-e", NULL}, false},
	    {{"--format=*", NULL}, "/bin/echo", "/", {"--format=x", NULL}, true},
	    {{"?", NULL}, "/bin/echo", "/", {"ab", NULL}, false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *dirs[2] = {"/srv/repo", "/usr/share/doc"};
		struct policy_host_command c = {.program = "/usr/bin/id", .cwd = dirs, .ncwd = 2};
		char *root_only[1] = {"/"};
		char *pats[4];
		size_t nargv = 0;

		if (strcmp(cases[i].program, "/usr/bin/git") == 0) {
			c.program = "/usr/bin/git";
		} else {
			c.cwd = root_only;
			c.ncwd = 1;
			if (strcmp(cases[i].program, "/usr/bin/cat") == 0)
				c.program = "/usr/bin/cat";
			else if (strcmp(cases[i].program, "/bin/echo") == 0)
				c.program = "/bin/echo";
		}
		for (size_t k = 0; k < 4 && cases[i].args[k] != NULL; k++) {
			if (strcmp(cases[i].args[k], "...") == 0 ||
			    strcmp(cases[i].args[k], "-...") == 0) {
				c.more = true;
				c.more_options = cases[i].args[k][0] == '-';
				break;
			}
			pats[c.nargs++] = (char *)cases[i].args[k];
		}
		c.args = pats;
		while (cases[i].argv[nargv] != NULL)
			nargv++;
		if (policy_host_command_match(&c, cases[i].program, cases[i].cwd, cases[i].argv,
		                              nargv) != cases[i].match)
			fail_msg("case %zu: %s in %s", i, cases[i].program,
			         cases[i].cwd != NULL ? cases[i].cwd : "(none)");
	}
}

/* A rule parsed from a file and found through the list: the same matcher. */
static void
test_access_command(void **state)
{
	struct policy_host_access *h;
	const char *st[2] = {"status", "--porcelain"}, *plain[1] = {"status"};

	(void)state;
	h = parse_ok("{\"commands\": [{\"program\": \"/usr/bin/git\", \"args\": [\"status\", "
	             "\"...\"], \"cwd\": [\"/home/me/src\"]}]}");
	assert_non_null(
	    policy_host_access_command(h, "/usr/bin/git", NULL, "/home/me/src/a", plain, 1));
	assert_null(
	    policy_host_access_command(h, "/usr/bin/git", NULL, "/home/me/Downloads/a", plain, 1));
	assert_null(policy_host_access_command(h, "/usr/bin/git", NULL, "/home/me/src/a", st, 2));
	/* The file a link names counts, the directory still does. */
	assert_non_null(
	    policy_host_access_command(h, "/bin/git", "/usr/bin/git", "/home/me/src", plain, 1));
	assert_null(policy_host_access_command(h, "/bin/git", "/usr/bin/git", "/tmp", plain, 1));
	policy_host_access_free(h);
}

/* A person's grant (exact) compares bytes: a pattern character is itself,
 * and the directory is the one it was approved in, not what is below. */
static void
test_exact_grant(void **state)
{
	char *pats[1] = {"*"}, *dirs[1] = {"/srv/repo"};
	struct policy_host_command c = {.program = "/bin/echo",
	                                .args = pats,
	                                .nargs = 1,
	                                .cwd = dirs,
	                                .ncwd = 1,
	                                .exact = true};
	const char *star[1] = {"*"}, *other[1] = {"x"};

	(void)state;
	assert_true(policy_host_command_match(&c, "/bin/echo", "/srv/repo", star, 1));
	assert_false(policy_host_command_match(&c, "/bin/echo", "/srv/repo", other, 1));
	assert_false(policy_host_command_match(&c, "/bin/echo", "/srv/repo/sub", star, 1));
	assert_false(policy_host_command_match(&c, "/bin/echo", "/tmp", star, 1));
	/* An option the person saw is the person's to allow. */
	pats[0] = "-n";
	star[0] = "-n";
	assert_true(policy_host_command_match(&c, "/bin/echo", "/srv/repo", star, 1));
}

static void
test_paths(void **state)
{
	static const struct {
		const char *in, *out; /* out NULL: refused */
	} norm[] = {
	    {"/", "/"},        {"/a/b", "/a/b"}, {"//a///b/", "/a/b"},     {"/a/./b/.", "/a/b"},
	    {"/a/../b", NULL}, {"/..", NULL},    {"/a/..b/c", "/a/..b/c"}, /* a name, not the parent
	                                                                    */
	    {"a/b", NULL},     {"", NULL},       {"/a\nb", NULL},
	};
	static const struct {
		const char *prefix, *path;
		bool under;
	} under[] = {
	    {"/srv/data", "/srv/data", true},
	    {"/srv/data", "/srv/data/x", true},
	    {"/srv/data", "/srv/database", false},
	    {"/srv/data", "/srv", false},
	    {"/", "/etc/passwd", true},
	    {"/srv/data", "/srv/data/../../etc", true},
	};
	char out[PATH_MAX], err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(norm) / sizeof(norm[0]); i++) {
		int rc = policy_host_path_normalise(norm[i].in, out, sizeof(out), err, sizeof(err));

		if (norm[i].out == NULL ? rc == 0 : rc != 0 || strcmp(out, norm[i].out) != 0)
			fail_msg("normalise case %zu (%s): rc %d out '%s'", i, norm[i].in, rc,
			         rc == 0 ? out : err);
	}
	/* Prefixes compare normalised paths (the walk's canonical ones): the
	 * last row is why ".." never reaches them. */
	for (size_t i = 0; i < sizeof(under) / sizeof(under[0]); i++) {
		if (policy_host_path_under(under[i].prefix, under[i].path) != under[i].under)
			fail_msg("under case %zu", i);
	}
}

/* ---- the walk ------------------------------------------------------------------ */

#define PERSON 4242
#define STRANGER 4343

static char root[64];

static void
mk(const char *rel, const char *content)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static void
link_as(const char *target, const char *rel, uid_t owner)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_int_equal(symlink(target, p), 0);
	if (owner != (uid_t)-1)
		assert_int_equal(lchown(p, owner, (gid_t)-1), 0);
}

static void
test_walk(void **state)
{
	static const struct {
		const char *path; /* under root */
		bool strict;
		enum exec_host_open mode;
		int rc;
		const char *canon; /* under root; NULL: not checked */
		const char *err;   /* a part of it */
	} cases[] = {
	    {"/data/a.txt", false, EXEC_HOST_READ, 0, "/data/a.txt", NULL},
	    {"/links/mine", false, EXEC_HOST_READ, 0, "/data/a.txt", NULL},
	    {"/links/roots", false, EXEC_HOST_READ, 0, "/data/a.txt", NULL},
	    {"/links/theirs", false, EXEC_HOST_READ, -EPERM, NULL, "owned by uid 4343"},
	    {"/links/dir/a.txt", false, EXEC_HOST_READ, 0, "/data/a.txt", NULL},
	    {"/links/theirdir/a.txt", false, EXEC_HOST_READ, -EPERM, NULL, "links/theirdir"},
	    {"/links/up", false, EXEC_HOST_READ, 0, "/data/a.txt", NULL}, /* "../data/a.txt" */
	    {"/links/mine", true, EXEC_HOST_READ, -ELOOP, NULL, "is a symlink"},
	    {"/data/a.txt", true, EXEC_HOST_READ, 0, "/data/a.txt", NULL},
	    {"/data/../data/a.txt", false, EXEC_HOST_READ, -EINVAL, NULL, "'..'"},
	    {"/data", false, EXEC_HOST_READ, -EISDIR, NULL, "not a regular file"},
	    {"/data", false, EXEC_HOST_LIST, 0, "/data", NULL},
	    {"/data/a.txt", false, EXEC_HOST_LIST, -ENOTDIR, NULL, "not a directory"},
	    {"/data/fifo", false, EXEC_HOST_READ, -EINVAL, NULL, "not a regular file"},
	    {"/data/new.txt", false, EXEC_HOST_RESOLVE, 0, "/data/new.txt", NULL},
	    {"/data/new.txt", false, EXEC_HOST_READ, -ENOENT, NULL, NULL},
	    {"/links/loop", false, EXEC_HOST_READ, -ELOOP, NULL, "too many"},
	    {"/data/a.txt/x", false, EXEC_HOST_READ, -ENOTDIR, NULL, NULL},
	};
	char canon[PATH_MAX], err[512], want[PATH_MAX], dir[PATH_MAX];
	int fd;

	(void)state;
	if (geteuid() != 0) {
		/* lchown to other users needs root. */
		skip();
	}
	snprintf(root, sizeof(root), "/tmp/tollgate-test-host.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/data", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/links", root);
	assert_int_equal(mkdir(dir, 0755), 0);
	mk("data/a.txt", "hello");
	snprintf(dir, sizeof(dir), "%s/data/fifo", root);
	assert_int_equal(mkfifo(dir, 0644), 0);
	snprintf(want, sizeof(want), "%s/data/a.txt", root);
	link_as(want, "links/mine", PERSON);
	link_as(want, "links/roots", 0);
	link_as(want, "links/theirs", STRANGER);
	snprintf(want, sizeof(want), "%s/data", root);
	link_as(want, "links/dir", PERSON);
	link_as(want, "links/theirdir", STRANGER);
	link_as("../data/a.txt", "links/up", PERSON);
	link_as("loop", "links/loop", PERSON);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[PATH_MAX];
		int rc;

		snprintf(path, sizeof(path), "%s%s", root, cases[i].path);
		err[0] = '\0';
		rc = exec_host_walk(path, PERSON, cases[i].strict, cases[i].mode, &fd, canon,
		                    sizeof(canon), err, sizeof(err));
		if (rc != cases[i].rc)
			fail_msg("case %zu (%s): rc %d, want %d (%s)", i, cases[i].path, rc,
			         cases[i].rc, err);
		if (cases[i].canon != NULL) {
			snprintf(want, sizeof(want), "%s%s", root, cases[i].canon);
			if (strcmp(canon, want) != 0)
				fail_msg("case %zu: canon %s, want %s", i, canon, want);
		}
		if (cases[i].err != NULL && strstr(err, cases[i].err) == NULL)
			fail_msg("case %zu: err '%s', want '%s'", i, err, cases[i].err);
		if (rc == 0 && cases[i].mode == EXEC_HOST_RESOLVE)
			assert_int_equal(fd, -1);
		if (rc == 0 && cases[i].mode == EXEC_HOST_READ) {
			char b[8] = {0};

			assert_int_equal(read(fd, b, sizeof(b) - 1), 5);
			assert_string_equal(b, "hello");
		}
		if (fd >= 0)
			close(fd);
	}
	/* A write is strict: it makes the file, then cuts an existing one. */
	snprintf(want, sizeof(want), "%s/data/w.txt", root);
	assert_int_equal(exec_host_walk(want, PERSON, true, EXEC_HOST_WRITE, &fd, canon,
	                                sizeof(canon), err, sizeof(err)),
	                 0);
	assert_int_equal(write(fd, "12345", 5), 5);
	close(fd);
	assert_int_equal(exec_host_walk(want, PERSON, true, EXEC_HOST_WRITE, &fd, canon,
	                                sizeof(canon), err, sizeof(err)),
	                 0);
	{
		struct stat st;

		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_size, 0);
	}
	close(fd);
	/* ... and never through a link, even the person's own. */
	snprintf(want, sizeof(want), "%s/links/mine", root);
	assert_int_equal(exec_host_walk(want, PERSON, true, EXEC_HOST_WRITE, &fd, canon,
	                                sizeof(canon), err, sizeof(err)),
	                 -ELOOP);
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
		assert_int_equal(system(cmd), 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_errors),  cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_command_match), cmocka_unit_test(test_access_command),
	    cmocka_unit_test(test_exact_grant),   cmocka_unit_test(test_paths),
	    cmocka_unit_test(test_walk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
