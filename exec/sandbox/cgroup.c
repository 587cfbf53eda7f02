/*
 * A sandbox's cgroup: memory, pids and CPU accounting. cgroup v2 where its
 * controllers are enabled for our subtree, v1 hierarchies otherwise (per
 * controller, so hybrid systems work). A v2 directory without controllers is
 * made only when v1 lacks pids or cpuacct (it then gives cgroup.kill and
 * cpu.stat): moving a pid into any hierarchy costs an RCU grace period (below).
 */
#include "exec/sandbox/exec.h"
#include "exec/sandbox/diagnose.h"
#include "exec/sandbox/userns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gateway/core/fdio.h"

/*
 * On a v2 system our own cgroup usually holds processes (ours), so the "no
 * internal processes" rule forbids enabling controllers for its children.
 * Root then uses a cgroup of its own under the hierarchy's root, which may.
 */
#define V2_SHARED "tollgate"

struct exec_cgroup {
	char v2[PATH_MAX];     /* our directory in the unified hierarchy, or "" */
	char v1_mem[PATH_MAX]; /* v1 directories, "" when unused */
	char v1_pids[PATH_MAX];
	char v1_cpuacct[PATH_MAX];
	bool v2_memory, v2_pids;
	/* v1 "tasks" files the child writes "0" to (join_self), or -1. */
	int join_fd[3];
};

/* Where each hierarchy is mounted and where this process sits in it. */
struct cg_layout {
	/* Mount points, from one read of /proc/self/mountinfo ("" if none). */
	char v2_mnt[PATH_MAX], mem_mnt[PATH_MAX], pids_mnt[PATH_MAX], cpuacct_mnt[PATH_MAX];
	char v2_parent[PATH_MAX];
	char v2_shared[PATH_MAX]; /* MOUNT/tollgate, when it exists */
	char mem_parent[PATH_MAX];
	char pids_parent[PATH_MAX];
	char cpuacct_parent[PATH_MAX];
};

static int
read_at(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return gw_read_text(path, buf, len);
}

static int
write_small(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return gw_write_text(path, text);
}

static bool
has_word(const char *list, const char *word, char sep)
{
	size_t n = strlen(word);

	for (const char *p = list; p != NULL && *p != '\0';) {
		if (strncmp(p, word, n) == 0 &&
		    (p[n] == sep || p[n] == '\0' || p[n] == '\n' || p[n] == ' ' || p[n] == ','))
			return true;
		p = strchr(p, sep);
		if (p != NULL)
			p++;
	}
	return false;
}

/* Our own path in the hierarchy with this controller ("" for v2). */
static bool
own_path(const char *cgroup_file, const char *controller, char *out, size_t len)
{
	char line[PATH_MAX + 128];
	const char *p = cgroup_file, *nl, *c1, *c2;
	size_t l;

	while (*p != '\0') {
		nl = strchr(p, '\n');
		l = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (l < sizeof(line)) {
			memcpy(line, p, l);
			line[l] = '\0';
			c1 = strchr(line, ':');
			c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
			if (c2 != NULL) {
				char ctrls[256];
				size_t cl = (size_t)(c2 - c1 - 1);

				if (cl < sizeof(ctrls)) {
					memcpy(ctrls, c1 + 1, cl);
					ctrls[cl] = '\0';
					if ((controller[0] == '\0' && cl == 0 &&
					     strncmp(line, "0:", 2) == 0) ||
					    (controller[0] != '\0' &&
					     has_word(ctrls, controller, ','))) {
						snprintf(out, len, "%s", c2 + 1);
						return true;
					}
				}
			}
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	return false;
}

/*
 * Mount points of v2 and of the v1 hierarchies we use, in one pass over
 * mountinfo (it used to be read once per controller: five reads a run).
 */
static void
mount_points(struct cg_layout *lay)
{
	char line[4096], mnt[PATH_MAX], fstype[64], opts[1024];
	struct {
		const char *controller;
		char *out;
	} want[] = {
	    {"", lay->v2_mnt},
	    {"memory", lay->mem_mnt},
	    {"pids", lay->pids_mnt},
	    {"cpuacct", lay->cpuacct_mnt},
	};
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *dash = strstr(line, " - ");

		if (dash == NULL)
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if (sscanf(dash + 3, "%63s %*s %1023s", fstype, opts) != 2)
			continue;
		/* The first mount of each wins, as the earlier per-controller scan did. */
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			bool match;

			if (want[i].out[0] != '\0')
				continue;
			if (want[i].controller[0] == '\0')
				match = strcmp(fstype, "cgroup2") == 0;
			else
				match = strcmp(fstype, "cgroup") == 0 &&
				        has_word(opts, want[i].controller, ',');
			if (match)
				snprintf(want[i].out, PATH_MAX, "%s", mnt);
		}
	}
	fclose(f);
}

