"""A real Slurm cluster on this machine, for lab 11 and CI: `python -m lab_utils cluster up|status|down`.

`up` writes its own slurm.conf and munge key into a state folder (default /var/tmp/lab-cluster, or
$LAB_CLUSTER_DIR), then starts one munged, one slurmctld and two slurmd (`slurmd -N node1`, `-N node2`: Slurm's
multiple-slurmd mode, one host standing in for two nodes, each with its own port, spool and share of the cores), and
waits until `sinfo` shows both nodes idle. `down` cancels the cluster's jobs and stops exactly the processes whose pid
files it wrote (checked against their command lines), nothing else. Needs root and Debian's slurm-wlm and munge.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..launch import free_port

DEFAULT_DIR = Path("/var/tmp/lab-cluster")
NODES = ("node1", "node2")
PARTITION = "lab"
PROGRAMS = {"munged": "munge", "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sinfo": "slurm-wlm",
            "sbatch": "slurm-wlm", "scontrol": "slurm-wlm"}
UP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


def state_dir(path=None) -> Path:
    """Where the cluster keeps its configuration, keys, logs, pid files and spools."""
    return Path(path or os.environ.get("LAB_CLUSTER_DIR") or DEFAULT_DIR).resolve()


def refusal(euid: int | None = None, which=shutil.which) -> str | None:
    """Why `up` cannot run here, in one sentence (None when it can)."""
    missing = sorted({package for program, package in PROGRAMS.items()
                      if which(program) is None and which(program, path="/usr/sbin:/usr/bin:/sbin:/bin") is None})
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return ("make cluster needs root (it starts munged, slurmctld and two slurmd daemons): run it as root "
                "(`sudo make cluster`); on a real Slurm cluster you need none of this, run lab 11 there")
    if missing:
        return (f"make cluster needs Debian's {' and '.join(missing)} package(s): `apt-get install -y slurm-wlm munge` "
                "(as root), then run it again")
    return None


def _program(name: str) -> str:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") or name


@dataclass(frozen=True)
class Layout:
    """The cluster's files and the share of this machine each node declares."""

    root: Path
    cpus_per_node: int
    memory_mb_per_node: int

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    def pid_file(self, daemon: str) -> Path:
        """munged, slurmctld or a node name (its slurmd)."""
        name = f"slurmd.{daemon}" if daemon in NODES else daemon
        return self.root / "run" / f"{name}.pid"

    def log_file(self, daemon: str) -> Path:
        name = f"slurmd.{daemon}" if daemon in NODES else daemon
        return self.root / "log" / f"{name}.log"


def layout(path=None) -> Layout:
    """The cores split between the two nodes (at least one each) and half the memory, split too."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    memory_mb = pages * page_size // 2**20
    return Layout(state_dir(path), max(1, cores // len(NODES)), max(256, memory_mb // (2 * len(NODES))))


def slurm_conf(lay: Layout, host: str, ctld_port: int, node_ports: list[int]) -> str:
    """The cluster's slurm.conf: one controller and the nodes on this host, no accounting database, no cgroups."""
    r = lay.root
    nodes = "\n".join(
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={lay.cpus_per_node} "
        f"RealMemory={lay.memory_mb_per_node} State=UNKNOWN" for name, port in zip(NODES, node_ports))
    return f"""# written by `python -m lab_utils cluster up` (lab 11): a Slurm cluster of {len(NODES)} nodes on this one host
ClusterName=lab
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={lay.socket}
CredType=cred/munge
StateSaveLocation={r}/ctld
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={lay.pid_file("slurmctld")}
SlurmdPidFile={r}/run/slurmd.%n.pid
SlurmctldLogFile={lay.log_file("slurmctld")}
SlurmdLogFile={r}/log/slurmd.%n.log
PlugStackConfig={r}/plugstack.conf
# every node is this host: Slurm cannot fence one node's cores from the other's, so no cgroups and no binding
# (lab_utils.slurm pins each node's tasks to its own cores instead); processes tracked through /proc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=600
SchedulerParameters=sched_interval=1
{nodes}
PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=60 State=UP
"""


