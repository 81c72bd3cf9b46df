"""Lab 11's exercises: the solution passes; each plausible wrong answer fails the self-check with its own hint and
scores 0 in the grader (partial credit only for read_scheduler, never full)."""
import os
import random

import torch

from lab_utils import exercises, tensors
from lab_utils.exercises import check, to_plain
from lab_utils.labs.lab11 import slurm
from lab_utils.labs.lab11.exercises import expand_nodelist, memory_mb, parse_sbatch, slurm_minutes
from test_judges import solution_function, solution_source


def score(fn, seed: int = 7) -> float:
    exercise = exercises.get(fn.__name__)
    inputs = exercise.cases(random.Random(seed))
    return exercise.score(to_plain(exercise.run(fn, inputs)), inputs)[0]


def fails(fn, words: str) -> bool:
    result = check(fn)
    assert not result and words in result.message, result.message
    return score(fn) < 1.0


# ---- rank_from_slurm ------------------------------------------------------------------------------------------------

def first_host(nodelist):
    return expand_nodelist(nodelist)[0]


def rank_from_slurm(env):
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"], "LOCAL_RANK": env["SLURM_LOCALID"],
            "MASTER_ADDR": first_host(env["SLURM_JOB_NODELIST"]),
            "MASTER_PORT": str(10000 + int(env["SLURM_JOB_ID"]) % 10000)}


def test_nodelists_expand_as_scontrol_does():
    assert expand_nodelist("gpu[007-008]") == ["gpu007", "gpu008"]
    assert expand_nodelist("cn[09-10],cn42") == ["cn09", "cn10", "cn42"]
    assert expand_nodelist("n[1-2,5]") == ["n1", "n2", "n5"] and expand_nodelist("login1") == ["login1"]
    assert expand_nodelist("gpu-node[01-02]") == ["gpu-node01", "gpu-node02"]


def test_rank_from_slurm_solution_passes():
    assert check(rank_from_slurm) and score(rank_from_slurm) == 1.0


def test_rank_from_slurm_wrong_answers_fail_with_their_hint():
    def rank_from_slurm(env):  # the global rank as local rank
        return {**right(env), "LOCAL_RANK": env["SLURM_PROCID"]}
    assert fails(rank_from_slurm, "SLURM_LOCALID") and fails(rank_from_slurm, "SLURM_PROCID counts across nodes")

    def rank_from_slurm(env):  # the node's number as local rank (learner s13r5h: the hint named SLURM_PROCID)
        return {**right(env), "LOCAL_RANK": env["SLURM_NODEID"]}
    assert fails(rank_from_slurm, "SLURM_NODEID numbers the node, not the task on it")

    def rank_from_slurm(env):  # nodes counted, not tasks
        return {**right(env), "WORLD_SIZE": env["SLURM_NNODES"]}
    assert fails(rank_from_slurm, "not nodes")

    def rank_from_slurm(env):  # the raw list as an address
        return {**right(env), "MASTER_ADDR": env["SLURM_JOB_NODELIST"]}
    assert fails(rank_from_slurm, "expand SLURM_JOB_NODELIST")

    def rank_from_slurm(env):  # every task its own node: the hung rendezvous
        return {**right(env), "MASTER_ADDR": env["SLURMD_NODENAME"]}
    assert fails(rank_from_slurm, "this task's own node")

    def rank_from_slurm(env):  # zero padding lost
        name = first_host(env["SLURM_JOB_NODELIST"])
        return {**right(env), "MASTER_ADDR": name.rstrip("0123456789") + str(int(name[len(name.rstrip("0123456789")):]))}
    assert fails(rank_from_slurm, "zero padding")

    def rank_from_slurm(env):  # the first host cut at the first "-" (learner s13r8h: passed before gpu-node[01-02])
        first = env["SLURM_JOB_NODELIST"].split(",")[0].replace("[", "").split("-")[0]
        return {**right(env), "MASTER_ADDR": first}
    assert fails(rank_from_slurm, "'gpu-node01'")

    def rank_from_slurm(env):  # numbers, not strings
        return {k: int(v) if v.isdigit() else v for k, v in right(env).items()}
    assert fails(rank_from_slurm, "strings")

    def rank_from_slurm(env):  # a port per task
        return {**right(env), "MASTER_PORT": str(int(right(env)["MASTER_PORT"]) + int(env["SLURM_PROCID"]))}
    assert fails(rank_from_slurm, "same MASTER_PORT")


