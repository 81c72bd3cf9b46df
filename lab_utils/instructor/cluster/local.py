"""A real Slurm cluster on this machine, for lab 11 and CI: `python -m lab_utils cluster up|status|down`.

`up` writes its own slurm.conf and munge key into a state folder (default /var/tmp/lab-cluster, or
$LAB_CLUSTER_DIR), then starts one munged, the accounting (a MariaDB server and slurmdbd, database.py: where Debian's
mariadb-server and slurmdbd are installed), one slurmctld and three slurmd (`slurmd -N node1`, `-N node2`, `-N node3`:
Slurm's multiple-slurmd mode, one host standing in for several nodes, each with its own port and spool). node1 and
node2 share the cores and form the partition `lab`; node3 is the partition `short`, whose time limit is one minute
(lab 11's wall-time and pending demos; its jobs only sleep). It waits until `sinfo` shows every node idle. `down`
cancels the cluster's jobs and stops exactly the processes whose pid files it wrote (checked against their command
lines), the database included, nothing else. Needs root and Debian's slurm-wlm and munge.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...launch import free_port
from . import database

DEFAULT_DIR = Path("/var/tmp/lab-cluster")
COMPUTE = ("node1", "node2")  # partition `lab`: they split this machine's cores
SHORT = "node3"  # partition `short`: one CPU, a time limit of one minute, for jobs that sleep
NODES = (*COMPUTE, SHORT)
PARTITION = "lab"
SHORT_PARTITION = "short"
SHORT_MEMORY_MB = 512
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
    """The cores split between the two compute nodes (at least one each) and half the memory, split too."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    memory_mb = pages * page_size // 2**20
    return Layout(state_dir(path), max(1, cores // len(COMPUTE)), max(256, memory_mb // (2 * len(COMPUTE))))


def slurm_conf(lay: Layout, host: str, ctld_port: int, node_ports: list[int], dbd_port: int | None = None) -> str:
    """The cluster's slurm.conf: one controller and the nodes on this host, accounting through slurmdbd on `dbd_port`
    (None: no accounting), no cgroups."""
    r = lay.root
    nodes = "\n".join(
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} "
        + (f"CPUs=1 RealMemory={SHORT_MEMORY_MB}" if name == SHORT else
           f"CPUs={lay.cpus_per_node} RealMemory={lay.memory_mb_per_node}") + " State=UNKNOWN"
        for name, port in zip(NODES, node_ports))
    accounting = (f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
                  f"AccountingStoragePort={dbd_port}\nAccountingStoragePass={lay.socket}\n"
                  "AccountingStorageEnforce=associations,limits,qos"
                  if dbd_port else "AccountingStorageType=accounting_storage/none")
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
# (lab_utils.labs.lab11.slurm pins each node's tasks to its own cores instead); processes tracked through /proc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
# memory: without cgroups, the tasks' memory is read from /proc (every 30 s, or --acctg-freq) and a step above its
# --mem is killed (OUT_OF_MEMORY)
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobAcctGatherParams=OverMemoryKill
{accounting}
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
PartitionName={PARTITION} Nodes={','.join(COMPUTE)} Default=YES MaxTime=60 State=UP
PartitionName={SHORT_PARTITION} Nodes={SHORT} MaxTime=1 State=UP
"""


def _alive(pid: int, program: str, conf_hint: str) -> bool:
    """True when `pid` runs `program` with this cluster's configuration or socket on its command line (slurmdbd,
    which takes no path: in its environment)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if program == "slurmdbd" else []
    except OSError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if argv else "X"
    return (state != "Z" and bool(argv) and os.path.basename(argv[0].decode()) == program
            and any(conf_hint in a.decode(errors="replace") for a in argv + environ))


def _read_pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):  # IndexError: the daemon has not written it yet
        return int(path.read_text().split()[0])
    return None


def accounting_on(lay: Layout) -> bool:
    """True when this cluster's slurm.conf sends accounting to slurmdbd."""
    with contextlib.suppress(OSError):
        return "accounting_storage/slurmdbd" in lay.conf.read_text()
    return False


def _program_and_hint(lay: Layout, daemon: str) -> tuple[str, str]:
    """The program a daemon runs, and a string its command line (or environment) holds for this cluster only."""
    if daemon in NODES:
        return "slurmd", str(lay.conf)
    return daemon, {"munged": str(lay.socket), "mariadbd": str(lay.root / "db")}.get(daemon, str(lay.conf))


def daemons(lay: Layout) -> dict[str, int | None]:
    """Each daemon of this cluster -> its pid while it runs (from its pid file, checked), else None."""
    found = {}
    for daemon in ("munged", *(("mariadbd", "slurmdbd") if accounting_on(lay) else ()), "slurmctld", *NODES):
        program, hint = _program_and_hint(lay, daemon)
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


