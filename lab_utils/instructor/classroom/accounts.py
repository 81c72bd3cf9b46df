"""Local learner accounts: a group, one user each with a home holding a copy of the course, and a password."""
from __future__ import annotations

import grp
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

COURSE = ("notebooks", "lab_utils", "datasets")  # what each learner's home receives from the repository
PROGRAMS = ("useradd", "userdel", "groupadd", "groupdel", "chpasswd", "runuser")


def _sbin(name: str) -> str:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") or name


def _run(*cmd: str, stdin: str | None = None) -> None:
    done = subprocess.run([_sbin(cmd[0]), *cmd[1:]], input=stdin, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {done.returncode}): {done.stderr.strip()}")


def missing_programs() -> list[str]:
    """The account tools (Debian's passwd and util-linux) this machine lacks."""
    return [p for p in PROGRAMS if shutil.which(p) is None and shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def create_group(name: str) -> None:
    _run("groupadd", name)


def create_learner(name: str, group: str, home: Path) -> str:
    """Create the account with its home, and give it a fresh password (returned: PAM logs the learner in with it)."""
    _run("useradd", "--create-home", "--home-dir", str(home), "--gid", group, "--shell", "/bin/bash", name)
    password = secrets.token_urlsafe(12)
    _run("chpasswd", stdin=f"{name}:{password}\n")
    return password


def copy_course(repo: Path, home: Path, name: str, group: str) -> None:
    """The learner's own copy of the student notebooks, lab_utils and the datasets, owned by the learner."""
    for part in COURSE:
        shutil.copytree(repo / part, home / part, ignore=shutil.ignore_patterns("__pycache__", "results"),
                        dirs_exist_ok=True)
    for path in [home, *home.rglob("*")]:
        shutil.chown(path, name, group)
    home.chmod(0o700)  # classmates may not read each other's work


def can_run(name: str, program: str) -> str | None:
    """None when the learner can run `program -c pass` (the course's venv: every folder above it must let others
    in), else what went wrong."""
    done = subprocess.run([_sbin("runuser"), "-u", name, "--", program, "-c", "import jupyterhub, ipykernel"],
                          capture_output=True, text=True, timeout=120, cwd="/")
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["(no message)"])[-1]


def delete_learner(name: str, home: Path) -> None:
    """Remove the account, its home and its mail spool."""
    if user_exists(name):
        _run("userdel", "--remove", name)
    if home.exists():  # userdel leaves a home it did not create where the path differs
        shutil.rmtree(home)


def delete_group(name: str) -> None:
    if group_exists(name):
        _run("groupdel", name)
