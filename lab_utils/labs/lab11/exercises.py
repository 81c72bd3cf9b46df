"""Lab 11: torch's variables from Slurm's, an #SBATCH header for a request, resuming from a checkpoint, reading the
scheduler's answer."""
from __future__ import annotations

import contextlib
import re

from ...exercises.core import Exercise, FROM_LESSON, max_abs_diff, register
from .slurm.options import SHORT, parse_sbatch, total_tasks_message  # noqa: F401  (SHORT: the short options, read by tests)

# ---- rank_from_slurm: SLURM_* -> RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT -----------------------------

TORCH_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's compact host list ("gpu[003-004,010],login1") as names, in order (what `scontrol show hostnames` says)."""
    names = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", nodelist):
        prefix, _, ranges = part.partition("[")
        if not ranges:
            names.append(prefix)
            continue
        for item in ranges.rstrip("]").split(","):
            first, _, last = item.partition("-")
            for number in range(int(first), int(last or first) + 1):
                names.append(f"{prefix}{number:0{len(first)}d}")
    return names


def master_port(job_id) -> int:
    """The course's rule: 10000 + the job id's last four digits (two jobs on one first node rarely share it)."""
    return 10000 + int(job_id) % 10000


def _rank_cases(rng):
    fixed = [  # 2 nodes x 4 tasks: task 5 is the second node's task 1; a zero-padded, comma-separated node list
        {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NNODES": "2",
         "SLURM_NTASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "gpu[007-008]", "SLURMD_NODENAME": "gpu008",
         "SLURM_JOB_ID": "4187321", "SLURM_CPUS_PER_TASK": "8"},
        {"SLURM_PROCID": "2", "SLURM_NTASKS": "3", "SLURM_LOCALID": "0", "SLURM_NODEID": "2", "SLURM_NNODES": "3",
         "SLURM_NTASKS_PER_NODE": "1(x3)", "SLURM_JOB_NODELIST": "cn[09-10],cn42", "SLURMD_NODENAME": "cn42",
         "SLURM_JOB_ID": "77", "SLURM_CPUS_PER_TASK": "1"},
        # host names with a hyphen (learner s13r8h: a parse that cut at the first "-" passed every other case)
        {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NNODES": "2",
         "SLURM_NTASKS_PER_NODE": "1(x2)", "SLURM_JOB_NODELIST": "gpu-node[01-02]", "SLURMD_NODENAME": "gpu-node02",
         "SLURM_JOB_ID": "912345", "SLURM_CPUS_PER_TASK": "4"},
    ]
    drawn = []
    for _ in range(3):
        nodes, per_node = rng.randint(1, 4), rng.choice([1, 2, 4, 8])
        node, local = rng.randrange(nodes), rng.randrange(per_node)
        start = rng.randint(1, 90)
        names = [f"n{start + i:03d}" for i in range(nodes)]
        listed = f"n[{start:03d}-{start + nodes - 1:03d}]" if nodes > 1 else names[0]
        drawn.append({"SLURM_PROCID": str(node * per_node + local), "SLURM_NTASKS": str(nodes * per_node),
                      "SLURM_LOCALID": str(local), "SLURM_NODEID": str(node), "SLURM_NNODES": str(nodes),
                      "SLURM_NTASKS_PER_NODE": f"{per_node}(x{nodes})", "SLURM_JOB_NODELIST": listed,
                      "SLURMD_NODENAME": names[node], "SLURM_JOB_ID": str(rng.randint(100, 9_999_999)),
                      "SLURM_CPUS_PER_TASK": str(rng.choice([1, 4, 8]))})
    return fixed + drawn


def _rank_run(rank_from_slurm, cases):
    return [dict(rank_from_slurm(dict(env))) for env in cases]


def _rank_expected(cases):
    return [{"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"], "LOCAL_RANK": env["SLURM_LOCALID"],
             "MASTER_ADDR": expand_nodelist(env["SLURM_JOB_NODELIST"])[0],
             "MASTER_PORT": str(master_port(env["SLURM_JOB_ID"]))} for env in cases]


def _read_from(got, cases, key: str, sources) -> str | None:
    """The SLURM_* variable among `sources` that the answer's `key` equals in every case, or None."""
    return next((source for source in sources
                 if all(isinstance(g, dict) and g.get(key) == env[source] for g, env in zip(got, cases))), None)


