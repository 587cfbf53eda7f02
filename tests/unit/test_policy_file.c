/*
 * Policy files (policy/file.c): what a valid file means, every error with
 * its exact FILE:LINE:COL, size and nesting limits, and the atomic rewrite
 * of policy_file_add_rule.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/policy.h"

#include "fixture_file.h"

/* Some SHA-256 value: the loader checks its form, not what it hashes. */
#define S3CRET_SHA256 "2c9a9d2e4b1b6e0e0e7c5b0a8c7d5e9a3c2d5d8f8e9c3b4c8c9a2e1d0f3b4a5c"

static const char full_policy[] =
	"{\n"
	"  \"version\": 1,\n"
	"  \"comment\": \"sample\",\n"
	"  \"default\": \"ask\",\n"
	"  \"ask_timeout\": 30,\n"
	"  \"allow\": [\"pypi.org\", \"*.pythonhosted.org\", \"api.github.com:443\"],\n"
	"  \"deny\": [\"*.evil.example\"],\n"
	"  \"ask\": [\"*.example.org:*\"],\n"
	"  \"allow_cidr\": [\"10.1.0.0/16\"],\n"
	"  \"deny_cidr\": [\"10.1.2.0/24\"],\n"
	"  \"clients\": [\n"
	"    {\"name\": \"ci\", \"sources\": [\"10.20.0.0/16\"], \"allow\": [\"github.com\"],\n"
	"     \"default\": \"deny\"},\n"
	"    {\"name\": \"alice\", \"user\": \"alice\",\n"
	"     \"password_sha256\": \"" S3CRET_SHA256 "\",\n"
	"     \"ask_timeout\": 5.5}\n"
	"  ]\n"
	"}\n";

static struct policy *
load(const char *text)
{
	struct policy *p = NULL;
	char err[512] = "";

	if (policy_load_buffer("t.json", text, strlen(text), &p, err, sizeof(err)) != 0)
		fail_msg("load failed: %s", err);
	return p;
}

static void
decide(const struct policy *p, const char *target, struct policy_decision *d)
{
	struct policy_host h;
	int port;

	assert_int_equal(policy_hostport_parse(target, strlen(target), &h, &port), 0);
	policy_decide(p, &h, port < 0 ? 443 : port, d);
}

