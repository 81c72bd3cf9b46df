"""A seccomp filter for graded submissions: the usual escapes (mounts, ptrace, keyrings, bpf, new namespaces, kernel
modules, io_uring) fail with EPERM; setting an extended attribute fails with ENOTSUP (as on a filesystem without them:
xattrs are stored beside a file's bytes, and the disk limit counts bytes); everything a lab needs is allowed.

The filter is a classic BPF program built here (no libseccomp needed): `filter_program()` gives the bytes bubblewrap's
`--seccomp FD` reads, `install()` loads it into the calling process (where no bubblewrap runs).
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct

# syscall numbers by architecture: (audit arch, {name: number})
_X86_64 = (0xC000003E, {
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "unshare": 272,
    "setns": 308, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "perf_event_open": 298, "userfaultfd": 323, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "syslog": 103, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
    "clock_adjtime": 305, "pidfd_getfd": 438, "kcmp": 312, "iopl": 172, "ioperm": 173, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "clone": 56, "clone3": 435,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "setxattrat": 463})
_AARCH64 = (0xC00000B7, {
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "unshare": 97,
    "setns": 268, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273,
    "delete_module": 106, "perf_event_open": 241, "userfaultfd": 282, "open_by_handle_at": 265,
    "name_to_handle_at": 264, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "syslog": 116, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171,
    "clock_adjtime": 266, "pidfd_getfd": 438, "kcmp": 272, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "clone": 220, "clone3": 435,
    "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463})
ARCHES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}
NO_XATTRS = ("setxattr", "lsetxattr", "fsetxattr", "setxattrat")  # ENOTSUP: what copy tools take as "no xattrs here"
NEW_NAMESPACES = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def supported() -> bool:
    return platform.machine().lower() in ARCHES


def _op(code, k, jt=0, jf=0):
    return (code, jt, jf, k)


def instructions() -> list[tuple]:
    """The filter as (code, jt, jf, k) tuples."""
    arch, numbers = ARCHES[platform.machine().lower()]
    deny = _RET, _ERRNO | errno.EPERM
    denied = [n for name, n in numbers.items() if name not in ("clone", "clone3", *NO_XATTRS)]
    prog = [_op(_LD_W_ABS, 4), _op(_JEQ, arch, 1, 0), _op(*deny), _op(_LD_W_ABS, 0)]
    if arch == _X86_64[0]:
        prog += [_op(_JGE, 0x40000000, 0, 1), _op(*deny)]  # the x32 ABI: another way to reach the same calls
    # clone3 says ENOSYS, so that C libraries fall back to clone, whose flags a classic filter can read
    prog += [_op(_JEQ, numbers["clone3"], 0, 1), _op(_RET, _ERRNO | errno.ENOSYS)]
    for number in denied:
        prog += [_op(_JEQ, number, 0, 1), _op(*deny)]
    for name in NO_XATTRS:
        prog += [_op(_JEQ, numbers[name], 0, 1), _op(_RET, _ERRNO | errno.ENOTSUP)]
    # clone: allowed unless its flags (the low word of the first argument) ask for a new namespace
    return prog + [_op(_JEQ, numbers["clone"], 1, 0), _op(_RET, _ALLOW),
                   _op(_LD_W_ABS, 16), _op(_JSET, NEW_NAMESPACES, 0, 1), _op(*deny), _op(_RET, _ALLOW)]


def filter_program() -> bytes:
    """The compiled filter (struct sock_filter array), as bubblewrap's --seccomp reads it."""
    return b"".join(struct.pack("=HBBI", *op) for op in instructions())


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def installer():
    """A function that sets no_new_privs and loads the filter into the calling process (prepared before a fork, so
    that the child only makes two system calls)."""
    ops = instructions()
    table = (_Filter * len(ops))(*[_Filter(*op) for op in ops])
    prog = _Program(len(ops), table)
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]

    def install():
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
                prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "could not load the sandbox's seccomp filter")
    install.keep = (table, prog)  # type: ignore[attr-defined]  # the filter must outlive the call; functions take attributes
    return install
