"""Lab 11's "your turn" batch script: the self-check reads sacct's record of the learner's job and names the wrong
request (judged here on records as sacct gives them; on the cluster, where one answers, on real jobs)."""
import json
import re
import time
from pathlib import Path

import pytest

import subprocess

from lab_utils.instructor.course.assign import strip_solutions
from lab_utils.labs.lab11 import slurm
from lab_utils.labs.lab11.slurm import yourturn
from lab_utils.labs.lab11.slurm.yourturn import NOT_WRITTEN

ROOT = Path(__file__).resolve().parents[2]
RIGHT = {"state": "COMPLETED", "exit_code": "0:0", "nodes": 2, "tasks": 2, "mem_mb_per_node": 300.0, "limit_min": 2.0}


def script_cell() -> str:
    """The solution's %%writefile cell of the your-turn script."""
    cells = json.loads((ROOT / "solutions" / "11_from_notebook_to_cluster.ipynb").read_text())["cells"]
    return next("".join(c["source"]) for c in cells if "".join(c["source"]).startswith("%%writefile {your_turn}"))


def test_the_right_record_passes():
    passed, message = yourturn.judge(RIGHT, "#SBATCH --nodes=2")
    assert passed and "COMPLETED" in message


@pytest.mark.parametrize("wrong, named", [
    ({"nodes": 1, "tasks": 1}, "--nodes=2"),                               # forgot --nodes
    ({"mem_mb_per_node": 600.0}, "PER NODE"),                              # --mem=600M: the total over 2 nodes
    ({"mem_mb_per_node": 6026.0}, "without --mem"),                         # no --mem: the whole node
    ({"mem_mb_per_node": 150.0}, "not 300"),                               # --mem=300M halved by hand
    ({"limit_min": 1.0}, "M:SS is minutes and seconds"),                   # --time=0:2 (2 seconds, rounded up)
    ({"limit_min": 60.0}, "not 2 minutes"),                                # no --time: the partition's limit
    ({"tasks": 4}, "--ntasks-per-node counts the tasks of ONE node"),      # 2 per node (or --ntasks=4)
    ({"state": "FAILED", "exit_code": "1:0"}, "read its output file"),     # the script itself failed
])
def test_each_wrong_request_is_named(wrong, named):
    passed, message = yourturn.judge({**RIGHT, **wrong}, "#SBATCH --nodes=2")
    assert not passed and named in message, message


def test_a_time_of_mm_ss_is_read_back_as_seconds_rounded_up():
    """Learner s10m finding 14: --time=00:02 got 'its time limit is 1 minute(s)' without saying it read 2 seconds."""
    passed, message = yourturn.judge({**RIGHT, "limit_min": 1.0}, "#SBATCH --nodes=2\n#SBATCH --time=00:02\n")
    assert not passed and "--time=00:02 is MM:SS, 0 min 2 s, rounded up to 1 minute(s)" in message, message
    assert "--time=00:02:00" in message
    # review 11, item 15: the rounding is computed and compared with sacct's limit; MM:SS with 0 s is read too
    passed, message = yourturn.judge({**RIGHT, "limit_min": 5.0}, "#SBATCH --nodes=2\n#SBATCH --time=00:02\n")
    assert "rounds up to 1 minute(s), yet sacct reads 5 minute(s)" in message and "rounded up to 5" not in message
    passed, message = yourturn.judge({**RIGHT, "limit_min": 5.0}, "#SBATCH --nodes=2\n#SBATCH --time=5:00\n")
    assert not passed and "--time=5:00 is MM:SS, 5 min 0 s; --time=00:02:00" in message, message
    passed, message = yourturn.judge({**RIGHT, "limit_min": 60.0}, "#SBATCH --nodes=2\n")  # no --time at all
    assert not passed and "MM:SS, " not in message, message


def test_the_student_stub_says_not_written_as_the_exercises_do():
    student = strip_solutions(script_cell(), "your turn")
    # learner s11r2h finding 4: the stub of a bash script is a bash line (it fails the job), not Python's raise
    assert "NotImplementedError" not in student and "exit 1" in student and "#SBATCH --nodes" not in student
    assert subprocess.run(["bash", "-n"], input=student.split("\n", 1)[1], text=True).returncode == 0
    assert subprocess.run(["bash"], input=student.split("\n", 1)[1].replace("srun", "true"), text=True,
                          capture_output=True).returncode == 1
    passed, message = yourturn.judge({"state": "FAILED", "nodes": 1, "tasks": None, "mem_mb_per_node": 6026.0,
                                      "limit_min": 60.0}, student)
    assert not passed and message.startswith(NOT_WRITTEN)


@pytest.mark.parametrize("text, mb", [("600M", 600), ("1.17G", 1.17 * 1024), ("12052M", 12052), ("300Mn", 300),
                                      ("", 0)])
def test_reqmem_is_read_in_megabytes(text, mb):
    assert yourturn.mem_mb(text) == pytest.approx(mb)