static void
test_full(void **state)
{
	struct policy *p = load(full_policy), *sel;
	struct policy_stats st;
	struct policy_decision d;
	struct policy_addr src;
	const char *name;
	bool auth;

	policy_get_stats(p, &st);
	assert_int_equal(st.rules, 5);
	assert_int_equal(st.cidrs, 2);
	assert_int_equal(st.clients, 2);
	assert_int_equal(policy_default(p), POLICY_ASK);
	assert_true(policy_ask_timeout(p) == 30.0);
	decide(p, "pypi.org", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	assert_string_equal(d.rule, "allow pypi.org (t.json:6:13)");
	decide(p, "files.pythonhosted.org", &d);
	assert_string_equal(d.rule, "allow *.pythonhosted.org (t.json:6:25)");
	decide(p, "api.github.com:80", &d);
	assert_int_equal(d.reason, POLICY_REASON_PORT_NOT_ALLOWED);
	decide(p, "x.evil.example", &d);
	assert_string_equal(d.rule, "deny *.evil.example (t.json:7:12)");
	decide(p, "www.example.org:8080", &d);
	assert_int_equal(d.verdict, POLICY_ASK);
	assert_string_equal(d.rule, "ask *.example.org:* (t.json:8:11)");
	decide(p, "10.1.3.1", &d);
	assert_string_equal(d.rule, "allow-cidr 10.1.0.0/16 (t.json:9:18)");
	decide(p, "10.1.2.1", &d);
	assert_string_equal(d.rule, "deny-cidr 10.1.2.0/24 (t.json:10:17)");
	decide(p, "unknown.net", &d);
	assert_int_equal(d.verdict, POLICY_ASK);

	assert_int_equal(policy_addr_parse("10.20.0.7", 9, &src), 0);
	sel = policy_select_client(p, &src, NULL, NULL, &name, &auth);
	assert_non_null(sel);
	assert_string_equal(name, "ci");
	decide(sel, "github.com", &d);
	assert_string_equal(d.rule, "allow github.com (t.json:12:59)");
	decide(sel, "unknown.net", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_true(policy_ask_timeout(sel) == 30.0);
	policy_free(sel);
	policy_free(p);
}

/* A client section's "mode": its effective policy carries it, others fall back. */
static void
test_client_mode(void **state)
{
	struct policy *p = load("{\"version\": 1, \"clients\": [\n"
	                        " {\"name\": \"r\", \"sources\": [\"10.1.0.0/16\"], \"mode\": "
	                        "\"report\"},\n"
	                        " {\"name\": \"e\", \"sources\": [\"10.2.0.0/16\"], \"mode\": "
	                        "\"enforce\"},\n"
	                        " {\"name\": \"n\", \"sources\": [\"10.3.0.0/16\"]}]}");
	struct policy *sel;
	char plain[65], moded[65];

	assert_int_equal(policy_mode(p, POLICY_MODE_ENFORCE), POLICY_MODE_ENFORCE);
	assert_int_equal(policy_mode(p, POLICY_MODE_REPORT), POLICY_MODE_REPORT);
	sel = policy_client_by_name(p, "r");
	assert_int_equal(policy_mode(sel, POLICY_MODE_ENFORCE), POLICY_MODE_REPORT);
	policy_free(sel);
	sel = policy_client_by_name(p, "e");
	assert_int_equal(policy_mode(sel, POLICY_MODE_REPORT), POLICY_MODE_ENFORCE);
	policy_free(sel);
	sel = policy_client_by_name(p, "n");
	assert_int_equal(policy_mode(sel, POLICY_MODE_REPORT), POLICY_MODE_REPORT);
	policy_free(sel);
	policy_free(p);

	/* The mode is part of what the digest covers: a switch shows in the audit. */
	p = load(
	    "{\"version\": 1, \"clients\": [{\"name\": \"r\", \"sources\": [\"10.1.0.0/16\"]}]}");
	assert_int_equal(policy_digest(p, plain), 0);
	policy_free(p);
	p = load("{\"version\": 1, \"clients\": [{\"name\": \"r\", \"sources\": [\"10.1.0.0/16\"], "
	         "\"mode\": \"report\"}]}");
	assert_int_equal(policy_digest(p, moded), 0);
	policy_free(p);
	assert_string_not_equal(plain, moded);
}

/* '_' and '-' spell one key: the full policy either way is the same policy. */
static void
test_spellings(void **state)
{
	static const char *const keys[] = { "ask_timeout", "allow_cidr", "deny_cidr",
		                            "password_sha256", NULL };
	char hyphens[sizeof(full_policy)], a[65], b[65];
	struct policy *p;

	(void)state;
	memcpy(hyphens, full_policy, sizeof(full_policy));
	for (size_t i = 0; keys[i] != NULL; i++) {
		for (char *at = strstr(hyphens, keys[i]); at != NULL; at = strstr(at + 1, keys[i]))
			*strchr(at, '_') = '-';
	}
	assert_null(strstr(hyphens, "ask_timeout"));
	assert_non_null(strstr(hyphens, "\"password-sha256\""));
	p = load(full_policy);
	assert_int_equal(policy_digest(p, a), 0);
	policy_free(p);
	p = load(hyphens);
	assert_int_equal(policy_digest(p, b), 0);
	assert_true(policy_ask_timeout(p) == 30.0);
	policy_free(p);
	assert_string_equal(a, b);
}

static void
test_minimal(void **state)
{
	struct policy *p = load("{\"version\":1}");
	struct policy_stats st;
	struct policy_decision d;

	policy_get_stats(p, &st);
	assert_int_equal(st.rules + st.cidrs + st.clients, 0);
	assert_int_equal(policy_default(p), POLICY_DENY);
	assert_true(policy_ask_timeout(p) == 60.0);
	decide(p, "example.com", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	policy_free(p);
}

struct err_case {
	const char *text;
	const char *err; /* exact message */
};

static const struct err_case err_cases[] = {
	{ "", "t.json:1:1: invalid JSON: '[' or '{' expected" },
	{ "{", NULL },
	{ "[]", "t.json:1:1: expected a JSON object ({\"version\": 1, ...})" },
	{ "{}", "t.json:1:1: missing \"version\": expected \"version\": 1" },
	{ "  {\"allow\": []}", "t.json:1:3: missing \"version\": expected \"version\": 1" },
	{ "{\"version\": 2}", "t.json:1:13: \"version\": expected 1 (the only version so far)" },
	{ "{\"version\": \"1\"}", "t.json:1:13: \"version\": expected 1 (the only version so far)" },
	{ "{\"version\": 1.0}", "t.json:1:13: \"version\": expected 1 (the only version so far)" },
	{ "{\"version\": 1,\n \"alow\": [\"a.com\"]}",
	  "t.json:2:2: unknown key \"alow\" (did you mean \"allow\"?)" },
	{ "{\"version\": 1,\n \"allow\": [\"a.com\",\n   \"a.*.b\"]}",
	  "t.json:3:4: malformed pattern: '*' is allowed only as the whole host ('*') "
	  "or as the whole first label ('*.example.com') (expected HOST[:PORT], e.g. "
	  "example.com, *.example.com:443, *:*)" },
	{ "{\"version\": 1, \"deny\": [\"*.\"]}", NULL },
	{ "{\"version\": 1, \"ask\": [\"**.x\"]}", NULL },
	{ "{\"version\": 1, \"allow\": [\"foo.com:99999\"]}",
	  "t.json:1:26: malformed pattern: port out of range (1-65535) "
	  "(expected HOST[:PORT], e.g. example.com, *.example.com:443, *:*)" },
	{ "{\"version\": 1, \"allow\": \"a.com\"}",
	  "t.json:1:25: \"allow\": expected an array of pattern strings (\"*.example.com:443\")" },
	{ "{\"version\": 1, \"allow\": [\"a.com\", 5]}",
	  "t.json:1:35: expected a string (a HOST[:PORT] pattern)" },
	{ "{\"version\": 1, \"allow_cidr\": [\"10.0.0.1/8\"]}",
	  "t.json:1:31: malformed address rule: bits set after the prefix (did you "
	  "mean the network address?)" },
	{ "{\"version\": 1, \"deny_cidr\": {}}",
	  "t.json:1:29: \"deny_cidr\": expected an array of address strings (\"10.0.0.0/8\")" },
	{ "{\"version\": 1, \"default\": \"allow\"}",
	  "t.json:1:27: \"default\": expected \"deny\" or \"ask\"" },
	{ "{\"version\": 1, \"default\": null}",
	  "t.json:1:27: \"default\": expected \"deny\" or \"ask\"" },
	{ "{\"version\": 1, \"ask_timeout\": 0}",
	  "t.json:1:31: \"ask_timeout\": expected a number of seconds, more than 0 and at most "
	  "86400" },
	{ "{\"version\": 1, \"ask-timeout\": 0}",
	  "t.json:1:31: \"ask-timeout\": expected a number of seconds, more than 0 and at most "
	  "86400" },
	/* '_' and '-' are one character: both spellings of a key are one key given twice. */
	{ "{\"version\": 1, \"ask_timeout\": 5,\n \"ask-timeout\": 6}",
	  "t.json:2:2: \"ask_timeout\" and \"ask-timeout\" are the same key (give it once)" },
	{ "{\"version\": 1, \"allow-cidr\": [], \"allow_cidr\": []}",
	  "t.json:1:34: \"allow-cidr\" and \"allow_cidr\" are the same key (give it once)" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"tls_cn\": \"x\", \"tls-cn\": "
	  "\"y\"}]}",
	  "t.json:1:57: \"tls_cn\" and \"tls-cn\" are the same key (give it once)" },
	{ "{\"version\": 1, \"frobnicate\": 1}",
	  "t.json:1:16: unknown key \"frobnicate\" (expected one of: version, comment, default, "
	  "ask-timeout, allow, deny, ask, allow-cidr, deny-cidr, clients, filesystem, inspect, secrets)" },
	{ "{\"version\": 1, \"ask_timeout\": -1}", NULL },
	{ "{\"version\": 1, \"secrets\": {}}",
	  "t.json:1:27: \"secrets\": expected an array of {\"name\": ..., \"hosts\": [...]}" },
	{ "{\"version\": 1, \"secrets\": [{\"name\": \"1X\", \"hosts\": [\"a.com\"]}]}",
	  "t.json:1:28: \"name\": expected a variable name (A-Z a-z 0-9 _)" },
	{ "{\"version\": 1, \"secrets\": [{\"name\": \"X\", \"hosts\": []}]}",
	  "t.json:1:28: \"hosts\": expected a non-empty array of host names" },
	{ "{\"version\": 1, \"secrets\": [{\"name\": \"X\", \"hosts\": [\"a.com:443\"]}]}",
	  "t.json:1:28: 'a.com:443': name a host or *.domain, without a port" },
	{ "{\"version\": 1, \"secrets\": [{\"name\": \"X\", \"hosts\": [\"a.com\"]}, "
	  "{\"name\": \"X\", \"hosts\": [\"b.com\"]}]}",
	  "t.json:1:63: secret X: given twice" },
	{ "{\"version\": 1, \"secrets\": [{\"name\": \"X\", \"hosts\": [\"a.com\"], "
	  "\"value\": \"v\"}]}",
	  "t.json:1:28: unknown key \"value\" in a secret (expected name, hosts, env or comment)" },
	{ "{\"version\": 1, \"ask_timeout\": 86401}", NULL },
	{ "{\"version\": 1, \"ask_timeout\": \"60s\"}", NULL },
	{ "{\"version\": 1, \"comment\": 5}", "t.json:1:27: \"comment\": expected a string" },
	{ "{\"version\": 1, \"version\": 1}",
	  "t.json:1:24: invalid JSON: duplicate object key" },
	{ "{\"version\": 1,\n\"allow\": [\"a.com\",]}", NULL },
	{ "{\"version\": 1} x", NULL },
	{ "{\"version\": 1, \"allow\": [\"a\\u0000b\"]}", NULL },
	{ "{\"version\": 1, \"clients\": {}}",
	  "t.json:1:27: \"clients\": expected an array of client sections" },
	{ "{\"version\": 1, \"clients\": [5]}",
	  "t.json:1:28: expected an object (a client section)" },
	{ "{\"version\": 1, \"clients\": [{}]}", "t.json:1:28: a client section needs \"name\"" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\"}]}",
	  "t.json:1:28: client 'a': expected \"sources\" or \"user\" to select it" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a b\", \"sources\": [\"10.0.0.0/8\"]}]}",
	  "t.json:1:37: \"name\": expected 1-63 letters, digits, '-', '_' or '.'" },
	{ "{\"version\": 1,\n \"clients\": [\n  {\"name\": \"a\",\n   \"sources\": [\"10.0.0.0/8\"],\n"
	  "   \"version\": 1}]}",
	  "t.json:5:4: unknown key \"version\" in a client section (expected one of: name, comment, "
	  "sources, user, password-sha256, mode, tls-subject, tls-cn, default, ask-timeout, "
	  "allow, deny, ask, allow-cidr, deny-cidr)" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"sources\": [\"10.0.0.0/8\"], "
	  "\"mode\": \"audit\"}]}",
	  "t.json:1:77: \"mode\": expected \"enforce\" or \"report\"" },
	{ "{\"version\": 1, \"mode\": \"report\"}",
	  "t.json:1:16: unknown key \"mode\" (expected one of: version, comment, default, "
	  "ask-timeout, allow, deny, ask, allow-cidr, deny-cidr, clients, filesystem, inspect, secrets)" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"sources\": []}]}",
	  "t.json:1:53: \"sources\": expected a non-empty array of CIDR blocks (\"10.0.0.0/8\")" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"sources\": [\"10.0.0.0/8\", "
	  "\"10.1/16\"]}]}",
	  "t.json:1:68: malformed address: expected an IPv4 dotted quad or an IPv6 "
	  "address (no brackets), optionally followed by /PREFIX" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"user\": \"a\"}]}",
	  "t.json:1:28: client \"a\": \"user\" needs \"password-sha256\"" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"sources\": [\"10.0.0.0/8\"], "
	  "\"password_sha256\": \"" S3CRET_SHA256 "\"}]}",
	  "t.json:1:28: client \"a\": \"password-sha256\" needs \"user\"" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"user\": \"a\", \"password_sha256\": "
	  "\"abc\"}]}",
	  "t.json:1:74: \"password_sha256\": expected 64 hex digits (the SHA-256 of the password)" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"user\": \"a:b\"}]}",
	  "t.json:1:50: \"user\": expected a proxy user name (1-128 characters, no ':' or control "
	  "characters)" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"user\": \"a\", \"password\": \"x\"}]}",
	  NULL },
	{ "{\"version\": 1, \"clients\": [\n {\"name\": \"a\", \"sources\": [\"10.0.0.0/8\"]},\n"
	  " {\"name\": \"a\", \"sources\": [\"10.0.0.0/8\"]}]}",
	  "t.json:3:2: client 'a' is defined twice" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"sources\": [\"10.0.0.0/8\"], "
	  "\"allow\": [\"*.\"]}]}",
	  NULL },
	/* Columns count characters, as jansson's do. */
	{ "{\"version\": 1, \"comment\": \"\xc3\xa9\xc3\xa9\", \"alow\": 1}",
	  "t.json:1:33: unknown key \"alow\" (did you mean \"allow\"?)" },
	/* A key written with escapes is found where it is. */
	{ "{\"version\": 1, \"\\u0061llow\": [\"*.\"]}", NULL },
	{ "{\"version\": 1, \"al\\nlow\": 1}",
	  "t.json:1:16: unknown key \"al?low\" (did you mean \"allow\"?)" },
	{ "{\"version\": 1, \"allow\": [\"a\\nb.com\"]}", NULL },
	{ "\xef\xbb\xbf{\"version\": 1}", NULL },
	{ "{\"version\": 1, \"allow\": [\"\xff\"]}", NULL },
	/* The "filesystem" section: what the sandbox sees of the host's files. */
	{ "{\"version\": 1, \"filesystem\": []}",
	  "t.json:1:30: \"filesystem\": expected an object ({\"read\": [...], \"write\": [...]})" },
	{ "{\"version\": 1, \"filesystem\": {\"exec\": []}}",
	  "t.json:1:31: unknown key \"exec\" in \"filesystem\" (expected read or write)" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": \"/srv\"}}",
	  "t.json:1:39: \"read\": expected an array of paths (\"/src\" or \"/src:/dest\")" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [5]}}",
	  "t.json:1:40: expected a string (\"/src\" or \"/src:/dest\")" },
	{ "{\"version\": 1,\n \"filesystem\": {\"read\": [\"/srv\",\n  \"srv\"]}}",
	  "t.json:3:3: SRC must be an absolute path" },
	{ "{\"version\": 1, \"filesystem\": {\"write\": [\"/srv:dest\"]}}",
	  "t.json:1:41: DEST must be an absolute path" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/proc\"]}}",
	  "t.json:1:40: without a DEST the path is also the one in the sandbox, which "
	  "overlaps what the sandbox's own set-up mounts (/proc, /sys, /dev, /var/tmp, "
	  "/run/tollgate, /out)" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/tmp\"]}}",
	  "t.json:1:40: DEST would cover what the sandbox's own set-up mounts there "
	  "(/tmp, /work, /run): bind below it instead (e.g. /tmp/NAME)" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/var/tmp/x\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/run/tollgate/x\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/out/x\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/dev\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/sys/fs\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/work\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/run\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/\"]}}",
	  "t.json:1:40: DEST cannot be / (the sandbox's own root)" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/usr/local/x\"]}}",
	  "t.json:1:40: DEST overlaps a system directory bound from the host "
	  "(/usr, /bin, /sbin, /lib*, /etc, /opt)" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/data/../etc\"]}}",
	  "t.json:1:40: DEST must be a plain path (no empty, '.' or '..' "
	  "component, no trailing '/')" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/data//x\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv/\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv:/data/.\"]}}", NULL },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\":/data\"]}}",
	  "t.json:1:40: SRC must be an absolute path" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/a\\tb:/data\"]}}", NULL },
	{ "{\"version\": 1,\n \"filesystem\": {\"read\": [\"/srv:/data\"],\n  \"write\": "
	  "[\"/home/u/cache:/data/cache\"]}}",
	  "t.json:3:13: its DEST overlaps one bound already" },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/a\", \"/b:/a\"]}}",
	  "t.json:1:46: its DEST overlaps one bound already" },
	{ "{\"version\": 1, \"clients\": [{\"name\": \"a\", \"sources\": [\"10.0.0.0/8\"], "
	  "\"filesystem\": {}}]}",
	  NULL },
};