def _start(cmd, lay: Layout, daemon: str, what: str, background: bool = False) -> int:
    """Run a daemon's start command (it forks and writes its pid file; `background`: it stays in the foreground, so
    it runs in a session of its own); its pid once the file names a live process."""
    program, hint = _program_and_hint(lay, daemon)
    if background:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=client_env(lay), start_new_session=True)
        done = None
    else:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=client_env(lay))
    deadline = time.monotonic() + database.START_TIMEOUT_S
    while time.monotonic() < deadline:
        pid = _read_pid(lay.pid_file(daemon))
        if pid and _alive(pid, program, hint):
            return pid
        if background and proc.poll() is not None:
            break
        time.sleep(0.1)
    exit_code = done.returncode if done else proc.poll()
    said = done.stderr.strip() if done else ""
    raise RuntimeError(f"{what} did not start (exit {exit_code}): {said}\n"
                       f"its log {lay.log_file(daemon)} ends with:\n{_tail(lay.log_file(daemon))}")


def _write_key(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(128))


def accounting_refusal(euid: int | None = None) -> str | None:
    """Why this cluster runs without accounting (None when it can have it)."""
    lacking = database.missing()
    if lacking:
        return (f"no accounting: Debian's {' and '.join(lacking)} not installed (`apt-get install -y mariadb-server "
                "slurmdbd`), so sacct and seff have no records; everything else works")
    return None


