"""Run a command as an unprivileged uid (nobody), the way an instructor without root runs the grader. As root only.

    .venv/bin/python tests/as_unprivileged.py COMMAND...

The course and its Python may lie under a folder that uid cannot search (root's home, mode 0700, holds pyenv): in a
bubblewrap view of this machine, each such folder is replaced by an empty searchable one with the course and the
interpreter bound back, read-only. Nothing on the host changes.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

UID = int(os.environ.get("UNPRIVILEGED_UID", "65534"))


def searchable(path: Path) -> bool:
    """Can UID search (enter) `path`? Asked of the kernel, as that uid."""
    return subprocess.run(["setpriv", "--reuid", str(UID), "--regid", str(UID), "--clear-groups", "test", "-x",
                           str(path)], capture_output=True).returncode == 0


def view(targets) -> list[str]:
    args, hidden, bound = ["--dev-bind", "/", "/"], [], []
    for target in targets:
        if any(target.is_relative_to(b) for b in bound):
            continue
        bound.append(target)
        blocked = next((p for p in [*reversed(target.parents), target] if not searchable(p)), None)
        if blocked is None:
            continue
        if not any(blocked.is_relative_to(h) for h in hidden):
            args += ["--perms", "0755", "--tmpfs", str(blocked)]
            hidden.append(blocked)
        for folder in [p for p in reversed(target.parents) if p.is_relative_to(blocked) and p != blocked]:
            args += ["--perms", "0755", "--dir", str(folder)]
        args += ["--ro-bind", str(target), str(target)]
    return args


def main(argv) -> int:
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        print("as_unprivileged.py: run as root, with bubblewrap installed (it switches to an unprivileged uid)")
        return 2
    targets = sorted({Path.cwd().resolve(), Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()},
                     key=lambda p: len(p.parts))
    command = ["bwrap", *view(targets), "--chdir", str(Path.cwd()), "--", "setpriv", "--reuid", str(UID),
               "--regid", str(UID), "--clear-groups", "--", "env", "HOME=/tmp", "USER=nobody", *argv]
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