static void
layout_one(const char *cgfile, const char *mnt, const char *controller, char *out, size_t len)
{
	char own[PATH_MAX];

	out[0] = '\0';
	if (mnt[0] == '\0' || !own_path(cgfile, controller, own, sizeof(own)))
		return;
	if (strcmp(own, "/") == 0)
		own[0] = '\0';
	if (snprintf(out, len, "%s%s", mnt, own) >= (int)len)
		out[0] = '\0';
	if (access(out, W_OK) != 0)
		out[0] = '\0';
}

/*
 * Where V2_SHARED lives: the hierarchy's root for root; rootless, the
 * subtree systemd delegates to the user (user@UID.service, whose processes
 * sit in its init.scope, so its children may have controllers). Untested
 * on the v1-only hosts tollgate's CI runs on. false when there is none.
 */
static bool
shared_base(const struct cg_layout *lay, char *out, size_t len)
{
	unsigned int uid = (unsigned int)exec_rootless_host_uid();
	int n;

	if (lay->v2_mnt[0] == '\0')
		return false;
	if (!exec_rootless())
		n = snprintf(out, len, "%s", lay->v2_mnt);
	else
		n = snprintf(out, len, "%s/user.slice/user-%u.slice/user@%u.service", lay->v2_mnt,
		             uid, uid);
	return n > 0 && (size_t)n < len && access(out, W_OK) == 0;
}

static void
layout_get(struct cg_layout *lay)
{
	char cgfile[8192], base[PATH_MAX];

	memset(lay, 0, sizeof(*lay));
	if (gw_read_text("/proc/self/cgroup", cgfile, sizeof(cgfile)) != 0)
		return;
	mount_points(lay);
	layout_one(cgfile, lay->v2_mnt, "", lay->v2_parent, sizeof(lay->v2_parent));
	if (lay->v2_parent[0] != '\0' && shared_base(lay, base, sizeof(base)) &&
	    snprintf(lay->v2_shared, sizeof(lay->v2_shared), "%s/" V2_SHARED, base) <
	        (int)sizeof(lay->v2_shared) &&
	    access(lay->v2_shared, W_OK) != 0)
		lay->v2_shared[0] = '\0';
	layout_one(cgfile, lay->mem_mnt, "memory", lay->mem_parent, sizeof(lay->mem_parent));
	layout_one(cgfile, lay->pids_mnt, "pids", lay->pids_parent, sizeof(lay->pids_parent));
	layout_one(cgfile, lay->cpuacct_mnt, "cpuacct", lay->cpuacct_parent,
	           sizeof(lay->cpuacct_parent));
}

int
exec_cgroup_dirs(char dirs[][PATH_MAX], size_t max)
{
	struct cg_layout lay;
	const char *all[5];
	size_t n = 0;

	layout_get(&lay);
	all[0] = lay.v2_parent;
	all[1] = lay.mem_parent;
	all[2] = lay.pids_parent;
	all[3] = lay.cpuacct_parent;
	all[4] = lay.v2_shared;
	for (size_t i = 0; i < 5 && n < max; i++) {
		if (all[i][0] != '\0')
			snprintf(dirs[n++], PATH_MAX, "%s", all[i]);
	}
	return (int)n;
}

/* Makes parent/name; "" in out when that fails (the hierarchy is skipped). */
static void
make_dir(const char *parent, const char *name, char *out, size_t len)
{
	out[0] = '\0';
	if (parent[0] == '\0')
		return;
	if (snprintf(out, len, "%s/%s", parent, name) >= (int)len ||
	    (mkdir(out, 0755) != 0 && errno != EEXIST))
		out[0] = '\0';
}

