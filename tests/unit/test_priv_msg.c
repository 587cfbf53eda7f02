/*
 * The privileged parent's view of the gate (exec/priv/priv.h): its one parser
 * refuses every malformed request and closes the fds that came with it, and
 * the ceiling check refuses a sandbox wider than the operator's flags.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/priv/priv.h"

struct msg {
	char b[32768]; /* room for an extra CA past its cap */
	size_t n;
};

static void
m_raw(struct msg *m, const void *v, size_t n)
{
	assert_true(m->n + n <= sizeof(m->b));
	memcpy(m->b + m->n, v, n);
	m->n += n;
}

static void
m_u32(struct msg *m, uint32_t v)
{
	m_raw(m, &v, sizeof(v));
}

static void
m_i64(struct msg *m, int64_t v)
{
	m_raw(m, &v, sizeof(v));
}

static void
m_str(struct msg *m, const char *s)
{
	m_u32(m, s != NULL ? (uint32_t)strlen(s) + 1 : 0);
	if (s != NULL)
		m_raw(m, s, strlen(s) + 1);
}

static void
m_head(struct msg *m, uint32_t kind, uint32_t handle, int32_t value)
{
	struct exec_priv_head h = {.kind = kind, .handle = handle, .value = value};

	m->n = 0;
	m_raw(m, &h, sizeof(h));
}

/* START: sh -c true, one env entry, one bind, the given flags and fd mask. */
static void
m_start(struct msg *m, uint32_t flags, uint32_t mask, int64_t ram)
{
	m_head(m, EXEC_PRIV_START, 0, 0);
	m_u32(m, flags);
	m_u32(m, mask);
	m_i64(m, ram);
	m_i64(m, 0);
	m_i64(m, 0);
	m_i64(m, 0);
	m_i64(m, 0); /* disk: the default */
	m_str(m, "/srv/work");
	m_str(m, NULL);
	m_str(m, NULL);
	m_str(m, NULL); /* image root */
	m_str(m, NULL); /* image working directory */
	m_u32(m, 0);    /* image uid: the sandbox's own */
	m_u32(m, 0);    /* image gid */
	m_u32(m, 3);
	m_str(m, "sh");
	m_str(m, "-c");
	m_str(m, "true");
	m_u32(m, 1);
	m_str(m, "A=b");
	m_u32(m, 1);
	m_u32(m, 0);
	m_str(m, "/srv/data");
	m_str(m, "/data");
	m_str(m, NULL); /* no extra CA */
}

static int
parse(struct msg *m, int *fds, size_t nfds, struct exec_priv_msg *out)
{
	return exec_priv_msg_parse(m->b, m->n, fds, nfds, out);
}