def _alive(pid: int, program: str, conf_hint: str) -> bool:
    """True when `pid` runs `program` with this cluster's configuration or socket on its command line."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if argv else "X"
    return (state != "Z" and bool(argv) and os.path.basename(argv[0].decode()) == program
            and any(conf_hint in a.decode() for a in argv))


def _read_pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):  # IndexError: the daemon has not written it yet
        return int(path.read_text().split()[0])
    return None


def daemons(lay: Layout) -> dict[str, int | None]:
    """Each daemon of this cluster -> its pid while it runs (from its pid file, checked), else None."""
    found = {}
    for daemon in ("munged", "slurmctld", *NODES):
        program = "slurmd" if daemon in NODES else daemon
        hint = str(lay.socket) if daemon == "munged" else str(lay.conf)
        pid = _read_pid(lay.pid_file(daemon))
        found[daemon] = pid if pid and _alive(pid, program, hint) else None
    return found


def client_env(lay: Layout) -> dict:
    """The environment in which sinfo, sbatch and friends talk to this cluster."""
    return {**os.environ, "SLURM_CONF": str(lay.conf)}


def _run(cmd, lay: Layout, timeout: float = 15.0, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=client_env(lay))
    if check and done.returncode:
        raise RuntimeError(f"`{' '.join(map(str, cmd))}` failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done


def node_states(lay: Layout) -> dict[str, str]:
    """sinfo's state of each node ('idle', 'alloc', 'down*', ...); empty when the controller does not answer."""
    try:
        done = _run([_program("sinfo"), "-h", "-N", "-o", "%N %t"], lay, timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return {}
    if done.returncode:
        return {}
    return dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)