/*
 * A v2 directory's cgroup.subtree_control and cgroup.controllers, each read
 * once whatever the number of controllers asked about (a start asks about
 * memory and pids, and the shared parent's too).
 */
struct v2_dir {
	char path[PATH_MAX];
	bool subtree_read, controllers_read;
	char subtree[512];     /* "" when unreadable */
	char controllers[512]; /* "" when unreadable */
};

static void
v2_dir_init(struct v2_dir *d, const char *path)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
}

static const char *
v2_dir_file(struct v2_dir *d, bool controllers)
{
	char path[PATH_MAX + 32];
	bool *done = controllers ? &d->controllers_read : &d->subtree_read;
	char *buf = controllers ? d->controllers : d->subtree;

	if (!*done) {
		*done = true;
		snprintf(path, sizeof(path), "%s/%s", d->path,
		         controllers ? "cgroup.controllers" : "cgroup.subtree_control");
		if (gw_read_text(path, buf, sizeof(d->subtree)) != 0)
			buf[0] = '\0';
	}
	return buf;
}

/* Enables a v2 controller for our children, if the parent offers it. */
static bool
v2_enable(struct v2_dir *parent, const char *controller)
{
	char text[64];

	if (has_word(v2_dir_file(parent, false), controller, ' '))
		return true;
	if (!has_word(v2_dir_file(parent, true), controller, ' '))
		return false;
	snprintf(text, sizeof(text), "+%s", controller);
	return write_small(parent->path, "cgroup.subtree_control", text) == 0;
}

/*
 * MOUNT/tollgate, made when the hierarchy's root offers memory or pids to
 * its children and our own cgroup cannot. false when it cannot be used.
 * known: a directory already read (the own parent, often the same one).
 */
static bool
v2_shared_parent(struct cg_layout *lay, struct v2_dir *known)
{
	char base[PATH_MAX];
	struct v2_dir other, *d = &other;
	const char *subtree;

	if (!shared_base(lay, base, sizeof(base)))
		return false;
	if (strcmp(base, known->path) == 0)
		d = known;
	else
		v2_dir_init(&other, base);
	subtree = v2_dir_file(d, false);
	if (!has_word(subtree, "memory", ' ') && !has_word(subtree, "pids", ' '))
		return false;
	if (snprintf(lay->v2_shared, sizeof(lay->v2_shared), "%s/" V2_SHARED, base) >=
	    (int)sizeof(lay->v2_shared))
		return false;
	if (mkdir(lay->v2_shared, 0755) != 0 && errno != EEXIST) {
		lay->v2_shared[0] = '\0';
		return false;
	}
	return true;
}

/*
 * Why the child joins its v1 cgroups itself: moving another process (a pid
 * written to cgroup.procs) takes cgroup_threadgroup_rwsem for writing, whose
 * writer waits for an RCU grace period (5 to 20 ms here, on every run), but
 * a single-threaded task writing "0" (itself) to a v1 "tasks" file needs no
 * threadgroup lock at all (~50 us). The files are opened here, by root, so
 * the child (already in its user namespace) passes the permission check,
 * which looks at the opener's credentials.
 */
static int
open_join_fds(struct exec_cgroup *cg)
{
	const char *dirs[3] = {cg->v1_mem, cg->v1_pids, cg->v1_cpuacct};
	char path[PATH_MAX];

	for (size_t i = 0; i < 3; i++) {
		if (dirs[i][0] == '\0')
			continue;
		if (snprintf(path, sizeof(path), "%s/tasks", dirs[i]) >= (int)sizeof(path))
			return -ENAMETOOLONG;
		cg->join_fd[i] = open(path, O_WRONLY | O_CLOEXEC);
		if (cg->join_fd[i] < 0)
			return -errno;
	}
	return 0;
}

static void
close_join_fds(struct exec_cgroup *cg)
{
	for (size_t i = 0; i < 3; i++) {
		if (cg->join_fd[i] >= 0)
			close(cg->join_fd[i]);
		cg->join_fd[i] = -1;
	}
}

