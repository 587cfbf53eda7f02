#!/usr/bin/env bash
# `tollgate serve --host-access` through the official SDK client, under the
# default split and under TOLLGATE_PRIVSEP=0: a host command in the
# operator's list runs as the person (a real /usr/bin/id); one outside it is
# refused when the person denies it or no one answers, and runs once a
# person approves it with `tollgate approve` (the audit names them); an
# allowlisted `/usr/bin/git status ...` runs only in the directory its rule
# names (in another repository, whose configuration would run a command, it
# is asked and denied, and nothing ran) and its "..." takes no option; a bare
# argv[0] is refused; host files: an allowed read, another user's symlink
# refused, the person's own followed, '..' refused, a write and a copy into
# a session's work directory; without --host-access no host tool is
# listed and a call to one is an unknown tool.
source "$(dirname "$0")/lib.sh"

source "$(dirname "$0")/mcp/setup.sh"
command -v useradd >/dev/null && command -v userdel >/dev/null || skip "useradd/userdel (passwd)"
command -v sqlite3 >/dev/null || skip "sqlite3 (the CLI) to read the audit back"

# The system's interpreter: a version manager's shim costs a second a call.
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
py() { "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }

# The person serve runs for (SUDO_UID, as sudo would set it) and a stranger
# whose symlink must not be followed; both go at the end.
person=tgh-p$$
stranger=tgh-s$$
useradd -M -N -s /usr/sbin/nologin "$person" || skip "useradd $person failed"
defer "userdel $person 2>/dev/null"
useradd -M -N -s /usr/sbin/nologin "$stranger" || skip "useradd $stranger failed"
defer "userdel $stranger 2>/dev/null"
puid=$(id -u "$person")
suid=$(id -u "$stranger")

chmod 711 "$TEST_TMP"
H=$TEST_TMP/h
mkdir -p "$H/data" "$H/links" "$H/out" "$H/private" "$H/approve-me"
echo "granted-file" >"$H/approve-me/g.txt"
echo "hello-host" >"$H/data/a.txt"
echo "not for the model" >"$H/private/p.txt"
ln -s "$H/data/a.txt" "$H/links/theirs"
ln -s "$H/data/a.txt" "$H/links/mine"
# Two repositories whose configuration runs a command on `git status`
# (core.fsmonitor): the one the rule names, and one the model names.
for r in repo other; do
	git init -q "$H/$r"
	echo x >"$H/$r/f"
	git -C "$H/$r" -c user.name=t -c user.email=t@t add f
	git -C "$H/$r" -c user.name=t -c user.email=t@t commit -qm init
	git -C "$H/$r" config core.fsmonitor "touch $H/ran-in-$r #"
done
chown -R "$puid" "$H"
chown -h "$suid" "$H/links/theirs"
cat >"$TEST_TMP/access.json" <<EOF
{
  "comment": "test_serve_host.sh",
  "commands": [
    {"program": "/usr/bin/id", "args": ["-u"], "cwd": ["/"]},
    {"program": "/bin/echo", "args": ["allowed", "..."], "cwd": ["$H"]},
    {"program": "/usr/bin/git", "args": ["status", "..."], "cwd": ["$H/repo"]}
  ],
  "read": ["$H/data", "$H/links"],
  "write": ["$H/out"]
}
EOF

cat >"$TEST_TMP/steps.json" <<EOF
[
 {"step": "list", "tool": "list_host_access"},
 {"step": "id", "tool": "host_exec", "args": {"argv": ["/usr/bin/id", "-u"]}},
 {"step": "echo", "tool": "host_exec", "args": {"argv": ["/bin/echo", "allowed", "a b"], "cwd": "$H"}},
 {"step": "git-here", "tool": "host_exec", "args": {"argv": ["/usr/bin/git", "status", "."], "cwd": "$H/repo"}},
 {"step": "git-elsewhere", "tool": "host_exec", "args": {"argv": ["/usr/bin/git", "status", "."], "cwd": "$H/other"}},
 {"step": "git-option", "tool": "host_exec", "args": {"argv": ["/usr/bin/git", "status", "--porcelain"], "cwd": "$H/repo"}},
 {"step": "echo-option", "tool": "host_exec", "args": {"argv": ["/bin/echo", "allowed", "-e", "x"], "cwd": "$H"}},
 {"step": "echo-below", "tool": "host_exec", "args": {"argv": ["/bin/echo", "allowed"], "cwd": "$H/data"}},
 {"step": "request-nocwd", "tool": "request_host_access", "args": {"command": {"program": "/usr/bin/git", "args": ["log"]}, "reason": "r"}},
 {"step": "bare", "tool": "host_exec", "args": {"argv": ["id", "-u"]}},
 {"step": "shell", "tool": "host_exec", "args": {"argv": ["/bin/echo allowed"]}},
 {"step": "denied", "tool": "host_exec", "args": {"argv": ["/bin/echo", "deny-me"]}},
 {"step": "unanswered", "tool": "host_exec", "args": {"argv": ["/bin/echo", "timeout-me"]}},
 {"step": "approved", "tool": "host_exec", "args": {"argv": ["/bin/echo", "approve-me"], "reason": "test"}},
 {"step": "again", "tool": "host_exec", "args": {"argv": ["/bin/echo", "approve-me"]}},
 {"step": "read", "tool": "host_file_read", "args": {"path": "$H/data/a.txt"}},
 {"step": "theirs", "tool": "host_file_read", "args": {"path": "$H/links/theirs"}},
 {"step": "mine", "tool": "host_file_read", "args": {"path": "$H/links/mine"}},
 {"step": "dotdot", "tool": "host_file_read", "args": {"path": "$H/data/../private/p.txt"}},
 {"step": "private", "tool": "host_file_read", "args": {"path": "$H/private/p.txt"}},
 {"step": "ls", "tool": "host_file_list", "args": {"path": "$H/data"}},
 {"step": "write", "tool": "host_file_write", "args": {"path": "$H/out/w.txt", "content": "written-by-model"}},
 {"step": "write-out", "tool": "host_file_write", "args": {"path": "$H/data/w.txt", "content": "x"}},
 {"step": "session", "tool": "create_session", "args": {}},
 {"step": "copy", "tool": "host_file_copy", "args": {"path": "$H/data/a.txt", "session_id": "\$SESSION", "name": "copied.txt"}},
 {"step": "cat", "tool": "execute_code", "args": {"language": "bash", "code": "cat copied.txt", "session_id": "\$SESSION"}},
 {"step": "request", "tool": "request_host_access", "args": {"path": "$H/approve-me", "access": "read", "reason": "to read g.txt"}},
 {"step": "after-request", "tool": "host_file_read", "args": {"path": "$H/approve-me/g.txt"}},
 {"step": "granted", "tool": "list_host_access"}
]
EOF

# The person at the control socket: approves what says approve-me, lets
# timeout-me run out, denies anything else, and notes what it was shown.
approver() {
	local ctl=$1 log=$2 deadline=$((SECONDS + 120))
	: >"$log"
	while ((SECONDS < deadline)); do
		if "$TOLLGATE" pending --control "$ctl" --json >"$log.p" 2>/dev/null; then
			while IFS=$'\t' read -r id kind what; do
				[[ $kind == host ]] || continue
				cut -f1 "$log" | grep -qx "$id" && continue
				printf '%s\t%s\n' "$id" "$what" >>"$log"
				case $what in
				*approve-me*) "$TOLLGATE" approve "$id" --scope client --control "$ctl" </dev/null >>"$log.decided" 2>&1 || true ;;
				*timeout-me*) ;;
				*) "$TOLLGATE" deny "$id" --control "$ctl" </dev/null >>"$log.decided" 2>&1 || true ;;
				esac
			done < <("$PY" -c '
import json, sys
for line in open(sys.argv[1]):
    if line.strip():
        a = json.loads(line)
        print("%s\t%s\t%s" % (a["id"], a.get("kind", ""), a.get("what", "")))' "$log.p")
		fi
		sleep 0.1
	done
}

