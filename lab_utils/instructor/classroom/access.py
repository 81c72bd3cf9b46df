"""Let the class's group pass through the folders above the course's Python that shut others out (e.g. a pyenv
under /root, mode 700): a POSIX ACL entry granting search (x) only, to that group only, removed again by `down`."""
from __future__ import annotations

import errno
import os
import struct
import sys
from pathlib import Path

XATTR = "system.posix_acl_access"
VERSION = 2
USER_OBJ, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x04, 0x08, 0x10, 0x20
UNDEFINED = 0xFFFFFFFF


def interpreter_paths() -> list[Path]:
    """The interpreter, its venv and its standard library, as written and resolved."""
    exe = Path(sys.executable)
    return [exe, exe.resolve(), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]


def blocked_folders(paths) -> list[Path]:
    """Folders above `paths` that others may not search (mode without o+x), outermost first."""
    found: list[Path] = []
    for path in paths:
        for folder in reversed(Path(path).parents):
            if not os.stat(folder).st_mode & 0o001 and folder not in found:
                found.append(folder)
    return found


def acl_granting_search(mode: int, gid: int) -> bytes:
    """The ACL of a folder with permission bits `mode`, plus search (x) for group `gid`."""
    def entry(tag: int, perm: int, ident: int = UNDEFINED) -> bytes:
        return struct.pack("<HHI", tag, perm, ident)

    owner, group, other = (mode >> 6) & 7, (mode >> 3) & 7, mode & 7
    return (struct.pack("<I", VERSION) + entry(USER_OBJ, owner) + entry(GROUP_OBJ, group) + entry(GROUP, 1, gid)
            + entry(MASK, group | 1) + entry(OTHER, other))


def grant_search(folder: Path, gid: int) -> int:
    """Give group `gid` search permission on `folder`; its former permission bits (for `revoke`)."""
    try:
        os.getxattr(folder, XATTR)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, getattr(errno, "ENOATTR", errno.ENODATA)):
            raise
    else:
        raise RuntimeError(f"{folder} already has an access control list: give the group search permission on it "
                           "yourself (setfacl -m g:lab-class:x), or move the course's venv where others can reach it")
    mode = os.stat(folder).st_mode & 0o7777
    try:
        os.setxattr(folder, XATTR, acl_granting_search(mode, gid))
    except OSError as exc:
        raise RuntimeError(f"cannot add an ACL entry to {folder} ({exc.strerror}): the learners cannot reach the "
                           "course's Python; make every folder above it searchable by others (chmod o+x), or move "
                           "the venv (e.g. under /opt)") from None
    return mode


def revoke(folder: Path, mode: int) -> None:
    """Remove the ACL and restore the permission bits `grant_search` found."""
    try:
        os.removexattr(folder, XATTR)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOENT):
            raise
    if folder.exists():
        os.chmod(folder, mode)