int
exec_cgroup_new(const char *name, const struct exec_limits *l, struct exec_cgroup **out, char *err,
                size_t errlen)
{
	struct exec_cgroup *cg;
	struct cg_layout lay;
	const char *v2_parent;
	char num[32];
	int rc = 0;

	*out = NULL;
	cg = calloc(1, sizeof(*cg));
	if (cg == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < 3; i++)
		cg->join_fd[i] = -1;
	layout_get(&lay);
	v2_parent = lay.v2_parent;
	if (v2_parent[0] != '\0') {
		struct v2_dir own, shared;

		v2_dir_init(&own, v2_parent);
		cg->v2_memory = v2_enable(&own, "memory");
		cg->v2_pids = v2_enable(&own, "pids");
		if ((!cg->v2_memory || !cg->v2_pids) && v2_shared_parent(&lay, &own)) {
			bool m, p;

			v2_dir_init(&shared, lay.v2_shared);
			m = v2_enable(&shared, "memory");
			p = v2_enable(&shared, "pids");

			if ((int)m + (int)p > (int)cg->v2_memory + (int)cg->v2_pids) {
				v2_parent = lay.v2_shared;
				cg->v2_memory = m;
				cg->v2_pids = p;
			}
		}
		if (cg->v2_memory || cg->v2_pids)
			make_dir(v2_parent, name, cg->v2, sizeof(cg->v2));
		if (cg->v2[0] == '\0')
			cg->v2_memory = cg->v2_pids = false;
	}
	if (!cg->v2_memory)
		make_dir(lay.mem_parent, name, cg->v1_mem, sizeof(cg->v1_mem));
	if (!cg->v2_pids)
		make_dir(lay.pids_parent, name, cg->v1_pids, sizeof(cg->v1_pids));
	make_dir(lay.cpuacct_parent, name, cg->v1_cpuacct, sizeof(cg->v1_cpuacct));
	/*
	 * A v2 cgroup without controllers only for what v1 cannot give here:
	 * killing by a pid list (v1 pids) and CPU accounting (v1 cpuacct). On a
	 * hybrid host it would cost one grace period (the move) for nothing.
	 */
	if (cg->v2[0] == '\0' && v2_parent[0] != '\0' &&
	    (cg->v1_pids[0] == '\0' || cg->v1_cpuacct[0] == '\0'))
		make_dir(v2_parent, name, cg->v2, sizeof(cg->v2));
	rc = open_join_fds(cg);
	if (rc != 0) {
		snprintf(err, errlen, "cgroup tasks: %s", strerror(-rc));
		goto out;
	}

	if (l->ram_mb > 0) {
		snprintf(num, sizeof(num), "%lld", (long long)l->ram_mb * 1024 * 1024);
		if (cg->v2_memory) {
			rc = write_small(cg->v2, "memory.max", num);
			if (rc == 0)
				(void)write_small(cg->v2, "memory.swap.max", "0");
		} else if (cg->v1_mem[0] != '\0') {
			rc = write_small(cg->v1_mem, "memory.limit_in_bytes", num);
			if (rc == 0)
				(void)write_small(cg->v1_mem, "memory.memsw.limit_in_bytes", num);
		}
		if (rc != 0) {
			snprintf(err, errlen, "cgroup memory limit: %s", strerror(-rc));
			goto out;
		}
	}
	if (l->pids > 0) {
		/* One more for the sandbox's init. */
		snprintf(num, sizeof(num), "%ld", l->pids + 1);
		if (cg->v2_pids)
			rc = write_small(cg->v2, "pids.max", num);
		else if (cg->v1_pids[0] != '\0')
			rc = write_small(cg->v1_pids, "pids.max", num);
		if (rc != 0) {
			snprintf(err, errlen, "cgroup pids limit: %s", strerror(-rc));
			goto out;
		}
	}
out:
	if (rc != 0) {
		exec_cgroup_free(cg);
		return rc;
	}
	*out = cg;
	return 0;
}