def _rank_judge(got, expected, cases):
    for g, e, env in zip(got, expected, cases):
        if set(g) != set(TORCH_KEYS):
            return 0.0, f"return exactly the keys {', '.join(TORCH_KEYS)}; got {', '.join(sorted(g))}"
        if any(not isinstance(v, str) for v in g.values()):
            return 0.0, "environment variables are strings: os.environ.update() refuses an int (str(...) each value)"
        if g["RANK"] != e["RANK"]:
            read = _read_from(got, cases, "RANK", ("SLURM_LOCALID", "SLURM_NODEID"))  # learner s13r6h: LOCALID
            if read == "SLURM_LOCALID":
                return 0.0, ("RANK is the task's number in the whole job (SLURM_PROCID); SLURM_LOCALID numbers it "
                             "on its own node only, so two nodes both hold a rank 0")
            if read == "SLURM_NODEID" or g["RANK"] == env["SLURM_NODEID"]:
                return 0.0, "RANK is the task's number in the whole job (SLURM_PROCID), not its node's (SLURM_NODEID)"
            return 0.0, f"RANK of task {env['SLURM_PROCID']} should be {e['RANK']}, got {g['RANK']}"
        if g["WORLD_SIZE"] != e["WORLD_SIZE"]:
            if g["WORLD_SIZE"] == env["SLURM_NNODES"]:
                return 0.0, "WORLD_SIZE counts processes (tasks: SLURM_NTASKS), not nodes (SLURM_NNODES)"
            return 0.0, f"WORLD_SIZE should be {e['WORLD_SIZE']} (every task of the job), got {g['WORLD_SIZE']}"
        if g["LOCAL_RANK"] != e["LOCAL_RANK"]:
            read = _read_from(got, cases, "LOCAL_RANK", ("SLURM_NODEID", "SLURM_PROCID"))  # learner s13r5h: NODEID
            if read == "SLURM_NODEID":
                return 0.0, ("LOCAL_RANK is the task's number on its own node (SLURM_LOCALID), which picks its GPU; "
                             "SLURM_NODEID numbers the node, not the task on it")
            if read == "SLURM_PROCID" or g["LOCAL_RANK"] == env["SLURM_PROCID"]:
                return 0.0, ("LOCAL_RANK is the task's number on its own node (SLURM_LOCALID), which picks its GPU; "
                             "SLURM_PROCID counts across nodes")
            return 0.0, f"LOCAL_RANK should be {e['LOCAL_RANK']}, got {g['LOCAL_RANK']}"
        if g["MASTER_ADDR"] != e["MASTER_ADDR"]:
            if g["MASTER_ADDR"] == env["SLURM_JOB_NODELIST"]:
                return 0.0, ("MASTER_ADDR is one host, the job's first node: expand SLURM_JOB_NODELIST "
                             f"({env['SLURM_JOB_NODELIST']!r}) and take the first name")
            if g["MASTER_ADDR"] == env["SLURMD_NODENAME"]:
                return 0.0, ("SLURMD_NODENAME is this task's own node: every task must name the same host, the job's "
                             "first node, or the tasks on other nodes wait for a rendezvous that never comes")
            if g["MASTER_ADDR"].lstrip("abcdefghijklmnopqrstuvwxyz-_") != e["MASTER_ADDR"].lstrip("abcdefghijklmnopqrstuvwxyz-_") \
                    and g["MASTER_ADDR"].rstrip("0123456789") == e["MASTER_ADDR"].rstrip("0123456789"):
                return 0.0, (f"the first host is {e['MASTER_ADDR']!r}, got {g['MASTER_ADDR']!r}: keep the zero padding "
                             "of the range ('gpu[007-008]' is gpu007 and gpu008)")
            return 0.0, f"MASTER_ADDR for {env['SLURM_JOB_NODELIST']!r} is its first host {e['MASTER_ADDR']!r}, got {g['MASTER_ADDR']!r}"
        if g["MASTER_PORT"] != e["MASTER_PORT"]:
            if g["MASTER_PORT"] == str(int(e["MASTER_PORT"]) + int(env["SLURM_PROCID"])):
                return 0.0, ("every task must compute the same MASTER_PORT: yours adds the task's number, so task 0 "
                             "listens where no other task looks (a hung rendezvous)")
            return 0.0, f"MASTER_PORT is 10000 + the job id's last four digits: {e['MASTER_PORT']} for job {env['SLURM_JOB_ID']}"
    return 1.0, "every task finds its rank, the world size, its local rank and the same rendezvous"


# no hint: every message names the variable that differs and what it should be
RANK_FROM_SLURM = Exercise("11", "rank_from_slurm", _rank_cases, _rank_run, _rank_expected, _rank_judge, "")