run_mode() {
	local mode=$1 ctl=$TEST_TMP/serve-$1.sock audit=$TEST_TMP/audit-$1.db rc
	local -a envs=(SUDO_UID="$puid")
	[[ $mode == single ]] && envs+=(TOLLGATE_PRIVSEP=0)
	rm -f "$H/out/w.txt" "$H/ran-in-repo" "$H/ran-in-other"
	approver "$ctl" "$TEST_TMP/asked-$mode" &
	local apid=$!
	set +e
	out=$(cd "$MCP_DIR" && env "${envs[@]}" timeout 120 node host.mjs "$TEST_TMP/steps.json" -- \
		"$TOLLGATE" serve --no-network --audit "$audit" --control "$ctl" --ask-timeout 3s \
		--host-access "$TEST_TMP/access.json" 2>"$TEST_TMP/err-$mode"); rc=$?
	set -e
	kill "$apid" 2>/dev/null || true
	wait "$apid" 2>/dev/null || true
	expect_eq "$mode: the SDK client session ends cleanly" "$rc" 0
	[[ $rc == 0 ]] || cat "$TEST_TMP/err-$mode" >&2

	expect_eq "$mode: host tools listed with input and output schemas" \
		"$(py "$(step tools)" 'sorted(k for k,v in d["schemas"].items() if v["input"] and v["output"])')" \
		"['host_exec', 'host_file_copy', 'host_file_list', 'host_file_read', 'host_file_write', 'list_host_access', 'request_host_access']"
	expect_eq "$mode: list_host_access: the person's uid" "$(py "$(step list)" 'd["structured"]["uid"]')" "$puid"
	expect_eq "$mode: list_host_access: the operator's commands" \
		"$(py "$(step list)" '[(c["program"], c["cwd"]) for c in d["structured"]["operator"]["commands"]]')" \
		"[('/usr/bin/id', ['/']), ('/bin/echo', ['$H']), ('/usr/bin/git', ['$H/repo'])]"
	expect_eq "$mode: an allowed /usr/bin/id runs as the person" "$(py "$(step id)" 'd["structured"]["stdout"].strip()')" "$puid"
	expect_eq "$mode: ... allowed by the operator's list" "$(py "$(step id)" 'd["structured"]["approved_by"]')" "operator allowlist"
	expect_eq "$mode: /bin/echo with a pattern runs, argv intact, in cwd" \
		"$(py "$(step echo)" 'd["structured"]["stdout"] + "|" + d["structured"]["cwd"]')" "allowed a b
|$H"
	expect_eq "$mode: git status ... runs in the directory its rule names" \
		"$(py "$(step git-here)" 'd["structured"]["exit_code"], d["structured"]["approved_by"]')" "0 operator allowlist"
	expect_eq "$mode: ... where the repository's configuration ran (so the check below can fail)" \
		"$([[ -e $H/ran-in-repo ]] && echo ran)" "ran"
	expect_match "$mode: the same git status in another repository is asked, and the denial refuses" \
		"$(py "$(step git-elsewhere)" 'd["isError"], d["text"]')" \
		"True.*run \[\"/usr/bin/git\",\"status\",\"\.\"\].* in $H/other as uid $puid is outside the operator's --host-access list and the person denied it"
	expect_eq "$mode: ... and nothing of that repository ran" "$([[ -e $H/ran-in-other ]] && echo ran || echo none)" "none"
	expect_match "$mode: an option after \"...\" is no match: asked, denied" \
		"$(py "$(step git-option)" 'd["isError"], d["text"]')" "True.*--porcelain.*the person denied it"
	expect_match "$mode: ... nor after a fixed argument" \
		"$(py "$(step echo-option)" 'd["isError"], d["text"]')" "True.*\"-e\".*the person denied it"
	expect_match "$mode: an allowed echo below its directory runs" \
		"$(py "$(step echo-below)" 'd["isError"], d.get("structured") and d["structured"]["approved_by"]')" "False operator allowlist"
	expect_match "$mode: request_host_access for a command without cwd is an error" \
		"$(py "$(step request-nocwd)" 'd["isError"], d["text"]')" "True.*command: a command needs \"cwd\""
	expect_match "$mode: a bare argv[0] is refused" "$(py "$(step bare)" 'd["isError"], d["text"]')" \
		"True.*not a full path.*never searches PATH.*/usr/bin/id"
	expect_match "$mode: a shell line as argv[0] is no program" "$(py "$(step shell)" 'd["isError"], d["text"]')" "True"
	expect_match "$mode: outside the list, denied by the person: refused" \
		"$(py "$(step denied)" 'd["isError"], d["text"]')" "True.*outside the operator's --host-access list and the person denied it"
	expect_match "$mode: outside the list, no answer: refused after the ask timed out" \
		"$(py "$(step unanswered)" 'd["isError"], d["text"]')" "True.*no person answered in time"
	expect_eq "$mode: approved with tollgate approve: it ran" \
		"$(py "$(step approved)" 'd["structured"]["stdout"].strip() if d["structured"] else d')" "approve-me"
	expect_eq "$mode: ... and the result names who approved" \
		"$(py "$(step approved)" 'd["structured"]["approved_by"]')" "control uid=0"
	expect_eq "$mode: approved for the server's life: runs again without asking" \
		"$(py "$(step again)" 'd["structured"]["stdout"].strip(), d["structured"]["approved_by"]')" "approve-me control uid=0"
	expect_match "$mode: tollgate pending showed exactly what would run" \
		"$(grep 'echo","approve-me' "$TEST_TMP/asked-$mode" | head -1)" \
		'run \["/bin/echo","approve-me"\] \(program /usr/bin/echo\) in / as uid '"$puid"
	expect_eq "$mode: the person was asked once for approve-me" "$(grep -c 'echo","approve-me' "$TEST_TMP/asked-$mode")" 1
	expect_eq "$mode: host_file_read of an allowed prefix" "$(py "$(step read)" 'repr(d["structured"]["content"])')" "'hello-host\\n'"
	expect_match "$mode: another user's symlink is refused" "$(py "$(step theirs)" 'd["isError"], d["text"]')" \
		"True.*$H/links/theirs is a symlink owned by uid $suid, neither root nor the person"
	expect_eq "$mode: the person's own symlink is followed, the real path shown" \
		"$(py "$(step mine)" 'd["structured"]["path"], d["structured"]["content"].strip()')" "$H/data/a.txt hello-host"
	expect_match "$mode: a '..' escape is refused" "$(py "$(step dotdot)" 'd["isError"], d["text"]')" "True.*'\.\.' is not allowed"
	expect_match "$mode: a path outside the read list asks, and the denial refuses" \
		"$(py "$(step private)" 'd["isError"], d["text"]')" "True.*read $H/private/p.txt.*denied"
	expect_eq "$mode: host_file_list" "$(py "$(step ls)" '[e["name"] for e in d["structured"]["entries"]]')" "['a.txt']"
	expect_eq "$mode: host_file_write into a write prefix" "$(cat "$H/out/w.txt" 2>&1)" "written-by-model"
	expect_eq "$mode: ... the file is the person's" "$(stat -c %u "$H/out/w.txt" 2>&1)" "$puid"
	expect_match "$mode: a write outside the write list is refused" "$(py "$(step write-out)" 'd["isError"], d["text"]')" "True.*denied"
	[[ -e $H/data/w.txt ]] && fail "$mode: the refused write made a file" || { checks=$((checks + 1)); pass "$mode: ... and made no file"; }
	expect_eq "$mode: host_file_copy into a session's work directory" "$(py "$(step copy)" 'd["structured"]["bytes"]')" "11"
	expect_eq "$mode: ... which the session's code reads" "$(py "$(step cat)" 'd["structured"]["stdout"].strip()')" "hello-host"
	expect_eq "$mode: list_host_access: the grant with who decided" \
		"$(py "$(step granted)" '[(g["kind"], g["scope"], g["by"]) for g in d["structured"]["granted"]]')" \
		"[('read', 'server', 'control uid=0'), ('command', 'server', 'control uid=0')]"
	expect_eq "$mode: request_host_access: a person granted the prefix" \
		"$(py "$(step request)" 'd["structured"]["granted"], d["structured"]["scope"], d["structured"]["approved_by"]')" "True server control uid=0"
	expect_eq "$mode: ... and a read below it runs without asking" \
		"$(py "$(step after-request)" 'd["structured"]["content"].strip(), d["structured"]["approved_by"]')" "granted-file control uid=0"
	expect_match "$mode: ... the person saw the prefix and the reason" "$(grep 'everything under' "$TEST_TMP/asked-$mode" | head -1)" \
		"read everything under $H/approve-me as uid $puid"
	expect_eq "$mode: audit: the approved command's row names the person at the control socket" \
		"$(sqlite3 "$audit" "select count(*) from events where kind='host.exec' and decision='allow' and detail like '%approve-me%' and detail like '%\"by\":\"control uid=0\"%'")" "2"
	expect_eq "$mode: audit: the allowlisted one names the operator's list" \
		"$(sqlite3 "$audit" "select count(*) from events where kind='host.exec' and detail like '%\"/usr/bin/id\"%' and detail like '%\"by\":\"operator allowlist\"%'")" "1"
	expect_eq "$mode: audit: the denied and the timed-out ones" \
		"$(sqlite3 "$audit" "select group_concat(reason) from (select reason from events where kind='host.exec' and decision='deny' and (detail like '%deny-me%' or detail like '%timeout-me%') order by id)")" \
		"denied,approval-timeout"
	expect_eq "$mode: audit: the approval row says host and who" \
		"$(sqlite3 "$audit" "select count(*) from events where kind='approval' and detail like '%\"kind\":\"host\"%' and detail like '%echo%approve-me%' and detail like '%\"by\":\"control\"%'")" "1"
	expect_eq "$mode: audit: no file content in any row" \
		"$(sqlite3 "$audit" "select count(*) from events where detail like '%hello-host%' or detail like '%written-by-model%'")" "0"
}

