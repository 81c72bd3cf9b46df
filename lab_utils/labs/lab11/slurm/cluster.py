"""The Slurm cluster `sinfo` reaches (a real one or the course's local one), its nodes and partitions, and running a
Slurm command with a timeout and a clear error."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

SKIPPED = "skipped: no Slurm here (make cluster needs root; on a cluster, run this lab there)"
LOCAL_CLUSTER_DIR = Path("/var/tmp/lab-cluster")  # where `python -m lab_utils cluster up` keeps its slurm.conf
COMMAND_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Node:
    """One node as sinfo reports it."""

    name: str
    state: str
    cpus: int
    memory_mb: int
    gres: str
    host: str
    address: str


@dataclass(frozen=True)
class Cluster:
    """The Slurm cluster this machine talks to."""

    conf: str | None
    partitions: tuple[str, ...]
    default_partition: str | None
    nodes: tuple[Node, ...]

    @property
    def one_host(self) -> bool:
        """True when every node is this machine (the course's local cluster): the nodes share its cores and GPUs."""
        here = {socket.gethostname(), socket.gethostname().split(".")[0], "localhost"}
        return bool(self.nodes) and all(n.host in here for n in self.nodes)

    def conf_for_a_shell(self) -> str:
        """What a terminal's `export SLURM_CONF=` takes: for the course's local cluster, a command that prints its path
        (the same line on every machine), else the path itself."""
        if self.conf == str(LOCAL_CLUSTER_DIR / "slurm.conf"):
            return f"$({course_python()} -m lab_utils cluster conf)"
        return str(self.conf)

    def describe(self) -> str:
        nodes = ", ".join(f"{n.name} ({n.state}, {n.cpus} CPU, {n.memory_mb} MB{', ' + n.gres if n.gres not in ('', '(null)') else ''})"
                          for n in self.nodes)
        where = (f"\nthe course's local cluster, every node on this machine; SLURM_CONF names its {Path(self.conf).name}"
                 if self.one_host and self.conf else "\nthe course's local cluster, every node on this machine"
                 if self.one_host else "")
        terminal = (f"\nin a terminal in the course folder, Slurm's commands (sinfo, sbatch, squeue) find this cluster\n"
                    f"only after this line; paste it first:\nexport SLURM_CONF={self.conf_for_a_shell()}"
                    if self.one_host and self.conf else "")
        first = textwrap.fill(f"Slurm: partitions {', '.join(self.partitions)} (default {self.default_partition}); "
                              f"nodes {nodes}", width=100, subsequent_indent="  ", break_on_hyphens=False)
        return f"{first}{where}{terminal}"


def course_python(executable: str | None = None, root: Path | None = None) -> str:
    """The course's Python as a terminal in the course folder names it: `.venv/bin/python` after `make env`, else
    `python`."""
    exe = Path(executable or sys.executable)
    root = root or Path(__file__).resolve().parents[4]
    venv = root / ".venv" / "bin" / "python"
    return ".venv/bin/python" if venv.exists() and venv.resolve() == exe.resolve() else "python"


def _slurm_env(conf: str | None = None) -> dict:
    return {**os.environ, **({"SLURM_CONF": conf} if conf else {})}


def _sinfo(conf: str | None, said: list[str] | None = None) -> str | None:
    """sinfo's node lines with SLURM_CONF=`conf`, or None (what sinfo said then appended to `said`)."""
    try:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%P|%t|%c|%m|%G|%n|%o"], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, env=_slurm_env(conf))
    except (OSError, subprocess.TimeoutExpired) as exc:
        if said is not None:
            said.append(type(exc).__name__)
        return None
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout
    if said is not None:
        said.append((done.stderr or done.stdout).strip().splitlines()[-1:][0] if (done.stderr or done.stdout).strip()
                    else f"exit status {done.returncode}, no nodes")
    return None


def wrong_conf_message(conf: str, said: str) -> str:
    """What to tell a learner whose SLURM_CONF does not lead sinfo to a cluster."""
    missing = "" if Path(conf).exists() else " (no such file)"
    return (f"no Slurm reached: the environment variable SLURM_CONF is set to {conf}{missing}, and sinfo said: {said}. "
            "Unset it (`%env SLURM_CONF=` in a cell, `unset SLURM_CONF` in a terminal) to use the course's local "
            "cluster, or set it to your cluster's slurm.conf")


def find_cluster() -> Cluster | None:
    """The Slurm cluster `sinfo` reaches, a real one or the course's local one; None when there is none (printing why
    when SLURM_CONF is set and sinfo reaches nothing with it)."""
    if shutil.which("sinfo") is None:
        return None
    conf = os.environ.get("SLURM_CONF")
    said: list[str] = []
    out = _sinfo(conf, said)
    if out is None and conf:  # a learner's wrong SLURM_CONF would otherwise read as "no Slurm here"
        print(wrong_conf_message(conf, said[-1] if said else "nothing"))
        return None
    local = LOCAL_CLUSTER_DIR / "slurm.conf"
    if out is None and not conf and local.exists():
        conf = str(local)
        out = _sinfo(conf)
        if out is not None:
            os.environ["SLURM_CONF"] = conf  # so this process and the Slurm commands it runs reach the local cluster
    if out is None:
        return None
    nodes: dict[str, Node]
    nodes, partitions, default = {}, [], None
    for line in out.splitlines():
        name, partition, state, cpus, memory, gres, host, address = line.split("|")
        if partition.endswith("*"):
            partition = default = partition[:-1]
        if partition not in partitions:
            partitions.append(partition)
        nodes.setdefault(name, Node(name, state, int(cpus), int(memory), gres, host, address))
    return Cluster(conf, tuple(partitions), default or (partitions[0] if partitions else None), tuple(nodes.values()))


def command(cmd: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run a Slurm command; its output, or a RuntimeError naming the command and what it said."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"`{shlex.join(cmd)}` did not answer within {timeout:g} s: is slurmctld running "
                           "(`python -m lab_utils cluster status`)?") from None
    if done.returncode:
        raise RuntimeError(f"`{shlex.join(cmd)}` failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def seconds(text: str) -> float:
    """sacct's or scontrol's [D-][HH:]MM:SS[.mmm] as seconds."""
    days, _, rest = text.rpartition("-")
    return (float(days) * 86400 if days else 0.0) + sum(float(x) * 60 ** i for i, x in enumerate(reversed(rest.split(":"))))
