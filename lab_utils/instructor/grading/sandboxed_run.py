"""A submission's sandboxed run, the part of grading that runs untrusted code: the whole notebook (papermill, for
the executed notebook handed back and the run's status), then one probe per exercise, each in a fresh process (the
children of one probe process, which imports torch once for all of them where their set-up uses it). Takes
a job and returns plain data; runs in the grader's process (lab_utils.instructor.grading.grade) or as a Slurm array task on a
node (lab_utils.instructor.grading.grade_slurm), the same code either way."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ...hardware import usable_cpu_count
from . import submission_reader
from .probe import MAX_ANSWER_BYTES, parse_answer
from .sandbox.host import remove_tree
from .sandbox.isolation import Isolation, Limits
from .sandbox.jail import Sandbox
from .submission_reader import MAX_NOTEBOOK_BYTES

ROOT = Path(__file__).resolve().parents[3]
PROBE_TIMEOUT_S = 120.0
# runs in the sandbox as its pid 1, not dumpable: the notebook comes in on stdin; papermill saves the executed notebook
# after every cell into a file without a name (O_TMPFILE), which the kernel can neither find, replace nor block; the
# driver stops the run at its deadline and sends back the last saved notebook on a descriptor the kernel does not have
PAPERMILL = """
import ctypes, json, os, signal, sys, warnings
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
params, cell_timeout, root, limit, deadline = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
notebook = sys.stdin.buffer.read(limit + 1)
back = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
with open("submission.ipynb", "wb") as handle:
    handle.write(notebook)
try:
    saved = os.open(os.environ.get("TMPDIR", "."), os.O_TMPFILE | os.O_RDWR, 0o600)
except OSError:  # a filesystem without unnamed files: a named one, removed at once (still open here)
    import tempfile
    saved, name = tempfile.mkstemp(prefix=".executed-")
    os.unlink(name)
warnings.filterwarnings("ignore")  # papermill: an output path without .ipynb


class Deadline(Exception):
    pass


def stop(*_):
    raise Deadline()


sys.path.insert(0, root)
# jsonschema (under nbformat, under papermill) builds an IRI grammar when rfc3987_syntax can be imported: about 1.7 s
# of CPU per submission, for a format no notebook schema uses. Refused here, so jsonschema leaves that checker out
sys.modules.setdefault("rfc3987_syntax", None)
import papermill
from nbclient.exceptions import DeadKernelError
from papermill.exceptions import PapermillExecutionError
from lab_utils.instructor.course.headless import QUIET_KERNEL
code = 0
signal.signal(signal.SIGALRM, stop)
signal.setitimer(signal.ITIMER_REAL, deadline)
try:
    papermill.execute_notebook("submission.ipynb", f"/proc/self/fd/{saved}", parameters=json.loads(params),
                               kernel_name="python3", execution_timeout=cell_timeout, interrupt_on_timeout=True,
                               progress_bar=False, log_output=False, request_save_on_cell_execute=True,
                               extra_arguments=QUIET_KERNEL)
except PapermillExecutionError:
    pass  # a cell raised: expected with partial answers; every cell still ran
except DeadKernelError as exc:
    print("KERNEL DIED:", exc, file=sys.stderr)
    code = 3
except Deadline:
    code = 124
signal.setitimer(signal.ITIMER_REAL, 0)
offset = 0
while offset <= limit:
    chunk = os.pread(saved, 1 << 20, offset)
    if not chunk:
        break
    offset += len(chunk)
    while chunk:
        chunk = chunk[os.write(back, chunk):]