def right(env):
    return rank_from_slurm(env)


def test_rank_from_slurm_rank_from_localid_names_localid_not_nodeid():
    """Learner s13r6h finding 17: RANK read from SLURM_LOCALID was told it had read SLURM_NODEID."""
    def rank_from_slurm(env):  # the task's number on its node as its rank
        return {**right(env), "RANK": env["SLURM_LOCALID"]}
    result = check(rank_from_slurm)
    assert not result and "SLURM_LOCALID numbers it on its own node" in result.message, result.message
    assert "SLURM_NODEID" not in result.message
    assert score(rank_from_slurm) < 1.0


def test_rank_from_slurm_hint_gives_no_formula_away():
    """Learner s9h: every FAIL's hint restated all five formulas, so the first wrong try handed over the answer."""
    hint = exercises.get("rank_from_slurm").hint
    assert not any(name in hint for name in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "% 10000"))

    def rank_from_slurm(env):  # the node's number as the rank: the message names RANK alone
        return {**right(env), "RANK": env["SLURM_NODEID"]}
    message = check(rank_from_slurm).message
    assert "RANK is the task's number in the whole job" in message and "WORLD_SIZE" not in message


# ---- sbatch_header --------------------------------------------------------------------------------------------------

def slurm_time(minutes):
    days, rest = divmod(minutes, 1440)
    return (f"{days}-" if days else "") + f"{rest // 60:02d}:{rest % 60:02d}:00"


def sbatch_header(request):
    lines = [f"#SBATCH --job-name={request['job_name']}", f"#SBATCH --nodes={request['nodes']}",
             f"#SBATCH --ntasks-per-node={request['tasks_per_node']}",
             f"#SBATCH --cpus-per-task={request['cpus_per_task']}", f"#SBATCH --mem={request['mem_gb']}G",
             f"#SBATCH --time={slurm_time(request['minutes'])}"]
    if request["gpus_per_node"]:
        lines.append(f"#SBATCH --gres=gpu:{request['gpus_per_node']}")
    return "\n".join(lines)


def test_slurm_reads_times_memory_and_options_as_slurm_does():
    assert slurm_minutes("1:30") == 1.5 and slurm_minutes("01:30:00") == 90 and slurm_minutes("90") == 90
    assert slurm_minutes("1-01:00:00") == 1500 and slurm_minutes("2-3") == 2 * 1440 + 180
    assert memory_mb("64") == 64 and memory_mb("64G") == 65536 and memory_mb("500M") == 500
    assert parse_sbatch("#SBATCH -N 2 -c8\n# SBATCH --mem=1\n#SBATCH --time 10  # ten\nsrun x\n#SBATCH --mem=5") == \
        {"nodes": "2", "cpus-per-task": "8", "time": "10"}


def test_sbatch_header_solution_and_equivalent_spellings_pass():
    right_header = globals()["sbatch_header"]
    assert check(right_header) and score(right_header) == 1.0

    def sbatch_header(r):  # short options, minutes, MB, --gpus-per-node
        lines = [f"#SBATCH -N {r['nodes']}", f"#SBATCH --ntasks-per-node {r['tasks_per_node']}",
                 f"#SBATCH -c {r['cpus_per_task']}", f"#SBATCH --mem={r['mem_gb'] * 1024}", f"#SBATCH -t {r['minutes']}"]
        return "\n".join(lines + ([f"#SBATCH --gpus-per-node={r['gpus_per_node']}"] if r["gpus_per_node"] else []))
    assert check(sbatch_header) and score(sbatch_header) == 1.0


def edited(old, new):
    def sbatch_header(request):
        return globals()["sbatch_header"](request).replace(old(request), new(request))
    return sbatch_header


