"""Slurm around lab 11's lesson: find the cluster, submit, wait with a timeout, read back, remove the files named
after a run's jobs, ask running tasks where they wait (lab 12's table, per task), and inside a task: the first node's
address, a rendezvous port chosen free, the task's cores, the time of its first optimizer step. The
batch scripts and the Slurm-to-torch translation are the lesson: lab 11's notebook (lab_utils.labs.lab11.lesson)."""
from __future__ import annotations

import contextlib
import json
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
        terminal = ("\nin a terminal, Slurm's commands find this cluster only after `export SLURM_CONF=...`: "
                    "`python -m lab_utils cluster status` prints the line to paste" if self.one_host and self.conf else "")
        return f"Slurm: partitions {', '.join(self.partitions)} (default {self.default_partition}); nodes {nodes}{where}{terminal}"


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


# ---- submitting and waiting ----------------------------------------------------------------------------------------

def sbatch(script_path, *extra: str, cwd=None) -> int:
    """Submit a batch script; its job id."""
    out = command(["sbatch", "--parsable", *extra, str(script_path)] if cwd is None else
               ["sbatch", "--parsable", f"--chdir={cwd}", *extra, str(script_path)])
    return int(out.strip().split(";")[0])


def job_info(job_id) -> list[dict]:
    """`scontrol show job` of a job (one dict per array task), [] once Slurm has forgotten it."""
    try:
        out = command(["scontrol", "show", "job", "-o", str(job_id)])
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
        command(["scancel", str(job_id)])


def _say_states(job_id, jobs: list[dict], seen: dict, say) -> None:
    """Say each task's state and nodes once per change (`seen`: what was said last, by task)."""
    for job in jobs:
        task = job.get("ArrayTaskId")
        key = f"{job_id}_{task}" if task and task != "(null)" else str(job_id)
        where = job.get("NodeList", "(null)")
        line = f"job {key}: {job.get('JobState', '?')}" + (f" on {where}" if where not in ("(null)", "") else "")
        if seen.get(key) != line:
            seen[key] = line
            say(line)


def _ended(jobs: list[dict]) -> bool:
    return bool(jobs) and all(j.get("JobState") in DONE_STATES for j in jobs)


def wait(job_id, timeout: float, *, say=print, poll: float = 0.2) -> list[dict]:
    """Wait for every task of the job to end, saying each change of state; returns the final `scontrol` records."""
    deadline = time.monotonic() + timeout
    seen: dict
    seen = {}
    while True:
        jobs = job_info(job_id)
        _say_states(job_id, jobs, seen, say)
        if _ended(jobs):
            return jobs
        if time.monotonic() > deadline:
            cancel(job_id)
            raise TimeoutError(f"Slurm job {job_id} did not end within {timeout:g} s, so it was cancelled "
                               f"(last state: {', '.join(seen.values()) or 'unknown'}). A pending job waits for free "
                               "nodes (`squeue`); a running one may be stuck in a rendezvous (see its log).")
        time.sleep(poll)


def wait_for_results(job, timeout: float, *, check_every: float = 10.0, poll: float = 0.2) -> None:
    """Wait until every task of a submitit `job` wrote its result file or the job ended; cancel it on timeout."""
    deadline, asked = time.monotonic() + timeout, time.monotonic()
    results = [job.task(i).paths.result_pickle for i in range(job.num_tasks)] if job.num_tasks > 1 else \
        [job.paths.result_pickle]
    while not all(path.exists() for path in results):
        now = time.monotonic()
        if now > deadline:
            cancel(job.job_id)
            raise TimeoutError(f"Slurm job {job.job_id} wrote no results within {timeout:g} s, so it was cancelled "
                               "(see its log; a pending job waits for free nodes: `squeue`)")
        # `scontrol` only every `check_every` s: the job's steps are timed, and it costs CPU that its ranks share
        if now - asked > check_every:
            asked = now
            jobs = job_info(job.job_id)
            if jobs and all(j.get("JobState") in DONE_STATES for j in jobs):
                return  # ended without (all) results: job.results() raises the task's error
        time.sleep(poll)


