"""The "your turn" batch script of lab 11: the request it must make, what sacct recorded for the learner's job, and a
self-check that names a wrong request (PASS/FAIL, as the exercises' check() prints)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .cluster import command
from .options import parse_sbatch, total_tasks_message
from .sacct import seconds, settled

NAME = "your-turn"
NOT_WRITTEN = "not written yet: replace the `exit 1` line"  # the exercises' words for a stub
STUB_MARKS = ("Exercise: write your", "NotImplementedError")  # the student stub: assign's shell line (or Python's)


def stub_left(script: str) -> bool:
    """True while the script still holds the student stub."""
    return any(mark in script for mark in STUB_MARKS)
REQUEST = {"nodes": 2, "tasks_per_node": 1, "mem_mb_per_node": 300, "minutes": 2}  # what the markdown asks for


def job_request(job_id) -> dict:
    """sacct's record of a job: state, exit code, nodes it ran on and nodes it asked for, time limit (minutes), memory
    per node (MB), tasks of step .0."""
    out = command(["sacct", "-n", "-P", "-o", "JobID,State,ExitCode,NNodes,ReqNodes,NTasks,ReqMem,Timelimit", "-j",
                   str(job_id)])
    found: dict[str, object] = {"tasks": None}
    for line in out.splitlines():
        if line.count("|") != 7:
            continue
        job, state, exit_code, nodes, asked, tasks, mem, limit = line.split("|")
        if job == str(job_id):
            asked_nodes = int(asked) if asked.isdigit() else int(nodes)
            found.update(state=state.split()[0], exit_code=exit_code, nodes=int(nodes), req_nodes=asked_nodes,
                         limit_min=minutes(limit),  # sacct's ReqMem: per node x the nodes asked for (ReqNodes)
                         mem_mb_per_node=mem_mb(mem) / max(asked_nodes, 1))
        elif job == f"{job_id}.0" and tasks:
            found["tasks"] = int(tasks)
        elif job == f"{job_id}.batch":
            found["started"] = True  # the batch step ran: the job started (a job cancelled while pending has none)
    found.setdefault("started", False)
    return found


def minutes(text: str) -> float | None:
    """sacct's Timelimit ("00:02:00", "1-00:00:00") in minutes; None for one it does not give ("UNLIMITED")."""
    try:
        return seconds(text) / 60
    except ValueError:
        return None


def mem_mb(text: str) -> float:
    """sacct's ReqMem ("600M", "1.17G", "12052M"; an older Slurm appends n per node or c per CPU) in MB."""
    text = text.rstrip("nc")
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}
    return float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text or 0)


def ignored_lines(script: str) -> list[str]:
    """The script's lines meant as #SBATCH lines that sbatch reads as plain comments ('# SBATCH', '#sbatch')."""
    return [line.strip() for line in script.splitlines()
            if re.match(r"#\s+SBATCH\b|#sbatch\b", line.strip(), re.I) and not line.startswith("#SBATCH")]


def sbatch_warnings(said) -> list[str]:
    """What sbatch warned when it took the script ('sbatch: Warning: ...'), the warnings' own words."""
    return [re.sub(r"^sbatch: (warning|error): ", "", line.strip(), flags=re.I) for line in said
            if re.match(r"sbatch: (warning|error):", line.strip(), re.I)]


def judge(record: dict, script: str, want: dict = REQUEST, said=()) -> tuple[bool, str]:
    """(passed, message) for sacct's record of the job the learner's script made (`said`: what sbatch printed when
    it took the script); the first wrong request named, by the line at fault where the script or sbatch shows it."""
    if stub_left(script):
        return False, NOT_WRITTEN + " in the script by your #SBATCH lines (it ends the script, so the job fails)"
    passed, message = _judge_record(record, script, want, said)
    options = parse_sbatch(script)
    if passed and "ntasks" in options and "ntasks-per-node" not in options:  # learner s13r6h: as exercise 2 does
        return False, "the job ran as asked here, but " + total_tasks_message(want["tasks_per_node"])
    ignored = ignored_lines(script)
    if not passed and ignored:
        return False, (f"sbatch read {ignored[0]!r} as a plain comment: only lines that start with exactly "
                       "#SBATCH (no space) are read, so the job got the defaults")
    return passed, message