def test_sbatch_header_wrong_answers_fail_with_their_hint():
    hours = edited(lambda r: f"--time={slurm_time(r['minutes'])}", lambda r: f"--time={r['minutes'] // 60}:{r['minutes'] % 60:02d}")
    assert fails(hours, "MINUTES:SECONDS")
    # learner s10d: '00:90' (one colon, 90 as seconds) was told 'a bare --time number is minutes, not hours'
    one_colon = edited(lambda r: f"--time={slurm_time(r['minutes'])}", lambda r: f"--time=00:{r['minutes']}")
    assert fails(one_colon, "--time=00:90 has one colon: Slurm reads it as MINUTES:SECONDS, 00 min 90 s")
    assert "a bare --time number" not in check(one_colon).message
    megabytes = edited(lambda r: f"--mem={r['mem_gb']}G", lambda r: f"--mem={r['mem_gb']}")
    assert fails(megabytes, "a bare number is megabytes")
    # learner s10h: the memory of all nodes was told '--mem asks for 128 GB per node, not 64', which reads backwards
    all_nodes = edited(lambda r: f"--mem={r['mem_gb']}G", lambda r: f"--mem={r['mem_gb'] * r['nodes']}G")
    assert fails(all_nodes, "--mem is per node: the memory of one node, not the job's total")
    double = edited(lambda r: f"--mem={r['mem_gb']}G", lambda r: f"--mem={r['mem_gb'] + 3}G")
    assert fails(double, "GB per node, but your --mem=") and ", not " not in check(double).message
    total_tasks = edited(lambda r: "--ntasks-per-node=", lambda r: "--ntasks=")
    assert fails(total_tasks, "--ntasks is the job's total")
    node_cores = edited(lambda r: f"--cpus-per-task={r['cpus_per_task']}",
                        lambda r: f"--cpus-per-task={r['cpus_per_task'] * r['tasks_per_node']}")
    assert fails(node_cores, "ONE task")
    spaced = edited(lambda r: "#SBATCH --nodes", lambda r: "# SBATCH --nodes")
    assert fails(spaced, "exactly '#SBATCH'")
    all_gpus = edited(lambda r: f"--gres=gpu:{r['gpus_per_node']}", lambda r: f"--gres=gpu:{r['gpus_per_node'] * r['nodes']}")
    assert fails(all_gpus, "per node")

    def sbatch_header(request):  # learner B: a GPU line on CPU nodes too, asking for 0 (it passed)
        header = globals()["sbatch_header"](request)
        return header if request["gpus_per_node"] else header + "\n#SBATCH --gres=gpu:0"
    assert fails(sbatch_header, "on CPU nodes leave the GPU line out: --gres=gpu:0 names")

    def sbatch_header(request):  # noqa: F811 learner s13r7h: '--gpus-per-node=0' was answered with '--gres=gpu:0' quoted
        header = globals()["sbatch_header"](request)
        return header if request["gpus_per_node"] else header + "\n#SBATCH --gpus-per-node=0"
    assert fails(sbatch_header, "on CPU nodes leave the GPU line out: --gpus-per-node=0 names")


# ---- train_resumable ------------------------------------------------------------------------------------------------

RESUME = exercises.get("train_resumable")
train_resumable = solution_function(RESUME)  # the solution notebook's


def resume_edit(edits: dict):
    """The solution's train_resumable with each `old` text of its source replaced by `new`: a learner's wrong answer."""
    source = solution_source(RESUME)
    for old, new in edits.items():
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    namespace: dict = {}
    exec(RESUME.setup, namespace)
    exec(compile(source, "<wrong answer>", "exec"), namespace)
    return namespace["train_resumable"]


def test_train_resumable_solution_passes():
    assert check(train_resumable) and score(train_resumable) == 1.0


def test_train_resumable_wrong_answers_fail_with_their_hint():
    assert fails(resume_edit({'optimizer.load_state_dict(state["optimizer"])': "pass"}), "restores the weights but not the optimizer's momentum")
    assert fails(resume_edit({'step = state["step"]': "pass"}), "from step 0")
    assert fails(resume_edit({"if os.path.exists(path):": "if False:"}), "from step 0")
    assert fails(resume_edit({"slurm.resume_batch(step)": "slurm.resume_batch(ran)"}), "data order")
    assert fails(resume_edit({"if step % every == 0:": "if True:"}), "last checkpoint")
    assert fails(resume_edit({'path + ".tmp")\n            os.replace(path + ".tmp", path)': "path)"}), "os.replace")
    assert fails(resume_edit({'"ran": ran}': '"ran": step}'}), "instead of the steps this call ran")
    # learner s9h: a resume one step past the checkpoint was told it "started where the first one died"
    assert fails(resume_edit({'step = state["step"]': 'step = state["step"] + 1'}), "one past the last checkpoint")
    assert "where the first one died" not in check(resume_edit({'step = state["step"]': 'step = state["step"] + 1'})).message
    assert fails(resume_edit({"if step % every == 0:": "if step % every == 0 or step == stop_at:"}),
                 "where the first one died")
    # learner s10d: returning before the stop_at step's checkpoint passed (the text asks for it)
    before = resume_edit({"if step % every == 0:": "if step == stop_at:\n            break\n        if step % every == 0:"})
    assert fails(before, "must write step 8's checkpoint before it stops")
    # learner s6C: stops right but returns ran = steps; the message must not only talk about stopping
    assert fails(resume_edit({'"ran": ran}': '"ran": steps}'}), "or `ran` is the total (steps) instead of the steps")
    # learner s10m finding 13: storing the index just trained (s) got only 'should start at step 6 and run 4 steps'
    index_saved = resume_edit({'"step": step}, path + ".tmp")': '"step": step - 1}, path + ".tmp")'})
    assert fails(index_saved, "the checkpoint stored the index of the step just trained")
    assert "one before the last checkpoint's" in check(index_saved).message