# ---- sbatch_header: a request -> #SBATCH lines ---------------------------------------------------------------------

def slurm_minutes(text: str) -> float:
    """A --time value in minutes, as Slurm reads it: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    days, _, rest = text.partition("-") if "-" in text else ("0", "", text)
    parts = [float(p) for p in rest.split(":")]
    if _ == "-":  # D-H, D-H:M, D-H:M:S
        h, m, s = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        h, m, s = parts
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]  # M:S, not H:M
    else:
        h, m, s = 0, parts[0], 0
    return float(days) * 1440 + h * 60 + m + s / 60


def memory_mb(text: str) -> float:
    """A --mem value in MB: a bare number is MB; K, M, G, T suffixes."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?", text.strip().upper())
    if not found:
        raise ValueError(f"not a memory size: {text!r}")
    return float(found.group(1)) * {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2}[found.group(2)]



def _header_cases(rng):
    fixed = [
        {"job_name": "resnet", "nodes": 2, "tasks_per_node": 4, "cpus_per_task": 8, "mem_gb": 64, "minutes": 90,
         "gpus_per_node": 4},
        {"job_name": "prep", "nodes": 1, "tasks_per_node": 1, "cpus_per_task": 16, "mem_gb": 32, "minutes": 1500,
         "gpus_per_node": 0},
    ]
    drawn = []
    for i in range(3):
        gpus = rng.choice([0, 1, 4, 8])
        drawn.append({"job_name": f"job{i}", "nodes": rng.randint(1, 8), "tasks_per_node": gpus or rng.choice([1, 2, 4]),
                      "cpus_per_task": rng.choice([1, 2, 6, 8, 16]), "mem_gb": rng.choice([4, 16, 100, 256]),
                      "minutes": rng.choice([20, 45, 130, 600, 2900]), "gpus_per_node": gpus})
    return fixed + drawn


def _header_run(sbatch_header, cases):
    return [str(sbatch_header(dict(case))) for case in cases]


def _gpus_per_node(options: dict, nodes: int):
    """GPUs per node the options ask for (None: a total over the job, which does not say per node)."""
    if "gpus-per-node" in options:
        return int(options["gpus-per-node"].split(":")[-1])
    if "gres" in options:
        found = re.fullmatch(r"gpu(?::[\w-]+)?:(\d+)", options["gres"])
        return int(found.group(1)) if found else 0
    return None if "gpus" in options else 0