def _start_accounting(lay: Layout, host: str, say) -> int:
    """The database (made the first time) and slurmdbd; slurmdbd's port."""
    db = database.Database(lay.root)
    database.install(db, say=say)
    db_port, dbd_port = free_port(), free_port()
    pid = _start(database.mariadbd_command(db, db_port), lay, "mariadbd", "mariadbd (accounting database)",
                 background=True)
    database.wait_for_sql(db, lambda: _alive(pid, "mariadbd", str(lay.root / "db")))
    database.grant(db)
    fd = os.open(db.dbd_conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # slurmdbd refuses a readable one
    with os.fdopen(fd, "w") as handle:
        handle.write(database.dbd_conf(db, host, dbd_port, db_port, lay.socket))
    os.chmod(db.dbd_conf, 0o600)
    _start([database.program("slurmdbd")], lay, "slurmdbd", "slurmdbd")
    _wait_for_dbd(lay, dbd_port)
    return dbd_port


def _wait_for_dbd(lay: Layout, port: int, timeout: float = database.START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"slurmdbd did not listen on port {port} within {timeout:g} s; its log ends with:\n"
                       f"{_tail(lay.log_file('slurmdbd'))}")


def _users() -> list[str]:
    """Who submits jobs here: root, and the user behind sudo."""
    sudo = os.environ.get("SUDO_USER")
    return ["root"] + ([sudo] if sudo and sudo != "root" else [])


def up(path=None, timeout: float = UP_TIMEOUT_S, say=print, accounting: bool = True) -> Layout:
    """Start the cluster (harmless when it already runs), with accounting where this machine has its packages and
    `accounting` is true; returns its layout. Raises RuntimeError with the reason."""
    reason = refusal()
    if reason:
        raise RuntimeError(reason)
    lay = layout(path)
    running = daemons(lay)
    states = node_states(lay) if all(running.values()) else {}
    if len(states) == len(NODES) and not any(s.endswith("*") or s.startswith(("down", "drain")) for s in states.values()):
        say(f"the cluster already runs (state in {lay.root}): {describe_cluster(lay, running)}")
        return lay
    if any(running.values()):
        say("part of the cluster runs: stopping it first")
        down(path, say=lambda *_: None)
    for attempt in range(PORT_TRIES):
        try:
            return _up(lay, timeout, say, accounting)
        except PortTaken:  # a port chosen free was taken before the daemon bound it: new ports, once more
            down(path, say=lambda *_: None)
            if attempt == PORT_TRIES - 1:
                raise
        except BaseException:
            down(path, say=lambda *_: None)  # nothing half-started is left running
            raise
    raise AssertionError("unreachable")


PORT_TRIES = 3  # free_port() can race another program taking the port between its check and the daemon's bind


class PortTaken(RuntimeError):
    """A daemon of the cluster died because another program took its port first."""


def _port_taken(lay: Layout) -> str | None:
    """The daemon that stopped because its port was taken (its log says so and it no longer runs), or None."""
    for daemon, pid in daemons(lay).items():
        if pid is None and lay.log_file(daemon).exists() and "Address already in use" in _tail(lay.log_file(daemon), 3):
            return daemon
    return None


def _up(lay: Layout, timeout: float, say, accounting: bool) -> Layout:
    started = time.monotonic()
    for sub in ("ctld", "spool", "run", "log"):
        (lay.root / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(lay.root, 0o755)
    for node in NODES:
        (lay.root / "spool" / node).mkdir(exist_ok=True)
    host = socket.gethostname().split(".")[0]
    (lay.root / "plugstack.conf").write_text("")
    munge = lay.root / "munge"
    _write_key(munge / "munge.key")
    os.chmod(munge, 0o700)
    _start([_program("munged"), f"--socket={lay.socket}", f"--key-file={munge / 'munge.key'}",
            f"--pid-file={lay.pid_file('munged')}", f"--log-file={lay.log_file('munged')}",
            f"--seed-file={munge / 'munged.seed'}", "--force"], lay, "munged", "munged")
    no_accounting = "no accounting: `cluster up --no-accounting`" if not accounting else accounting_refusal()
    dbd_port = None
    ctld_port, node_ports = free_port(), [free_port() for _ in NODES]
    if no_accounting is None:
        lay.conf.write_text(slurm_conf(lay, host, ctld_port, node_ports, dbd_port=1))  # slurmdbd reads its dir
        dbd_port = _start_accounting(lay, host, say)
    lay.conf.write_text(slurm_conf(lay, host, ctld_port, node_ports, dbd_port=dbd_port))
    if dbd_port:
        marker = database.Database(lay.root).ready_marker
        if not marker.exists():
            database.register_accounts(client_env(lay), "lab", _users(), say=say)
            marker.write_text("the cluster, its account and QOS are in the database\n")
    _start([_program("slurmctld"), "-f", str(lay.conf), "-i"], lay, "slurmctld", "slurmctld")
    for node in NODES:
        _start([_program("slurmd"), "-f", str(lay.conf), "-N", node], lay, node, f"slurmd -N {node}")
    deadline = time.monotonic() + timeout
    while True:
        states = node_states(lay)
        if len(states) == len(NODES) and all(s == "idle" for s in states.values()):
            break
        taken = _port_taken(lay)
        if taken:
            raise PortTaken(f"{taken} stopped: another program took its port ({_tail(lay.log_file(taken), 1)})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the nodes did not become idle within {timeout:g} s (sinfo: {states or 'no answer'}); "
                               f"logs in {lay.root / 'log'}; `python -m lab_utils cluster down` stops what started")
        if any(s.startswith(("down", "drain", "fail")) for s in states.values()):
            for node, s in states.items():  # a node marked down from an earlier run returns once its slurmd answers
                if s.startswith(("down", "drain")):
                    _run([_program("scontrol"), "update", f"NodeName={node}", "State=RESUME"], lay, check=False)
        time.sleep(0.3)
    say(f"started a Slurm cluster on this machine in {time.monotonic() - started:.1f} s (state in {lay.root}): "
        f"{describe_cluster(lay, daemons(lay))}")
    say(f"nodes {', '.join(COMPUTE)}: {lay.cpus_per_node} CPU(s) and {lay.memory_mb_per_node} MB each, partition "
        f"'{PARTITION}'; node {SHORT}: 1 CPU, partition '{SHORT_PARTITION}' (time limit 1 minute); "
        f"to use it from a shell: export SLURM_CONF={lay.conf}")
    say("accounting: slurmdbd over MariaDB (sacct works)" if dbd_port else f"{no_accounting}")
    return lay


def describe_cluster(lay: Layout, running: dict[str, int | None]) -> str:
    return ", ".join(f"{d if d not in NODES else 'slurmd -N ' + d} (pid {pid})" if pid else f"{d} (not running)"
                     for d, pid in running.items())


def status(path=None, say=print) -> bool:
    """Print what runs and what sinfo says; True when every daemon runs and both nodes answer."""
    lay = layout(path)
    running = daemons(lay)
    if not any(running.values()):
        say(f"no cluster of this course runs (state folder {lay.root}); start one with `make cluster` (as root)")
        return False
    say(describe_cluster(lay, running))
    states = node_states(lay)
    say("sinfo: " + (", ".join(f"{n} {s}" for n, s in states.items()) if states else "no answer from slurmctld"))
    say(f"to use it from a terminal (sinfo, sbatch, squeue, sacct), paste: export SLURM_CONF={lay.conf}")
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
    for daemon in (*NODES, "slurmctld", "slurmdbd", "mariadbd", "munged"):
        pid = running.get(daemon)
        if pid is None:
            continue
        program, hint = _program_and_hint(lay, daemon)
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
    from ...process_tree import descendants

    return descendants(pid)


def print_conf(path=None) -> int:
    """`cluster conf`: print only the path of the cluster's slurm.conf (for `export SLURM_CONF=$(...)`); 3 when none."""
    conf = layout(path).conf
    if not conf.exists():
        print(f"no cluster of this course was started here (no {conf}); start one with `make cluster` (as root)",
              file=sys.stderr)
        return 3
    print(conf)
    return 0


def main(action: str, path=None, accounting: bool = True) -> int:
    """CLI body of `cluster up|status|down`."""
    try:
        if action == "up":
            up(path, accounting=accounting)
            return 0
        if action == "down":
            down(path)
            return 0
        if action == "conf":
            return print_conf(path)
        return 0 if status(path) else 3
    except RuntimeError as exc:
        print(f"cluster {action}: {exc}")
        return 2