def test_train_resumable_checkpointing_after_the_index_is_named_not_where_the_first_one_died():
    """Learner s12r4h: a checkpoint after the step of index s with s % every == 0 (steps done s + 1 stored right) was
    told 'the resumed job started at step 7, where the first one died'."""
    on_index = resume_edit({"if step % every == 0:": "if (step - 1) % every == 0:"})
    message = check(on_index).message
    assert not check(on_index) and "where the first one died" not in message, message
    assert "came after the step of index 6, a multiple of every" in message and "steps DONE" in message


def test_train_resumable_checkpointing_on_the_index_is_told_the_index_is_not_the_steps_done():
    """Learner s10h checkpointed after the step of index s when s % every == 0, storing s as the steps done: the
    message was the generic one; it now names the mix-up, and no message says 'step % every' (the text's words are
    'the steps done')."""
    def train_resumable(steps, every, path, stop_at=None):  # the learner's own answer, loop on the index
        model, optimizer = slurm.resume_problem()
        start = 0
        if os.path.exists(path):
            state = torch.load(path)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start = state["done"]
        ran = 0
        for s in range(start, steps):
            slurm.resume_step(model, optimizer, slurm.resume_batch(s))
            ran += 1
            if s % every == 0:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "done": s}, path + ".tmp")
                os.replace(path + ".tmp", path)
            if stop_at is not None and s + 1 == stop_at:
                break
        return {"weights": tensors.flat_weights(model).tolist(), "ran": ran}

    assert fails(train_resumable, "the checkpoint holds the step's index, not the steps done")
    died = check(resume_edit({"if step % every == 0:": "if step % every == 0 or step == stop_at:"})).message
    assert "where the first one died" in died and "step % every" not in died and "steps done are a multiple" in died


def test_train_resumable_taking_the_steps_done_as_the_batch_index_is_told_the_index_counts_from_0():
    """Learner s5C read 'step' as 1-based (steps done) and trained on resume_batch(1..N): the text and the message now
    keep the index (from 0, the batch) and the steps done (from 1, checkpoints and stop_at) apart."""
    one_based = resume_edit({"slurm.resume_step(model, optimizer, slurm.resume_batch(step))\n        step, ran = step + 1, ran + 1":
                             "step, ran = step + 1, ran + 1\n        slurm.resume_step(model, optimizer, slurm.resume_batch(step))"})
    assert fails(one_based, "the step of index s (0, 1, ...) on resume_batch(s)")
    assert "s + 1 steps are done" in check(one_based).message