def _header_judge(got, expected, cases):
    for text, case in zip(got, cases):
        if not isinstance(text, str):
            return 0.0, "return the header as one string of lines"
        lines = [line for line in text.splitlines() if line.strip()]
        near_misses = [line for line in lines if re.match(r"#\s*SBATCH|SBATCH|#sbatch", line) and not line.startswith("#SBATCH")]
        if near_misses:
            return 0.0, (f"Slurm reads only lines that start with exactly '#SBATCH' (no space, capitals): "
                         f"{near_misses[0]!r} is a plain comment to it")
        options = parse_sbatch(text)
        want = case
        if options.get("nodes") != str(want["nodes"]):
            return 0.0, f"ask for {want['nodes']} node(s): --nodes={want['nodes']}"
        if "ntasks-per-node" not in options:
            if "ntasks" in options:
                return 0.0, total_tasks_message(want["tasks_per_node"])
            return 0.0, "say how many tasks (processes) each node runs: --ntasks-per-node"
        if options["ntasks-per-node"] != str(want["tasks_per_node"]):
            return 0.0, f"--ntasks-per-node={options['ntasks-per-node']}, but each node runs {want['tasks_per_node']} process(es)"
        cpus = options.get("cpus-per-task")
        if cpus != str(want["cpus_per_task"]):
            if cpus == str(want["cpus_per_task"] * want["tasks_per_node"]) and want["tasks_per_node"] > 1:
                return 0.0, "--cpus-per-task counts the cores of ONE task (process), not of the node"
            return 0.0, f"each process needs {want['cpus_per_task']} core(s): --cpus-per-task={want['cpus_per_task']}"
        if "mem" in options:
            try:
                mb = memory_mb(options["mem"])
            except ValueError as exc:
                return 0.0, str(exc)
            if abs(mb - want["mem_gb"] * 1024) > 1:
                if abs(mb - want["mem_gb"]) < 1e-9:
                    return 0.0, f"--mem={options['mem']} is {options['mem']} MB: a bare number is megabytes (write {want['mem_gb']}G)"
                totals = {want["mem_gb"] * 1024 * want["tasks_per_node"] * want["nodes"], want["mem_gb"] * 1024 * want["nodes"]}
                if any(abs(mb - total) <= 1 for total in totals) and mb != want["mem_gb"] * 1024:
                    return 0.0, "--mem is per node: the memory of one node, not the job's total"
                return 0.0, (f"the request is {want['mem_gb']} GB per node, but your --mem={options['mem']} gives "
                             f"each node {mb / 1024:g} GB")
        elif "mem-per-cpu" in options:
            per_node = memory_mb(options["mem-per-cpu"]) * want["cpus_per_task"] * want["tasks_per_node"]
            if abs(per_node - want["mem_gb"] * 1024) > 1:
                return 0.0, (f"the request is {want['mem_gb']} GB per node, but --mem-per-cpu x the node's cores "
                             f"gives each node {per_node / 1024:g} GB")
        else:
            return 0.0, "ask for the memory: --mem (per node; G for gigabytes)"
        if "time" not in options:
            return 0.0, "ask for a time limit (--time): without one the partition's default applies"
        try:
            minutes = slurm_minutes(options["time"])
        except ValueError:
            return 0.0, f"{options['time']!r} is not a Slurm time (HH:MM:SS, or D-HH:MM:SS)"
        if abs(minutes - want["minutes"]) > 1e-6:
            h, m = divmod(want["minutes"], 60)
            if options["time"] in (f"{h}:{m:02d}", f"{h:02d}:{m:02d}"):
                return 0.0, (f"--time={options['time']} is {options['time']} as MINUTES:SECONDS to Slurm; "
                             "hours need HH:MM:SS")
            colons = options["time"].split("-")[-1].count(":")
            if colons == 1 and "-" not in options["time"]:
                m, s = options["time"].split(":")
                return 0.0, (f"--time={options['time']} has one colon: Slurm reads it as MINUTES:SECONDS, {m} min "
                             f"{s} s ({minutes:g} minutes), not {want['minutes']} minutes")
            if colons == 0 and "-" not in options["time"] and abs(minutes * 60 - want["minutes"]) < 1e-6:
                return 0.0, "a bare --time number is minutes, not hours"
            return 0.0, f"--time={options['time']} is {minutes:g} minutes, not {want['minutes']}"
        gpus = _gpus_per_node(options, want["nodes"])
        asked = next((k for k in ("gres", "gpus-per-node", "gpus") if k in options), None)
        if not want["gpus_per_node"] and asked:
            # a GPU line asking for 0 names a resource CPU nodes do not declare: Slurm can refuse the job; the message
            # quotes the learner's own line (learner s13r7h: it quoted --gres=gpu:0 for --gpus-per-node=0)
            return 0.0, (f"on CPU nodes leave the GPU line out: --{asked}={options[asked]} names a GPU resource these "
                         "nodes may not have, and Slurm can refuse the job (Invalid generic resource specification)")
        if gpus != want["gpus_per_node"]:
            if gpus is None:
                return 0.0, "--gpus is the job's total: ask per node (--gres=gpu:N or --gpus-per-node=N)"
            if gpus == want["gpus_per_node"] * want["nodes"] and want["nodes"] > 1:
                return 0.0, "--gres=gpu:N is per node: N is one node's GPUs, not the job's total"
            return 0.0, f"each node needs {want['gpus_per_node']} GPU(s), the header asks for {gpus}"
    return 1.0, "every header asks Slurm for exactly what the job needs"


# no hint: every message names the option at fault and Slurm's rule it breaks
SBATCH_HEADER = Exercise("11", "sbatch_header", _header_cases, _header_run, FROM_LESSON, _header_judge, "")


# ---- train_resumable: checkpoint every N steps, resume to the uninterrupted weights ---------------------------------

def _resume_cases(rng):
    # the second case tells an off-by-one resume (from step 5) from a resume where the first job died (step 7); the
    # third dies at a checkpoint's step: a job that returns before writing it resumes a checkpoint early
    fixed = [{"steps": 10, "every": 3, "stop_at": 7}, {"steps": 12, "every": 4, "stop_at": 7},
             {"steps": 12, "every": 4, "stop_at": 8}]
    drawn = []
    for _ in range(2):
        every = rng.randint(2, 4)
        steps = rng.randint(3 * every, 5 * every)
        stop_at = rng.choice([s for s in range(every + 1, steps) if s % every])
        drawn.append({"steps": steps, "every": every, "stop_at": stop_at})
    return fixed + drawn