run_mode split
run_mode single

# ---- elicitation: the client's user decides, shown exactly what would run ----------------
cat >"$TEST_TMP/elicit.json" <<EOF
[
 {"step": "elicited", "tool": "host_exec", "args": {"argv": ["/bin/echo", "via-elicitation"], "reason": "say hi"}}
]
EOF
set +e
out=$(cd "$MCP_DIR" && ELICIT=once SUDO_UID="$puid" timeout 60 node host.mjs "$TEST_TMP/elicit.json" -- \
	"$TOLLGATE" serve --no-network --audit "$TEST_TMP/audit-elicit.db" --ask-timeout 20s \
	--host-access "$TEST_TMP/access.json" 2>"$TEST_TMP/err-elicit"); rc=$?
set -e
expect_eq "elicitation: the session ends cleanly" "$rc" 0
expect_eq "elicitation: allowed once by the client's user, it ran" \
	"$(py "$(step elicited)" 'd["structured"]["stdout"].strip(), d["structured"]["approved_by"]')" \
	"via-elicitation mcp client=tollgate-host-test"
expect_match "elicitation: the form shows exactly what would run, and the reason" \
	"$(py "$(step elicitations)" 'd["asked"][0]["message"]')" \
	'run \["/bin/echo","via-elicitation"\] \(program /usr/bin/echo\) in / as uid '"$puid"'.*Its reason: say hi'