/* Whether name is off in /proc/cgroups (its "enabled" column 0). */
static bool
controller_disabled(const char *name)
{
	char buf[2048], row[64];
	size_t n = strlen(name);

	if (gw_read_text("/proc/cgroups", buf, sizeof(buf)) != 0)
		return false;
	for (const char *p = buf; p != NULL && *p != '\0';) {
		if (strncmp(p, name, n) == 0 && (p[n] == '\t' || p[n] == ' ')) {
			unsigned int hier, num, enabled;

			snprintf(row, sizeof(row), "%.*s", (int)strcspn(p, "\n"), p);
			return sscanf(row + n, "%u %u %u", &hier, &num, &enabled) == 3 &&
			       enabled == 0;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return false;
}

void
exec_cgroup_facts_read(struct exec_cgroup_facts *f)
{
	struct cg_layout lay;
	char cgfile[8192], path[PATH_MAX], buf[512], prefix[128];
	unsigned int uid = (unsigned int)exec_rootless_host_uid();

	memset(f, 0, sizeof(*f));
	memset(&lay, 0, sizeof(lay));
	mount_points(&lay);
	f->rootless = exec_rootless();
	f->uid = uid;
	f->v2_mounted = lay.v2_mnt[0] != '\0';
	f->v1_memory = lay.mem_mnt[0] != '\0';
	f->memory_disabled = controller_disabled("memory");
	f->read_only = (f->v2_mounted && access(lay.v2_mnt, W_OK) != 0 && errno == EROFS) ||
	               (f->v1_memory && access(lay.mem_mnt, W_OK) != 0 && errno == EROFS);
	if (f->v2_mounted && read_at(lay.v2_mnt, "cgroup.controllers", buf, sizeof(buf)) == 0)
		f->v2_controllers = has_word(buf, "memory", ' ') && has_word(buf, "pids", ' ');
	if (gw_read_text("/proc/self/cgroup", cgfile, sizeof(cgfile)) == 0 &&
	    !own_path(cgfile, "", f->own_cgroup, sizeof(f->own_cgroup)))
		f->own_cgroup[0] = '\0';
	if (!f->v2_mounted)
		return;
	snprintf(prefix, sizeof(prefix), "/user.slice/user-%u.slice/user@%u.service", uid, uid);
	if (snprintf(path, sizeof(path), "%s%s", lay.v2_mnt, prefix) >= (int)sizeof(path))
		return;
	f->user_service = access(path, F_OK) == 0;
	f->user_service_mine = f->user_service && access(path, W_OK) == 0;
	if (read_at(path, "cgroup.controllers", buf, sizeof(buf)) == 0)
		f->user_delegated = has_word(buf, "memory", ' ') && has_word(buf, "pids", ' ');
	f->inside_user_service =
	    strncmp(f->own_cgroup, prefix, strlen(prefix)) == 0 &&
	    (f->own_cgroup[strlen(prefix)] == '/' || f->own_cgroup[strlen(prefix)] == '\0');
}

bool
exec_cgroup_has_memory(const struct exec_cgroup *cg)
{
	return cg != NULL && (cg->v2_memory || cg->v1_mem[0] != '\0');
}

int
exec_cgroup_join_self(struct exec_cgroup *cg)
{
	ssize_t n;
	int rc = 0;

	if (cg == NULL)
		return 0;
	for (size_t i = 0; i < 3 && rc == 0; i++) {
		if (cg->join_fd[i] < 0)
			continue;
		do {
			n = write(cg->join_fd[i], "0", 1);
		} while (n < 0 && errno == EINTR);
		if (n < 0)
			rc = -errno;
	}
	close_join_fds(cg);
	return rc;
}

int
exec_cgroup_attach(struct exec_cgroup *cg, pid_t pid)
{
	char num[32];
	int rc = 0;

	/* The child joined the v1 ones itself; its copies of the fds are its own. */
	close_join_fds(cg);
	if (cg->v2[0] != '\0') {
		snprintf(num, sizeof(num), "%d", (int)pid);
		rc = write_small(cg->v2, "cgroup.procs", num);
	}
	return rc;
}

void
exec_cgroup_kill_listed(const char *dir)
{
	char path[PATH_MAX], buf[8192];
	char *p, *end;
	long pid;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path) ||
	    gw_read_text(path, buf, sizeof(buf)) != 0)
		return;
	for (p = buf; *p != '\0'; p = end) {
		pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 1)
			kill((pid_t)pid, SIGKILL);
		while (*end == '\n')
			end++;
	}
}