/* A valid "filesystem" section: read and write entries, DEST defaulting to SRC. */
static const struct fs_case {
	const char *text;
	size_t n;
	const char *src[3], *dest[3];
	bool writable[3];
} fs_cases[] = {
	{ "{\"version\": 1}", 0, {NULL}, {NULL}, {false} },
	{ "{\"version\": 1, \"filesystem\": {}}", 0, {NULL}, {NULL}, {false} },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [], \"write\": []}}", 0, {NULL}, {NULL},
	  {false} },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/srv/project\"]}}", 1,
	  {"/srv/project"}, {"/srv/project"}, {false} },
	{ "{\"version\": 1, \"filesystem\": {\"write\": [\"/home/u/cache:/cache\"],\n"
	  " \"read\": [\"/srv/a b:/data\", \"/srv/x:y:/x\"]}}",
	  3, {"/home/u/cache", "/srv/a b", "/srv/x:y"}, {"/cache", "/data", "/x"},
	  {true, false, false} },
	/* SRC may be anything absolute: the host side is judged when a sandbox starts. */
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/../x/./y:/y\"]}}", 1, {"/../x/./y"},
	  {"/y"}, {false} },
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/data\", \"/database\"]}}", 2,
	  {"/data", "/database"}, {"/data", "/database"}, {false, false} },
	/* Below /tmp, /work and /run: mounted over what the set-up made there. */
	{ "{\"version\": 1, \"filesystem\": {\"read\": [\"/tmp/data\", \"/srv:/run/srv\"],\n"
	  " \"write\": [\"/srv/cache:/work/cache\"]}}",
	  3, {"/tmp/data", "/srv", "/srv/cache"}, {"/tmp/data", "/run/srv", "/work/cache"},
	  {false, false, true} },
};

