"""lab_utils.allocator: fixed malloc thresholds at import, in every process the course starts, with an opt-out."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import workers
from lab_utils import allocator
from lab_utils.launch import launch
from lab_utils.measure import Machine, Result, read_results, write_result

ROOT = Path(__file__).resolve().parents[1]
glibc_only = pytest.mark.skipif(not allocator.glibc_version(), reason="the thresholds are glibc's")

# In a fresh interpreter: glibc's faults a step (allocator.faults_per_step), and those of torch tensors shaped the
# same (six ~2.2 MB tensors freed together, each step), with the line and the variables its children would inherit.
STEPS = textwrap.dedent("""
    import json, os, resource
    import lab_utils, torch
    torch.set_num_threads(1)
    allocator = lab_utils.allocator
    glibc_faults, faults = allocator.faults_per_step(), []  # first: before the tensors below shape the heap
    for _ in range(30):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        activations = [torch.empty(13 * 2**20 // 4 // 6) for _ in range(6)]
        for a in activations:
            a.fill_(1.0)
        del activations
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    print(json.dumps({"faults": glibc_faults, "tensor_faults": sorted(faults[10:])[10],
                      "line": allocator.allocator_line(), "env": {k: os.environ.get(k) for k in allocator.ENV}}))
""")


def run_steps(**env_changes) -> dict:
    """Run STEPS in a fresh interpreter with `env_changes` (None unsets); its median faults a step, line and env."""
    import json
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in (*allocator.ENV, allocator.OPT_OUT):
        env.pop(name, None)  # as a learner's shell starts it: nothing inherited from this test process
    env.update({k: v for k, v in env_changes.items() if v is not None})
    done = subprocess.run([sys.executable, "-c", STEPS], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@glibc_only
def test_import_fixes_the_faults_and_the_opt_out_keeps_them():
    fixed, default = run_steps(), run_steps(LAB_MALLOC="default")
    assert fixed["faults"] <= 16 and fixed["tensor_faults"] <= 16, fixed  # freed blocks stay: no fresh pages a step
    assert default["faults"] >= 1000, default  # glibc's default trims them and takes ~3,300 fresh pages a step
    assert "no blocks from mmap" in fixed["line"] and "set by lab_utils" in fixed["line"]
    assert "default" in default["line"] and "32 MiB" not in default["line"]
    assert fixed["env"] == allocator.ENV  # what the processes it starts read at their first allocation
    assert default["env"] == dict.fromkeys(allocator.ENV)  # LAB_MALLOC=default: its children get the default too


@glibc_only
def test_inherited_thresholds_are_dropped_for_children_when_opted_out():
    opted = run_steps(LAB_MALLOC="default", **allocator.ENV)
    assert opted["env"] == dict.fromkeys(allocator.ENV) and "started with MALLOC_MMAP_THRESHOLD_" in opted["line"]


@glibc_only
@pytest.mark.parametrize("start", ["spawn", None])
def test_a_launched_rank_runs_the_fixed_thresholds(start):
    values = launch(workers.allocator_worker, 1, timeout=90, start=start)
    assert values[0]["env"] == allocator.ENV and "no blocks from mmap" in values[0]["line"]
    assert values[0]["faults"] <= 16, values[0]


def test_configure_is_idempotent_and_the_env_helpers_round_trip():
    state = allocator.configure()
    assert allocator.configure() == state and state in (allocator.SET, allocator.DEFAULT, allocator.UNSUPPORTED)
    env = allocator.use_default({**allocator.ENV, "OTHER": "1"})
    assert env == {"OTHER": "1", "LAB_MALLOC": "default"} and allocator.setting(env) in ("glibc default", "")
    env = allocator.use_fixed(env)
    assert "LAB_MALLOC" not in env and allocator.setting(env) in ("glibc mmap threshold 32 MiB", "")
    assert len(allocator.allocator_line()) <= 100


def test_elsewhere_it_is_a_no_op_with_its_reason(monkeypatch):
    saved = dict(allocator._state)
    monkeypatch.setattr(allocator, "glibc_version", lambda: "")
    monkeypatch.setenv("LAB_MALLOC", "default")  # opted out or not: nothing to set where glibc is not
    called = []
    monkeypatch.setattr(allocator, "_mallopt", lambda: called.append(1) or "")
    try:
        assert allocator.configure(force=True) == allocator.UNSUPPORTED and not called
        assert allocator.allocator_line().startswith("memory allocator: left as it is (not glibc on Linux")
        assert allocator.setting() == ""
    finally:
        allocator._state.clear()
        allocator._state.update(saved)


def test_rows_record_the_setting_and_compare_only_within_it(tmp_path, monkeypatch):
    row = Result("01", "torch", "single-device", 1, "cpu", 64, 1000.0, 1.0, "digits, cnn", threads=1)
    path, here = write_result(row, tmp_path), allocator.setting()
    monkeypatch.setattr(allocator, "setting", lambda env=None: "glibc default")
    write_result(row, tmp_path)
    first, second = read_results(path)
    assert first.machine.allocator == here
    assert second.machine.allocator == "glibc default"
    assert first.machine.fingerprint != second.machine.fingerprint  # rows of the two settings are not compared
    old = Machine("h", 2, "", "t", "f", "p")
    assert old.allocator == "" and old.fingerprint == ("h", "", "", "", "")


def test_the_machine_lines_name_the_allocator():
    from lab_utils import hardware
    assert allocator.allocator_line() in hardware.detect().fingerprint().splitlines()