def test_lab11_failures_lead_with_their_own_sentence_and_no_generic_hint():
    """Learner s10d finding 10: a ~300-600 character Hint restating the exercise followed every FAIL."""
    for name in ("rank_from_slurm", "sbatch_header", "train_resumable", "read_scheduler"):
        assert exercises.get(name).hint == "", name
    def rank_from_slurm(env):  # ints, not strings
        return {k: 1 for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    result = check(rank_from_slurm)
    assert not result and result.message.startswith("environment variables are strings") and "Hint" not in result.message


def test_read_scheduler_missing_job_is_named_first_without_the_id_lists():
    def read_scheduler(text):  # the TIMEOUT job left out
        timed_out = next(line.split("|")[0] for line in text.splitlines() if "|TIMEOUT|" in line)
        return {k: v for k, v in globals()["read_scheduler"](text).items() if k != timed_out}
    result = check(read_scheduler)
    assert not result and result.message.startswith("job ") and "has no answer" in result.message
    assert "[" not in result.message and len(result.message) < 200, result.message


# ---- read_scheduler -------------------------------------------------------------------------------------------------

PENDING = {"Resources": "wait", "Priority": "wait", "Dependency": "wait", "QOSMaxJobsPerUserLimit": "wait",
           "DependencyNeverSatisfied": "fix the dependency", "PartitionTimeLimit": "fix the request"}
ENDED = {"COMPLETED": "done", "TIMEOUT": "more time", "OUT_OF_MEMORY": "more memory", "NODE_FAIL": "resubmit",
         "FAILED": "read the log", "CANCELLED": "cancelled", "RUNNING": "wait"}


def read_scheduler(text):
    verdicts = {}
    for line in text.splitlines()[1:]:
        job_id, name, state, exit_code, reason = line.split("|")
        if "." not in job_id:
            state = state.split()[0]
            verdicts[job_id] = PENDING.get(reason, "wait") if state == "PENDING" else ENDED[state]
            if state == "FAILED" and exit_code == "0:9":  # the memory kill where Slurm reads memory from /proc
                verdicts[job_id] = "more memory"
    return verdicts


def test_read_scheduler_solution_passes():
    assert check(read_scheduler) and score(read_scheduler) == 1.0


def test_read_scheduler_wrong_answers_fail_with_their_hint():
    def read_scheduler(text):  # the last line of each job: its step
        verdicts = {}
        for line in text.splitlines()[1:]:
            job_id, name, state, exit_code, reason = line.split("|")
            state = state.split()[0]
            verdicts[job_id.split(".")[0]] = PENDING.get(reason, "wait") if state == "PENDING" else ENDED[state]
        return verdicts
    assert fails(read_scheduler, "read the job's own line")

    def read_scheduler(text):  # every pending job waits
        return {k: ("wait" if v in ("fix the request", "fix the dependency") else v)
                for k, v in globals()["read_scheduler"](text).items()}
    assert fails(read_scheduler, "Reason says whether waiting helps")

    def read_scheduler(text):  # 'CANCELLED by 0' never matched
        verdicts = {}
        for line in text.splitlines()[1:]:
            job_id, name, state, exit_code, reason = line.split("|")
            if "." not in job_id:
                verdicts[job_id] = PENDING.get(reason, "wait") if state == "PENDING" else ENDED.get(state, "read the log")
        return verdicts
    assert fails(read_scheduler, "first word")

    def read_scheduler(text):  # learner s11h: the whole State, answered as itself: 'CANCELLED by 0' named, no list
        verdicts = {}
        for line in text.splitlines()[1:]:
            job_id, name, state, exit_code, reason = line.split("|")
            if "." not in job_id:
                verdicts[job_id] = PENDING.get(reason, "wait") if state == "PENDING" else ENDED.get(state, state)
        return verdicts
    assert fails(read_scheduler, "('CANCELLED by 0') got 'CANCELLED by 0': 'CANCELLED by 0' is CANCELLED")

    def read_scheduler(text):  # learner s6C: the whole State, and a job whose State is not known left out
        return {k: v for k, v in globals()["read_scheduler"](text).items()
                if not any(line.startswith(f"{k}|") and "|CANCELLED by 0|" in line for line in text.splitlines())}
    assert fails(read_scheduler, "is missing, whose State reads 'CANCELLED by 0': the state is its first word")

    def read_scheduler(text):  # every FAILED job 'read the log' (learner B: lab 11's own memory kill reads FAILED 0:9)
        return {k: ("read the log" if v == "more memory" and f"{k}|" in text and f"|FAILED|0:9|" in
                    next(line for line in text.splitlines() if line.startswith(f"{k}|")) else v)
                for k, v in globals()["read_scheduler"](text).items()}
    assert fails(read_scheduler, "killed by signal 9")

    def read_scheduler(text):  # every FAILED job 'more memory'
        return {k: ("more memory" if v == "read the log" else v) for k, v in globals()["read_scheduler"](text).items()}
    assert fails(read_scheduler, "read the log")

    def read_scheduler(text):  # steps answered too
        return {line.split("|")[0]: "done" for line in text.splitlines()[1:]}
    assert fails(read_scheduler, "is a step of a job")


def test_read_scheduler_text_says_the_job_ids_are_strings():
    """Learner s10h: int ids were caught ('a dict's keys must be strings'), but the text never said the ids are strings."""
    import nbformat

    from lab_utils import learner_code
    nb = nbformat.read(learner_code.notebook_path("11_from_notebook_to_cluster.ipynb", beside="/nonexistent"), 4)
    text = next(c.source for c in nb.cells if c.get("id") == "l11-ex4-md")
    assert "the job id as a string" in text