static bool
fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void
test_good(void **state)
{
	struct exec_priv_msg *out = malloc(sizeof(*out));
	struct msg m;
	int fd[2];

	(void)state;
	m_head(&m, EXEC_PRIV_HUB, 0, 0);
	assert_int_equal(parse(&m, NULL, 0, out), 0);
	m_head(&m, EXEC_PRIV_SIGNAL, 7, 15);
	assert_int_equal(parse(&m, NULL, 0, out), 0);
	assert_int_equal(out->head.handle, 7);

	m_start(&m, EXEC_PRIV_F_SET_STDIO | EXEC_PRIV_F_ATTACH, 0x2, 64);
	assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
	assert_int_equal(parse(&m, &fd[1], 1, out), 0);
	assert_int_equal(out->start.nargv, 3);
	assert_string_equal(out->start.argv[2], "true");
	assert_null(out->start.argv[3]);
	assert_string_equal(out->start.env[0], "A=b");
	assert_string_equal(out->start.workdir, "/srv/work");
	assert_null(out->start.outdir);
	assert_int_equal(out->start.nbinds, 1);
	assert_null(out->start.extra_ca);
	assert_int_equal(out->start.limits.ram_mb, 64);
	assert_int_equal(out->start.fd[EXEC_PRIV_FD_STDIN], -1);
	assert_int_equal(out->start.fd[EXEC_PRIV_FD_STDOUT], fd[1]);
	close(fd[0]);
	close(fd[1]);

	/* The sandbox's extra CA (TLS inspection): carried, and capped. */
	m_start(&m, 0, 0, 0);
	m.n -= sizeof(uint32_t);
	m_str(&m, "-----BEGIN CERTIFICATE-----\n");
	assert_int_equal(parse(&m, NULL, 0, out), 0);
	assert_string_equal(out->start.extra_ca, "-----BEGIN CERTIFICATE-----\n");
	{
		char *big = malloc(EXEC_EXTRA_CA_MAX + 2);

		assert_non_null(big);
		memset(big, 'A', EXEC_EXTRA_CA_MAX + 1);
		big[EXEC_EXTRA_CA_MAX + 1] = '\0';
		m_start(&m, 0, 0, 0);
		m.n -= sizeof(uint32_t);
		m_str(&m, big);
		assert_int_not_equal(parse(&m, NULL, 0, out), 0);
		free(big);
	}

	m_head(&m, EXEC_PRIV_SIGN_OUT, 0, 0);
	m_str(&m, "sb-0123456789");
	assert_int_equal(parse(&m, NULL, 0, out), 0);
	assert_string_equal(out->sign_id, "sb-0123456789");
	m_head(&m, EXEC_PRIV_VAULT_LIST, 0, 0);
	m_str(&m, "default");
	assert_int_equal(parse(&m, NULL, 0, out), 0);
	assert_string_equal(out->vault_ns, "default");
	assert_null(out->vault_name);
	m_head(&m, EXEC_PRIV_VAULT_GET, 0, 0);
	m_str(&m, "default");
	m_str(&m, "API_TOKEN");
	assert_int_equal(parse(&m, NULL, 0, out), 0);
	assert_string_equal(out->vault_name, "API_TOKEN");
	free(out);
}