void
exec_cgroup_kill(struct exec_cgroup *cg)
{
	if (cg == NULL)
		return;
	if (cg->v2[0] != '\0' && write_small(cg->v2, "cgroup.kill", "1") == 0)
		return;
	if (cg->v1_pids[0] != '\0')
		exec_cgroup_kill_listed(cg->v1_pids);
	else if (cg->v1_mem[0] != '\0')
		exec_cgroup_kill_listed(cg->v1_mem);
}

double
exec_cgroup_cpu_seconds(struct exec_cgroup *cg)
{
	char buf[1024];
	const char *u;

	if (cg == NULL)
		return -1;
	if (cg->v1_cpuacct[0] != '\0') {
		if (read_at(cg->v1_cpuacct, "cpuacct.usage", buf, sizeof(buf)) == 0)
			return (double)strtoull(buf, NULL, 10) / 1e9;
	}
	if (cg->v2[0] != '\0') {
		if (read_at(cg->v2, "cpu.stat", buf, sizeof(buf)) == 0) {
			u = strstr(buf, "usage_usec ");
			if (u != NULL)
				return (double)strtoull(u + 11, NULL, 10) / 1e6;
		}
	}
	return -1;
}

uint64_t
exec_cgroup_peak_memory(struct exec_cgroup *cg)
{
	char buf[64];
	int rc;

	if (cg == NULL)
		return 0;
	if (cg->v2_memory)
		rc = read_at(cg->v2, "memory.peak", buf, sizeof(buf));
	else if (cg->v1_mem[0] != '\0')
		rc = read_at(cg->v1_mem, "memory.max_usage_in_bytes", buf, sizeof(buf));
	else
		return 0;
	if (rc != 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

/*
 * The "oom_kill N" line of a flat keyed file. Matched as a whole key at the
 * start of a line: v1's oom_control also has "oom_kill_disable", v2's
 * memory.events "oom_group_kill".
 */
static int
keyed_value(const char *text, const char *key, uint64_t *out)
{
	size_t n = strlen(key);
	const char *p = text;
	char *end;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, n) == 0 && p[n] == ' ') {
			errno = 0;
			*out = strtoull(p + n + 1, &end, 10);
			if (end == p + n + 1 || errno != 0)
				return -EINVAL;
			return 0;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return -ENOENT;
}

int
exec_cgroup_oom_kills(struct exec_cgroup *cg, uint64_t *out)
{
	char buf[1024];
	int rc;

	*out = 0;
	if (cg == NULL)
		return -ENOENT;
	/* The count is the memory controller's: with v2 memory, memory.events;
	 * a v2 directory without it has no such file, and v1's is the one. */
	if (cg->v2_memory)
		rc = read_at(cg->v2, "memory.events", buf, sizeof(buf));
	else if (cg->v1_mem[0] != '\0')
		rc = read_at(cg->v1_mem, "memory.oom_control", buf, sizeof(buf));
	else
		return -ENOENT;
	if (rc != 0)
		return rc;
	/* v1 before 4.13 has no oom_kill line: -ENOENT, the count is unknown. */
	return keyed_value(buf, "oom_kill", out);
}

/* rmdir, waiting a little for exiting tasks to leave (bounded: ~1 s). */
static void
remove_dir(const char *dir)
{
	struct timespec ts = {0, 10 * 1000 * 1000};

	if (dir[0] == '\0')
		return;
	for (int i = 0; i < 100; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			return;
		nanosleep(&ts, NULL);
	}
}

void
exec_cgroup_free(struct exec_cgroup *cg)
{
	if (cg == NULL)
		return;
	close_join_fds(cg);
	remove_dir(cg->v2);
	remove_dir(cg->v1_mem);
	remove_dir(cg->v1_pids);
	remove_dir(cg->v1_cpuacct);
	free(cg);
}