def _judge_record(record: dict, script: str, want: dict, said) -> tuple[bool, str]:
    """judge() once the script is written and its lines are read: the record against the request."""
    if record.get("nodes") != want["nodes"]:
        said_nodes = [w for w in sbatch_warnings(said) if "node" in w]
        ran = f"the job ran on {record.get('nodes')} node(s), not {want['nodes']}"
        options = parse_sbatch(script)
        if said_nodes or ("ntasks" in options and options.get("nodes") == str(want["nodes"])):
            warned = f": sbatch warned {said_nodes[0]!r}" if said_nodes else ""
            return False, (f"{ran}{warned}. --ntasks counts the tasks of the whole job, and too few of them need "
                           f"fewer nodes: ask {want['tasks_per_node']} task per node, "
                           f"#SBATCH --ntasks-per-node={want['tasks_per_node']}")
        return False, f"{ran}: ask with #SBATCH --nodes={want['nodes']}"
    asked = record.get("req_nodes")
    if asked is not None and asked != want["nodes"]:  # before the memory: sacct's ReqMem is per node x nodes asked
        return False, (f"it asked for {asked} node(s) (sacct's ReqNodes) and ran on {record.get('nodes')} only "
                       f"because each node here has one CPU: ask #SBATCH --nodes={want['nodes']} and "
                       f"#SBATCH --ntasks-per-node={want['tasks_per_node']}")
    tasks = want["nodes"] * want["tasks_per_node"]
    if record.get("tasks") is None:
        per_node = parse_sbatch(script).get("ntasks-per-node")
        wrong = per_node is not None and per_node != str(want["tasks_per_node"])
        never = record.get("started") is False  # cancelled while pending: no step, no output file
        if never and not wrong and record.get("limit_min") not in (None, want["minutes"]):
            return False, ("Slurm never started the job (the pending reason above), so it wrote no output file: "
                           + time_message(record, script, want))
        return False, (f"the job ran no srun step (it ended {record.get('state')})"
                       + (f": --ntasks-per-node={per_node} asks {per_node} tasks on EACH node, one CPU each, and "
                          f"each node here has one CPU, so it could never start; ask "
                          f"#SBATCH --ntasks-per-node={want['tasks_per_node']}" if wrong else
                          ": it never started, so it wrote no output file; the pending reason printed when it was "
                          "cancelled (above) says what it asked that Slurm cannot give" if never else
                          f": read its output file, {NAME}-JOBID.out"))
    if record.get("tasks") != tasks:
        return False, (f"its srun step ran {record.get('tasks')} task(s), not {tasks}: --ntasks-per-node counts the "
                       f"tasks of ONE node ({want['tasks_per_node']} here), and srun starts that many on each")
    mem = record.get("mem_mb_per_node", 0)
    if abs(mem - want["mem_mb_per_node"]) > 1:
        if abs(mem - want["mem_mb_per_node"] * want["nodes"]) <= 1:
            return False, (f"it asked {mem:.0f} MB per node: --mem is memory PER NODE, so --mem="
                           f"{want['mem_mb_per_node']}M (sacct's ReqMem shows it times the nodes)")
        if mem > 4 * want["mem_mb_per_node"] * want["nodes"]:
            return False, (f"it got {mem:.0f} MB per node, the whole node: without --mem Slurm gives a job all of "
                           f"each node's memory; ask --mem={want['mem_mb_per_node']}M")
        return False, f"it asked {mem:.0f} MB per node, not {want['mem_mb_per_node']} (--mem={want['mem_mb_per_node']}M)"
    limit = record.get("limit_min")
    if limit is None or abs(limit - want["minutes"]) > 1e-6:
        return False, time_message(record, script, want)
    if record.get("state") != "COMPLETED":
        return False, (f"the job ended {record.get('state')} (exit code {record.get('exit_code')}): read its output "
                       f"file, {NAME}-JOBID.out")
    return True, (f"{want['nodes']} nodes, {tasks} tasks, {want['mem_mb_per_node']} MB per node, "
                  f"{want['minutes']} minutes, COMPLETED")


def time_message(record: dict, script: str, want: dict) -> str:
    """What is wrong with the job's time limit (sacct's, in minutes) and how to write the one asked."""
    limit = record.get("limit_min")
    shown = "none" if limit is None else f"{limit:g} minute(s)"
    asked = parse_sbatch(script).get("time", "")
    read = ""
    if re.fullmatch(r"\d+:\d+", asked):  # one colon: MM:SS, which Slurm rounds up to whole minutes
        m, sec = (int(x) for x in asked.split(":"))
        rounded = m + (sec > 0)  # whole minutes, rounded up: what Slurm makes of MM:SS
        read = f"--time={asked} is MM:SS, {m} min {sec} s" + (
            "; " if not sec else f", rounded up to {rounded} minute(s); " if rounded == limit else
            f", which rounds up to {rounded} minute(s), yet sacct reads {shown} (the cluster changed it); ")
    if re.fullmatch(r"\d+", asked):  # a bare number: minutes (the learner may have meant seconds)
        read = f"--time={asked} is {asked} minutes, not seconds; "
    return (f"its time limit is {shown}, not {want['minutes']} minutes: {read}"
            f"--time=00:{want['minutes']:02d}:00 (HH:MM:SS; a bare number is minutes, and M:SS is "
            "minutes and seconds)")


@dataclass(frozen=True)
class Checked:
    """The self-check's outcome; shows as the exercises' PASS/FAIL line."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        from ....measure import lines  # at 100 columns, as every other check (learner s11h: 150-200 columns)

        return lines.wrap(f"{'PASS' if self.passed else 'FAIL'}  {NAME}: {self.message}")


def check_job(job_id, script_path, said=()) -> Checked:
    """The self-check of the learner's batch script: sacct's record of the job it made, judged with what sbatch said
    when it took the script (`said`, its lines); prints PASS or FAIL."""
    script = open(script_path).read()
    if not job_id:
        result = Checked(False, "sbatch made no job (see what it said above): fix the #SBATCH lines and run the "
                                "submit cell again" if not stub_left(script) else NOT_WRITTEN + " in the script")
    else:
        settled([job_id])
        passed, message = judge(job_request(job_id), script, said=said)
        result = Checked(passed, message)
    print(repr(result))
    return result
