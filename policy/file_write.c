/*
 * Adding a rule to a policy file on disk (scope "always" of an approval): an
 * atomic rewrite under the file's lock, checked before and after, and the
 * worker thread that does it so that a gateway's loop never waits on the lock.
 */
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gateway/core/clock.h"
#include "gateway/core/fdio.h"
#include "gateway/core/thread.h"
#include "policy/file.h"

/* ---- adding a rule on disk ---------------------------------------------- */

/* The new text of the file: root with pattern appended to its list. NULL on OOM. */
static char *
add_to_json(json_t *root, const char *key, const char *pattern, bool *present)
{
	json_t *list = json_object_get(root, key);
	json_t *item;
	size_t i;
	char *text, *with_nl;
	size_t n;

	*present = false;
	if (list == NULL) {
		list = json_array();
		if (list == NULL || json_object_set_new(root, key, list) != 0)
			return NULL;
	}
	json_array_foreach(list, i, item)
	{
		if (json_is_string(item) && strcmp(json_string_value(item), pattern) == 0) {
			*present = true;
			return NULL;
		}
	}
	if (json_array_append_new(list, json_string(pattern)) != 0)
		return NULL;
	text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
	if (text == NULL)
		return NULL;
	n = strlen(text);
	with_nl = realloc(text, n + 2);
	if (with_nl == NULL) {
		free(text);
		return NULL;
	}
	with_nl[n] = '\n';
	with_nl[n + 1] = '\0';
	return with_nl;
}

/* Writes text next to path and renames it over path, durably. */
static int
replace_file(const char *path, const struct stat *st, const char *text, char *err, size_t errlen)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd = -1, dfd, rc = 0, n;

	if (slash == NULL)
		n = snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		n = snprintf(dir, sizeof(dir), "/");
	else
		n = snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (n < 0 || (size_t)n >= sizeof(dir) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot create a temporary file: %s", path,
		         strerror(errno));
		return rc;
	}
	/* Keep the file's mode and, where we may, its owner. */
	if (fchmod(fd, st->st_mode & 07777) != 0 ||
	    (fchown(fd, st->st_uid, st->st_gid) != 0 && errno != EPERM)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = gw_write_all(fd, text, strlen(text));
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: rename: %s", path, strerror(errno));
		goto out;
	}
	/* The rename itself is durable once the directory is. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	return 0;
out:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}

/* ---- waiting for the lock ----------------------------------------------- */

/*
 * The background writer (below) must be able to give up on a lock another
 * process holds for too long, and to stop at once when its owner stops, so
 * it polls with LOCK_NB and sleeps on its condition variable in between; a
 * plain caller just blocks in flock.
 */
#define LOCK_POLL_MIN_MS 10
#define LOCK_POLL_MAX_MS 200
#define WRITER_QUEUE_MAX 64

struct file_job {
	TAILQ_ENTRY(file_job) entry;
	char *path;
	char pattern[POLICY_HOST_MAX + 32];
	enum policy_verdict action;
	double lock_timeout;
	policy_file_done_cb cb;
	void *arg;
	int rc;
	bool present;
	char err[PATH_MAX + 256]; /* a path and why */
};
TAILQ_HEAD(file_job_list, file_job);

struct policy_file_writer {
	pthread_mutex_t mu;
	pthread_cond_t wake; /* the worker: a job, or stop; also its sleep between lock tries */
	pthread_t worker;
	bool started, stop;
	struct file_job_list queue; /* waiting for the worker */
	struct file_job_list done;  /* finished, waiting for policy_file_writer_collect */
	size_t nqueued;
	int pipe_rd, pipe_wr; /* a byte in it: something is in done */
	policy_file_add_fn adder; /* NULL: file_add_rule here */
};

/*
 * Sleeps ms on the writer's condition variable, or less when it is told to
 * stop. Returns whether it was told to stop. Without a writer, just sleeps.
 */
