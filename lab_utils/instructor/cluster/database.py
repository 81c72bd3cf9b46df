"""The local cluster's accounting: a MariaDB server and slurmdbd, both in the cluster's state folder, so that sacct
(and the efficiency figures seff prints) work. Started by `cluster up` when Debian's mariadb-server and slurmdbd are
installed; without them the cluster runs without accounting and says so.

The database is made once (`mariadb-install-db`, the first-start cost); later starts reuse it. Both daemons listen on
127.0.0.1 only, on ports chosen free at each start.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PROGRAMS = {"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server", "mariadb": "mariadb-client",
            "slurmdbd": "slurmdbd", "sacctmgr": "slurm-client"}
DATABASE = "slurm_acct_db"
ACCOUNT = "course"
QOS = "debug"  # one job per user at a time: a second one pends with reason QOSMaxJobsPerUserLimit (lab 11)
START_TIMEOUT_S = 60.0


def program(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def missing() -> list[str]:
    """The Debian packages accounting needs that are not installed."""
    return sorted({package for name, package in PROGRAMS.items() if program(name) is None})


@dataclass(frozen=True)
class Database:
    """Where the accounting's files live inside the cluster's state folder."""

    root: Path

    @property
    def datadir(self) -> Path:
        return self.root / "db" / "data"

    @property
    def socket(self) -> Path:
        return self.root / "db" / "mariadb.sock"

    @property
    def password_file(self) -> Path:
        return self.root / "db" / "slurm.pass"

    @property
    def ready_marker(self) -> Path:
        """Written once the cluster, its account and QOS are in the database: later starts skip sacctmgr."""
        return self.root / "db" / "registered"

    @property
    def dbd_conf(self) -> Path:
        return self.root / "slurmdbd.conf"

    def pid_file(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def log_file(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"


def password(db: Database) -> str:
    """The database password of slurmdbd's user, made once (mode 600)."""
    path = db.password_file
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(16))
    return path.read_text().strip()


def dbd_conf(db: Database, host: str, dbd_port: int, db_port: int, munge_socket: Path) -> str:
    return f"""# written by `python -m lab_utils cluster up` (lab 11): accounting for the local cluster
AuthType=auth/munge
AuthInfo=socket={munge_socket}
DbdHost={host}
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
PidFile={db.pid_file("slurmdbd")}
LogFile={db.log_file("slurmdbd")}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=slurm
StoragePass={password(db)}
StorageLoc={DATABASE}
"""


def mariadbd_command(db: Database, port: int) -> list[str]:
    return [program("mariadbd") or "mariadbd", "--no-defaults", f"--datadir={db.datadir}", f"--socket={db.socket}",
            f"--pid-file={db.pid_file('mariadbd')}", f"--log-error={db.log_file('mariadbd')}", f"--port={port}",
            "--bind-address=127.0.0.1", "--skip-name-resolve", "--user=root", "--skip-log-bin",
            "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--max-connections=40"]


def sql(db: Database, statement: str, timeout: float = 30.0) -> str:
    done = subprocess.run([program("mariadb") or "mariadb", "--no-defaults", f"--socket={db.socket}", "-u", "root", "-N", "-e",
                           statement], capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"mariadb: {done.stderr.strip()}")
    return done.stdout


def install(db: Database, say=print) -> float:
    """Make the database's files the first time (seconds it took; 0 when they exist)."""
    if (db.datadir / "mysql").is_dir():
        return 0.0
    start = time.monotonic()
    shutil.rmtree(db.datadir, ignore_errors=True)  # a half-made one from an interrupted first start
    db.datadir.mkdir(parents=True)
    done = subprocess.run([program("mariadb-install-db") or "mariadb-install-db", "--no-defaults", f"--datadir={db.datadir}", "--user=root",
                           "--auth-root-authentication-method=socket", "--skip-test-db"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"mariadb-install-db failed: {(done.stderr or done.stdout).strip()[-800:]}")
    seconds = time.monotonic() - start
    say(f"made the accounting database in {db.datadir} ({seconds:.1f} s, once)")
    return seconds


def wait_for_sql(db: Database, alive, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            sql(db, "SELECT 1", timeout=5)
            return
        if not alive() or time.monotonic() > deadline:
            raise RuntimeError(f"mariadbd did not answer within {timeout:g} s; its log {db.log_file('mariadbd')} ends "
                               f"with:\n{_tail(db.log_file('mariadbd'))}")
        time.sleep(0.2)


def grant(db: Database) -> None:
    """slurmdbd's database user, from 127.0.0.1 only (idempotent)."""
    pw = password(db)
    sql(db, f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{pw}'; "
            f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{pw}'; "
            f"GRANT ALL ON {DATABASE}.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")


def register_accounts(env: dict, cluster_name: str, users, say=print) -> None:
    """The cluster, the course's account with `users`, and the QOS of lab 11's pending demo (sacctmgr, idempotent)."""
    def sacctmgr(*args):
        done = subprocess.run([program("sacctmgr") or "sacctmgr", "-i", *args], capture_output=True, text=True, timeout=30, env=env)
        out = (done.stdout + done.stderr).strip()
        if done.returncode and "Nothing new added" not in out and "already exists" not in out:
            raise RuntimeError(f"sacctmgr {' '.join(args)}: {out}")
        return out

    sacctmgr("add", "cluster", cluster_name)
    sacctmgr("add", "qos", QOS, "MaxJobsPerUser=1", "MaxWall=00:10:00")
    sacctmgr("add", "account", ACCOUNT, "Description=lab 11", "Organization=course", f"Cluster={cluster_name}")
    for user in users:
        sacctmgr("add", "user", user, f"Account={ACCOUNT}", f"Cluster={cluster_name}")
        sacctmgr("modify", "user", user, "set", f"QOS=normal,{QOS}", "DefaultQOS=normal")
        sacctmgr("modify", "user", user, "set", f"DefaultAccount={ACCOUNT}")
    say(f"accounting: cluster '{cluster_name}', account '{ACCOUNT}' ({', '.join(users)}), QOS normal and '{QOS}' "
        "(one job per user at a time)")


def _tail(path: Path, lines: int = 8) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"
