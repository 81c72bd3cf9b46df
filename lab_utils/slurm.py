"""Slurm around lab 11's lesson: find the cluster, write a batch script, submit, wait with a timeout, read back.

What a task does with Slurm's variables (SLURM_PROCID -> RANK, ...) is the lesson and sits in the notebook; here is
the plumbing: `find()` (whatever Slurm this machine talks to, or the course's local cluster of `make cluster`),
`batch_script()` (an sbatch script whose `srun` starts one `torchrun` agent per node), `sbatch`/`wait`/`cancel` on
`scontrol` (no accounting database needed), a `submitit` executor, and inside a task: the first node's address, a
rendezvous port chosen free, the task's cores, and the wall-clock time of its first optimizer step.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SKIPPED = "skipped: no Slurm here (make cluster needs root; on a cluster, run this lab there)"
LOCAL_CLUSTER_DIR = Path("/var/tmp/lab-cluster")  # where `python -m lab_utils cluster up` keeps its slurm.conf
DONE_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
               "BOOT_FAIL", "DEADLINE")
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

    def describe(self) -> str:
        nodes = ", ".join(f"{n.name} ({n.state}, {n.cpus} CPU, {n.memory_mb} MB{', ' + n.gres if n.gres not in ('', '(null)') else ''})"
                          for n in self.nodes)
        where = (f" (the course's local cluster, every node on this machine; SLURM_CONF names its {Path(self.conf).name})"
                 if self.one_host and self.conf else " (the course's local cluster, every node on this machine)"
                 if self.one_host else "")
        return f"Slurm: partitions {', '.join(self.partitions)} (default {self.default_partition}); nodes {nodes}{where}"


def _slurm_env(conf: str | None = None) -> dict:
    return {**os.environ, **({"SLURM_CONF": conf} if conf else {})}


def _sinfo(conf: str | None) -> str | None:
    try:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%P|%t|%c|%m|%G|%n|%o"], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, env=_slurm_env(conf))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def find() -> Cluster | None:
    """The Slurm cluster `sinfo` reaches (a real one, or the course's local one, whose SLURM_CONF is then set for this
    process and the commands it runs); None when there is none."""
    if shutil.which("sinfo") is None:
        return None
    conf = os.environ.get("SLURM_CONF")
    out = _sinfo(conf)
    local = LOCAL_CLUSTER_DIR / "slurm.conf"
    if out is None and not conf and local.exists():
        conf = str(local)
        out = _sinfo(conf)
        if out is not None:
            os.environ["SLURM_CONF"] = conf
    if out is None:
        return None
    nodes, partitions, default = {}, [], None
    for line in out.splitlines():
        name, partition, state, cpus, memory, gres, host, address = line.split("|")
        if partition.endswith("*"):
            partition = default = partition[:-1]
        if partition not in partitions:
            partitions.append(partition)
        nodes.setdefault(name, Node(name, state, int(cpus), int(memory), gres, host, address))
    return Cluster(conf, tuple(partitions), default or (partitions[0] if partitions else None), tuple(nodes.values()))


def _run(cmd: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run a Slurm command; its output, or a RuntimeError naming the command and what it said."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"`{shlex.join(cmd)}` did not answer within {timeout:g} s: is slurmctld running "
                           "(`python -m lab_utils cluster status`)?") from None
    if done.returncode:
        raise RuntimeError(f"`{shlex.join(cmd)}` failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


# ---- the batch script ----------------------------------------------------------------------------------------------

def batch_script(python_file, args=(), *, job_name: str = "lab11-ddp", nodes: int = 2, tasks_per_node: int = 1,
                 gpus_per_node: int = 0, cpus_per_task: int = 1, time_limit: str = "00:05:00",
                 partition: str | None = None, account: str | None = None, output: str = "slurm-%j.out",
                 python: str = sys.executable, max_restarts: int = 0, one_host: bool = False) -> str:
    """An sbatch script: `srun` starts one `torchrun` agent per node (c10d rendezvous on the first node), and each
    agent starts `tasks_per_node` processes (with GPUs: one per GPU) running `python_file args`."""
    for name, value in (("nodes", nodes), ("tasks_per_node", tasks_per_node), ("cpus_per_task", cpus_per_task)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(gpus_per_node, int) or gpus_per_node < 0:
        raise ValueError(f"gpus_per_node must be 0 (CPU) or a positive integer, got {gpus_per_node!r}")
    procs = gpus_per_node or tasks_per_node  # one process per GPU on a GPU node
    gpu = gpus_per_node > 0
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={job_name}",
             f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1             # one Slurm task per node: the torchrun agent, which starts "
             "the node's processes",
             f"#SBATCH --cpus-per-task={cpus_per_task * procs:<14}# cores for those {procs} process(es): "
             f"{cpus_per_task} each"]
    if gpu:
        lines.append(f"#SBATCH --gres=gpu:{gpus_per_node:<20}# {gpus_per_node} GPU(s) per node: one process per GPU")
    else:
        lines.append("##SBATCH --gres=gpu:N                 # on a GPU cluster: N GPUs per node, one process per GPU "
                     "(gpus_per_node=N)")
    lines.append(f"#SBATCH --time={time_limit}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines += [f"#SBATCH --output={output}", "", "set -euo pipefail", "",
              "# the rendezvous: the first node of the allocation (this script runs there), on a port free there",
              'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
              "head_addr=$(scontrol show node \"$head_node\" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')"
              "  # its host name on most clusters",
              f"port=$({shlex.quote(python)} -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); "
              "print(s.getsockname()[1])')",
              f"export OMP_NUM_THREADS={cpus_per_task}             # intra-op threads per process: its share of "
              "the cores"]
    if gpu:
        lines += ["export NCCL_DEBUG=WARN                  # NCCL carries the collectives between GPUs (the backend "
                  "lab_utils.hardware picks when each process owns a GPU)",
                  "# export NCCL_SOCKET_IFNAME=ib0        # the interface NCCL uses between nodes, where it guesses wrong"]
    else:
        lines.append("# on GPU nodes: gloo -> NCCL, chosen by lab_utils.hardware when each process owns a GPU; "
                     "export NCCL_DEBUG=WARN")
    if one_host:
        lines.append("export LAB_ONE_HOST=1                  # every node of the course's local cluster is this "
                     "machine: ranks share its cores and GPUs")
    bind = "--cpu-bind=cores " if gpu or cpus_per_task > 1 else ""
    lines += ["",
              "# one agent per node; --kill-on-bad-exit: a failed node ends the whole step",
              f'srun --nodes="$SLURM_NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 {bind}\\',
              f"  {shlex.quote(python)} -m torch.distributed.run \\",
              f'    --nnodes="$SLURM_NNODES" --nproc-per-node={procs} \\',
              '    --rdzv-backend=c10d --rdzv-endpoint="$head_addr:$port" --rdzv-id="$SLURM_JOB_ID" \\',
              f"    --max-restarts={max_restarts} \\",
              "    " + " ".join(shlex.quote(str(a)) for a in (python_file, *args)), ""]
    return "\n".join(lines)


def restart_script(python_file, args=(), *, attempts: int = 2, job_name: str = "lab11-restart", nodes: int = 2,
                   tasks_per_node: int = 1, gpus_per_node: int = 0, cpus_per_task: int = 1,
                   time_limit: str = "00:05:00", partition: str | None = None, account: str | None = None,
                   output: str = "slurm-%j.out", python: str = sys.executable, one_host: bool = False) -> str:
    """An sbatch script that runs `python_file args` as one srun step of `nodes x tasks_per_node` tasks (rank =
    SLURM_PROCID) and, when a task dies, starts a fresh step — new processes, a new rendezvous port — up to `attempts`
    times in the same allocation; the program must resume from its checkpoint."""
    if not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"attempts must be a positive integer, got {attempts!r}")
    head = batch_script(python_file, args, job_name=job_name, nodes=nodes, tasks_per_node=tasks_per_node,
                        gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task, time_limit=time_limit,
                        partition=partition, account=account, output=output, python=python, one_host=one_host)
    head = head[:head.index("\n# the rendezvous:")]
    procs = gpus_per_node or tasks_per_node
    gpu = gpus_per_node > 0
    head = head.replace("#SBATCH --ntasks-per-node=1             # one Slurm task per node: the torchrun agent, which "
                        "starts the node's processes",
                        f"#SBATCH --ntasks-per-node={procs:<15}# one Slurm task per process (on GPU nodes: one per GPU)")
    head = re.sub(r"#SBATCH --cpus-per-task=\d+ *#[^\n]*", f"#SBATCH --cpus-per-task={cpus_per_task:<17}# cores per process", head)
    head = head.replace("set -euo pipefail", "set -uo pipefail  # no -e: a failed step is what the loop below handles")
    bind = "--cpu-bind=cores " if gpu or cpus_per_task > 1 else ""
    port = (f"$({shlex.quote(python)} -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); "
            "print(s.getsockname()[1])')")
    lines = [head.rstrip(), "",
             "# every task's rendezvous: the first node of the allocation (this script runs there)",
             'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
             "export MASTER_ADDR=$(scontrol show node \"$head_node\" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')",
             f"export OMP_NUM_THREADS={cpus_per_task}"]
    if one_host:
        lines += ["export LAB_ONE_HOST=1                  # every node of the course's local cluster is this machine: "
                  "ranks share its cores",
                  "export GLOO_SOCKET_IFNAME=lo           # ... and gloo stays on the loopback"]
    if gpu:
        lines.append("export NCCL_DEBUG=WARN                  # NCCL carries the collectives between GPUs")
    lines += ["",
              "# the restart: a fresh srun step (new processes, a new port) in the same allocation, at most "
              f"{attempts} attempts",
              f"for attempt in $(seq 1 {attempts}); do",
              f"  export MASTER_PORT={port}",
              '  echo "attempt $attempt: srun step of $SLURM_NNODES node(s), rendezvous on $head_node"',
              "  # --kill-on-bad-exit: when one task dies, Slurm ends the step's other tasks (no rank waits forever)",
              f'  srun --nodes="$SLURM_NNODES" --ntasks-per-node={procs} --kill-on-bad-exit=1 {bind}\\',
              f"    {shlex.quote(python)} " + " ".join(shlex.quote(str(a)) for a in (python_file, *args)),
              "  status=$?",
              '  if [ "$status" -eq 0 ]; then echo "attempt $attempt completed"; exit 0; fi',
              '  echo "attempt $attempt failed (exit status $status): a fresh step resumes from the last checkpoint"',
              "done",
              "exit 1", ""]
    return "\n".join(lines)


def rank_from_slurm() -> dict:
    """Inside an srun task: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE from SLURM_PROCID, SLURM_NTASKS,
    SLURM_LOCALID and the tasks per node (MASTER_ADDR/PORT come from the batch script); set and returned."""
    world_size = int(os.environ["SLURM_NTASKS"])
    env = {"RANK": os.environ["SLURM_PROCID"], "WORLD_SIZE": str(world_size), "LOCAL_RANK": os.environ["SLURM_LOCALID"],
           "LOCAL_WORLD_SIZE": str(world_size // int(os.environ["SLURM_NNODES"]))}
    os.environ.update(env)
    return env


# ---- submitting and waiting ----------------------------------------------------------------------------------------

def sbatch(script_path, *extra: str, cwd=None) -> int:
    """Submit a batch script; its job id."""
    out = _run(["sbatch", "--parsable", *extra, str(script_path)] if cwd is None else
               ["sbatch", "--parsable", f"--chdir={cwd}", *extra, str(script_path)])
    return int(out.strip().split(";")[0])


def job_info(job_id) -> list[dict]:
    """`scontrol show job` of a job (one dict per array task), [] once Slurm has forgotten it."""
    try:
        out = _run(["scontrol", "show", "job", "-o", str(job_id)])
    except RuntimeError as exc:
        if "Invalid job id" in str(exc):
            return []
        raise
    jobs = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields:
            jobs.append(fields)
    return jobs


def cancel(job_id) -> None:
    """Cancel a job (all its array tasks); no error when it has ended."""
    with contextlib.suppress(RuntimeError):
        _run(["scancel", str(job_id)])


def wait(job_id, timeout: float, *, say=print, poll: float = 0.2) -> list[dict]:
    """Wait until every task of the job has ended, saying each change of state (job id, state, nodes); cancel it
    and raise TimeoutError after `timeout` seconds. Returns the final `scontrol` records."""
    deadline = time.monotonic() + timeout
    seen = {}
    while True:
        jobs = job_info(job_id)
        for job in jobs:
            task = job.get("ArrayTaskId")
            key = f"{job_id}_{task}" if task and task != "(null)" else str(job_id)
            state = job.get("JobState", "?")
            where = job.get("NodeList", "(null)")
            line = f"job {key}: {state}" + (f" on {where}" if where not in ("(null)", "") else "")
            if seen.get(key) != line:
                seen[key] = line
                say(line)
        if jobs and all(j.get("JobState") in DONE_STATES for j in jobs):
            return jobs
        if time.monotonic() > deadline:
            cancel(job_id)
            raise TimeoutError(f"Slurm job {job_id} did not end within {timeout:g} s, so it was cancelled "
                               f"(last state: {', '.join(seen.values()) or 'unknown'}). A pending job waits for free "
                               "nodes (`squeue`); a running one may be stuck in a rendezvous (see its log).")
        time.sleep(poll)


def wait_for_results(job, timeout: float, *, check_every: float = 10.0, poll: float = 0.2) -> None:
    """Wait until every task of a submitit `job` has written its result file: a file-system check every `poll` s,
    and a scheduler query (`scontrol`) only every `check_every` s, to notice a job that ended without results. Used
    while the job's steps are timed: each `scontrol` costs CPU that the job's ranks share on a small machine."""
    deadline, asked = time.monotonic() + timeout, time.monotonic()
    results = [job.task(i).paths.result_pickle for i in range(job.num_tasks)] if job.num_tasks > 1 else \
        [job.paths.result_pickle]
    while not all(path.exists() for path in results):
        now = time.monotonic()
        if now > deadline:
            cancel(job.job_id)
            raise TimeoutError(f"Slurm job {job.job_id} wrote no results within {timeout:g} s, so it was cancelled "
                               "(see its log; a pending job waits for free nodes: `squeue`)")
        if now - asked > check_every:
            asked = now
            jobs = job_info(job.job_id)
            if jobs and all(j.get("JobState") in DONE_STATES for j in jobs):
                return  # ended without (all) results: job.results() raises the task's error
        time.sleep(poll)


def executor(folder, *, nodes: int = 1, tasks_per_node: int = 1, gpus_per_node: int = 0, cpus_per_task: int = 1,
             time_limit_min: int = 5, partition: str | None = None, account: str | None = None,
             job_name: str = "lab11", setup=(), array_parallelism: int | None = None):
    """A submitit executor for this cluster (its pickles and logs in `folder`, which every node must see)."""
    import submitit

    ex = submitit.SlurmExecutor(folder=str(folder), python=sys.executable)
    params = dict(job_name=job_name, nodes=nodes, ntasks_per_node=tasks_per_node, cpus_per_task=cpus_per_task,
                  time=time_limit_min, setup=list(setup), signal_delay_s=10, stderr_to_stdout=True)
    if gpus_per_node:
        params["gpus_per_node"] = gpus_per_node
    if partition:
        params["partition"] = partition
    if account:
        params["account"] = account
    if array_parallelism:
        params["array_parallelism"] = array_parallelism
    ex.update_parameters(**params)
    return ex


def log_tail(path, lines: int = 8, folder=None) -> str:
    """The last lines of a job's log ('(no log yet)' when it does not exist), without submitit's time stamps, with
    `folder` shown by its name and this machine's host name as <host>."""
    with contextlib.suppress(OSError):
        text = Path(path).read_text(errors="replace").rstrip()
        text = re.sub(r" \(\d{4}-\d\d-\d\d [\d:,]+\)", "", text)
        text = re.sub(r" AT \d{4}-\d\d-\d\dT[\d:]+", "", text)  # slurmstepd's "CANCELLED AT <date>T<time>"
        if folder is not None:
            text = text.replace(str(Path(folder).resolve()), Path(folder).name).replace(str(folder), Path(folder).name)
        text = re.sub(rf"\b{re.escape(socket.gethostname())}\b", "<host>", text)
        return "\n".join(text.splitlines()[-lines:])
    return "(no log yet)"