# ---- without --host-access: no host tool is offered -----------------------------------
cat >"$TEST_TMP/off.json" <<EOF
[
 {"step": "exec", "tool": "host_exec", "args": {"argv": ["/usr/bin/id"]}},
 {"step": "request", "tool": "request_host_access", "args": {"path": "/etc", "access": "read", "reason": "r"}},
 {"step": "list", "tool": "list_host_access"},
 {"step": "read", "tool": "host_file_read", "args": {"path": "/etc/hostname"}},
 {"step": "write", "tool": "host_file_write", "args": {"path": "/tmp/x", "content": "x"}},
 {"step": "ls", "tool": "host_file_list", "args": {"path": "/etc"}},
 {"step": "copy", "tool": "host_file_copy", "args": {"path": "/etc/hostname", "session_id": "s"}}
]
EOF
set +e
out=$(cd "$MCP_DIR" && timeout 60 node host.mjs "$TEST_TMP/off.json" -- \
	"$TOLLGATE" serve --no-network --audit "$TEST_TMP/audit-off.db" 2>"$TEST_TMP/err-off"); rc=$?
set -e
expect_eq "without --host-access: the session ends cleanly" "$rc" 0
expect_eq "without --host-access: no host tool in tools/list" "$(py "$(step tools)" 'sorted(d["schemas"])')" "[]"
for s in exec request list read write ls copy; do
	expect_eq "without --host-access: $s is an unknown tool (-32602)" "$(py "$(step "$s")" 'd.get("rpcError")')" "-32602"