def _resume_run(train_resumable, cases):
    from . import slurm

    with slurm.one_thread():  # a tiny model: threads only add their hand-offs
        return _resume_runs(train_resumable, cases)


def _resume_runs(train_resumable, cases):
    import tempfile
    from pathlib import Path

    out = []
    for case in cases:
        with tempfile.TemporaryDirectory() as folder, _saves_recorded() as written:
            path = str(Path(folder) / "checkpoint.pt")
            first = train_resumable(case["steps"], case["every"], path, stop_at=case["stop_at"])
            second = train_resumable(case["steps"], case["every"], path)
            fresh = train_resumable(case["steps"], case["every"], str(Path(folder) / "other.pt"))
        out.append({"first_ran": int(first["ran"]), "resumed_ran": int(second["ran"]),
                    "weights": [float(w) for w in second["weights"]], "uninterrupted": [float(w) for w in fresh["weights"]],
                    "saved_in_place": path in written})
    return out


@contextlib.contextmanager
def _saves_recorded():
    """The paths torch.save writes to while inside (a file object counts by its name)."""
    import torch

    original, written = torch.save, []

    def recording(obj, f, *args, **kwargs):
        written.append(str(getattr(f, "name", f)))
        return original(obj, f, *args, **kwargs)

    torch.save = recording
    try:
        yield written
    finally:
        torch.save = original


# the plausible wrong answers the judge names: edits of the solution's train_resumable
WRONG_RESUMES = {"keep_momentum": {'optimizer.load_state_dict(state["optimizer"])': "pass"},
                 "batch_of_step": {"slurm.resume_batch(step)": "slurm.resume_batch(ran)"},
                 # checkpoints after the step of index s when s is a multiple of every, storing s as the steps done
                 "index_as_done": {"if step % every == 0:": "if (step - 1) % every == 0:",
                                   '"step": step}': '"step": step - 1}'}}


def _resume_variant(case, wrong: str | None = None):
    """The first job (to stop_at) and the resumed one of the solution's train_resumable (the lesson generated from
    its cell), or of its `wrong` edit; the resumed job's result."""
    import tempfile
    from pathlib import Path

    from .lesson import train_resumable
    from ...variants import variant

    train = train_resumable if wrong is None else variant(train_resumable, WRONG_RESUMES[wrong], name=wrong, show=False)
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "c.pt")
        train(case["steps"], case["every"], path, stop_at=case["stop_at"])
        return train(case["steps"], case["every"], path)


def _resume_expected(cases):
    from . import slurm

    with slurm.one_thread():
        return _resume_references(cases)


def _resume_references(cases):
    out = []
    for case in cases:
        second = _resume_variant(case)
        out.append({"first_ran": case["stop_at"], "resumed_ran": second["ran"], "weights": second["weights"],
                    "uninterrupted": _resume_variant(dict(case, stop_at=None))["weights"], "saved_in_place": False})
    return out


def _one_thread(fn, *args, **kwargs):
    from . import slurm

    with slurm.one_thread():
        return fn(*args, **kwargs)