def shown(text: str, folder) -> str:
    """A script as the notebook prints it: `folder` by its name, this interpreter as `python` (the file on disk keeps
    the absolute paths every node needs)."""
    for path in (str(Path(folder).resolve()), str(folder)):
        text = text.replace(path, Path(folder).name)
    return text.replace(sys.executable, "python")

# ---- inside a task -------------------------------------------------------------------------------------------------

def first_node_address() -> str:
    """The address of the job's first node (Slurm's NodeAddr: its host name on most clusters)."""
    first = _run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]]).split()[0]
    found = re.search(r"\bNodeAddr=(\S+)", _run(["scontrol", "show", "node", "-o", first]))
    return found.group(1) if found else first


def shared_free_port(folder, timeout: float = 60.0) -> int:
    """A port free on the first node, the same in every task of this job: task 0 (which runs there) picks it and
    writes it to `folder` (seen by every node); the others read it."""
    path = Path(folder) / f"port-{os.environ['SLURM_JOB_ID']}"
    if os.environ.get("SLURM_PROCID") == "0":
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        path.with_suffix(".tmp").write_text(str(port))
        os.replace(path.with_suffix(".tmp"), path)
        return port
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"task 0 of job {os.environ['SLURM_JOB_ID']} wrote no port to {path} within {timeout:g} s: "
                               "is that folder on a file system every node shares?")
        time.sleep(0.05)
    return int(path.read_text())