done

# ---- a bad file stops serve with FILE:LINE:COL ------------------------------------------
printf '{\n  "commands": [\n    {"program": "id"}\n  ]\n}\n' >"$TEST_TMP/bad.json"
set +e
err=$("$TOLLGATE" serve --no-network --host-access "$TEST_TMP/bad.json" </dev/null 2>&1); rc=$?
set -e
expect_eq "a bad --host-access file: exit 125" "$rc" 125
expect_match "... naming file, line and column" "$err" "bad.json:3:17: \"program\" 'id' is not a full path"

# ---- docs/mcp.md's example file is one serve takes ---------------------------------------
"$PY" - "$TOLLGATE_SRC/docs/mcp.md" "$TEST_TMP/doc.json" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
block = re.search(r"\*\*The file\*\*.*?```json\n(.*?)```", text, re.S).group(1)
open(sys.argv[2], "w").write(block)
PYEOF
set +e
err=$(: | "$TOLLGATE" serve --no-network --audit "$TEST_TMP/audit-doc.db" --host-access "$TEST_TMP/doc.json" 2>&1); rc=$?
set -e
expect_eq "docs/mcp.md's example --host-access file is accepted" "$rc" "0"
[[ $rc == 0 ]] || echo "$err" >&2
expect_eq "... and every command in it names its directories" \
	"$("$PY" -c 'import json,sys; print(all(c.get("cwd") for c in json.load(open(sys.argv[1]))["commands"]))' "$TEST_TMP/doc.json")" True

finish
