"""Runs a command on a pseudo-terminal of a given width and prints what it
wrote (CRLF as LF): how tests see what a person at a terminal sees.
usage: tty_run.py COLUMNS CMD [ARG...]"""
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time

columns = int(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    # The size is set on the terminal before the command starts: set by the
    # parent after the fork, a fast command could ask for it first and see 0.
    fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    os.execvp(sys.argv[2], sys.argv[2:])
out = b""
deadline = time.monotonic() + 30
while time.monotonic() < deadline and len(out) < 1 << 20:
    ready, _, _ = select.select([fd], [], [], 0.5)
    if not ready:
        continue
    try:
        chunk = os.read(fd, 65536)
    except OSError:  # EIO: the child closed the terminal
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace").replace("\r\n", "\n"))
