/*
 * Why the machine refused (exec/sandbox/diagnose.c), as tables: each setting or
 * condition gives its cause and its fix, including those this machine
 * cannot produce (Debian's kernel.unprivileged_userns_clone, AppArmor's
 * restriction, a unified cgroup v2 host with or without systemd's
 * delegation, a kernel without Landlock); tests/integration/
 * test_env_errors.sh produces the others for real.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "exec/sandbox/diagnose.h"

/* A host that allows everything: a case changes what it is about. */
static struct exec_userns_facts
open_host(int err, bool privileged)
{
	return (struct exec_userns_facts){
	    .err = err,
	    .privileged = privileged,
	    .seccomp = false,
	    .chrooted = 0,
	    .max_user_ns = 15000,
	    .unprivileged_clone = -1,
	    .apparmor_restrict = -1,
	};
}

static void
expect_has(const char *what, const char *text, const char *part)
{
	if (strstr(text, part) == NULL)
		fail_msg("%s: '%s' lacks '%s'", what, text, part);
}

static void
test_userns(void **state)
{
	static const struct {
		const char *what;
		int err;
		bool privileged, seccomp;
		int chrooted;
		long max;
		int unpriv, apparmor;
		bool explained;
		const char *why, *fix;
	} cases[] = {
	    {"max 0 (user)", ENOSPC, false, false, 0, 0, -1, -1, true,
	     "user.max_user_namespaces is 0", "; sysctl -w user.max_user_namespaces=15000 as root"},
	    {"max 0 (root)", ENOSPC, true, false, 0, 0, -1, -1, true,
	     "user.max_user_namespaces is 0", "; sysctl -w user.max_user_namespaces=15000 ("},
	    {"limit reached", ENOSPC, false, false, 0, 7, -1, -1, true,
	     "the limit of user namespaces is reached (user.max_user_namespaces=7", "; raise it"},
	    {"nested too deep", EUSERS, true, false, 0, 100, -1, -1, true, "32 user namespaces",
	     "; run tollgate from a less nested one"},
	    {"chroot (root)", EPERM, true, false, 1, 100, -1, -1, true,
	     "the kernel refuses them inside a chroot", "; run tollgate outside the chroot"},
	    {"chroot wins over Debian's switch", EPERM, false, false, 1, 100, 0, -1, true,
	     "inside a chroot", "pivot_root"},
	    {"Debian's switch", EPERM, false, false, 0, 100, 0, -1, true,
	     "kernel.unprivileged_userns_clone is 0",
	     "; sysctl -w kernel.unprivileged_userns_clone=1 as root, or run tollgate as root"},
	    {"Debian's switch does not stop root", EPERM, true, false, 0, 100, 0, -1, false,
	     "the kernel refused one (unshare: ", NULL},
	    {"both refuse: Debian's first", EPERM, false, false, 0, 100, 0, 1, true, NULL, NULL},
	    {"AppArmor alone", EPERM, false, false, 0, 100, -1, 1, true,
	     "AppArmor restricts them for users (kernel.apparmor_restrict_unprivileged_userns=1)",
	     "; an AppArmor profile for tollgate with the 'userns,' rule"},
	    {"AppArmor off", EPERM, false, false, 0, 100, -1, 0, false,
	     "the kernel refused one (unshare: ", "; run tollgate as root"},
	    {"seccomp ENOSYS", ENOSYS, true, true, -1, 100, -1, -1, true,
	     "a seccomp filter on this process answers unshare with ENOSYS",
	     "--security-opt seccomp=unconfined"},
	    {"no clone3", ENOSYS, true, false, -1, 100, -1, -1, true, "this kernel has no unshare",
	     "; a newer kernel"},
	    {"seccomp EPERM", EPERM, true, true, 0, 100, -1, -1, true,
	     "a seccomp filter on this process refuses them", "; run the container with"},
	    {"unknown", EINVAL, true, false, -1, 100, -1, -1, false,
	     "the kernel refused one (unshare: Invalid argument)", NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct exec_userns_facts f = open_host(cases[i].err, cases[i].privileged);
		char buf[1024];
		bool explained;

		f.seccomp = cases[i].seccomp;
		f.chrooted = cases[i].chrooted;
		f.max_user_ns = cases[i].max;
		f.unprivileged_clone = cases[i].unpriv;
		f.apparmor_restrict = cases[i].apparmor;
		explained = exec_userns_why(&f, "unshare", buf, sizeof(buf));
		/* Debian's switch first, when both refuse. */
		if (cases[i].why == NULL) {
			expect_has(cases[i].what, buf, "kernel.unprivileged_userns_clone");
			continue;
		}
		if (explained != cases[i].explained)
			fail_msg("%s: explained %d: %s", cases[i].what, explained, buf);
		expect_has(cases[i].what, buf, cases[i].why);
		if (cases[i].fix != NULL)
			expect_has(cases[i].what, buf, cases[i].fix);
		if (strchr(buf, '\n') != NULL)
			fail_msg("%s: more than one line", cases[i].what);
	}
}

static void
test_setup_failure(void **state)
{
	char buf[1024];

	(void)state;
	exec_setup_failure_why("mount /proc", EPERM, "/proc/kcore", buf, sizeof(buf));
	expect_has("masked /proc", buf,
	           "sandbox set-up failed at 'mount /proc': Operation not permitted; /proc/kcore "
	           "is mounted over");
	expect_has("masked /proc", buf, "--security-opt systempaths=unconfined");
	/* Nothing over /proc, or another step: the plain line. */
	exec_setup_failure_why("mount /proc", EPERM, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "sandbox set-up failed at 'mount /proc': Operation not permitted");
	exec_setup_failure_why("pivot_root", EPERM, "/proc/kcore", buf, sizeof(buf));
	assert_string_equal(buf, "sandbox set-up failed at 'pivot_root': Operation not permitted");
	exec_setup_failure_why("mount /proc", EBUSY, "/proc/kcore", buf, sizeof(buf));
	assert_string_equal(buf, "sandbox set-up failed at 'mount /proc': Device or resource busy");
}

static void
test_cgroup(void **state)
{
	/* A unified host where systemd delegates, and tollgate runs inside. */
	const struct exec_cgroup_facts good = {
	    .rootless = true,
	    .uid = 1000,
	    .v2_mounted = true,
	    .v2_controllers = true,
	    .user_service = true,
	    .user_service_mine = true,
	    .user_delegated = true,
	    .inside_user_service = true,
	    .own_cgroup = "/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope",
	};
	struct exec_cgroup_facts f;
	char buf[1024];

	(void)state;
	assert_null(exec_cgroup_why(&good, buf, sizeof(buf)));
	f = good;
	f.inside_user_service = false;
	snprintf(f.own_cgroup, sizeof(f.own_cgroup), "/user.slice/user-1000.slice/session-3.scope");
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("outside", buf,
	           "tollgate runs in /user.slice/user-1000.slice/session-3.scope, "
	           "outside user@1000.service");
	expect_has("outside", buf, "; start it inside: systemd-run --user --scope tollgate");
	f = good;
	f.user_delegated = false;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("not delegated", buf,
	           "systemd delegates no memory and pids to user@1000.service");
	expect_has("not delegated", buf, "Delegate=cpu cpuset io memory pids");
	f = good;
	f.user_service = f.user_service_mine = f.user_delegated = false;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("no user manager", buf, "no systemd user manager runs for uid 1000");
	expect_has("no user manager", buf, "loginctl enable-linger USER");
	f = good;
	f.v2_controllers = false;
	f.v1_memory = true;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("hybrid", buf,
	           "cgroup v1's (a hybrid host); boot with "
	           "systemd.unified_cgroup_hierarchy=1");
	f.v2_mounted = false;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("v1 only", buf, "(no cgroup2 is mounted)");
	f = good;
	f.memory_disabled = true;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("memory off", buf, "cgroup_disable=memory");
	f = good;
	f.read_only = true;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("read-only", buf, "mounted read-only (a container's); give the container");
	/* Root: only a missing memory controller is a cause. */
	f = (struct exec_cgroup_facts){.v1_memory = true};
	assert_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	f.v1_memory = false;
	assert_non_null(exec_cgroup_why(&f, buf, sizeof(buf)));
	expect_has("root, none", buf, "no cgroup hierarchy here offers the memory controller");
}

static void
test_landlock(void **state)
{
	char buf[1024];

	(void)state;
	exec_landlock_why(EOPNOTSUPP, "lockdown,capability,yama,apparmor", buf, sizeof(buf));
	expect_has("off at boot", buf,
	           "booted without it in its list of security modules (active: "
	           "lockdown,capability,yama,apparmor)");
	expect_has("off at boot", buf,
	           "; add landlock to the lsm= kernel parameter "
	           "(lsm=landlock,lockdown,capability,yama,apparmor) and reboot");
	exec_landlock_why(EOPNOTSUPP, NULL, buf, sizeof(buf));
	expect_has("off at boot, list unknown", buf, "(active: unknown)");
	exec_landlock_why(ENOSYS, NULL, buf, sizeof(buf));
	expect_has("not built", buf,
	           "built without Landlock; boot one built with "
	           "CONFIG_SECURITY_LANDLOCK=y");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_userns),
	    cmocka_unit_test(test_setup_failure),
	    cmocka_unit_test(test_cgroup),
	    cmocka_unit_test(test_landlock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
