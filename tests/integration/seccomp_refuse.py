#!/usr/bin/env python3
"""Runs a command under a seccomp filter that refuses what a container
runtime's default profile refuses, so that tollgate meets the refusal for
real: seccomp_refuse.py RULE[,RULE...] -- CMD [ARG...]

Rules: clone3=ERRNO (every clone3, as Docker's profile answers ENOSYS),
newuser=ERRNO (unshare and clone with CLONE_NEWUSER), landlock=ERRNO
(landlock_create_ruleset). ERRNO is a name: ENOSYS, EPERM, EOPNOTSUPP.
Exits 77 on an architecture whose numbers it does not know."""
import ctypes
import errno
import os
import platform
import struct
import sys

ARCH = {
    "x86_64": (0xC000003E, {"clone3": 435, "unshare": 272, "clone": 56, "landlock": 444}),
    "aarch64": (0xC00000B7, {"clone3": 435, "unshare": 97, "clone": 220, "landlock": 444}),
}
CLONE_NEWUSER = 0x10000000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000


def ins(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k)


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    rules = dict(r.split("=") for r in sys.argv[1].split(","))
    cmd = sys.argv[sep + 1:]
    machine = platform.machine()
    if machine not in ARCH:
        print("seccomp_refuse: no syscall numbers for " + machine, file=sys.stderr)
        sys.exit(77)
    audit_arch, nr = ARCH[machine]
    prog = [ins(LD_W_ABS, 4), None, ins(LD_W_ABS, 0)]  # arch, check, nr
    for name in ("clone3", "landlock"):
        if name in rules:
            prog += [ins(JEQ_K, nr[name], 0, 1),
                     ins(RET_K, RET_ERRNO | getattr(errno, rules[name]))]
    if "newuser" in rules:
        for name in ("unshare", "clone"):
            # nr == name and (args[0] & CLONE_NEWUSER): refuse; else on.
            prog += [ins(JEQ_K, nr[name], 0, 3), ins(LD_W_ABS, 16),
                     ins(JSET_K, CLONE_NEWUSER, 0, 1),
                     ins(RET_K, RET_ERRNO | getattr(errno, rules["newuser"])),
                     ins(LD_W_ABS, 0)]
    prog.append(ins(RET_K, RET_ALLOW))
    # Another architecture's calls: allowed (jump to the last instruction).
    prog[1] = ins(JEQ_K, audit_arch, 0, len(prog) - 3)
    code = b"".join(prog)
    buf = ctypes.create_string_buffer(code, len(code))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() != 0 and libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        sys.exit("prctl(PR_SET_NO_NEW_PRIVS): " + os.strerror(ctypes.get_errno()))
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        sys.exit("prctl(PR_SET_SECCOMP): " + os.strerror(ctypes.get_errno()))
    os.execvp(cmd[0], cmd)


main()