def test_a_limit_sacct_does_not_give_in_time_reads_none():
    assert yourturn.minutes("UNLIMITED") is None and yourturn.minutes("1-00:00:00") == 1440


@pytest.mark.skipif(slurm.find_cluster() is None, reason=slurm.SKIPPED)
def test_on_the_cluster_the_solution_passes_and_the_total_memory_is_named(tmp_path, capsys):
    solution = re.sub(r"^### (BEGIN|END) SOLUTION\n", "", script_cell().split("\n", 1)[1], flags=re.M)
    wrong = solution.replace("--mem=300M", "--mem=600M")
    results = []
    for name, text in (("right", solution), ("wrong", wrong)):
        path = tmp_path / f"{name}.sbatch"
        path.write_text(text)
        job = slurm.sbatch(path, cwd=tmp_path)
        slurm.wait(job, 120, say=lambda line: None)
        results.append(slurm.check_job(job, path))
    assert results[0].passed, results[0].message
    assert not results[1].passed and "PER NODE" in results[1].message
    assert "PASS  your-turn" in capsys.readouterr().out


def test_no_job_names_the_sbatch_refusal_or_the_stub(tmp_path, capsys):
    path = tmp_path / "s.sbatch"
    path.write_text("#SBATCH --ntasks-per-node=2\n")
    assert not slurm.check_job(None, path) and "sbatch made no job" in capsys.readouterr().out
    path.write_text(strip_solutions(script_cell(), "your turn"))
    assert not slurm.check_job(None, path) and NOT_WRITTEN in capsys.readouterr().out


def test_one_task_on_two_nodes_is_named_by_sbatchs_warning_not_by_the_nodes_line():
    """Learner s10d finding 5: --nodes=2 with --ntasks=1 was told 'ask with #SBATCH --nodes=2', which it had."""
    script = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks=1\n#SBATCH --mem=300M\n#SBATCH --time=2\n"
    said = ["sbatch: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1", "Submitted batch job 12"]
    wrong = {**RIGHT, "nodes": 1, "tasks": 1}
    for heard in (said, []):  # with sbatch's words, or from the script alone
        passed, message = yourturn.judge(wrong, script, said=heard)
        assert not passed and "--ntasks-per-node=1" in message and "ask with #SBATCH --nodes" not in message, message
    assert "setting nnodes to 1" in yourturn.judge(wrong, script, said=said)[1]
    passed, message = yourturn.judge(wrong, "#!/bin/bash\n#SBATCH --mem=300M\n")  # no --nodes line at all
    assert not passed and "ask with #SBATCH --nodes=2" in message


@pytest.mark.parametrize("line", ["# SBATCH --nodes=2", "#sbatch --nodes=2", "#  SBATCH --nodes=2"])
def test_a_near_miss_sbatch_line_is_named_as_a_comment_sbatch_ignored(line):
    """Learner s10d finding 5: '# SBATCH' lines (a space) were told 'ask with #SBATCH --nodes=2'."""
    script = f"#!/bin/bash\n{line}\n# SBATCH --time=00:02:00\nsrun hostname\n"
    passed, message = yourturn.judge({**RIGHT, "nodes": 1, "tasks": 1, "mem_mb_per_node": 6026.0, "limit_min": 60.0},
                                     script)
    assert not passed and repr(line) in message and "exactly #SBATCH" in message, message


def test_two_tasks_without_two_nodes_names_the_missing_nodes_line_not_the_memory():
    """Learner s10m finding 3: --ntasks=2 --mem=300M (no --nodes) was told 'it asked 150 MB per node, not 300'."""
    script = "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --mem=300M\n#SBATCH --time=2:00\n"
    # sacct: NNodes=2 (each node has 1 CPU), ReqNodes=1, ReqMem=300M: 300 MB per node asked
    passed, message = yourturn.judge({**RIGHT, "req_nodes": 1}, script)
    assert not passed and "--nodes=2" in message and "ReqNodes" in message and "MB" not in message, message
    assert yourturn.judge({**RIGHT, "req_nodes": 2}, "#SBATCH --nodes=2")[0]


def test_a_job_that_never_ran_a_step_names_tasks_per_node_not_none():
    """Learner s10m finding 3b: --ntasks-per-node=2 was told 'its srun step ran None task(s)'."""
    script = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n#SBATCH --mem=300M\n#SBATCH --time=2:00\n"
    passed, message = yourturn.judge({**RIGHT, "state": "CANCELLED", "tasks": None}, script)
    assert not passed and "None" not in message and "--ntasks-per-node=1" in message and "CANCELLED" in message
    passed, message = yourturn.judge({**RIGHT, "state": "FAILED", "tasks": None}, "#SBATCH --nodes=2")
    assert not passed and "None" not in message and "output file" in message, message