def _tail(path: Path, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def _start(cmd, lay: Layout, daemon: str, what: str) -> int:
    """Run a daemon's start command (it forks and writes its pid file); its pid once the file names a live process."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=client_env(lay))
    program = "slurmd" if daemon in NODES else daemon
    hint = str(lay.socket) if daemon == "munged" else str(lay.conf)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pid = _read_pid(lay.pid_file(daemon))
        if pid and _alive(pid, program, hint):
            return pid
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start (exit {done.returncode}): {done.stderr.strip()}\n"
                       f"its log {lay.log_file(daemon)} ends with:\n{_tail(lay.log_file(daemon))}")


def _write_key(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(128))


def up(path=None, timeout: float = UP_TIMEOUT_S, say=print) -> Layout:
    """Start the cluster (harmless when it already runs); returns its layout. Raises RuntimeError with the reason."""
    reason = refusal()
    if reason:
        raise RuntimeError(reason)
    lay = layout(path)
    running = daemons(lay)
    states = node_states(lay) if all(running.values()) else {}
    if len(states) == len(NODES) and not any(s.endswith("*") or s.startswith(("down", "drain")) for s in states.values()):
        say(f"the cluster already runs (state in {lay.root}): {describe(lay, running)}")
        return lay
    if any(running.values()):
        say("part of the cluster runs: stopping it first")
        down(path, say=lambda *_: None)
    for sub in ("ctld", "spool", "run", "log"):
        (lay.root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(lay.root, 0o755)
    for node in NODES:
        (lay.root / "spool" / node).mkdir(exist_ok=True)
    host = socket.gethostname().split(".")[0]
    lay.conf.write_text(slurm_conf(lay, host, free_port(), [free_port() for _ in NODES]))
    (lay.root / "plugstack.conf").write_text("")
    munge = lay.root / "munge"
    _write_key(munge / "munge.key")
    os.chmod(munge, 0o700)
    _start([_program("munged"), f"--socket={lay.socket}", f"--key-file={munge / 'munge.key'}",
            f"--pid-file={lay.pid_file('munged')}", f"--log-file={lay.log_file('munged')}",
            f"--seed-file={munge / 'munged.seed'}", "--force"], lay, "munged", "munged")
    _start([_program("slurmctld"), "-f", str(lay.conf), "-i"], lay, "slurmctld", "slurmctld")
    for node in NODES:
        _start([_program("slurmd"), "-f", str(lay.conf), "-N", node], lay, node, f"slurmd -N {node}")
    deadline = time.monotonic() + timeout
    while True:
        states = node_states(lay)
        if len(states) == len(NODES) and all(s == "idle" for s in states.values()):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the nodes did not become idle within {timeout:g} s (sinfo: {states or 'no answer'}); "
                               f"logs in {lay.root / 'log'}; `python -m lab_utils cluster down` stops what started")
        if any(s.startswith(("down", "drain", "fail")) for s in states.values()):
            for node, s in states.items():  # a node marked down from an earlier run returns once its slurmd answers
                if s.startswith(("down", "drain")):
                    _run([_program("scontrol"), "update", f"NodeName={node}", "State=RESUME"], lay, check=False)
        time.sleep(0.3)
    say(f"started a Slurm cluster on this machine (state in {lay.root}): {describe(lay, daemons(lay))}")
    say(f"nodes {', '.join(NODES)}: {lay.cpus_per_node} CPU(s) and {lay.memory_mb_per_node} MB each, partition "
        f"'{PARTITION}'; to use it from a shell: export SLURM_CONF={lay.conf}")
    return lay


def describe(lay: Layout, running: dict[str, int | None]) -> str:
    return ", ".join(f"{d if d not in NODES else 'slurmd -N ' + d} (pid {pid})" if pid else f"{d} (not running)"
                     for d, pid in running.items())


def status(path=None, say=print) -> bool:
    """Print what runs and what sinfo says; True when every daemon runs and both nodes answer."""
    lay = layout(path)
    running = daemons(lay)
    if not any(running.values()):
        say(f"no cluster of this course runs (state folder {lay.root}); start one with `make cluster` (as root)")
        return False
    say(describe(lay, running))
    states = node_states(lay)
    say("sinfo: " + (", ".join(f"{n} {s}" for n, s in states.items()) if states else "no answer from slurmctld"))
    return all(running.values()) and len(states) == len(NODES) and not any(s.endswith("*") for s in states.values())


def _stop_pid(pid: int, program: str, hint: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(pid, program, hint) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid, program, hint):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def down(path=None, say=print) -> list[str]:
    """Cancel the cluster's jobs, then stop its daemons (slurmd, slurmctld, munged); returns what was stopped."""
    lay = layout(path)
    running = daemons(lay)
    if not any(running.values()):
        say(f"no cluster of this course runs (state folder {lay.root}): nothing to stop")
        return []
    if running["slurmctld"]:
        with contextlib.suppress(subprocess.TimeoutExpired, RuntimeError):
            _run([_program("scancel"), f"--partition={PARTITION}"], lay, check=False)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while time.monotonic() < deadline and _run([_program("squeue"), "-h", "-o", "%i"], lay, check=False).stdout.strip():
                time.sleep(0.3)
    stopped = []
    for daemon in (*NODES, "slurmctld", "munged"):
        pid = running[daemon]
        if pid is None:
            continue
        program = "slurmd" if daemon in NODES else daemon
        hint = str(lay.socket) if daemon == "munged" else str(lay.conf)
        children = descendants_of(pid) if daemon in NODES else []
        _stop_pid(pid, program, hint)
        for child in children:  # a job step's slurmstepd that outlived its slurmd
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        lay.pid_file(daemon).unlink(missing_ok=True)
        stopped.append(f"{program}{' -N ' + daemon if daemon in NODES else ''} (pid {pid})")
    say("stopped " + ", ".join(stopped))
    return stopped


def descendants_of(pid: int) -> list[int]:
    from ..launch import descendants

    return descendants(pid)


def main(action: str, path=None) -> int:
    """CLI body of `cluster up|status|down`."""
    try:
        if action == "up":
            up(path)
            return 0
        if action == "down":
            down(path)
            return 0
        return 0 if status(path) else 3
    except RuntimeError as exc:
        print(f"cluster {action}: {exc}")
        return 2
