#!/usr/bin/env python3
"""Runs a command on a real pseudo-terminal, as a person at a terminal would.

The command is a session leader whose controlling terminal is a new pty; the
driver holds the master (the person's screen and keyboard) and performs STEPs
in order, each bounded by the overall --timeout:

  expect:TEXT     wait until TEXT appears after the previous match
  send:KEYS       type KEYS (Python escapes: send:o, send:\\x03)
  sleep:SECONDS   wait, reading the screen meanwhile
  resize:RxC      set the terminal's size (the kernel sends SIGWINCH)
  fg              record whether the terminal's foreground is still the command's
  signal:NAME     send signal NAME to the command (tollgate)
  raw / cooked    the terminal must be in raw mode now / in its first modes
  check:SHELL     run a shell command; the step fails unless it exits 0

Prints one JSON line at the end: the command's exit status ("rc"), whether
the terminal's modes are as they were before ("modes_restored"), whether the
foreground stayed the command's at every `fg` ("fg_ok"), how many typed bytes
still wait unread on the terminal ("pending_input"), and the first step that
failed ("failed", or null). --log gets everything the screen showed.
"""
import argparse
import codecs
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time


def set_size(fd, spec):
    rows, cols = (int(x) for x in spec.split("x"))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--size", default="24x80")
    ap.add_argument("--stdin-null", action="store_true",
                    help="the command's stdin is /dev/null (stdout, stderr: the pty)")
    ap.add_argument("steps", nargs="*")
    argv = sys.argv[1:]
    if "--" not in argv:
        ap.error("usage: pty_driver.py [options] [STEP...] -- CMD [ARG...]")
    cut = argv.index("--")
    args = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]

    master, slave = os.openpty()
    set_size(slave, args.size)
    modes0 = termios.tcgetattr(slave)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        stdin = os.open("/dev/null", os.O_RDONLY) if args.stdin_null else slave
        os.dup2(stdin, 0)
        os.dup2(slave, 1)
        os.dup2(slave, 2)
        os.closerange(3, 1024)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)

    deadline = time.monotonic() + args.timeout
    screen = bytearray()
    cursor = 0
    status = None
    fg_ok = True
    failed = None

    def pump(seconds):
        """Reads the screen for up to `seconds`; notes the command's end."""
        nonlocal status
        end = min(time.monotonic() + seconds, deadline)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([master], [], [], min(left, 0.05))
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    data = b""
                screen.extend(data)
            if status is None:
                w, st = os.waitpid(pid, os.WNOHANG)
                if w == pid:
                    status = st
            if status is not None and not r:
                return

    for step in args.steps:
        kind, _, arg = step.partition(":")
        if kind == "expect":
            want = codecs.decode(arg, "unicode_escape").encode("latin-1")
            while True:
                at = screen.find(want, cursor)
                if at >= 0:
                    cursor = at + len(want)
                    break
                if time.monotonic() >= deadline or status is not None:
                    pump(0.5)
                    at = screen.find(want, cursor)
                    if at >= 0:
                        cursor = at + len(want)
                        break
                    failed = step
                    break
                pump(0.1)
        elif kind == "send":
            os.write(master, codecs.decode(arg, "unicode_escape").encode("latin-1"))
        elif kind == "sleep":
            pump(float(arg))
        elif kind == "resize":
            set_size(master, arg)
        elif kind == "fg":
            if os.tcgetpgrp(master) != pid:
                fg_ok = False
        elif kind == "signal":
            os.kill(pid, getattr(signal, arg))
        elif kind == "raw":
            if termios.tcgetattr(slave)[3] & (termios.ICANON | termios.ECHO):
                failed = step
        elif kind == "cooked":
            if termios.tcgetattr(slave) != modes0:
                failed = step
        elif kind == "check":
            if subprocess.run(arg, shell=True, timeout=30).returncode != 0:
                failed = step
        else:
            failed = "unknown step " + step
        if failed is not None:
            break

    if failed is not None and status is None:
        os.kill(pid, signal.SIGKILL)
    while status is None and time.monotonic() < deadline:
        pump(0.2)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        failed = failed or "the command did not end in time"
        _, status = os.waitpid(pid, 0)
    pump(0.3)
    modes1 = termios.tcgetattr(slave)
    pending = struct.unpack("i", fcntl.ioctl(slave, termios.FIONREAD, b"\0\0\0\0"))[0]
    with open(args.log, "wb") as f:
        f.write(screen)
    if os.WIFEXITED(status):
        rc = os.WEXITSTATUS(status)
    else:
        rc = 128 + os.WTERMSIG(status)
    print(json.dumps({"rc": rc, "modes_restored": modes0 == modes1, "fg_ok": fg_ok,
                      "pending_input": pending, "failed": failed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
