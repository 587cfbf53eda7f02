/*
 * A sandbox's cgroup: memory, pids and CPU accounting. cgroup v2 where its
 * controllers are enabled for our subtree, v1 hierarchies otherwise (per
 * controller, so hybrid systems work). A v2 directory is made even without
 * controllers: cgroup.kill and cpu.stat need none.
 */
#include "exec/exec.h"

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
};

/* Where each hierarchy is mounted and where this process sits in it. */
struct cg_layout {
	char v2_parent[PATH_MAX];
	char v2_shared[PATH_MAX]; /* MOUNT/tollgate, when it exists */
	char mem_parent[PATH_MAX];
	char pids_parent[PATH_MAX];
	char cpuacct_parent[PATH_MAX];
};

static int
read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	size_t got = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return 0;
}

static int
read_at(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return read_small(path, buf, len);
}

static int
write_small(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];
	size_t len = strlen(text);
	ssize_t n;
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do {
		n = write(fd, text, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		rc = -errno;
	close(fd);
	return rc;
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

/* Mount point of the v1 hierarchy holding controller, or of v2 (""). */
static bool
mount_point(const char *controller, char *out, size_t len)
{
	char line[4096], mnt[PATH_MAX], fstype[64], opts[1024];
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		const char *dash = strstr(line, " - ");

		if (dash == NULL)
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if (sscanf(dash + 3, "%63s %*s %1023s", fstype, opts) != 2)
			continue;
		if (controller[0] == '\0' && strcmp(fstype, "cgroup2") == 0)
			found = true;
		else if (controller[0] != '\0' && strcmp(fstype, "cgroup") == 0 &&
		         has_word(opts, controller, ','))
			found = true;
		if (found)
			snprintf(out, len, "%s", mnt);
	}
	fclose(f);
	return found;
}

static void
layout_one(const char *cgfile, const char *controller, char *out, size_t len)
{
	char mnt[PATH_MAX], own[PATH_MAX];

	out[0] = '\0';
	if (!mount_point(controller, mnt, sizeof(mnt)) ||
	    !own_path(cgfile, controller, own, sizeof(own)))
		return;
	if (strcmp(own, "/") == 0)
		own[0] = '\0';
	if (snprintf(out, len, "%s%s", mnt, own) >= (int)len)
		out[0] = '\0';
	if (access(out, W_OK) != 0)
		out[0] = '\0';
}

static void
layout_get(struct cg_layout *lay)
{
	char cgfile[8192], mnt[PATH_MAX];

	memset(lay, 0, sizeof(*lay));
	if (read_small("/proc/self/cgroup", cgfile, sizeof(cgfile)) != 0)
		return;
	layout_one(cgfile, "", lay->v2_parent, sizeof(lay->v2_parent));
	if (lay->v2_parent[0] != '\0' && mount_point("", mnt, sizeof(mnt)) &&
	    snprintf(lay->v2_shared, sizeof(lay->v2_shared), "%s/" V2_SHARED, mnt) <
	        (int)sizeof(lay->v2_shared) &&
	    access(lay->v2_shared, W_OK) != 0)
		lay->v2_shared[0] = '\0';
	layout_one(cgfile, "memory", lay->mem_parent, sizeof(lay->mem_parent));
	layout_one(cgfile, "pids", lay->pids_parent, sizeof(lay->pids_parent));
	layout_one(cgfile, "cpuacct", lay->cpuacct_parent, sizeof(lay->cpuacct_parent));
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

/* Enables a v2 controller for our children, if the parent offers it. */
static bool
v2_enable(const char *parent, const char *controller)
{
	char buf[512], path[PATH_MAX], text[64];

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", parent);
	if (read_small(path, buf, sizeof(buf)) == 0 && has_word(buf, controller, ' '))
		return true;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", parent);
	if (read_small(path, buf, sizeof(buf)) != 0 || !has_word(buf, controller, ' '))
		return false;
	snprintf(text, sizeof(text), "+%s", controller);
	return write_small(parent, "cgroup.subtree_control", text) == 0;
}

/*
 * MOUNT/tollgate, made when the hierarchy's root offers memory or pids to
 * its children and our own cgroup cannot. false when it cannot be used.
 */
static bool
v2_shared_parent(struct cg_layout *lay)
{
	char mnt[PATH_MAX], buf[512], path[PATH_MAX];

	if (!mount_point("", mnt, sizeof(mnt)))
		return false;
	if (snprintf(path, sizeof(path), "%s/cgroup.subtree_control", mnt) >= (int)sizeof(path) ||
	    read_small(path, buf, sizeof(buf)) != 0 ||
	    (!has_word(buf, "memory", ' ') && !has_word(buf, "pids", ' ')))
		return false;
	if (snprintf(lay->v2_shared, sizeof(lay->v2_shared), "%s/" V2_SHARED, mnt) >=
	    (int)sizeof(lay->v2_shared))
		return false;
	if (mkdir(lay->v2_shared, 0755) != 0 && errno != EEXIST) {
		lay->v2_shared[0] = '\0';
		return false;
	}
	return true;
}

int
exec_cgroup_new(const char *name, const struct exec_limits *l, struct exec_cgroup **out, char *err,
                size_t errlen)
{
	struct exec_cgroup *cg;
	struct cg_layout lay;
	char num[32];
	int rc = 0;

	*out = NULL;
	cg = calloc(1, sizeof(*cg));
	if (cg == NULL)
		return -ENOMEM;
	layout_get(&lay);
	if (lay.v2_parent[0] != '\0') {
		const char *parent = lay.v2_parent;

		cg->v2_memory = v2_enable(parent, "memory");
		cg->v2_pids = v2_enable(parent, "pids");
		if ((!cg->v2_memory || !cg->v2_pids) && v2_shared_parent(&lay)) {
			bool m = v2_enable(lay.v2_shared, "memory");
			bool p = v2_enable(lay.v2_shared, "pids");

			if ((int)m + (int)p > (int)cg->v2_memory + (int)cg->v2_pids) {
				parent = lay.v2_shared;
				cg->v2_memory = m;
				cg->v2_pids = p;
			}
		}
		make_dir(parent, name, cg->v2, sizeof(cg->v2));
		if (cg->v2[0] == '\0')
			cg->v2_memory = cg->v2_pids = false;
	}
	if (!cg->v2_memory)
		make_dir(lay.mem_parent, name, cg->v1_mem, sizeof(cg->v1_mem));
	if (!cg->v2_pids)
		make_dir(lay.pids_parent, name, cg->v1_pids, sizeof(cg->v1_pids));
	make_dir(lay.cpuacct_parent, name, cg->v1_cpuacct, sizeof(cg->v1_cpuacct));

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

bool
exec_cgroup_has_memory(const struct exec_cgroup *cg)
{
	return cg != NULL && (cg->v2_memory || cg->v1_mem[0] != '\0');
}

int
exec_cgroup_attach(struct exec_cgroup *cg, pid_t pid)
{
	const char *dirs[4] = {cg->v2, cg->v1_mem, cg->v1_pids, cg->v1_cpuacct};
	char num[32];
	int rc;

	snprintf(num, sizeof(num), "%d", (int)pid);
	for (size_t i = 0; i < 4; i++) {
		if (dirs[i][0] == '\0')
			continue;
		rc = write_small(dirs[i], "cgroup.procs", num);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static void
kill_listed(const char *dir)
{
	char path[PATH_MAX], buf[8192];
	char *p, *end;
	long pid;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (read_small(path, buf, sizeof(buf)) != 0)
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
		kill_listed(cg->v1_pids);
	else if (cg->v1_mem[0] != '\0')
		kill_listed(cg->v1_mem);
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
	remove_dir(cg->v2);
	remove_dir(cg->v1_mem);
	remove_dir(cg->v1_pids);
	remove_dir(cg->v1_cpuacct);
	free(cg);
}