/* Each bad message is refused, and an fd sent with it is closed. */
static void
test_bad_messages(void **state)
{
	struct exec_priv_msg *out = malloc(sizeof(*out));
	struct msg m;
	int fd[2];

	(void)state;
	for (int i = 0; i < 27; i++) {
		size_t nfds = 1;
		const char *what = "";

		switch (i) {
		case 0: /* short: half a head */
			m_head(&m, EXEC_PRIV_HUB, 0, 0);
			m.n = sizeof(struct exec_priv_head) / 2;
			what = "short";
			nfds = 0;
			break;
		case 1: /* a kind no one knows */
			m_head(&m, 99, 0, 0);
			what = "unknown kind";
			nfds = 0;
			break;
		case 2: /* a reply's kind, from the gate */
			m_head(&m, EXEC_PRIV_REPLY, 0, 0);
			what = "reply kind";
			nfds = 0;
			break;
		case 3: /* fds where the kind takes none */
			m_head(&m, EXEC_PRIV_HUB, 0, 0);
			what = "fds on HUB";
			break;
		case 4: /* a string's length past the end */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x1, 0);
			m.n = sizeof(struct exec_priv_head) + 8 + 32;
			m_u32(&m, 1000);
			m_raw(&m, "/srv", 5);
			what = "length past the end";
			break;
		case 5: /* a string without its NUL */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x1, 0);
			m.n = sizeof(struct exec_priv_head) + 8 + 32;
			m_u32(&m, 4);
			m_raw(&m, "/srv", 4);
			what = "missing NUL";
			break;
		case 6: /* a NUL inside a string */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x1, 0);
			m.n = sizeof(struct exec_priv_head) + 8 + 32;
			m_u32(&m, 5);
			m_raw(&m, "/s\0v", 5);
			what = "NUL inside";
			break;
		case 7: /* more fds than the mask says */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x1, 0);
			nfds = 2;
			what = "too many fds";
			break;
		case 8: /* fewer fds than the mask says */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x7, 0);
			what = "too few fds";
			break;
		case 9: /* stdio fds without set_stdio */
			m_start(&m, 0, 0x1, 0);
			what = "fds without set_stdio";
			break;
		case 10: /* bytes after the body */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x1, 0);
			m_u32(&m, 0);
			what = "trailing bytes";
			break;
		case 11: /* a signal out of range */
			m_head(&m, EXEC_PRIV_SIGNAL, 1, 65);
			what = "signal 65";
			nfds = 0;
			break;
		case 12: /* a request about no sandbox */
			m_head(&m, EXEC_PRIV_KILL, 0, 0);
			what = "handle 0";
			nfds = 0;
			break;
		case 13: /* a negative limit */
			m_start(&m, EXEC_PRIV_F_SET_STDIO, 0x1, -1);
			what = "negative limit";
			break;
		case 14: /* flags no one defined */
			m_start(&m, EXEC_PRIV_F_SET_STDIO | 0x80, 0x1, 0);
			what = "unknown flag";
			break;
		case 15: /* a kept-alive sandbox with a command */
			m_start(&m, EXEC_PRIV_F_SET_STDIO | EXEC_PRIV_F_KEEP_ALIVE, 0x1, 0);
			what = "keep_alive with argv";
			break;
		case 16: /* SIGN_OUT names no sandbox */
			m_head(&m, EXEC_PRIV_SIGN_OUT, 0, 0);
			m_str(&m, NULL);
			what = "SIGN_OUT without an id";
			nfds = 0;
			break;
		case 17: /* an id a manifest could not carry */
			m_head(&m, EXEC_PRIV_SIGN_OUT, 0, 0);
			m_str(&m, "sb 1\n");
			what = "SIGN_OUT with a space and a newline";
			nfds = 0;
			break;
		case 18: /* an id past EXEC_ARTIFACT_ID_MAX */
			m_head(&m, EXEC_PRIV_SIGN_OUT, 0, 0);
			{
				char id[200];

				memset(id, 'a', sizeof(id) - 1);
				id[sizeof(id) - 1] = '\0';
				m_str(&m, id);
			}
			what = "SIGN_OUT with a long id";
			nfds = 0;
			break;
		case 19: /* a path: the directory is the operator's, never the gate's */
			m_head(&m, EXEC_PRIV_SIGN_OUT, 0, 0);
			m_str(&m, "sb-1");
			m_str(&m, "/etc");
			what = "SIGN_OUT with a path after the id";
			nfds = 0;
			break;
		case 20: /* an fd (say, a directory to sign) */
			m_head(&m, EXEC_PRIV_SIGN_OUT, 0, 0);
			m_str(&m, "sb-1");
			what = "SIGN_OUT with an fd";
			break;
		case 21: /* a handle or value it does not take */
			m_head(&m, EXEC_PRIV_SIGN_OUT, 3, 0);
			m_str(&m, "sb-1");
			what = "SIGN_OUT with a handle";
			nfds = 0;
			break;
		case 22: /* a path where a namespace goes */
			m_head(&m, EXEC_PRIV_VAULT_LIST, 0, 0);
			m_str(&m, "../../etc");
			what = "vault: a path as namespace";
			nfds = 0;
			break;
		case 23: /* a name the vault would not take */
			m_head(&m, EXEC_PRIV_VAULT_GET, 0, 0);
			m_str(&m, "default");
			m_str(&m, "A=B");
			what = "vault: a bad name";
			nfds = 0;
			break;
		case 24: /* a get without its name */
			m_head(&m, EXEC_PRIV_VAULT_GET, 0, 0);
			m_str(&m, "default");
			what = "vault: no name";
			nfds = 0;
			break;
		case 25: /* a list with a name after it */
			m_head(&m, EXEC_PRIV_VAULT_LIST, 0, 0);
			m_str(&m, "default");
			m_str(&m, "TOKEN");
			what = "vault: trailing name";
			nfds = 0;
			break;
		case 26: /* a vault read with fds */
			m_head(&m, EXEC_PRIV_VAULT_LIST, 0, 0);
			m_str(&m, "default");
			what = "vault: fds";
			break;
		}
		assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
		{
			int fds[2] = {fd[0], fd[1]};

			if (parse(&m, fds, nfds, out) != -EPROTO)
				fail_msg("accepted: %s", what);
		}
		if (nfds >= 1 && fd_open(fd[0]))
			fail_msg("fd left open: %s", what);
		if (nfds >= 2 && fd_open(fd[1]))
			fail_msg("second fd left open: %s", what);
		if (nfds < 1)
			close(fd[0]);
		if (nfds < 2)
			close(fd[1]);
	}
	free(out);
}