os._exit(code)
"""
STOP_GRACE_S = 30.0  # after the driver's own deadline: time to stop the kernel and send the notebook back
PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from lab_utils.instructor.grading.probe import main; main()")


def _python(box: Sandbox, code: str, args: list[str], timeout: float) -> list[str]:
    """`python -I -c code args`: isolated (neither the working directory nor PYTHON* variables are on its path, so a
    module planted beside it is never imported); where no sandbox kills the whole tree, a subreaper wraps it."""
    command = [sys.executable, "-I", "-c", code, *args]
    if box.isolation.bubblewrap:
        return command
    subreaper = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from lab_utils.instructor.grading.subreaper import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-I", "-c", subreaper, str(timeout), "--", *command]


class _Exchange:
    """A sandboxed process's pipes: what it is given on stdin, at most `out_limit` bytes of its stdout (more is
    drained and dropped), the last bytes of its stderr."""

    def __init__(self, process: subprocess.Popen, data: bytes, out_limit: int, tail: int = 8192):
        self.out, self.err, self.overflow = bytearray(), bytearray(), False
        self._threads = [threading.Thread(target=self._feed, args=(process.stdin, data), daemon=True),
                         threading.Thread(target=self._drain, args=(process.stdout, out_limit), daemon=True)]
        if process.stderr is not None:
            self._threads.append(threading.Thread(target=self._tail, args=(process.stderr, tail), daemon=True))
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _feed(stream, data: bytes) -> None:
        try:
            stream.write(data)
        except OSError:
            pass  # it ended before reading everything
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def _drain(self, stream, limit: int) -> None:
        with stream:
            while chunk := stream.read1(1 << 16):
                if len(self.out) + len(chunk) > limit:
                    self.overflow = True
                else:
                    self.out += chunk

    def _tail(self, stream, keep: int) -> None:
        with stream:
            while chunk := stream.read1(1 << 16):
                self.err = (self.err + chunk)[-keep:]

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=5)


def execute(notebook: str, box: Sandbox, params: dict, *, cell_timeout: float,
            timeout: float) -> tuple[str, str, str | None]:
    """Run the whole notebook in the sandbox; returns (status, message, executed notebook as text, or None)."""
    argv = _python(box, PAPERMILL, [json.dumps(params), str(cell_timeout), str(ROOT), str(MAX_NOTEBOOK_BYTES),
                                    str(timeout)], timeout + STOP_GRACE_S)
    process = box.popen(argv, workdir="run", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        cpu_seconds=(timeout + STOP_GRACE_S) * usable_cpu_count())
    exchange = _Exchange(process, notebook.encode(), MAX_NOTEBOOK_BYTES)
    try:
        code = process.wait(timeout=timeout + STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        code = None
    box.kill_all()
    exchange.join()
    tail = bytes(exchange.err)[-4000:].decode(errors="replace")
    tail = "\n".join(line for line in tail.splitlines() if "WARNING" not in line)
    cleaned = submission_reader.clean_in_child(bytes(exchange.out)) if exchange.out and not exchange.overflow else {}
    result = cleaned.get("notebook")
    if code is None or code == 124:
        return "timeout", f"the notebook ran longer than {timeout:g} s and was stopped", result
    if code == 3 or "KERNEL DIED" in tail:
        return "kernel_died", "the kernel died (os._exit, a crash or out of memory)", result
    if code != 0 or result is None:
        last = tail.strip().splitlines()[-1][:200] if tail.strip() else f"exit code {code}"
        return "kernel_died", f"execution stopped: {last}", result
    timeouts = tail.count("Timeout waiting for execute reply") + cleaned["interrupted"]
    if timeouts:
        return "timeout", f"{timeouts} cell(s) ran longer than {cell_timeout:g} s and were interrupted", result
    if cleaned["errors"]:
        return "error", f"{cleaned['errors']} cell(s) raised; the first: {cleaned['first_error']}", result
    return "completed", "", result


def probe_batch(requests: list[dict], box: Sandbox, timeout: float, workdir: str) -> list[dict]:
    """Run exercises in one process in the sandbox, each in a fresh child of it (probe.py): their answers in order,
    stopping at the first probe that outruns its limit or ends the process early; that probe's record says why, and
    the list is then shorter than `requests` (the caller starts the rest again)."""
    process = box.popen(_python(box, PROBE, [str(ROOT)], 2 * timeout * len(requests)), workdir=workdir,
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                        cpu_seconds=timeout * usable_cpu_count())
    data = b"".join((json.dumps(r) + "\n").encode() for r in requests)
    exchange = _Exchange(process, data, len(requests) * (MAX_ANSWER_BYTES + 4096))
    stopped = _wait_each(process, box, timeout, lambda: exchange.out.count(b"\n"), len(requests))
    box.kill_all()
    exchange.join()
    lines = bytes(exchange.out).split(b"\n")[:-1]
    records = [parse_answer(line) for line in lines[:len(requests)]]
    if len(records) < len(requests):
        why = stopped or box.exceeded or "no answer came back (the process ended early)"
        records.append({"status": "error", "error": why})
    elif box.exceeded:  # over a limit while the last probe ran: that probe's answer is not used
        records[-1] = {"status": "error", "error": box.exceeded}
    return records


def probes(requests: list[dict], box: Sandbox, timeout: float) -> list[dict]:
    """One record per exercise: blocked and missing ones from the request, the others from probe processes (one for
    all, started again after a probe that was stopped); each exercise is run in a fresh process."""
    records: list[dict | None] = [None] * len(requests)
    todo = []
    for index, request in enumerate(requests):
        if "blocked" in request:
            records[index] = {"status": "blocked", "error": request["blocked"]}
        elif "missing" in request:
            records[index] = {"status": "missing", "error": request["missing"]}
        else:
            todo.append(index)
    batch = 0
    while todo:
        if box.exceeded:  # over a limit of the sandbox: no later answer counts
            for index in todo:
                records[index] = {"status": "error", "error": box.exceeded}
            break
        answered = probe_batch([requests[i] for i in todo], box, timeout, f"probe-{batch}")
        for index, record in zip(todo, answered):
            records[index] = record
        todo, batch = todo[len(answered):], batch + 1
    return [r for r in records if r is not None]


def _wait_each(process: subprocess.Popen, box: Sandbox, timeout: float, answered, total: int) -> str:
    """Wait for a process that answers `total` probes one after another (`answered()`: how many so far); '' when it
    ended, else why its current probe was stopped. Each probe's limit counts from the previous answer: where the
    sandbox's CPU time is counted, its own CPU at its share (a busy machine cannot cost it the limit), stopped once it
    has used `timeout` seconds of its share or after twice `timeout` of waiting (sleeping or blocked); elsewhere after
    `timeout` seconds."""
    done, start, used_before = answered(), time.monotonic(), box.cpu_seconds()
    share = box.limits.cpus or usable_cpu_count()
    while True:
        try:
            process.wait(timeout=0.2)
            return ""
        except subprocess.TimeoutExpired:
            pass
        now_done = answered()
        if now_done != done:
            done, start, used_before = now_done, time.monotonic(), box.cpu_seconds()
        waited = time.monotonic() - start
        if done >= total:  # every answer is in: the process is ending
            if waited >= timeout:
                return ""
            continue
        if used_before is None:
            if waited >= timeout:
                return f"it ran longer than {timeout:g} s"
            continue
        used = (box.cpu_seconds() or used_before) - used_before
        if used >= timeout * share:
            return (f"it used {used:.0f} CPU-seconds, more than {timeout:g} s at its share of {share:g} CPU(s) "
                    "allows")
        if waited >= 2 * timeout:
            return f"it ran longer than {2 * timeout:g} s (using only {used:.1f} CPU-seconds: it waited or slept)"


def run_job(job: dict, isolation: Isolation, scratch: Path, limits: Limits) -> dict:
    """The part of grading that runs the submission, in its own sandbox (here, or on a cluster node): the whole
    notebook, then one probe per exercise. Returns plain data: status, message, executed notebook, answer records."""
    home = Path(tempfile.mkdtemp(prefix=f"{re.sub(r'[^A-Za-z0-9_-]', '_', job['student'])[:40]}-", dir=scratch))
    params = dict(job["parameters"])
    probe_timeout = job.get("probe_timeout") or max(PROBE_TIMEOUT_S, job["cell_timeout"])
    try:
        with Sandbox(isolation, home, limits, {"PYTHONPATH": str(ROOT)}) as box:
            if job["results_dir"]:
                params["results_dir"] = str(box.inside("run") / "results")
            status, message, executed = (execute(job["notebook"], box, params, cell_timeout=job["cell_timeout"],
                                                 timeout=job["timeout"])
                                         if job["execute"] else ("completed", "probes only: the notebook was not run", None))
            if box.exceeded:
                status, message = "error", f"stopped: {box.exceeded}"
            records = probes(job["requests"], box, probe_timeout)
    finally:
        remove_tree(home)
    return {"status": status, "message": message, "records": records, "sandbox": isolation.row_note,
            "executed": executed}
