#!/usr/bin/env bash
# A gateway that starts removes the control sockets that gateways killed with
# -9 left in the control directory, and nothing else: not a socket named for
# a live pid, not a file that is not a socket.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "python3 is not installed"

dir=$TEST_TMP/ctl
export TOLLGATE_CONTROL_DIR=$dir
mkdir -m 0700 -p "$dir"

# A pid that is surely gone: a child that has exited and been reaped.
sh -c 'exit 0' &
dead=$!
wait "$dead" || true
sh -c 'exit 0' &
dead2=$!
wait "$dead2" || true
# make_socket PATH: a unix socket file nobody listens on.
make_socket() { python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$1"; }
make_socket "$dir/$dead.sock"
make_socket "$dir/$$.sock" # a live pid: may be a gateway between bind and listen
echo "not a socket" >"$dir/$dead2.sock"

port=$(free_port)
"$TOLLGATE" proxy --listen "127.0.0.1:$port" --upstream-dns "127.0.0.1:$(free_port)" \
	--audit "$TEST_TMP/audit.db" 2>"$TEST_TMP/proxy.log" &
ppid_=$!
defer "kill $ppid_ 2>/dev/null"
wait_for 10 test -S "$dir/$ppid_.sock" || { cat "$TEST_TMP/proxy.log" >&2; fail "the gateway made no socket in $dir"; finish; }

checks=$((checks + 1))
if [[ -e $dir/$dead.sock ]]; then fail "the dead pid's socket is still there"; else pass "the dead pid's socket was removed"; fi
checks=$((checks + 1))
if [[ -S $dir/$$.sock ]]; then pass "a live pid's socket was kept"; else fail "a live pid's socket was removed"; fi
checks=$((checks + 1))
if [[ -f $dir/$dead2.sock ]]; then pass "a file that is not a socket was kept"; else fail "a regular file was removed"; fi
expect_eq "the gateway is found" "$("$TOLLGATE" pending --json >/dev/null 2>&1; echo $?)" 0
finish