def _one_past_the_checkpoint(got, cases) -> bool:
    """Every resumed job started one step past its last checkpoint (an off-by-one resume), in a case where that differs
    from the step the first job died at."""
    starts = [c["steps"] - g["resumed_ran"] for g, c in zip(got, cases)]
    checkpoints = [c["stop_at"] // c["every"] * c["every"] for c in cases]
    return (all(s == k + 1 for s, k in zip(starts, checkpoints))
            and any(k + 1 != c["stop_at"] for k, c in zip(checkpoints, cases)))


def _one_before_the_checkpoint(got, cases) -> bool:
    """Every resumed job started one step before its last checkpoint: the checkpoint stored the index of the step just
    trained (s) instead of the steps done (s + 1)."""
    starts = [c["steps"] - g["resumed_ran"] for g, c in zip(got, cases)]
    return all(s == c["stop_at"] // c["every"] * c["every"] - 1 for s, c in zip(starts, cases))


def _checkpoint_after_the_index(got, cases) -> bool:
    """Every resumed job started where a checkpoint after the step of INDEX s with s % every == 0 leaves it (steps
    done s + 1 = 1, every + 1, ...), and some case tells that apart from the right checkpoint and from stop_at."""
    starts = [c["steps"] - g["resumed_ran"] for g, c in zip(got, cases)]
    on_index = [(c["stop_at"] - 1) // c["every"] * c["every"] + 1 for c in cases]
    return (starts == on_index and any(k != c["stop_at"] // c["every"] * c["every"] and k != c["stop_at"]
                                       for k, c in zip(on_index, cases)))


def _resume_judge(got, expected, cases):
    for g, e, case in zip(got, expected, cases):
        if max_abs_diff(g["uninterrupted"], e["uninterrupted"]) > 1e-6:
            return 0.0, ("a run without a fault does not train like the reference: one resume_step per step, the "
                         "step of index s (0, 1, ...) on resume_batch(s), from resume_problem(); after it, s + 1 "
                         "steps are done")
        if g["first_ran"] != case["stop_at"]:
            said = f"with stop_at={case['stop_at']} the first job must stop after that step and return ran = " \
                f"{case['stop_at']}; it returned ran = {g['first_ran']}"
            if g["first_ran"] == case["steps"]:
                return 0.0, (f"{said}, all the steps: either it did not stop once stop_at steps were done, or `ran` "
                             "is the total (steps) instead of the steps this call ran")
            return 0.0, (f"{said}: either it stopped elsewhere (stop once stop_at steps are done, after the step of "
                         "index stop_at - 1), or `ran` counts something else than the steps this call ran")
        last_checkpoint = case["stop_at"] // case["every"] * case["every"]
        if g["resumed_ran"] == case["steps"]:
            return 0.0, (f"the resumed job says it ran all {case['steps']} steps: either it ran every step again from "
                         "step 0 (load the checkpoint's weights, momentum AND step count, and continue from that "
                         "step), or `ran` is the step reached instead of the steps this call ran")
        if g["resumed_ran"] != e["resumed_ran"] and _one_past_the_checkpoint(got, cases):
            return 0.0, (f"the resumed job started at step {last_checkpoint + 1}, one past the last checkpoint's "
                         f"(step {last_checkpoint}): the checkpoint stores the steps done, {last_checkpoint}, which is "
                         "also the index of the next step to train: continue from it, not from it + 1")
        if g["resumed_ran"] != e["resumed_ran"] and _one_before_the_checkpoint(got, cases):
            return 0.0, (f"the resumed job started at step {last_checkpoint - 1}, one before the last checkpoint's "
                         f"(step {last_checkpoint}): the checkpoint stored the index of the step just trained, "
                         f"{last_checkpoint - 1}, instead of the steps done, {last_checkpoint} (after the step of "
                         "index s, s + 1 steps are done): store the steps done")
        if case["stop_at"] % case["every"] == 0 and g["resumed_ran"] == e["resumed_ran"] + case["every"]:
            return 0.0, (f"with stop_at={case['stop_at']}, a multiple of every={case['every']}, the first job must "
                         f"write step {case['stop_at']}'s checkpoint before it stops; yours stopped first, so the "
                         f"resumed job redid {case['every']} steps from step {case['stop_at'] - case['every']}")
        if g["resumed_ran"] != e["resumed_ran"] and _checkpoint_after_the_index(got, cases):
            start = case["steps"] - g["resumed_ran"]
            return 0.0, (f"with every={case['every']} and stop_at={case['stop_at']} the resumed job started at step "
                         f"{start}: your last checkpoint came after the step of index {start - 1}, a multiple of "
                         f"every; a checkpoint belongs where the steps DONE are a multiple of every (step "
                         f"{last_checkpoint} here), after the step of index s with (s + 1) % every == 0")
        if g["resumed_ran"] != e["resumed_ran"] and g["resumed_ran"] == case["steps"] - case["stop_at"]:
            return 0.0, (f"the resumed job started at step {case['stop_at']}, where the first one died: it can only "
                         f"know step {last_checkpoint}, the last checkpoint (one whenever the steps done are a multiple of `every`)")
        if g["resumed_ran"] != e["resumed_ran"]:
            return 0.0, (f"the resumed job should start at the last checkpoint (step {last_checkpoint}) and run "
                         f"{e['resumed_ran']} steps; it ran {g['resumed_ran']}")
        if max_abs_diff(g["weights"], e["weights"]) <= 1e-6:
            if g["saved_in_place"]:
                return 0.0, ("the checkpoint is written straight to `path`: a job killed while writing leaves a "
                             "truncated file the requeued job cannot load. Save to path + '.tmp', then "
                             "os.replace(path + '.tmp', path)")
            continue
        if max_abs_diff(g["weights"], _one_thread(_resume_variant, case, "keep_momentum")["weights"]) <= 1e-6:
            return 0.0, ("your checkpoint restores the weights but not the optimizer's momentum, so the resumed "
                         "updates differ from the uninterrupted run's: save and load optimizer.state_dict() too "
                         "(SGD with momentum remembers the last updates)")
        if max_abs_diff(g["weights"], _one_thread(_resume_variant, case, "batch_of_step")["weights"]) <= 1e-6:
            return 0.0, "after the resume, step s must train on resume_batch(s): the data order continues, it does not restart"
        if max_abs_diff(g["weights"], _one_thread(_resume_variant, case, "index_as_done")["weights"]) <= 1e-6:
            return 0.0, ("the checkpoint holds the step's index, not the steps done: after the step of index s, s + 1 "
                         "steps are done, so the resumed job trains step s twice. Checkpoint when the steps done are "
                         "a multiple of every, and store the steps done")
        return 0.0, ("the resumed job does not end with the uninterrupted run's weights: the checkpoint must hold "
                     "and restore the model, the optimizer and the steps done")
    return 1.0, "the resumed job ends with the uninterrupted run's weights, redoing only the steps after the last checkpoint"


# no hint: every message names the part of the job at fault (the last one lists what the resume must restore)
TRAIN_RESUMABLE = Exercise(
    "11", "train_resumable", _resume_cases, _resume_run, _resume_expected, _resume_judge, "",
    setup="import os\nimport torch\nfrom lab_utils import tensors\nfrom lab_utils.labs.lab11 import slurm")


# ---- read_scheduler: sacct's lines -> what to do about each job ----------------------------------------------------

ACTIONS = ("done", "wait", "fix the request", "fix the dependency", "more time", "more memory", "resubmit",
           "read the log", "cancelled")
# a job's own line and its steps' lines, as sacct prints them (-P: '|' between the fields)
_STEPS = {"COMPLETED": [("batch", "COMPLETED", "0:0"), ("extern", "COMPLETED", "0:0")],
          "TIMEOUT": [("batch", "CANCELLED", "0:15"), ("extern", "COMPLETED", "0:0"), ("0", "CANCELLED", "0:15")],
          "OUT_OF_MEMORY": [("batch", "OUT_OF_MEMORY", "0:125"), ("extern", "COMPLETED", "0:0")],
          "NODE_FAIL": [("batch", "CANCELLED", "0:9"), ("extern", "COMPLETED", "0:0")],
          "FAILED": [("batch", "FAILED", "1:0"), ("extern", "COMPLETED", "0:0")],
          "CANCELLED": [("batch", "CANCELLED", "0:15"), ("extern", "COMPLETED", "0:0")],
          # the memory kill of a cluster without cgroups (this lab's own, cell 'too-big'): FAILED, killed by signal 9
          "MEMORY_KILL": [("batch", "CANCELLED", "0:9"), ("extern", "COMPLETED", "0:0")]}


def _sacct_text(jobs) -> str:
    lines = ["JobID|JobName|State|ExitCode|Reason"]
    for job_id, name, state, reason in jobs:
        shown = {"CANCELLED": "CANCELLED by 0", "MEMORY_KILL": "FAILED"}.get(state, state)
        exit_code = {"FAILED": "1:0", "TIMEOUT": "0:0", "OUT_OF_MEMORY": "0:125", "NODE_FAIL": "0:0",
                     "MEMORY_KILL": "0:9"}.get(state, "0:0")
        lines.append(f"{job_id}|{name}|{shown}|{exit_code}|{reason}")
        for step, step_state, code in _STEPS.get(state, []):
            lines.append(f"{job_id}.{step}|{step}|{step_state}|{code}|")
    return "\n".join(lines) + "\n"


def _scheduler_cases(rng):
    cases = []
    for k in range(3):
        states = ["TIMEOUT", "CANCELLED", ("PENDING", "PartitionTimeLimit"), ("PENDING", "DependencyNeverSatisfied"),
                  ("PENDING", "Resources"), "MEMORY_KILL", "FAILED"]
        states += rng.sample(["COMPLETED", "OUT_OF_MEMORY", "NODE_FAIL", "FAILED", ("PENDING", "Priority"),
                              ("PENDING", "Dependency"), ("PENDING", "QOSMaxJobsPerUserLimit"), "RUNNING"], 4)
        rng.shuffle(states)
        first = rng.randint(100, 90000)
        jobs = []
        for i, state in enumerate(states):
            state, reason = state if isinstance(state, tuple) else (state, "None")
            jobs.append((str(first + i), f"train{i}", state, reason))
        cases.append(_sacct_text(jobs))
    return cases


def _scheduler_run(read_scheduler, cases):
    return [dict(read_scheduler(text)) for text in cases]


def _last_line_reading(text: str) -> dict:
    """What reading each job's LAST line (a step's, for most ended jobs) would answer: the classic mistake."""
    last = {}
    for line in text.splitlines()[1:]:
        job_id, rest = line.split("|", 1)
        last[job_id.split(".")[0]] = f"{job_id.split('.')[0]}|{rest}"
    from .lesson import read_scheduler  # the lesson's reading, of the last lines only

    return read_scheduler("JobID|JobName|State|ExitCode|Reason\n" + "\n".join(last.values()))


def _scheduler_judge(got, expected, cases):
    right = total = 0
    misses = []  # (kind, job_id, state, want, have)
    for g, e, text in zip(got, expected, cases):
        if set(g) != set(e):
            extra = sorted(set(g) - set(e))
            if any("." in k for k in extra):
                return 0.0, f"{extra[0]} is a step of a job (JobID.step), not a job: answer for the jobs' own lines only"
            missing = sorted(set(e) - set(g))
            states = {line.split("|")[0]: line.split("|")[2] for line in text.splitlines()[1:]}
            if not missing:
                return 0.0, f"{extra[0]} is not a job of the text: answer once for each JobID it lists"
            return 0.0, next((f"job {j} is missing, whose State reads {states[j]!r}: the state is its first word "
                              f"({states[j].split()[0]}), the words after it say who did it" for j in missing
                              if len(states.get(j, "").split()) > 1),
                             f"job {missing[0]} ({states.get(missing[0], '?')}) has no answer: answer once for every "
                             "job's own line")
        states = {line.split("|")[0]: line.split("|")[2] for line in text.splitlines()[1:]}
        last = _last_line_reading(text)
        for job_id, want in e.items():
            total += 1
            have = g[job_id]
            if have == want:
                right += 1
                continue
            state = states[job_id]
            exit_code = next(line.split("|")[3] for line in text.splitlines()[1:] if line.split("|")[0] == job_id)
            kind = ("cancelled" if state.startswith("CANCELLED ") else  # 'CANCELLED by 0': first, whatever was answered
                    "unknown" if have not in ACTIONS else "step" if have == last[job_id] else
                    "signal 9" if state == "FAILED" and exit_code == "0:9" else
                    "pending-wait" if state == "PENDING" and have == "wait" else
                    "pending" if state == "PENDING" else "cancelled" if state.startswith("CANCELLED") else "other")
            misses.append((kind, job_id, state, want, have))
    if not total:
        return 0.0, "no jobs"
    if right == total:
        return 1.0, "every job read right"
    hints = {"unknown": "answer with one of " + ", ".join(repr(a) for a in ACTIONS),
             "step": ("a job's last lines are its steps (JobID.batch, .extern, .0): a TIMEOUT job's batch step reads "
                      "CANCELLED; read the job's own line (no dot in JobID)"),
             "pending-wait": ("a PENDING job's Reason says whether waiting helps: PartitionTimeLimit or "
                              "DependencyNeverSatisfied never start by themselves"),
             "pending": "Resources, Priority, Dependency and QOSMaxJobsPerUserLimit only need patience ('wait')",
             "cancelled": "'CANCELLED by 0' is CANCELLED: the state is the first word",
             "signal 9": ("a FAILED job with ExitCode 0:9 was killed by signal 9: where Slurm reads memory from /proc "
                          "(this lab's cluster, its 'too-big' job) that is the memory limit's kill, 'more memory'; a "
                          "FAILED job with another exit code is your program's error, 'read the log'")}
    kinds = [m[0] for m in misses]
    kind = next((k for k in hints if k in kinds), "other")
    _, job_id, state, want, have = next(m for m in misses if m[0] == kind)
    hint = hints.get(kind, f"{want!r}, not {have!r}")
    return right / total, f"{right} of {total} jobs read right; job {job_id} ({state!r}) got {have!r}: {hint}"


# no hint: every message names the first job read wrong, by the rule it breaks
READ_SCHEDULER = Exercise("11", "read_scheduler", _scheduler_cases, _scheduler_run, FROM_LESSON, _scheduler_judge, "")

register(RANK_FROM_SLURM, SBATCH_HEADER, TRAIN_RESUMABLE, READ_SCHEDULER)