def log_tail(path, lines: int = 8, folder=None) -> str:
    """The last `lines` of a job's log, without submitit's time stamps, `folder` by its name, this host as <host>."""
    with contextlib.suppress(OSError):
        text = Path(path).read_text(errors="replace").rstrip()
        text = re.sub(r" \(\d{4}-\d\d-\d\d [\d:,]+\)", "", text)
        text = re.sub(r" AT \d{4}-\d\d-\d\dT[\d:]+", "", text)  # slurmstepd's "CANCELLED AT <date>T<time>"
        if folder is not None:
            text = text.replace(str(Path(folder).resolve()), Path(folder).name).replace(str(folder), Path(folder).name)
        text = re.sub(rf"\b{re.escape(socket.gethostname())}\b", "<host>", text)
        return "\n".join(text.splitlines()[-lines:])
    return "(no log yet)"


JOB_FILE = re.compile(r"^(?:[A-Za-z][\w.-]*?-)?(\d+)(?=[-_.]|$)")  # by-hand-171.out, hang-195-0.out, 183_0_log.out


def job_files(folder, since: int) -> list[Path]:
    """The files in `folder` (and its submitit/ folder) named after a job whose id is `since` or later: the logs
    (`%j` in --output), port and where files, submitit's pickles. Scripts, checkpoints and results keep their names."""
    found = []
    for where in (Path(folder), Path(folder) / "submitit"):
        for path in sorted(where.iterdir()) if where.is_dir() else []:
            # submitit links .submission_file_<hash>.sh to the last job's script: named after that job
            name = Path(os.readlink(path)).name if path.is_symlink() else path.name
            match = JOB_FILE.match(name)
            if (path.is_file() or path.is_symlink()) and match and int(match.group(1)) >= since:
                found.append(path)
    return found


def remove_job_files(folder, since: int) -> list[str]:
    """Remove job_files(folder, since): a lab run cleans what its jobs left (their logs piled up run after run);
    the names removed, relative to `folder`."""
    removed = []
    for path in job_files(folder, since):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(str(path.relative_to(folder)))
    return removed


def without_machine_paths(text: str, folder) -> str:
    """A script as the notebook prints it: `folder` by its name, this interpreter as `python`, its folder as .venv/bin."""
    for path in (str(Path(folder).resolve()), str(folder)):
        text = text.replace(path, Path(folder).name)
    text = text.replace(sys.executable, "python").replace(str(Path(sys.executable).parent), ".venv/bin")
    return text.replace(sys.prefix, ".venv")  # display only: the file on disk keeps the paths every node needs


def accounting() -> str | None:
    """None when sacct reads this cluster's job records; else why not, in one sentence."""
    try:
        command(["sacct", "-n", "-X", "-j", "1"])
    except RuntimeError as exc:
        if "disabled" in str(exc):
            return ("sacct: this cluster keeps no job records (accounting storage is disabled: `make cluster` starts "
                    "slurmdbd where Debian's mariadb-server and slurmdbd are installed)")
        return f"sacct does not answer here: {exc}"
    return None


def sacct_states(job_ids) -> dict[str, str]:
    """The job lines' states in sacct (the last record of a requeued job), job id -> state."""
    out = command(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(map(str, job_ids))])
    return {job: state.split()[0] for job, state in (line.split("|") for line in out.splitlines() if "|" in line)}


def controller_names(job_ids) -> dict[str, str]:
    """job id -> its name as slurmctld knows it (while it remembers the job: MinJobAge, 5 minutes by default)."""
    names = {}
    for job in job_ids:
        try:
            found = re.search(r"\bJobName=(\S+)", command(["scontrol", "show", "job", "-o", str(job)]))
        except RuntimeError:  # forgotten already: sacct's name is the only one
            continue
        if found:
            names[str(job)] = found.group(1)
    return names


def sacct_names(job_ids) -> dict[str, str]:
    """job id -> the job's name in sacct."""
    out = command(["sacct", "-n", "-X", "-P", "-o", "JobID,JobName", "-j", ",".join(map(str, job_ids))])
    return {job: name for job, name in (line.split("|", 1) for line in out.splitlines() if "|" in line)}


def settled(job_ids, timeout: float = 15.0, poll: float = 0.3) -> dict[str, str]:
    """Wait until sacct records every job as ended, under its own name (slurmdbd lags a moment behind slurmctld,
    and until it has the job's full record sacct may show a placeholder name such as 'allocation'); their states."""
    deadline = time.monotonic() + timeout
    names = controller_names(job_ids)
    while True:
        states = sacct_states(job_ids)
        ended = all(states.get(str(j), "").startswith(DONE_STATES) for j in job_ids)
        recorded = sacct_names(job_ids) if ended and names else {}
        if (ended and all(recorded.get(job) == name for job, name in names.items())) or time.monotonic() > deadline:
            return states
        time.sleep(poll)


