/*
 * Paths the caller names (--audit, files under TOLLGATE_HOME) opened so that
 * another local user cannot steer them: a symlink on the way is followed only
 * when root or the caller owns it. The bottom layer: no includes from above.
 */
#ifndef TOLLGATE_CORE_SAFEPATH_H
#define TOLLGATE_CORE_SAFEPATH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Symlinks followed in one walk, as the kernel's own bound. */
#define GW_SAFEPATH_MAX_LINKS 40

/*
 * Whether uid may own a symlink that tollgate follows: root, the real uid,
 * or, when the real uid is root, SUDO_UID (the person behind sudo).
 */
bool gw_safepath_owner_ok(uid_t uid);

/* Whether path has a ".." component anywhere. */
bool gw_path_has_dotdot(const char *path);

/*
 * One walk, for a caller that judges symlinks its own way (host access, for
 * the person serve runs for) or wants the last object itself.
 */
struct gw_safepath_walk {
	/* In. Judges each symlink before it is followed: shown names it, st is
	 * its lstat, links counts the links met so far, this one included. 0
	 * follows it; -errno refuses it, with err set (left empty, the walk
	 * writes "shown: reason"). NULL: at most GW_SAFEPATH_MAX_LINKS, each
	 * owned as gw_safepath_owner_ok allows. Past GW_SAFEPATH_MAX_LINKS the
	 * walk stops whatever the judge says. */
	int (*link_ok)(void *arg, const char *shown, const struct stat *st, int links, char *err,
	               size_t errlen);
	void *arg;
	/* In. shown is the canonical path: "." is skipped, ".." (met in a
	 * link's target) goes up a directory and drops a name, and a link is
	 * replaced by where it leads. Else shown is every name walked, in
	 * order, and "." and ".." are opened as names. */
	bool canonical;
	/* Out, on success. dirfd (O_PATH) holds the last name, base; fd is
	 * that name's object (O_PATH, never a symlink; st its fstat), or -1
	 * when the name does not exist yet, or when the walk ended at a
	 * directory itself ("/", a link to "/", and when canonical a last "."
	 * or a link's last ".."): then base is "." and dirfd is that
	 * directory. gw_safepath_walk_done closes both. */
	int dirfd;
	int fd;
	struct stat st;
	char base[NAME_MAX + 1];
	char shown[PATH_MAX];
};

/*
 * The walk gw_safepath_resolve_at makes, with w's judge of links: 0 with w's
 * outputs filled, or -errno with err set (shown in w then names where it
 * stopped) and nothing left open.
 */
int gw_safepath_walk(int atfd, const char *path, struct gw_safepath_walk *w, char *err,
                     size_t errlen);
/* Closes what a successful gw_safepath_walk left open in w. */
void gw_safepath_walk_done(struct gw_safepath_walk *w);

/*
 * Walks path one component at a time from "/" (absolute) or the working
 * directory, each opened O_PATH|O_NOFOLLOW (openat2 with
 * RESOLVE_NO_MAGICLINKS where the kernel has it). A symlink owned by anyone
 * else than gw_safepath_owner_ok allows is refused with -EPERM; an allowed
 * one is read and its target walked the same way, so the last component is
 * never a symlink either. Directories are not judged by owner: one the
 * caller names directly stays usable whoever owns it.
 *
 * On success *dirfd is an O_PATH fd of the directory that holds the last
 * component (the caller's to close) and base (of baselen bytes) its name,
 * which may not exist yet ("." when path is "/" itself). -errno otherwise,
 * with a one-line reason naming the offending component and its owner in
 * err (may be NULL).
 */
int gw_safepath_resolve(const char *path, int *dirfd, char *base, size_t baselen, char *err,
                        size_t errlen);
/* The same, a relative path walked from directory atfd (AT_FDCWD: the working directory). */
int gw_safepath_resolve_at(int atfd, const char *path, int *dirfd, char *base, size_t baselen,
                           char *err, size_t errlen);

/*
 * gw_safepath_resolve, then openat(dirfd, base, flags | O_NOFOLLOW |
 * O_CLOEXEC, mode): the fd of the file itself (-errno and err otherwise).
 * Never truncates, creates or writes through a link.
 */
int gw_safepath_open(const char *path, int flags, mode_t mode, char *err, size_t errlen);
/*
 * A file the caller names for tollgate to write (--json-status, --pubkey-out):
 * gw_safepath_open(path, O_WRONLY | O_CREAT | O_NOCTTY, mode), then cut to
 * nothing only when fstat says it is a regular file, so a FIFO or device
 * named there is written, never truncated, and nothing through a link.
 * The fd, or -errno with err set.
 */
int gw_safepath_open_output(const char *path, mode_t mode, char *err, size_t errlen);
/*
 * mkdir -p, one component at a time through gw_safepath_resolve: each
 * missing directory is made with mkdirat in its checked parent's fd (the
 * last with mode, the ones above it 0755), and what stands at a name is
 * judged as the walk judges it, so another user's symlink on the way is
 * refused and nothing is made where it points. 0, or -errno with err set.
 */
int gw_safepath_mkdirs(const char *path, mode_t mode, char *err, size_t errlen);
/* The same from atfd, as gw_safepath_resolve_at. */
int gw_safepath_open_at(int atfd, const char *path, int flags, mode_t mode, char *err,
                        size_t errlen);

/*
 * tollgate's own files in a directory it already holds (dirfd, from
 * gw_safepath_open of TOLLGATE_HOME): openat(dirfd, name, flags | O_NOFOLLOW
 * | O_CLOEXEC, mode), so a name swapped for a link after the directory was
 * checked is never followed, whoever owns the link. A link at name (seen
 * as ELOOP, or ENOTDIR with O_DIRECTORY, or EEXIST with O_CREAT|O_EXCL)
 * gives -ELOOP with err naming shown (the path to print) and the link's
 * owner; else -errno, err set.
 */
int gw_safepath_open_in(int dirfd, const char *name, int flags, mode_t mode, const char *shown,
                        char *err, size_t errlen);

/*
 * A file a flag or a config file names for tollgate to read (a policy, a
 * config file, a certificate, key or CA file, a token file): opened
 * read-only through gw_safepath_open (another user's symlink on the way is
 * refused; O_NONBLOCK, so a FIFO cannot hang the open), then refused unless
 * fstat says a regular file of at most max bytes (no device, FIFO, socket
 * or directory). st gets that fstat. The fd, or -errno with err set to one
 * line naming path and why; no error quotes the file's content.
 */
int gw_safepath_open_file(const char *path, size_t max, struct stat *st, char *err, size_t errlen);
/*
 * gw_safepath_open_file, then the whole file read into a fresh buffer of
 * *len bytes and a terminating NUL (the caller frees it; a secret's caller
 * wipes it first). 0, or -errno with err set (-EFBIG: over max).
 */
int gw_safepath_read_file(const char *path, size_t max, char **out, size_t *len, char *err,
                          size_t errlen);

/*
 * A file tollgate reads a secret from (a parent proxy's credentials) must be
 * private, as ssh wants of a key: a regular file owned by the effective uid
 * that group and others cannot reach. 0, or -EACCES (-errno when fstat
 * fails) with err naming path and what is wrong (mode, owner).
 */
int gw_safepath_check_private(int fd, const char *path, char *err, size_t errlen);

#endif