static void
test_ceiling(void **state)
{
	struct exec_priv_ceiling c = {
	    .binds = {{"/srv/data", "/data", false}, {"/srv/rw", "/rw", true}},
	    .nbinds = 2,
	    .workdir = "/srv/work",
	    .limits = {.ram_mb = 256, .pids = 64},
	};
	struct exec_priv_start *st = calloc(1, sizeof(*st));
	char why[256], own[256], escape[256], other[256];

	(void)state;
	snprintf(own, sizeof(own), "%s/tollgate-serve.x", exec_tmp_dir());
	snprintf(escape, sizeof(escape), "%s/tollgate-serve.x/../../etc", exec_tmp_dir());
	snprintf(other, sizeof(other), "%s/other", exec_tmp_dir());
	st->workdir = "/srv/work";
	st->binds[0] = (struct exec_bind){"/srv/data", "/data", false};
	st->binds[1] = (struct exec_bind){"/srv/rw", "/rw", true};
	st->nbinds = 2;
	st->limits.ram_mb = 256;
	st->limits.pids = 10;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);

	st->binds[1] = (struct exec_bind){"/etc", "/rw", true};
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/etc"));
	st->binds[1] = (struct exec_bind){"/srv/data", "/data", true};
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->binds[1] = (struct exec_bind){"/srv/rw", "/rw", false}; /* narrower: fine */
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);

	st->workdir = "/root";
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->workdir = own; /* a name is not enough: the parent must have made it */
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	c.gate_workdirs = true;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->workdir = escape;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->workdir = other;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->workdir = NULL;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);

	st->limits.ram_mb = 257;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "ram"));
	st->limits.ram_mb = 0; /* none where the operator set one */
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->limits.ram_mb = 128;
	st->limits.pids = 65;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->limits.pids = 64;
	st->limits.cpu_seconds = 1000; /* no cap: anything */
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);
	/* /work's size: 0 on either side is the default (1024 MiB here). */
	st->limits.disk_mb = 1025;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "disk"));
	st->limits.disk_mb = 1024;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);
	c.limits.disk_mb = 8;
	st->limits.disk_mb = 0;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->limits.disk_mb = 8;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);
	c.limits.disk_mb = 0;
	st->limits.disk_mb = 0;

	st->home = "/root";
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->home = NULL;
	/* An image root only where the operator's --image named it. */
	st->image_root = "/";
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	c.image_root = "/var/lib/tollgate/images/roots/ab";
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->image_root = "/var/lib/tollgate/images/roots/ab";
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);
	/* serve --image LANG=REF: any of the operator's roots, no other. */
	{
		static const char *const roots[] = {"/var/lib/tollgate/images/roots/cd",
		                                    "/var/lib/tollgate/images/roots/ef", NULL};

		c.image_root = NULL;
		c.image_roots = roots;
		st->image_root = "/var/lib/tollgate/images/roots/ef";
		assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);
		st->image_root = "/var/lib/tollgate/images/roots/ab";
		assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
		c.image_roots = NULL;
	}
	st->image_root = NULL;
	st->outdir = "/srv/out";
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	st->outdir = NULL;
	c.gate_workdirs = false;
	st->flags = EXEC_PRIV_F_KEEP_ALIVE;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	free(st);
}