def seconds(text: str) -> float:
    """sacct's or scontrol's [D-][HH:]MM:SS[.mmm] as seconds."""
    days, _, rest = text.rpartition("-")
    return (float(days) * 86400 if days else 0.0) + sum(float(x) * 60 ** i for i, x in enumerate(reversed(rest.split(":"))))


def usage(job_ids, timeout: float = 15.0, poll: float = 0.3) -> dict[str, tuple[float, float, int]]:
    """job id -> (elapsed s, CPU s, CPUs) from sacct, once the CPU time of every job is recorded (it arrives after the
    job's end state): what `seff` divides."""
    deadline = time.monotonic() + timeout
    while True:
        # without -X: the job's own line then sums its steps' CPU time (with -X it is the allocation's alone, 0)
        out = command(["sacct", "-n", "-P", "-o", "JobID,Elapsed,TotalCPU,AllocCPUS", "-j", ",".join(map(str, job_ids))])
        found = {job: (seconds(elapsed), seconds(cpu), int(cpus)) for job, elapsed, cpu, cpus in
                 (line.split("|") for line in out.splitlines() if line.count("|") == 3) if "." not in job}
        if (len(found) == len(job_ids) and all(v[1] > 0 for v in found.values())) or time.monotonic() > deadline:
            return found
        time.sleep(poll)


