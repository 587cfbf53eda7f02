/*
 * The pure parts of the exec layer: exit statuses from wait statuses and
 * exec errnos (docs/contributing.md, "Exit statuses"), the names that mark a run's
 * leftovers as stale, the rlimit plan, and the tree removal that must never
 * follow a symlink out of the directory it removes.
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
#include <sys/wait.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"

#include <linux/filter.h>

#include "exec/sandbox/seccomp_bpf.h"

static void
test_status_from_wait(void **state)
{
	static const struct {
		int wstatus;
		int want;
	} cases[] = {
	    {0x0000, 0},               /* exit 0 */
	    {0x0300, 3},               /* exit 3 */
	    {0xff00, 255},             /* exit 255 */
	    {0x0009, 128 + 9},         /* SIGKILL */
	    {0x000f, 128 + 15},        /* SIGTERM */
	    {0x0018 | 0x80, 152},      /* SIGXCPU with a core dump */
	    {0x007f | (19 << 8), 125}, /* stopped: not a final status */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(exec_status_from_wait(cases[i].wstatus), cases[i].want);
}

static void
test_status_from_exec_errno(void **state)
{
	assert_int_equal(exec_status_from_exec_errno(ENOENT), 127);
	assert_int_equal(exec_status_from_exec_errno(ENOTDIR), 127);
	assert_int_equal(exec_status_from_exec_errno(ENAMETOOLONG), 127);
	assert_int_equal(exec_status_from_exec_errno(EACCES), 126);
	assert_int_equal(exec_status_from_exec_errno(ENOEXEC), 126);
	assert_int_equal(exec_status_from_exec_errno(EPERM), 126);
	assert_int_equal(exec_status_from_exec_errno(E2BIG), 126);
}

static void
test_tags(void **state)
{
	char tag[96], name[160];
	pid_t child;
	int ws;

	assert_int_equal(exec_instance_tag(tag, sizeof(tag)), 0);
	assert_true(strncmp(tag, EXEC_TAG_PREFIX, strlen(EXEC_TAG_PREFIX)) == 0);
	snprintf(name, sizeof(name), "%s.sb-0011223344", tag);
	/* Ours, and we live. */
	assert_false(exec_tag_is_stale(name, EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(tag, EXEC_TAG_PREFIX));

	/* A process that has gone. */
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, &ws, 0), child);
	snprintf(name, sizeof(name), EXEC_TAG_PREFIX "%d.12345.sb-00", (int)child);
	assert_true(exec_tag_is_stale(name, EXEC_TAG_PREFIX));

	/* Our pid with another start time: the pid was reused. */
	snprintf(name, sizeof(name), EXEC_TAG_PREFIX "%d.1.sb-00", (int)getpid());
	assert_true(exec_tag_is_stale(name, EXEC_TAG_PREFIX));

	/* Names that are not ours are never touched. */
	assert_false(exec_tag_is_stale("tollgate-test_run_exit.Ab12", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(EXEC_TAG_PREFIX "abc.1.x", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(EXEC_TAG_PREFIX "12x.1", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(EXEC_TAG_PREFIX "-5.1", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(EXEC_TAG_PREFIX "0.1", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(EXEC_TAG_PREFIX "5.", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale(EXEC_TAG_PREFIX "5.1x", EXEC_TAG_PREFIX));
	assert_false(exec_tag_is_stale("other", EXEC_TAG_PREFIX));
}

static void
test_limits_plan(void **state)
{
	struct exec_limits l = {.ram_mb = 64, .cpu_seconds = 2, .pids = 10, .nofile = 32};
	struct exec_plan *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	assert_int_equal(exec_limits_plan(&l, true, p), 0);
	assert_true(p->set_data);
	assert_false(p->set_as); /* the memory cgroup is the real cap */
	assert_int_equal(p->rlim_data.rlim_max, 64ull << 20);
	assert_int_equal(p->rlim_nproc.rlim_max, 11); /* + the sandbox's init */
	assert_int_equal(p->rlim_cpu.rlim_cur, 2);
	assert_int_equal(p->rlim_cpu.rlim_max, 3);
	assert_int_equal(p->rlim_nofile.rlim_cur, 32);

	memset(p, 0, sizeof(*p));
	assert_int_equal(exec_limits_plan(&l, false, p), 0);
	assert_true(p->set_as); /* no memory cgroup: address space too */

	memset(p, 0, sizeof(*p));
	memset(&l, 0, sizeof(l));
	assert_int_equal(exec_limits_plan(&l, true, p), 0);
	assert_false(p->set_data || p->set_as || p->set_nproc || p->set_cpu || p->set_nofile);
	free(p);
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
test_remove_tree(void **state)
{
	char base[] = "/tmp/tollgate-unit-exec.XXXXXX";
	char tree[PATH_MAX], outside[PATH_MAX], path[PATH_MAX + 64];
	struct stat st;

	assert_non_null(mkdtemp(base));
	snprintf(outside, sizeof(outside), "%s/outside", base);
	snprintf(tree, sizeof(tree), "%s/tree", base);
	assert_int_equal(mkdir(outside, 0755), 0);
	snprintf(path, sizeof(path), "%s/keep", outside);
	write_file(path, "keep");
	assert_int_equal(mkdir(tree, 0755), 0);
	snprintf(path, sizeof(path), "%s/a", tree);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/a/b", tree);
	assert_int_equal(mkdir(path, 0000), 0); /* unreadable: removed all the same */
	snprintf(path, sizeof(path), "%s/a/file", tree);
	write_file(path, "x");
	/* Symlinks to outside, to a directory and to a file: only the links go. */
	snprintf(path, sizeof(path), "%s/a/link-dir", tree);
	assert_int_equal(symlink(outside, path), 0);
	snprintf(path, sizeof(path), "%s/link-file", tree);
	snprintf(outside + strlen(outside), sizeof(outside) - strlen(outside), "/keep");
	assert_int_equal(symlink(outside, path), 0);

	assert_int_equal(exec_remove_tree(tree), 0);
	assert_int_not_equal(lstat(tree, &st), 0);
	assert_int_equal(stat(outside, &st), 0);     /* the target survived */
	assert_int_equal(exec_remove_tree(tree), 0); /* already gone: fine */
	snprintf(path, sizeof(path), "%s/outside/keep", base);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/outside", base);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(rmdir(base), 0);
}

static void
test_seccomp_filters(void **state)
{
	const struct sock_fprog *const progs[] = {&exec_seccomp_sandbox_bpf,
	                                          &exec_seccomp_gate_bpf};

	(void)state;
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		/* Dozens of rules: far more than an empty allow-all filter. */
		assert_true(progs[i]->len > 40);
		assert_true(progs[i]->len <= BPF_MAXINSNS);
		assert_non_null(progs[i]->filter);
		/* The last instruction returns: a filter that falls off its end
		 * is refused by the kernel. */
		assert_int_equal(BPF_CLASS(progs[i]->filter[progs[i]->len - 1].code), BPF_RET);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_from_wait),
	    cmocka_unit_test(test_status_from_exec_errno),
	    cmocka_unit_test(test_tags),
	    cmocka_unit_test(test_limits_plan),
	    cmocka_unit_test(test_remove_tree),
	    cmocka_unit_test(test_seccomp_filters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