static bool
writer_nap(struct policy_file_writer *w, long ms)
{
	struct timespec ts;
	bool stop;

	if (w == NULL) {
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000L;
		(void)nanosleep(&ts, NULL);
		return false;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	if (!w->stop)
		(void)pthread_cond_timedwait(&w->wake, &w->mu, &ts);
	stop = w->stop;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

/*
 * Takes the exclusive lock on fd. Without a writer or a timeout, blocks
 * until it is free. Otherwise tries until the deadline (CLOCK_MONOTONIC
 * seconds) or until the writer stops, whichever comes first: -ETIMEDOUT or
 * -ECANCELED then.
 */
static int
lock_file(int fd, const char *path, struct policy_file_writer *w, double deadline, double timeout,
          char *err, size_t errlen)
{
	long nap = LOCK_POLL_MIN_MS;
	bool polls = w != NULL || timeout > 0;
	int rc;

	for (;;) {
		if (flock(fd, polls ? LOCK_EX | LOCK_NB : LOCK_EX) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (!polls || errno != EWOULDBLOCK) {
			rc = -errno;
			snprintf(err, errlen, "%s: lock: %s", path, strerror(errno));
			return rc;
		}
		if (gw_clock_mono() >= deadline) {
			snprintf(err, errlen,
			         "%s: still locked by another process after %g s; not written",
			         path, timeout);
			return -ETIMEDOUT;
		}
		if (writer_nap(w, nap)) {
			/* One last try: the holder may have just let go. */
			if (flock(fd, LOCK_EX | LOCK_NB) == 0)
				return 0;
			snprintf(err, errlen,
			         "%s: still locked by another process when the gateway stopped; "
			         "not written",
			         path);
			return -ECANCELED;
		}
		nap = nap * 2 > LOCK_POLL_MAX_MS ? LOCK_POLL_MAX_MS : nap * 2;
	}
}

/* ---- adding a rule on disk: the work itself ----------------------------- */

static int
file_add_rule(const char *path, enum policy_verdict action, const char *pattern,
              struct policy_file_writer *w, double timeout, bool *present, char *err, size_t errlen)
{
	char real[PATH_MAX], norm[POLICY_HOST_MAX + 32];
	char *buf = NULL, *text = NULL;
	struct policy *check = NULL;
	json_t *root = NULL;
	json_error_t jerr;
	struct stat st, now;
	size_t len = 0;
	double deadline = gw_clock_mono() + timeout;
	int fd = -1, rc;
	const char *key = action == POLICY_ALLOW ? "allow" : action == POLICY_ASK ? "ask" : "deny";

	*present = false;
	rc = policy_pattern_normalise(pattern, norm, sizeof(norm), err, errlen);
	if (rc != 0)
		return rc;
	if (realpath(path, real) == NULL) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	/*
	 * Writers serialise on a lock of the file itself. The rename gives the
	 * path a new inode, so after the lock is ours, check the path still
	 * names the inode we locked; otherwise lock the new one.
	 */
	for (int attempt = 0;; attempt++) {
		fd = policy_file_open(real, &st, err, errlen);
		if (fd < 0)
			return fd;
		rc = lock_file(fd, real, w, deadline, timeout, err, errlen);
		if (rc != 0)
			goto out;
		if (stat(real, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
			break;
		close(fd);
		fd = -1;
		if (attempt == 100) {
			snprintf(err, errlen, "%s: keeps being replaced", real);
			return -EBUSY;
		}
	}
	rc = policy_file_read(fd, real, &buf, &len, err, errlen);
	if (rc != 0)
		goto out;
	rc = policy_load_buffer(path, buf, len, &check, err, errlen);
	if (rc != 0)
		goto out; /* never rewrite a file that is wrong already */
	policy_free(check);
	check = NULL;
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "%s: %s", path, jerr.text);
		rc = -EINVAL;
		goto out;
	}
	text = add_to_json(root, key, norm, present);
	if (*present) {
		rc = 0;
		goto out;
	}
	if (text == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	rc = policy_load_buffer(path, text, strlen(text), &check, err, errlen);
	if (rc != 0)
		goto out;
	rc = replace_file(real, &st, text, err, errlen);
out:
	policy_free(check);
	json_decref(root);
	free(text);
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

int
policy_file_add_rule(const char *path, enum policy_verdict action, const char *pattern, char *err,
                     size_t errlen)
{
	bool present;

	return file_add_rule(path, action, pattern, NULL, 0, &present, err, errlen);
}

int
policy_file_add_rule_timed(const char *path, enum policy_verdict action, const char *pattern,
                           double lock_timeout, bool *present, char *err, size_t errlen)
{
	if (!(lock_timeout > 0)) {
		snprintf(err, errlen, "policy file: a lock timeout above 0 s is needed");
		return -EINVAL;
	}
	return file_add_rule(path, action, pattern, NULL, lock_timeout, present, err, errlen);
}

/* ---- the background writer ---------------------------------------------- */

static void
job_free(struct file_job *j)
{
	if (j == NULL)
		return;
	free(j->path);
	free(j);
}

/* Tells the owner's loop that done has something; a full pipe already says so. */
static void
writer_signal(struct policy_file_writer *w)
{
	const char b = 1;
	ssize_t n;

	do
		n = write(w->pipe_wr, &b, 1);
	while (n < 0 && errno == EINTR);
}

static void *
writer_main(void *arg)
{
	struct policy_file_writer *w = arg;
	struct file_job *j;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && TAILQ_EMPTY(&w->queue))
			pthread_cond_wait(&w->wake, &w->mu);
		j = TAILQ_FIRST(&w->queue);
		if (j == NULL)
			break; /* stopping, and nothing left */
		TAILQ_REMOVE(&w->queue, j, entry);
		w->nqueued--;
		pthread_mutex_unlock(&w->mu);
		/* After a stop, a job still gets its try: lock_file gives up on a held
		 * lock at once, but a free one is taken and the rule written. */
		if (w->adder != NULL)
			j->rc = w->adder(j->path, j->action, j->pattern, j->lock_timeout,
			                 &j->present, j->err, sizeof(j->err));
		else
			j->rc = file_add_rule(j->path, j->action, j->pattern, w, j->lock_timeout,
			                      &j->present, j->err, sizeof(j->err));
		pthread_mutex_lock(&w->mu);
		TAILQ_INSERT_TAIL(&w->done, j, entry);
		writer_signal(w);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int
policy_file_writer_new(struct policy_file_writer **out)
{
	struct policy_file_writer *w;
	pthread_condattr_t ca;
	int p[2];

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		int rc = -errno;

		free(w);
		return rc;
	}
	w->pipe_rd = p[0];
	w->pipe_wr = p[1];
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	TAILQ_INIT(&w->queue);
	TAILQ_INIT(&w->done);
	*out = w;
	return 0;
}

void
policy_file_writer_set_adder(struct policy_file_writer *w, policy_file_add_fn fn)
{
	w->adder = fn;
}

int
policy_file_writer_fd(const struct policy_file_writer *w)
{
	return w->pipe_rd;
}

/* The worker is started with the first job: most gateways never write a rule. */
static int
writer_start(struct policy_file_writer *w)
{
	int rc;

	/* The worker takes no signals: they belong to the event loop's thread. */
	rc = gw_thread_start(&w->worker, writer_main, w);
	if (rc == 0)
		w->started = true;
	return rc;
}

int
policy_file_add_rule_async(struct policy_file_writer *w, const char *path,
                           enum policy_verdict action, const char *pattern, double lock_timeout,
                           policy_file_done_cb cb, void *arg, char *err, size_t errlen)
{
	struct file_job *j = NULL;
	int rc = 0;

	if (w == NULL || path == NULL || pattern == NULL || cb == NULL || !(lock_timeout > 0)) {
		snprintf(err, errlen, "policy file writer: bad arguments");
		return -EINVAL;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL || (j->path = strdup(path)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
		goto out;
	}
	if (snprintf(j->pattern, sizeof(j->pattern), "%s", pattern) >= (int)sizeof(j->pattern)) {
		snprintf(err, errlen, "'%s': pattern too long", pattern);
		rc = -EINVAL;
		goto out;
	}
	j->action = action;
	j->lock_timeout = lock_timeout;
	j->cb = cb;
	j->arg = arg;
	pthread_mutex_lock(&w->mu);
	if (w->nqueued >= WRITER_QUEUE_MAX) {
		pthread_mutex_unlock(&w->mu);
		snprintf(err, errlen, "%s: %d writes are waiting already", path, WRITER_QUEUE_MAX);
		rc = -EAGAIN;
		goto out;
	}
	if (!w->started) {
		rc = writer_start(w);
		if (rc != 0) {
			pthread_mutex_unlock(&w->mu);
			snprintf(err, errlen, "%s: cannot start the writer: %s", path,
			         strerror(-rc));
			goto out;
		}
	}
	TAILQ_INSERT_TAIL(&w->queue, j, entry);
	w->nqueued++;
	j = NULL;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->mu);
out:
	job_free(j);
	return rc;
}

/* Runs and frees the finished jobs' callbacks, outside the lock. */
static void
run_done(struct file_job_list *list)
{
	struct file_job *j;

	while ((j = TAILQ_FIRST(list)) != NULL) {
		struct policy_file_result r = {
		    .path = j->path,
		    .action = j->action,
		    .pattern = j->pattern,
		    .rc = j->rc,
		    .present = j->present,
		    .err = j->rc != 0 ? j->err : "",
		};

		TAILQ_REMOVE(list, j, entry);
		j->cb(&r, j->arg);
		job_free(j);
	}
}

void
policy_file_writer_collect(struct policy_file_writer *w)
{
	struct file_job_list list;
	char drain[64];
	ssize_t n;

	/* Drain first: a byte written after this belongs to a job taken below
	 * or to a later one, and wakes the loop again either way. */
	do
		n = read(w->pipe_rd, drain, sizeof(drain));
	while (n > 0 || (n < 0 && errno == EINTR));
	TAILQ_INIT(&list);
	pthread_mutex_lock(&w->mu);
	TAILQ_CONCAT(&list, &w->done, entry);
	pthread_mutex_unlock(&w->mu);
	run_done(&list);
}

void
policy_file_writer_free(struct policy_file_writer *w)
{
	if (w == NULL)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_broadcast(&w->wake);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->worker, NULL);
	}
	/* The worker is gone: every job is in done now, told before we go. */
	run_done(&w->done);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->mu);
	close(w->pipe_rd);
	close(w->pipe_wr);
	free(w);
}