/* serve's work directories: a handle and at most a file name, never a path. */
static void
test_workdir_messages(void **state)
{
	static const struct {
		uint32_t kind, handle;
		int32_t value;
		const char *name; /* WORKDIR_FILE's; "-": no string at all */
		size_t nfds;
		bool good;
	} cases[] = {
	    {EXEC_PRIV_WORKDIR_NEW, 0, 0, NULL, 0, true},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "main.py", 0, true},
	    {EXEC_PRIV_WORKDIR_FREE, 3, 0, NULL, 0, true},
	    {EXEC_PRIV_WORKDIR_NEW, 3, 0, NULL, 0, false},       /* names no directory */
	    {EXEC_PRIV_WORKDIR_NEW, 0, 1, NULL, 0, false},       /* no value */
	    {EXEC_PRIV_WORKDIR_NEW, 0, 0, NULL, 1, false},       /* no fds */
	    {EXEC_PRIV_WORKDIR_FILE, 0, 0, "main.py", 0, false}, /* which directory? */
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "-", 0, false},       /* no name */
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "../main.py", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "/etc/passwd", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "d/main.py", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "..", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, ".bashrc", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "main py", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0,
	     "a1234567890123456789012345678901234567890123456789012345678901234", 0, false},
	    {EXEC_PRIV_WORKDIR_FILE, 3, 0, "main.py", 1, false},
	    {EXEC_PRIV_WORKDIR_FREE, 0, 0, NULL, 0, false},
	    {EXEC_PRIV_WORKDIR_FREE, 3, 9, NULL, 0, false},
	};
	struct exec_priv_msg *out = malloc(sizeof(*out));
	struct msg m;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd[2], rc;

		m_head(&m, cases[i].kind, cases[i].handle, cases[i].value);
		if (cases[i].kind == EXEC_PRIV_WORKDIR_FILE && strcmp(cases[i].name, "-") != 0)
			m_str(&m, cases[i].name);
		assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
		rc = parse(&m, fd, cases[i].nfds, out);
		if (rc != (cases[i].good ? 0 : -EPROTO))
			fail_msg("case %zu: rc %d", i, rc);
		if (cases[i].nfds > 0 && fd_open(fd[0]))
			fail_msg("case %zu: fd left open", i);
		if (cases[i].good && cases[i].name != NULL)
			assert_string_equal(out->file_name, cases[i].name);
		if (cases[i].nfds == 0)
			close(fd[0]);
		close(fd[1]);
	}
	/* The name's exact length is the string's: one extra byte is refused. */
	m_head(&m, EXEC_PRIV_WORKDIR_FILE, 3, 0);
	m_str(&m, "main.sh");
	m_u32(&m, 0);
	assert_int_equal(parse(&m, NULL, 0, out), -EPROTO);
	free(out);
}

/* An "always" rule: allow or deny, one host or domain, nothing else. */
static void
test_policy_add_messages(void **state)
{
	static const struct {
		uint32_t handle;
		int32_t value;
		const char *pattern; /* NULL: no string at all */
		size_t nfds;
		bool good;
	} cases[] = {
	    {0, 1, "api.example.com", 0, true},
	    {0, 0, "*.evil.example", 0, true},
	    {0, 1, "api.example.com:8443", 0, true},
	    {0, 1, "*", 0, false},                  /* every host */
	    {0, 1, "*:*", 0, false},                /* every host and port */
	    {0, 1, "*:443", 0, false},              /* every host */
	    {0, 1, "API.example.com", 0, false},    /* not normalised: not ours */
	    {0, 1, "a.com/../../etc", 0, false},    /* a path */
	    {0, 1, "", 0, false},
	    {0, 1, NULL, 0, false},                 /* no pattern */
	    {0, 2, "api.example.com", 0, false},    /* ask, or anything else */
	    {0, -1, "api.example.com", 0, false},
	    {3, 1, "api.example.com", 0, false},    /* a handle */
	    {0, 1, "api.example.com", 1, false},    /* an fd */
	};
	struct exec_priv_msg *out = malloc(sizeof(*out));
	struct msg m;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd[2], rc;

		m_head(&m, EXEC_PRIV_POLICY_ADD, cases[i].handle, cases[i].value);
		if (cases[i].pattern != NULL)
			m_str(&m, cases[i].pattern);
		assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
		rc = parse(&m, fd, cases[i].nfds, out);
		if (rc != (cases[i].good ? 0 : -EPROTO))
			fail_msg("case %zu (%s): rc %d", i, cases[i].pattern ? cases[i].pattern : "-", rc);
		if (cases[i].good)
			assert_string_equal(out->policy_pattern, cases[i].pattern);
		if (cases[i].nfds == 0)
			close(fd[0]);
		close(fd[1]);
	}
	/* A path after the pattern (say, a file to write to) is refused. */
	m_head(&m, EXEC_PRIV_POLICY_ADD, 0, 1);
	m_str(&m, "api.example.com");
	m_str(&m, "/etc/tollgate/policy.json");
	assert_int_equal(parse(&m, NULL, 0, out), -EPROTO);
	free(out);
}

/* Host access: a path a walk takes (absolute, no ".."), a mode in range, a
 * write always strict; a command's program and directory alike, 1 to
 * EXEC_HOST_ARGV_MAX arguments, a timeout of 1 to EXEC_HOST_TIMEOUT_MAX. */
