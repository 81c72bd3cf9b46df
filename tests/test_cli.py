"""The command line, run as a learner or CI would run it."""
import json
import subprocess
import sys

import pytest

from lab_utils.instructor.grading.sandbox import machine


def run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "lab_utils", *args], capture_output=True, text=True, timeout=timeout)


def bench_figures(capsys, *args) -> dict:
    """Run `bench ...` in this process, as `python -m lab_utils bench ...` runs it (torch and its fork server are
    warm here; the command line's own way in is test_bench_dp_refuses_bad_batch_sizes): it must succeed and end with a
    JSON line, returned parsed."""
    from lab_utils.instructor import cli

    capsys.readouterr()
    assert cli.main(["bench", *args]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_info_reports_hardware_and_plans():
    result = run("info")
    assert result.returncode == 0, result.stderr
    assert "CPU cores" in result.stdout
    for world_size in (1, 2, 4):
        assert f"world_size={world_size}: backend" in result.stdout


@pytest.mark.slow
def test_bench_overhead_ends_with_a_json_line(capsys):
    figures = bench_figures(capsys, "overhead", "--samples", "256", "--repeats", "1")
    assert figures["benchmark"] == "overhead" and figures["ratio"] > 0
    # the JSON rounds the rates to 0.1 and the ratio to 1e-4: recomputing it agrees within what that rounding allows
    # (a slow machine's small rates make the rates' rounding count)
    ours, plain = figures["lab_utils_samples_per_s"], figures["plain_samples_per_s"]
    allowed = ours / plain * (0.05 / ours + 0.05 / plain) + 5e-5 + 1e-9
    assert abs(figures["ratio"] - ours / plain) <= allowed


def test_assign_check_passes_on_the_committed_notebooks():
    result = run("assign", "--check")
    assert result.returncode == 0, result.stderr
    assert "matches" in result.stdout


def test_course_refuses_unknown_labs_with_a_clear_error(tmp_path):
    result = run("course", "--labs", "42", "--out", str(tmp_path))
    assert result.returncode == 2
    assert "unknown lab(s) ['42']" in result.stderr


def test_unknown_command_is_a_usage_error():
    assert run("fly").returncode == 2


@pytest.mark.slow
def test_a_command_other_than_bench_starts_without_torch_or_nbformat():
    probe = ("import sys\nfrom lab_utils.instructor import cli\n"
             "for argv in (['fly'], ['course', '--cell-timeout', 'x'], ['bench', 'dp', '--batch-sizes', 'x']):\n"
             "    try:\n        cli.main(argv)\n    except SystemExit:\n        pass\n"
             "    print(argv[0], sorted(m for m in ('torch', 'nbformat', 'tensorflow') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    # bench imports its registry to list the benchmarks (and torch with it); the others import nothing heavy
    assert result.stdout.splitlines() == ["fly []", "course []", "bench ['torch']"], result.stderr[-2000:]


@pytest.mark.slow
def test_bench_ddp_ends_with_a_json_line(capsys):
    figures = bench_figures(capsys, "ddp", "--repeats", "1", "--steps", "4")
    assert {"speedup_vs_1x1", "speedup_vs_1x2", "weights_max_abs_diff", "flags"} <= set(figures)
    assert figures["weights_max_abs_diff"] <= 1e-5
    assert [(s["name"], s["ranks"], s["threads"]) for s in figures["setups"]] == [
        ("1 rank x 1 thread", 1, 1), ("1 rank x 2 threads", 1, 2), ("2 ranks x 1 thread", 2, 1)]
    for s in figures["setups"]:
        assert s["step_ms"] == pytest.approx(1e3 * figures["global_batch"] / s["samples_per_s"], rel=1e-3)
        assert s["allreduce_ms"] is None if s["ranks"] == 1 else 0 < s["allreduce_ms"] < s["step_ms"]


@pytest.mark.slow
def test_bench_dp_ends_with_a_json_line(capsys):
    figures = bench_figures(capsys, "dp", "--repeats", "2", "--batch-sizes", "8,16")
    assert figures["grad_max_abs_diff"] <= 1e-5 and figures["speedup"] > 0 and isinstance(figures["flags"], str)
    assert [row["batch_size"] for row in figures["by_batch"]] == [8, 16] and figures["batch_size"] == 16
    for row in figures["by_batch"]:
        # the speedup is the paired rounds' median ratio (the verdict's figure); the ratio of the two medians is
        # another estimate of it from the same rounds, apart by no more than their spreads
        assert row["speedup"] == pytest.approx(row["single_ms"] / row["dp_ms"],
                                               rel=max(0.05, row["single_spread"] + row["dp_spread"]))
        assert row["single_spread"] >= 0 and row["dp_spread"] >= 0


def test_bench_dp_refuses_bad_batch_sizes():
    result = run("bench", "dp", "--batch-sizes", "16,x")
    assert result.returncode == 2 and "comma-separated integers" in result.stderr


@pytest.mark.slow
def test_bench_pipeline_ends_with_a_json_line(capsys):
    figures = bench_figures(capsys, "pipeline", "--batch-size", "64", "--repeats", "1")
    assert {"speedup_gpipe_m8_vs_naive", "bubble_abs_error_max", "grad_max_abs_diff"} <= set(figures)
    assert figures["grad_max_abs_diff"] <= 1e-5
    assert set(figures["configs"]) == {"naive", "gpipe M=2", "gpipe M=4", "gpipe M=8", "1f1b M=8"}


@pytest.mark.slow
def test_bench_tf_ends_with_a_json_line(capsys):
    figures = bench_figures(capsys, "tf", "--repeats", "1", "--steps", "5", "--global-batch", "64")
    assert figures["weights_max_abs_diff"] <= 1e-6 and figures["speedup_multiworker"] > 0  # the workers stay equal
    assert figures["replicas_in_sync"] == [2, 2]  # each worker is one replica of one strategy, not a worker alone
    assert figures["weights_vs_one_worker"] <= 1e-4  # = one worker on the same global batches, in another sum order
    assert figures["first_loss_vs_one_worker"] <= 1e-5
    assert [s["name"] for s in figures["setups"]] == ["1 worker", "2 workers"]


@pytest.mark.slow
def test_grade_refuses_missing_files_and_runs_a_tiny_batch(tmp_path):
    result = run("grade", "--lab", "10", str(tmp_path / "nobody.ipynb"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "no such submission" in result.stderr
    result = run("grade", "--lab", "10", __file__, "--out", str(tmp_path / "out"), "--tests", str(tmp_path / "none"))
    assert result.returncode == 2 and "not a folder" in result.stderr
    (tmp_path / "ann.ipynb").write_text("not a notebook")
    args = ("grade", "--lab", "10", str(tmp_path / "ann.ipynb"), "--out", str(tmp_path / "out"))
    result = run(*args)
    if not machine.detect_isolation().complete:  # a machine without bubblewrap: refused, and told how to grade anyway
        assert result.returncode == 2 and "--unsandboxed" in result.stderr and "bubblewrap" in result.stderr
        result = run(*args, "--unsandboxed")
    assert result.returncode == 0, result.stderr
    assert "ann  0/3  invalid" in result.stdout and "sandbox:" in result.stdout
    assert (tmp_path / "out" / "gradebook.csv").read_text().splitlines()[1].startswith("ann,10,0,3,invalid")


@pytest.mark.slow
def test_gpu_check_without_a_gpu_skips_every_check_and_succeeds():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: gpu-check really runs there")
    result = run("gpu-check")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["gpus"] == [] and len(report["checks"]) == 9
    assert all(v.startswith("skipped: no GPU") for v in report["checks"].values())
    quick = json.loads(run("gpu-check", "--quick").stdout.strip().splitlines()[-1])
    assert set(quick["checks"]) == {"lab 01", "lab 03", "lab 05", "lab 09"}


@pytest.mark.slow
def test_gpu_check_reports_a_broken_check_as_failed(monkeypatch):
    from lab_utils import hardware
    from lab_utils.instructor.gpu import registry as gpu_registry

    import json as json_module

    # a registered function that raises (json.loads needs an argument): the fresh process reports it as a failure
    verdict = gpu_registry.run_check(json_module.loads, 30, False)
    assert verdict["json.loads"].startswith("failed: TypeError"), verdict
    four = hardware.HardwareReport("h", 8, tuple(hardware.GPU(i, "g", 80.0) for i in range(4)), "3.11", "2.13", "-")
    monkeypatch.setattr(hardware, "detect", lambda: four)
    assert gpu_registry.plan_check(4) == "passed"


def test_the_docstring_names_every_subcommand_and_both_cell_timeouts_are_seconds_as_floats():
    from lab_utils.instructor import cli

    commands = cli.parser()._subparsers._group_actions[0].choices
    named = cli.__doc__.split("{", 1)[1].split("}", 1)[0].split(",")
    assert sorted(named) == sorted(commands)
    for argv in (["course", "--cell-timeout", "2.5"], ["outputs", "--cell-timeout", "2.5"],
                 ["grade", "--lab", "01", "x.ipynb", "--out", "o", "--cell-timeout", "2.5"]):
        assert cli.parser().parse_args(argv).cell_timeout == 2.5


def test_make_help_lists_every_target_and_gpu_check_passes_quick():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    makefile = (root / "Makefile").read_text()
    phony = next(line for line in makefile.splitlines() if line.startswith(".PHONY:")).split()[1:]
    shown = subprocess.run(["make", "-s", "help"], cwd=root, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    listed = {line.split()[1] for line in shown.stdout.splitlines() if line.strip().startswith("make ")}
    assert set(phony) - {"env"} <= listed
    # -o env: the venv counts as made (overriding STAMP instead made the Makefile a target, which make -n remakes)
    dry = {quick: subprocess.run(["make", "-n", "-o", "env", "gpu-check"] + ([f"QUICK={quick}"] if quick else []),
                                 cwd=root, capture_output=True, text=True, timeout=60).stdout
           for quick in ("", "1", "0")}
    assert "gpu-check --quick" in dry["1"]
    assert "gpu-check" in dry[""] and "--quick" not in dry[""] and "--quick" not in dry["0"]


@pytest.mark.slow
def test_a_registered_gpu_check_runs_in_a_fresh_process_of_its_own():
    import torch

    from lab_utils.instructor.gpu import registry as gpu_registry

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check really runs there (make gpu-check)")
    lab01 = next(c for c in gpu_registry.CHECKS if c.lab == "01")
    verdicts = gpu_registry.run_check(lab01.run, 120, quick=True)
    assert len(verdicts) == 3 and set(verdicts.values()) == {"skipped: no GPU"}, verdicts