static void
test_filesystem(void **state)
{
	for (size_t i = 0; i < sizeof(fs_cases) / sizeof(fs_cases[0]); i++) {
		const struct fs_case *c = &fs_cases[i];
		struct policy *p = load(c->text), *flags, *m;
		char why[256];

		assert_int_equal(policy_fs_count(p), c->n);
		for (size_t k = 0; k < c->n; k++) {
			const struct policy_fs_entry *e = policy_fs_get(p, k);

			assert_string_equal(e->src, c->src[k]);
			assert_string_equal(e->dest, c->dest[k]);
			assert_int_equal(e->writable, c->writable[k]);
		}
		/* Flags add to the file (policy_merge keeps both lists, file first). */
		flags = policy_new();
		assert_non_null(flags);
		assert_int_equal(policy_add_fs(flags, "/opt2:/flag", true, why, sizeof(why)), 0);
		m = policy_merge(p, flags);
		assert_non_null(m);
		assert_int_equal(policy_fs_count(m), c->n + 1);
		assert_string_equal(policy_fs_get(m, c->n)->dest, "/flag");
		assert_true(policy_fs_get(m, c->n)->writable);
		policy_free(m);
		policy_free(flags);
		policy_free(p);
	}
}

/* "secrets": each binding kept, its hosts inspected, kept by policy_merge. */
static void
test_secrets(void **state)
{
	struct policy *p = load("{\"version\": 1, \"inspect\": [\"a.example\"], \"secrets\": ["
	                        "{\"name\": \"GH_TOKEN\", \"hosts\": [\"api.github.com\", "
	                        "\"*.github.com\"]},"
	                        "{\"name\": \"NPM\", \"env\": \"CI_NPM\", \"hosts\": "
	                        "[\"a.example\"], \"comment\": \"x\"}]}");
	struct policy *flags, *m;

	(void)state;
	assert_int_equal(policy_secret_count(p), 2);
	assert_string_equal(policy_secret_get(p, 0)->name, "GH_TOKEN");
	assert_string_equal(policy_secret_get(p, 0)->env_var, "");
	assert_string_equal(policy_secret_get(p, 0)->hosts, "api.github.com,*.github.com");
	assert_string_equal(policy_secret_get(p, 1)->env_var, "CI_NPM");
	assert_null(policy_secret_get(p, 2));
	/* Bound hosts are inspected, each once. */
	assert_int_equal(policy_inspect_count(p), 3);
	assert_string_equal(policy_inspect_get(p, 1), "api.github.com");
	assert_string_equal(policy_inspect_get(p, 2), "*.github.com");
	flags = policy_new();
	assert_non_null(flags);
	m = policy_merge(p, flags);
	assert_non_null(m);
	assert_int_equal(policy_secret_count(m), 2);
	assert_string_equal(policy_secret_get(m, 1)->name, "NPM");
	policy_free(m);
	policy_free(flags);
	policy_free(p);
}