static void
test_host_messages(void **state)
{
	static const struct {
		uint32_t mode, strict;
		int32_t value;
		const char *path;
		bool good;
	} opens[] = {
	    {EXEC_HOST_READ, 0, 0, "/home/u/file", true},
	    {EXEC_HOST_RESOLVE, 0, 0, "/", true},
	    {EXEC_HOST_LIST, 1, 0, "/srv/data", true},
	    {EXEC_HOST_WRITE, 1, 0, "/home/u/out/w.txt", true},
	    {EXEC_HOST_WRITE, 0, 0, "/home/u/out/w.txt", false}, /* a write not strict */
	    {EXEC_HOST_DIR, 0, 0, "/tmp", true},
	    {EXEC_HOST_DIR + 1, 0, 0, "/tmp", false},             /* no such mode */
	    {EXEC_HOST_READ, 2, 0, "/tmp/x", false},              /* strict is 0 or 1 */
	    {EXEC_HOST_READ, 0, 0, "home/u/file", false},         /* relative */
	    {EXEC_HOST_READ, 0, 0, "/home/u/../../etc/shadow", false},
	    {EXEC_HOST_READ, 0, 0, "/..", false},
	    {EXEC_HOST_READ, 0, 0, "", false},
	    {EXEC_HOST_READ, 0, 0, NULL, false},
	    {EXEC_HOST_READ, 0, 1, "/tmp/x", false}, /* a value */
	};
	static const struct {
		int32_t value;
		const char *program, *cwd;
		uint32_t argc; /* "a" repeated, argv[0] the program */
		bool good;
	} execs[] = {
	    {30, "/usr/bin/id", "/", 1, true},
	    {1, "/bin/echo", "/home/u", 3, true},
	    {EXEC_HOST_TIMEOUT_MAX, "/bin/echo", "/", EXEC_HOST_ARGV_MAX, true},
	    {0, "/usr/bin/id", "/", 1, false},                      /* no timeout */
	    {EXEC_HOST_TIMEOUT_MAX + 1, "/usr/bin/id", "/", 1, false},
	    {30, "id", "/", 1, false},                              /* a bare name */
	    {30, "/usr/bin/../../bin/sh", "/", 1, false},
	    {30, "/usr/bin/id", "tmp", 1, false},                   /* a relative directory */
	    {30, "/usr/bin/id", "/tmp/..", 1, false},
	    {30, "/usr/bin/id", "/", 0, false},                     /* no argv */
	    {30, "/usr/bin/id", "/", EXEC_HOST_ARGV_MAX + 1, false},
	};
	struct exec_priv_msg *out = malloc(sizeof(*out));
	struct msg *m = malloc(sizeof(*m) + 0);
	char *big = malloc(EXEC_PRIV_MSG_MAX);

	(void)state;
	for (size_t i = 0; i < sizeof(opens) / sizeof(opens[0]); i++) {
		int rc;

		m_head(m, EXEC_PRIV_HOST_OPEN, 0, opens[i].value);
		m_u32(m, opens[i].mode);
		m_u32(m, opens[i].strict);
		if (opens[i].path != NULL)
			m_str(m, opens[i].path);
		rc = parse(m, NULL, 0, out);
		if (rc != (opens[i].good ? 0 : -EPROTO))
			fail_msg("open case %zu (%s): rc %d", i, opens[i].path ? opens[i].path : "-", rc);
		if (opens[i].good) {
			assert_string_equal(out->host_open.path, opens[i].path);
			assert_int_equal(out->host_open.mode, opens[i].mode);
		}
	}
	/* An fd with it, or a second path, is refused. */
	{
		int fd[2];

		m_head(m, EXEC_PRIV_HOST_OPEN, 0, 0);
		m_u32(m, EXEC_HOST_READ);
		m_u32(m, 0);
		m_str(m, "/tmp/x");
		assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
		assert_int_equal(parse(m, fd, 1, out), -EPROTO);
		close(fd[1]);
		m_str(m, "/etc/shadow");
		assert_int_equal(parse(m, NULL, 0, out), -EPROTO);
	}
	/* The command messages are larger than struct msg: built in big. */
	for (size_t i = 0; i < sizeof(execs) / sizeof(execs[0]); i++) {
		struct exec_priv_head h = {.kind = EXEC_PRIV_HOST_EXEC, .value = execs[i].value};
		size_t at = 0;
		uint32_t n;
		int rc;

		memcpy(big + at, &h, sizeof(h));
		at += sizeof(h);
		for (int k = 0; k < 2; k++) {
			const char *s = k == 0 ? execs[i].program : execs[i].cwd;

			n = (uint32_t)strlen(s) + 1;
			memcpy(big + at, &n, 4);
			memcpy(big + at + 4, s, n);
			at += 4 + n;
		}
		memcpy(big + at, &execs[i].argc, 4);
		at += 4;
		for (uint32_t a = 0; a < execs[i].argc; a++) {
			const char *s = a == 0 ? execs[i].program : "a";

			n = (uint32_t)strlen(s) + 1;
			memcpy(big + at, &n, 4);
			memcpy(big + at + 4, s, n);
			at += 4 + n;
		}
		rc = exec_priv_msg_parse(big, at, NULL, 0, out);
		if (rc != (execs[i].good ? 0 : -EPROTO))
			fail_msg("exec case %zu (%s): rc %d", i, execs[i].program, rc);
		if (execs[i].good) {
			assert_int_equal(out->host_exec.argc, execs[i].argc);
			assert_null(out->host_exec.argv[execs[i].argc]);
			assert_int_equal(out->host_exec.timeout, execs[i].value);
			assert_string_equal(out->host_exec.cwd, execs[i].cwd);
		}
	}
	free(big);
	free(m);
	free(out);
}