def test_a_job_cancelled_while_pending_on_its_time_is_told_its_time_not_to_read_a_log():
    """Learner s12r4h: --time=120 (meant as seconds) pended on PartitionConfig, was cancelled, and the check said
    'read its output file' of a job that never started."""
    script = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --mem=300M\n#SBATCH --time=120\n"
    never = {**RIGHT, "state": "CANCELLED", "tasks": None, "limit_min": 120.0, "started": False}
    passed, message = yourturn.judge(never, script)
    assert not passed and "never started" in message and "no output file" in message, message
    assert "--time=120 is 120 minutes, not seconds" in message and "--time=00:02:00" in message
    assert "read its output file" not in message
    other = {**never, "limit_min": 2.0}  # never started, time right: no log to read either, the reason says why
    passed, message = yourturn.judge(other, script.replace("--time=120", "--time=00:02:00"))
    assert not passed and "no output file" in message and "read its output file" not in message, message
    ran = {**never, "state": "FAILED", "limit_min": 2.0, "started": True}  # it ran, and died: its log says why
    assert "read its output file" in yourturn.judge(ran, script.replace("--time=120", "--time=00:02:00"))[1]


def test_a_pending_reason_that_never_resolves_is_named_at_once():
    pending = [{"JobState": "PENDING", "Reason": "PartitionConfig", "NumNodes": "2", "NumCPUs": "4"}]
    never = slurm.never_starts(7, pending)
    assert "PartitionConfig" in never and "never resolves" in never and "NumCPUs=4" in never
    assert "more time than its limit" in never  # learner s12r4h: --time=120 (minutes) over the 60-minute limit
    over = dict(pending[0], TimeLimit="02:00:00", Partition="lab")  # learner s12r4h: --time=120 meant as seconds
    named = slurm.never_starts(7, [over], limit_of=lambda partition: 60.0)
    assert "TimeLimit=02:00:00 (120 minutes)" in named and "MaxTime of 60 minutes" in named, named
    assert "no output file" in named and "CPUs or memory" not in named
    within = slurm.never_starts(7, [dict(over, TimeLimit="00:02:00")], limit_of=lambda partition: 60.0)
    assert "MaxTime" not in within and "CPUs or memory" in within  # not the time: the general reading
    for reason in ("Resources", "Priority", "BeginTime", "Dependency", "JobHeldUser", "None"):
        assert slurm.never_starts(7, [{"JobState": "PENDING", "Reason": reason}]) is None
    assert slurm.never_starts(7, [{"JobState": "RUNNING", "Reason": "PartitionConfig"}]) is None


@pytest.mark.skipif(slurm.find_cluster() is None, reason=slurm.SKIPPED)
def test_on_the_cluster_the_two_findings_are_named(tmp_path, capsys):
    """--ntasks=2 without --nodes names the nodes; --ntasks-per-node=2 stops at once on PartitionConfig."""
    base = "#!/bin/bash\n#SBATCH --mem=300M\n#SBATCH --time=2:00\n#SBATCH --output=%j.out\nsrun hostname\n"
    no_nodes = tmp_path / "no-nodes.sbatch"
    no_nodes.write_text(base.replace("#!/bin/bash\n", "#!/bin/bash\n#SBATCH --ntasks=2\n"))
    job = slurm.sbatch(no_nodes, cwd=tmp_path)
    slurm.wait(job, 120, say=lambda line: None)
    checked = slurm.check_job(job, no_nodes)
    assert not checked.passed and "--nodes=2" in checked.message and "150" not in checked.message, checked.message
    per_node = tmp_path / "per-node.sbatch"
    per_node.write_text(base.replace("#!/bin/bash\n", "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n"))
    job = slurm.sbatch(per_node, cwd=tmp_path)
    started = time.monotonic()
    with pytest.raises(slurm.NeverStarts, match="PartitionConfig"):
        slurm.wait(job, 120, say=lambda line: None)
    assert time.monotonic() - started < 30
    checked = slurm.check_job(job, per_node)
    assert not checked.passed and "None" not in checked.message and "--ntasks-per-node=1" in checked.message, checked


def test_the_checks_line_is_wrapped_at_100_columns():
    """Learner s11h finding 8: the your-turn FAIL lines ran to 150-200 columns, unlike every other check."""
    long = yourturn.Checked(False, "its time limit is 1 minute(s), not 2 minutes: --time=00:02 is MM:SS, 0 min 2 s, "
                                   "rounded up to 1 minute(s); --time=00:02:00 (HH:MM:SS; a bare number is minutes)")
    assert repr(long).startswith("FAIL  your-turn: its time limit") and all(len(x) <= 100 for x in repr(long).splitlines())


def test_total_tasks_instead_of_tasks_per_node_fails_as_exercise_2_does():
    """Learner s13r6h finding 16: --nodes=2 --ntasks=2 passed here while exercise 2 refused --ntasks."""
    from lab_utils.labs.lab11.slurm.options import total_tasks_message

    script = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks=2\n#SBATCH --mem=300M\n#SBATCH --time=00:02:00\n"
    passed, message = yourturn.judge(RIGHT, script)
    assert not passed and total_tasks_message(1) in message, message
    passed, _ = yourturn.judge(RIGHT, script.replace("--ntasks=2", "--ntasks-per-node=1"))
    assert passed