static void
test_errors(void **state)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
		const struct err_case *c = &err_cases[i];
		struct policy *p = (struct policy *)1;
		char err[1024] = "";
		int rc = policy_load_buffer("t.json", c->text, strlen(c->text), &p, err, sizeof(err));

		if (rc == 0)
			fail_msg("case %zu accepted: %s", i, c->text);
		assert_null(p);
		assert_null(strchr(err, '\n'));
		if (strncmp(err, "t.json:", 7) != 0)
			fail_msg("case %zu: '%s' does not start with FILE:", i, err);
		if (c->err != NULL && strcmp(err, c->err) != 0) {
			print_error("case %zu:\n got: %s\nwant: %s\n", i, err, c->err);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* An error about a file gives position and reason, never the file's text:
 * a policy path swapped for a link to another file must not leak it. */
static void
test_errors_quote_no_content(void **state)
{
	static const char *const texts[] = {
	    "root:$y$j9T$s3cr3tHASH:19000:0:99999:7:::\n",
	    "{\"version\": 1, \"allow\": [\"https://s3cr3t.example/x\"]}",
	    "{\"version\": 1, \"allow\": [\"s3cr3t.com,other.s3cr3t.com\"]}",
	    "{\"version\": 1, \"allow\": [\"s3cr3t.*.com\"]}",
	    "{\"version\": 1, \"allow_cidr\": [\"10.0.0.1/8s3cr3t\"]}",
	    "{\"version\": 1, \"filesystem\": {\"read\": [\"s3cr3t\"]}}",
	    "{\"version\": 1, \"filesystem\": {\"read\": [\"/a:/s3cr3t\", \"/b:/s3cr3t\"]}}",
	    "{\"version\": 1, \"clients\": [{\"name\": \"c\", \"sources\": [\"s3cr3t\"]}]}",
	    "{\"version\": 1, \"allow\": [\"\\ud800s3cr3t\"]}",
	    "{\"version\": 1, \"allow\": [s3cr3t]}",
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct policy *p = NULL;
		char err[1024] = "";

		assert_int_not_equal(
		    policy_load_buffer("t.json", texts[i], strlen(texts[i]), &p, err, sizeof(err)), 0);
		assert_null(p);
		if (strstr(err, "s3cr3t") != NULL || strstr(err, "root") != NULL)
			fail_msg("case %zu quotes the file: %s", i, err);
		if (strncmp(err, "t.json:", 7) != 0)
			fail_msg("case %zu: '%s' gives no position", i, err);
	}
}

/* Positions of a bad value in an escaped-key member: the walk decodes keys. */
static void
test_error_positions_escaped(void **state)
{
	const char *text = "{\"version\": 1,\n \"\\u0061llow\": [\"ok.com\", \"*.\"]}";
	struct policy *p = NULL;
	char err[512];

	assert_int_equal(policy_load_buffer("t.json", text, strlen(text), &p, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "t.json:2:27: malformed pattern"));
	text = "{\"version\": 1, \"allow\": [\"\xc3\xa9\"]}";
	assert_int_equal(policy_load_buffer("t.json", text, strlen(text), &p, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "t.json:1:26: "));
}

/* A nul byte in the buffer is an error, not the end of the text. */
static void
test_nul_in_buffer(void **state)
{
	static const char text[] = "{\"version\": 1}\0garbage";
	struct policy *p = NULL;
	char err[512];

	assert_int_equal(policy_load_buffer("t.json", text, sizeof(text) - 1, &p, err, sizeof(err)),
	                 -EINVAL);
	assert_null(p);
}

static void
test_limits(void **state)
{
	size_t big = POLICY_FILE_MAX + 1, n;
	char *text = malloc(big + 1);
	struct policy *p = NULL;
	char err[512];

	assert_non_null(text);
	/* Larger than the cap: refused before parsing. */
	memset(text, ' ', big);
	text[0] = '{';
	memcpy(text + big - 14, "\"version\": 1}", 13);
	text[big - 1] = ' ';
	assert_int_equal(policy_load_buffer("t.json", text, big, &p, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "limit"));
	/* Deep nesting: jansson refuses it, with a position. */
	n = 0;
	n += (size_t)snprintf(text, big, "{\"version\": 1, \"comment\": ");
	for (int i = 0; i < 5000; i++)
		text[n++] = '[';
	text[n] = '\0';
	assert_int_equal(policy_load_buffer("t.json", text, n, &p, err, sizeof(err)), -EINVAL);
	/* Many rules load, and each knows where it came from. */
	n = (size_t)snprintf(text, big, "{\"version\": 1, \"allow\": [");
	for (int i = 0; i < 20000; i++)
		n += (size_t)snprintf(text + n, big - n, "%s\"h%d.example\"", i ? ",\n" : "", i);
	n += (size_t)snprintf(text + n, big - n, "]}");
	assert_int_equal(policy_load_buffer("t.json", text, n, &p, err, sizeof(err)), 0);
	{
		struct policy_decision d;

		decide(p, "h19999.example", &d);
		assert_string_equal(d.rule, "allow h19999.example (t.json:20000:1)");
	}
	policy_free(p);
	free(text);
}

/*
 * Client sections share the top level's rules rather than copying them: a
 * file of thousands of rules and thousands of sections loads in memory
 * proportional to its size (a copy per section would need tens of millions
 * of rules here).
 */
static void
test_many_clients_share_rules(void **state)
{
	size_t cap = POLICY_FILE_MAX, n;
	char *text = malloc(cap);
	struct policy *p = NULL, *sel;
	struct policy_decision d;
	struct policy_stats st;
	char err[512];

	assert_non_null(text);
	n = (size_t)snprintf(text, cap, "{\"version\": 1, \"allow\": [");
	for (int i = 0; i < 6000; i++)
		n += (size_t)snprintf(text + n, cap - n, "%s\"h%d.example\"", i ? "," : "", i);
	n += (size_t)snprintf(text + n, cap - n, "], \"clients\": [");
	for (int i = 0; i < 6000; i++)
		n += (size_t)snprintf(text + n, cap - n,
		                      "%s{\"name\": \"c%d\", \"sources\": [\"10.%d.%d.0/24\"], "
		                      "\"allow\": [\"only%d.example\"]}",
		                      i ? "," : "", i, i / 256, i % 256, i);
	n += (size_t)snprintf(text + n, cap - n, "]}");
	assert_true(n < cap);
	assert_int_equal(policy_load_buffer("t.json", text, n, &p, err, sizeof(err)), 0);
	policy_get_stats(p, &st);
	assert_int_equal(st.rules, 6000);
	assert_int_equal(st.clients, 6000);
	sel = policy_client_by_name(p, "c5999");
	assert_non_null(sel);
	decide(sel, "h0.example", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide(sel, "only5999.example", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide(sel, "only1.example", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	policy_free(sel);
	policy_free(p);
	free(text);
}

/* ---- files on disk ------------------------------------------------------ */

static char tmpdir[64];

static int
setup_dir(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tollgate-unit-policy.XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown_dir(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *
read_file(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "re");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void
test_load_file(void **state)
{
	char path[128], err[512];
	struct policy *p = NULL;

	snprintf(path, sizeof(path), "%s/p.json", tmpdir);
	fixture_write_file(path, full_policy);
	assert_int_equal(policy_load_file(path, &p, err, sizeof(err)), 0);
	policy_free(p);
	fixture_write_file(path, "{\"version\": 1,\n  \"allow\": [\"*.\"]}\n");
	assert_int_equal(policy_load_file(path, &p, err, sizeof(err)), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(err, "p.json:2:13: malformed pattern"));
	assert_int_equal(strncmp(err, path, strlen(path)), 0);
	snprintf(path, sizeof(path), "%s/missing.json", tmpdir);
	assert_int_equal(policy_load_file(path, &p, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "No such file"));
	assert_int_equal(policy_load_file(tmpdir, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	/* A FIFO is refused without waiting for a writer. */
	snprintf(path, sizeof(path), "%s/fifo.json", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(policy_load_file(path, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
}

static void
test_add_rule(void **state)
{
	char path[128], err[512];
	struct policy *p = NULL;
	struct policy_decision d;
	struct stat st;
	const char *text;

	snprintf(path, sizeof(path), "%s/add.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1, \"comment\": \"keep me\", \"allow\": [\"a.com\"],\n"
	                         " \"filesystem\": {\"read\": [\"/srv\"], \"write\": [\"/c:/cache\"]}}\n");
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(policy_file_add_rule(path, POLICY_ALLOW, "New.Example.COM:8443", err,
	                                      sizeof(err)),
	                 0);
	assert_int_equal(policy_file_add_rule(path, POLICY_DENY, "*.bad.example", err, sizeof(err)),
	                 0);
	/* Adding the same rule twice keeps one. */
	assert_int_equal(policy_file_add_rule(path, POLICY_ALLOW, "new.example.com:8443", err,
	                                      sizeof(err)),
	                 0);
	text = read_file(path);
	assert_non_null(strstr(text, "\"keep me\""));
	assert_non_null(strstr(text, "\"new.example.com:8443\""));
	assert_null(strstr(strstr(text, "\"new.example.com:8443\"") + 1, "\"new.example.com:8443\""));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(policy_load_file(path, &p, err, sizeof(err)), 0);
	decide(p, "new.example.com:8443", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide(p, "a.com", &d);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	decide(p, "x.bad.example", &d);
	assert_int_equal(d.verdict, POLICY_DENY);
	/* The rewrite keeps the "filesystem" section. */
	assert_int_equal(policy_fs_count(p), 2);
	assert_string_equal(policy_fs_get(p, 1)->dest, "/cache");
	assert_true(policy_fs_get(p, 1)->writable);
	policy_free(p);

	/* A bad pattern or a bad file is refused, and the file is unchanged. */
	assert_int_equal(policy_file_add_rule(path, POLICY_ALLOW, "a.*.b", err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "malformed pattern"));
	fixture_write_file(path, "{\"version\": 1, \"alow\": []}\n");
	assert_int_equal(policy_file_add_rule(path, POLICY_ALLOW, "b.com", err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "unknown key"));
	assert_string_equal(read_file(path), "{\"version\": 1, \"alow\": []}\n");
	snprintf(path, sizeof(path), "%s/none.json", tmpdir);
	assert_int_equal(policy_file_add_rule(path, POLICY_ALLOW, "b.com", err, sizeof(err)),
	                 -ENOENT);
}

/* Through a symlink, the target is rewritten and the link stays a link. */
static void
test_add_rule_symlink(void **state)
{
	char path[128], link[128], err[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/target.json", tmpdir);
	snprintf(link, sizeof(link), "%s/link.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1}\n");
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(policy_file_add_rule(link, POLICY_ASK, "*.ask.example", err, sizeof(err)),
	                 0);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_non_null(strstr(read_file(path), "*.ask.example"));
}

/* Writers racing on one file: every rule lands, the file stays valid. */
static void
test_add_rule_concurrent(void **state)
{
	enum { WRITERS = 6, RULES = 8 };
	char path[128], err[512];
	struct policy *p = NULL;
	struct policy_stats st;
	pid_t pids[WRITERS];

	snprintf(path, sizeof(path), "%s/race.json", tmpdir);
	fixture_write_file(path, "{\"version\": 1, \"allow\": [\"seed.example\"]}\n");
	for (int w = 0; w < WRITERS; w++) {
		pids[w] = fork();
		assert_true(pids[w] >= 0);
		if (pids[w] == 0) {
			int bad = 0;

			for (int r = 0; r < RULES; r++) {
				char pattern[64];

				snprintf(pattern, sizeof(pattern), "w%d-r%d.example:%d", w, r, 1000 + r);
				if (policy_file_add_rule(path, POLICY_ALLOW, pattern, err, sizeof(err)) != 0)
					bad++;
			}
			_exit(bad == 0 ? 0 : 1);
		}
	}
	for (int w = 0; w < WRITERS; w++) {
		int status = 0;

		assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(policy_load_file(path, &p, err, sizeof(err)), 0);
	policy_get_stats(p, &st);
	assert_int_equal(st.rules, 1 + WRITERS * RULES);
	policy_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_spellings),
		cmocka_unit_test(test_client_mode),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_secrets),
		cmocka_unit_test(test_filesystem),
		cmocka_unit_test(test_error_positions_escaped),
		cmocka_unit_test(test_errors_quote_no_content),
		cmocka_unit_test(test_nul_in_buffer),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_many_clients_share_rules),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_add_rule),
		cmocka_unit_test(test_add_rule_symlink),
		cmocka_unit_test(test_add_rule_concurrent),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