/* A START may name a work directory the parent made, and no other. */
static void
test_workdir_ceiling(void **state)
{
	struct exec_priv_ceiling c = {.gate_workdirs = true};
	struct exec_priv_start *st = calloc(1, sizeof(*st));
	char why[256], made[256];

	(void)state;
	/* Named as the gate named its own before the parent made them. */
	snprintf(made, sizeof(made), "%s/tollgate-serve.x", exec_tmp_dir());
	st->workdir = made;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "work directory"));
	/* The parent sets the ceiling's workdir to one it holds. */
	c.workdir = made;
	assert_int_equal(exec_priv_start_check(st, &c, why, sizeof(why)), 0);
	free(st);
}

/* The image's User: both ids or neither, never (uid_t)-1, only with an
 * image root. */
static void
test_image_user_messages(void **state)
{
	struct exec_priv_msg *out = malloc(sizeof(*out));
	static const struct {
		const char *root;
		uint32_t uid, gid;
		int want;
	} cases[] = {
	    {"/var/lib/tollgate/images/roots/x", 1234, 1234, 0},
	    {"/var/lib/tollgate/images/roots/x", 0, 0, 0},
	    {"/var/lib/tollgate/images/roots/x", 1234, 0, -EPROTO},
	    {"/var/lib/tollgate/images/roots/x", 0, 50, -EPROTO},
	    {"/var/lib/tollgate/images/roots/x", UINT32_MAX, 5, -EPROTO},
	    {"/var/lib/tollgate/images/roots/x", 5, UINT32_MAX, -EPROTO},
	    {NULL, 1234, 1234, -EPROTO},
	};
	struct msg m;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		m_head(&m, EXEC_PRIV_START, 0, 0);
		m_u32(&m, 0);
		m_u32(&m, 0);
		for (int k = 0; k < 5; k++)
			m_i64(&m, 0);
		m_str(&m, NULL);
		m_str(&m, NULL);
		m_str(&m, NULL);
		m_str(&m, cases[i].root);
		m_str(&m, NULL);
		m_u32(&m, cases[i].uid);
		m_u32(&m, cases[i].gid);
		m_u32(&m, 1);
		m_str(&m, "true");
		m_u32(&m, 0);
		m_u32(&m, 0);
		m_str(&m, NULL);
		assert_int_equal(parse(&m, NULL, 0, out), cases[i].want);
		if (cases[i].want == 0) {
			assert_int_equal(out->start.image_uid, cases[i].uid);
			assert_int_equal(out->start.image_gid, cases[i].gid);
		}
	}
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_bad_messages),
	    cmocka_unit_test(test_ceiling),
	    cmocka_unit_test(test_workdir_messages),
	    cmocka_unit_test(test_policy_add_messages),
	    cmocka_unit_test(test_workdir_ceiling),
	    cmocka_unit_test(test_host_messages),
	    cmocka_unit_test(test_image_user_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
