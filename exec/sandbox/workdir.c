/*
 * serve's work directories (exec/sandbox/workdir.h): made here when this process
 * holds privilege, else asked of the privileged parent, which makes them
 * with this same code and answers with the path and the files' fds.
 */
#include "exec/sandbox/workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/sandbox/exec.h"
#include "exec/sandbox/userns.h"
#include "gateway/core/err.h"
#include "gateway/core/hex.h"
#include "gateway/core/log.h"

struct exec_workdir {
	uint32_t handle;     /* the parent's (a gate's directory), else 0 */
	int fd;              /* the inner directory, O_PATH; -1 in a gate */
	char dir[PATH_MAX];  /* the outer one, root's 0711; "" in a gate */
	char path[PATH_MAX]; /* the inner one, bound at EXEC_WORKDIR */
};

int
exec_random_hex(char *buf, size_t nbytes)
{
	uint8_t raw[32];
	size_t got = 0;
	ssize_t n;

	if (nbytes > sizeof(raw))
		return -EINVAL;
	while (got < nbytes) {
		n = getrandom(raw + got, nbytes - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	gw_hex_encode(raw, nbytes, buf);
	return 0;
}

int
exec_disk_bound(const char *dir, long mb, unsigned int mode, char *err, size_t errlen)
{
	char opts[96];
	long inodes = mb > 16 ? mb * 256 : 4096;
	int rc;

	snprintf(opts, sizeof(opts), "size=%ldm,nr_inodes=%ld,mode=%04o", mb, inodes, mode);
	if (mount("tollgate-disk", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "work directory %s: cannot bound it to %ld MiB: %s", dir,
		           mb, strerror(errno));
		return rc;
	}
	return 0;
}

void
exec_disk_release(const char *dir)
{
	/* EINVAL: not a mount point (made before it was bounded, or already gone). */
	if (umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT)
		log_warnx("work directory %s: cannot detach its tmpfs: %s", dir, strerror(errno));
}

static int
make_local(struct exec_workdir *w, char *err, size_t errlen)
{
	char tag[128], outer[33], inner[33];
	int rc, n;

	rc = exec_instance_tag(tag, sizeof(tag));
	if (rc == 0)
		rc = exec_random_hex(outer, 16);
	if (rc == 0)
		rc = exec_random_hex(inner, 16);
	if (rc != 0) {
		gw_set_err(err, errlen, "work directory: %s", strerror(-rc));
		return rc;
	}
	n = snprintf(w->path, sizeof(w->path), "%s/%s.wd-%s/w-%s", exec_tmp_dir(), tag, outer,
	             inner);
	if (n < 0 || (size_t)n >= sizeof(w->path)) {
		gw_set_err(err, errlen, "work directory: TMPDIR's name is too long");
		return -ENAMETOOLONG;
	}
	memcpy(w->dir, w->path, (size_t)(strrchr(w->path, '/') - w->path));
	/* The mode again after mkdir: the umask must not narrow what the
	 * sandbox's user, already another uid, has to traverse. */
	if (mkdir(w->dir, 0711) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "work directory %s: %s", w->dir, strerror(errno));
		w->dir[0] = '\0';
		return rc;
	}
	rc = exec_disk_bound(w->dir, exec_disk_mb(0), 0711, err, errlen);
	if (rc != 0) {
		rmdir(w->dir);
		w->dir[0] = '\0';
		return rc;
	}
	if (chmod(w->dir, 0711) != 0 || mkdir(w->path, 0700) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "work directory %s: %s", w->path, strerror(errno));
		return rc;
	}
	/* Held from here on: the sandbox owns the directory, never its name. */
	w->fd = open(w->path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->fd < 0 || fchownat(w->fd, "", exec_sandbox_host_uid(), exec_sandbox_host_gid(),
	                          AT_EMPTY_PATH) != 0) {
		rc = -errno;
		gw_set_err(err, errlen, "work directory %s: %s", w->path, strerror(errno));
		return rc;
	}
	return 0;
}

/* Set in the gate at the split: its directories are the parent's to make. */
static const struct exec_workdir_remote *remote;

void
exec_workdir_remote_install(const struct exec_workdir_remote *ops)
{
	remote = ops;
}

int
exec_workdir_new(struct exec_workdir **out, char *err, size_t errlen)
{
	struct exec_workdir *w;
	int rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		gw_set_err(err, errlen, "work directory: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	w->fd = -1;
	if (remote != NULL)
		rc = remote->make(&w->handle, w->path, sizeof(w->path), err, errlen);
	else
		rc = make_local(w, err, errlen);
	if (rc != 0) {
		exec_workdir_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

const char *
exec_workdir_path(const struct exec_workdir *w)
{
	return w->path;
}

int
exec_workdir_file(struct exec_workdir *w, const char *name, int *fd, char *err, size_t errlen)
{
	int rc;

	*fd = -1;
	if (!exec_workdir_name_ok(name)) {
		gw_set_err(err, errlen, "work directory: not a file name: %s", name);
		return -EINVAL;
	}
	if (w->handle != 0)
		return remote->file(w->handle, name, fd, err, errlen);
	/* The sandbox may have left anything under that name: a link is
	 * removed, never followed, and the new file is made with O_EXCL. */
	if (unlinkat(w->fd, name, 0) != 0 && errno != ENOENT) {
		rc = -errno;
		gw_set_err(err, errlen, "cannot replace %s: %s", name, strerror(-rc));
		return rc;
	}
	*fd = openat(w->fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (*fd < 0) {
		rc = -errno;
		gw_set_err(err, errlen, "cannot write %s: %s", name, strerror(errno));
		return rc;
	}
	return 0;
}

void
exec_workdir_free(struct exec_workdir *w)
{
	if (w == NULL)
		return;
	if (w->handle != 0 && remote->remove(w->handle) != 0)
		log_warnx("work directory %s: the privileged parent did not remove it", w->path);
	if (w->fd >= 0)
		close(w->fd);
	if (w->dir[0] != '\0')
		exec_disk_release(w->dir);
	if (w->dir[0] != '\0' && exec_remove_tree(w->dir) != 0)
		log_warnx("work directory %s: not removed", w->dir);
	free(w);
}