def wait_for_state(job_id, states, timeout: float, poll: float = 0.2) -> dict:
    """Wait until the job's scontrol record is in one of `states` (e.g. PENDING after a requeue); the record."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = job_info(job_id)
        if jobs and jobs[0].get("JobState") in states:
            return jobs[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not reach {'/'.join(states)} within {timeout:g} s "
                               f"(state: {jobs[0].get('JobState') if jobs else 'gone'})")
        time.sleep(poll)


def node_done(node: str, job_id, timeout: float, poll: float = 0.2) -> None:
    """Wait until `node` no longer cleans up after job `job_id` (not COMPLETING, the job's epilog and kills done), and
    the job's reason is set: a requeued job released before that can start while its last run is still being killed,
    and fail at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = re.search(r"\bState=(\S+)", command(["scontrol", "show", "node", "-o", node]))
        record = job_info(job_id)
        if state and "COMPLETING" not in state.group(1) and record and record[0].get("Reason") not in (None, "None"):
            time.sleep(1.0)  # slurmd's own bookkeeping of the killed step, which scontrol does not show
            return
        time.sleep(poll)
    raise TimeoutError(f"node {node} still cleaning up after job {job_id} after {timeout:g} s")


def wait_for_file(path, timeout: float, *, at_least: int | None = None, poll: float = 0.1) -> str:
    """Wait until a file holds text (and, with `at_least`, a number >= it); its text."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            text = Path(path).read_text()
            # an empty file is one its writer has created and not yet written
            if text.strip() and (at_least is None or int(text.strip()) >= at_least):
                return text
        if time.monotonic() > deadline:
            raise TimeoutError(f"{Path(path).name} did not appear{'' if at_least is None else ' (or not reach ' + str(at_least) + ')'} "
                               f"within {timeout:g} s: read the job's log")
        time.sleep(poll)


# ---- inside a task -------------------------------------------------------------------------------------------------

def place_task() -> str:
    """Set intra-op threads to SLURM_CPUS_PER_TASK, pin to own cores on the local cluster; returns what it did."""
    import torch

    threads = int(os.environ.get("SLURM_CPUS_PER_TASK", "1"))
    torch.set_num_threads(threads)
    # on the course's local cluster (LAB_ONE_HOST) every node is this machine and Slurm cannot bind: pin each task
    # to cores of its own, as lab_utils.launch pins ranks
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


def exit_now(code: int = 0) -> None:
    """Leave the process at once with `code`, output flushed, skipping the interpreter's clean-up."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # with a DDP process group held (launch.hold_process_groups), gloo's teardown can hang


# ---- where every task waits: lab 12's hang table, per Slurm task ---------------------------------------------------

ASK_S = 5.0  # how long the tasks have to say where they are once asked


class JobHung(TimeoutError):
    """A job whose tasks stopped making progress (or ran past its time): `table` says where each task was."""

    def __init__(self, message: str, table: str):
        super().__init__(f"{message}\n\n{table}")
        self.table = table


class TaskFailed(RuntimeError):
    """A job one of whose tasks raised: `table` says where each task was, the failed one's traceback beside it."""

    def __init__(self, message: str, table: str, tracebacks: dict):
        super().__init__(f"{message}\n\n{table}")
        self.table, self.tracebacks = table, tracebacks


def where_file(folder, job_id, task) -> Path:
    """The file task `task` of job `job_id` writes where it is into (a folder every node sees)."""
    return Path(folder) / f"where-{job_id}-{task}.json"


def _write_json(path: Path, value) -> None:
    path.with_suffix(".tmp").write_text(json.dumps(value))
    os.replace(path.with_suffix(".tmp"), path)  # renamed: the notebook never reads half an answer


def threads_not_blocking(signum: int) -> list[int]:
    """The ids of this process's threads, other than the calling one, that do not block `signum` (from /proc)."""
    import threading

    found = []
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        with contextlib.suppress(OSError, StopIteration, ValueError):
            status = Path(f"/proc/self/task/{tid}/status").read_text().splitlines()
            blocked = int(next(line for line in status if line.startswith("SigBlk:")).split()[1], 16)
            if int(tid) != threading.get_native_id() and not blocked >> (signum - 1) & 1:
                found.append(int(tid))
    return found


def answer_where_asked(folder) -> Path:
    """Inside a Slurm task: record this task's collectives (as `launch` does for a rank) and answer USR1 —
    `scancel --signal=USR1 JOB` sends it to every task — by writing where it is to `where_file`. Call it first thing,
    after blocking USR1 (the script's first lines: numpy and torch start threads when imported, and USR1 must reach
    none of them); until it has run, USR1 ends the process (its default), so the notebook asks only once every task
    has written its first record."""
    from ...launch import record

    unblocked = threads_not_blocking(record.ASK)
    if unblocked:  # USR1 would reach one of them and end the process (or be lost) instead of reaching the answer
        raise RuntimeError(f"{len(unblocked)} thread(s) of this task started before USR1 was blocked (numpy's or "
                           "torch's, started when imported): make `import signal; signal.pthread_sigmask("
                           "signal.SIG_BLOCK, {signal.SIGUSR1})` the script's first lines, before any import")
    path = where_file(folder, os.environ["SLURM_JOB_ID"], os.environ["SLURM_PROCID"])
    answers = [0]

    def reply(report: dict) -> None:
        answers[0] += 1
        _write_json(path, {**report, "answers": answers[0]})

    record.answer_when_asked(reply)  # blocks USR1 in this thread and every thread started later: a thread sigwaits
    record.start_recording()
    reply(record.snapshot())  # answer 1: ready to be asked
    return path


@contextlib.contextmanager
def telling_where(folder):
    """answer_where_asked(folder) for the block; an exception in it is written beside the record (its traceback and
    the learner's line), then raised on."""
    import traceback

    from ...launch.rank import _report as report_at  # the launcher's own report of a rank that raised

    path = answer_where_asked(folder)
    try:
        yield path
    except BaseException as exc:
        if isinstance(exc, SystemExit) and not exc.code:
            raise  # sys.exit(0): a task that ends well
        _write_json(path, {**report_at(exc), "answers": -1, "raised": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()})
        raise


def where_reports(folder, job_id, tasks: int) -> dict[int, dict]:
    """Each task's last record (first record, an answer, or what it raised), task -> record; missing tasks left out."""
    reports = {}
    for task in range(tasks):
        with contextlib.suppress(OSError, ValueError):
            reports[task] = json.loads(where_file(folder, job_id, task).read_text())
    return reports


def ask_where(job_id, folder, tasks: int, timeout: float = ASK_S, poll: float = 0.1) -> dict[int, dict | None]:
    """Ask every task of the job where it is (USR1 to the tasks of its steps) and wait for the answers of all that
    can still answer; task -> its record, None for a task that did not answer (exited, or killed)."""
    before = where_reports(folder, job_id, tasks)
    with contextlib.suppress(RuntimeError):  # the job ended meanwhile: no task answers, the wait below says so
        command(["scancel", "--signal=USR1", str(job_id)])  # the job steps' tasks; the batch script is not signalled
    deadline = time.monotonic() + timeout
    while True:
        now = where_reports(folder, job_id, tasks)
        fresh = {t: r for t, r in now.items()
                 if r.get("raised") or r.get("answers", 0) > before.get(t, {}).get("answers", 0)}
        if len(fresh) == tasks or time.monotonic() > deadline:
            return {t: fresh.get(t) for t in range(tasks)}
        time.sleep(poll)


def task_states(reports: dict) -> dict[int, str]:
    """task -> "raised ..." / "running" (it answered) / "no answer", for the table."""
    return {t: (f"raised {r['raised'].split(':')[0]}" if r.get("raised") else "running") if r else "no answer"
            for t, r in reports.items()}


def where_table(reports: dict) -> str:
    """Lab 12's table, one row per task (task n is rank n: SLURM_PROCID), and the first call where tasks differ."""
    from ...launch.where import rank_table

    return ("where each task was (task n = rank n; its record of collectives, kept by lab_utils):\n"
            + rank_table(reports, task_states(reports)).replace("rank |", "task |", 1))


def _stuck(before: dict, now: dict) -> bool:
    """True when every task answered twice, in progress in the same collective call both times."""
    def waits(report):
        calls = report.get("calls", []) if report else []
        return (report["count"], calls[-1]["seq"]) if calls and calls[-1]["state"] == "in progress" else None
    return bool(now) and all(waits(now[t]) is not None and waits(now[t]) == waits(before.get(t)) for t in now)


def wait_or_explain(job_id, timeout: float, folder, tasks: int, *, stalled_s: float = 3.0, say=print,
                    poll: float = 0.2) -> list[dict]:
    """wait() for a job whose `tasks` tasks answer where they are (answer_where_asked / telling_where). Every
    `stalled_s` s they are asked; when every task waited in the same collective call at two asks in a row, or at
    `timeout`: JobHung; when a task raised: TaskFailed. Both carry the table of where every task was, and the job is
    cancelled."""
    deadline, asked_at = time.monotonic() + timeout, time.monotonic()
    seen: dict = {}
    last: dict = {}
    while True:
        jobs = job_info(job_id)
        _say_states(job_id, jobs, seen, say)
        reports: dict = where_reports(folder, job_id, tasks)
        failed = {t: r for t, r in reports.items() if r.get("raised")}
        if failed:
            time.sleep(1.0)  # the others' own errors arrive first, if they have any
            if not _ended(job_info(job_id)):
                reports = dict(ask_where(job_id, folder, tasks))
            reports.update({t: r for t, r in where_reports(folder, job_id, tasks).items() if r.get("raised")})
            cancel(job_id)
            first = min(failed)
            raise TaskFailed(f"task {first} of job {job_id} raised {failed[first]['raised'].splitlines()[0]}; "
                             "the job was cancelled", where_table({t: reports.get(t) for t in range(tasks)}),
                             {t: r["traceback"] for t, r in reports.items() if r and r.get("raised")})
        if _ended(jobs):
            return jobs
        now = time.monotonic()
        if now > deadline or (len(reports) == tasks and now - asked_at >= stalled_s):
            answers = ask_where(job_id, folder, tasks)
            asked_at = time.monotonic()
            if now > deadline or _stuck(last, answers):
                cancel(job_id)
                why = (f"did not end within {timeout:g} s" if now > deadline else
                       f"made no progress for {stalled_s:g} s: every task waited in the same collective call")
                raise JobHung(f"Slurm job {job_id} {why}, so it was cancelled", where_table(answers))
            last = {t: r for t, r in answers.items() if r is not None}
        time.sleep(poll)


SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_PROCID",
                   "SLURM_LOCALID", "SLURM_NODEID", "SLURMD_NODENAME", "SLURM_CPUS_PER_TASK")


# ---- the resume exercise's small problem (lab 11): the same model, batches and step wherever it runs -----------------

@contextlib.contextmanager
def one_thread():
    """torch on one intra-op thread inside the block, as many as before after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resume_problem(seed: int = 0):
    """A small seeded model and its SGD optimizer with momentum (its state must be saved too)."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def resume_batch(step: int):
    """The batch of training step `step` (0, 1, ...): the same for a given step in every run."""
    import torch

    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randn(16, 6, generator=gen), torch.randint(0, 3, (16,), generator=gen)


def resume_step(model, optimizer, batch) -> float:
    """One optimizer step on `batch`; its loss."""
    import torch.nn.functional as F

    x, y = batch
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.detach())