def place_task() -> str:
    """Intra-op threads = SLURM_CPUS_PER_TASK; on the course's local cluster (LAB_ONE_HOST), where every node is
    this machine and Slurm cannot bind, pin this process to cores of its own (as lab_utils.launch pins ranks)."""
    import torch

    threads = int(os.environ.get("SLURM_CPUS_PER_TASK", "1"))
    torch.set_num_threads(threads)
    if not os.environ.get("LAB_ONE_HOST") or not hasattr(os, "sched_setaffinity"):
        return f"{threads} thread(s)"
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("SLURM_NTASKS_PER_NODE", "1").split("(")[0])
    local_rank = int(os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID", "0"))
    index = int(os.environ.get("SLURM_NODEID", "0")) * local_world + local_rank
    cores = sorted(os.sched_getaffinity(0))
    mine = cores[index * threads:(index + 1) * threads]
    if len(mine) == threads:
        os.sched_setaffinity(0, set(mine))
        return f"{threads} thread(s) on core(s) {mine}"
    return f"{threads} thread(s), not pinned ({len(cores)} cores for more tasks)"


class FirstStep:
    """Records the wall-clock time (time.time()) of the first optimizer step in this process, of any optimizer:
    `clock = FirstStep()` before training, `clock.at` after."""

    def __init__(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.at: float | None = None
        self._handle = register_optimizer_step_post_hook(self._hook)

    def _hook(self, optimizer, args, kwargs):
        if self.at is None:
            self.at = time.time()
            self._handle.remove()


def exit_now(code: int = 0) -> None:
    """Leave the process at once, output flushed: a task whose DDP process group is held (launch.hold_process_groups)
    must not reach the interpreter's clean-up, where gloo's teardown can hang."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@dataclass(frozen=True)
class TorchEnvironment:
    """What torchrun would set, derived from what Slurm set for this task."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int

    def export(self) -> dict:
        env = {"RANK": str(self.rank), "WORLD_SIZE": str(self.world_size), "LOCAL_RANK": str(self.local_rank),
               "LOCAL_WORLD_SIZE": str(self.local_world_size), "MASTER_ADDR": self.master_addr,
               "MASTER_PORT": str(self.master_port)}
        if self.master_addr.startswith("127.") and sys.platform.startswith("linux"):
            env["GLOO_SOCKET_IFNAME"] = "lo"  # every node is this machine: keep gloo on the loopback
        os.environ.update(env)
        return env


def torch_environment(folder) -> TorchEnvironment:
    """RANK = SLURM_PROCID, WORLD_SIZE = SLURM_NTASKS, LOCAL_RANK = SLURM_LOCALID, LOCAL_WORLD_SIZE = tasks per node,
    MASTER_ADDR = the first node's address, MASTER_PORT = a port free there (chosen by task 0, shared via `folder`)."""
    world_size = int(os.environ["SLURM_NTASKS"])
    return TorchEnvironment(rank=int(os.environ["SLURM_PROCID"]), world_size=world_size,
                            local_rank=int(os.environ["SLURM_LOCALID"]),
                            local_world_size=world_size // int(os.environ["SLURM_NNODES"]),
                            master_addr=first_node_address(), master_port=shared_free_port(folder))


SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_PROCID",
                   "SLURM_LOCALID", "SLURM_NODEID", "SLURMD_NODENAME", "SLURM_CPUS_PER_TASK")


def task(worker, cfg, folder) -> dict:
    """One Slurm task of a submitit job: the torch variables from Slurm's, this task's cores, then
    worker(rank, world_size, cfg); returns the worker's values plus what the task saw and when it first stepped."""
    from .launch import hold_process_groups

    env = torch_environment(folder).export()
    placed = place_task()
    clock = FirstStep()
    hold_process_groups()  # as lab 03's torchrun script: no gloo teardown hang when the task ends
    out = worker(int(env["RANK"]), int(env["WORLD_SIZE"]), cfg)
    return {**out, "slurm": {k: os.environ.get(k, "") for k in SLURM_VARIABLES}, "torch": env, "placed": placed,
            "first_step_at": clock.at}


def launched(worker, cfg) -> callable:
    """worker wrapped for lab_utils.launch, also returning the wall-clock time of its first optimizer step."""
    def timed(rank, world_size, cfg):
        clock = FirstStep()
        return {**worker(rank, world_size, cfg), "first_step_at": clock.at}

    return timed


def side_by_side(worker, cfg: dict, ex, folder, *, world_size: int = 2, repeats: int = 2, timeout: float = 180.0,
                 say=print) -> dict:
    """The same worker and settings on `ex`'s Slurm nodes and with lab_utils.launch on `world_size` local ranks,
    alternating, `repeats` times each: seconds from submission (or launch) to the first optimizer step, and the
    steady steps per second (median step, warm-up excluded) of each run."""
    import numpy as np

    from .launch import launch

    batch = cfg["per_rank_batch"] * world_size
    runs = {"slurm": [], "launch": []}
    for _ in range(repeats):
        start = time.time()
        job = ex.submit(task, worker, cfg, str(folder))
        wait_for_results(job, timeout)
        out = job.results()[0]
        runs["slurm"].append((out["first_step_at"] - start, out["samples_per_s"] / batch))
        start = time.time()
        out = launch(launched(worker, cfg), world_size, args=(cfg,), timeout=timeout)[0]
        runs["launch"].append((out["first_step_at"] - start, out["samples_per_s"] / batch))
    result = {}
    for name, values in runs.items():
        first, steps = zip(*values)
        result[name] = {"first_step_s": float(np.median(first)), "steps_per_s": float(np.median(steps)),
                        "steps_per_s_runs": [round(s, 3) for s in steps], "first_step_s_runs": [round(f, 2) for f in first]}
    result["slurm_vs_local_steps"] = result["slurm"]["steps_per_s"] / result["launch"]["steps_per_s"]
    return result
