"""lab_utils.conditions: what else used the machine while a lab measured, and how the labs' tables and CSVs say so."""
import os
import subprocess
import sys
import time

import pytest

from lab_utils import conditions, measure
from lab_utils.conditions import Load, Sample


def test_load_between_two_samples_splits_the_machines_cpu_into_ours_others_and_steal():
    load = conditions.between(Sample(10.0, 100.0, 5.0, 3.0), Sample(12.0, 103.0, 5.2, 4.0), cores=2)
    assert (load.seconds, load.own, load.others) == (2.0, 0.5, 1.0) and load.steal == pytest.approx(0.1)
    assert load.busy and "other programs used 1.0 of 2 cores" in load.line() and "rerun" in load.line()
    assert load.note() and "; " not in load.note()[0]  # a results-row note, which flags splits at "; "
    quiet = conditions.between(Sample(0.0, 0.0, 0.0, 0.0), Sample(10.0, 19.0, 0.0, 18.5), cores=2)
    assert not quiet.busy and quiet.note() == [] and "rerun" not in quiet.line()
    # our own CPU can exceed what /proc/stat counted between two reads of different files: never negative others
    assert conditions.between(Sample(0.0, 0.0, 0.0, 0.0), Sample(1.0, 1.0, 0.0, 1.2), cores=2).others == 0.0


def test_a_program_outside_this_process_tree_is_counted_as_others():
    if conditions.sample() is None:
        pytest.skip("no /proc here: nothing to measure the machine with")
    # sh starts the burner and exits at once: the burner is no descendant of this process
    subprocess.run(["sh", "-c", f"{sys.executable} -c 'import time\nt = time.time()\nwhile time.time() - t < 3: pass' &"],
                   check=True)
    time.sleep(0.3)
    conditions.taken(reset=True)
    with conditions.measuring():
        time.sleep(1.5)
    load = conditions.taken(reset=True)
    assert load.others >= 0.5 and load.own < 0.2 and load.busy, load
    assert conditions.taken() is None  # reset: nothing measured since


def test_measuring_windows_add_up_weighted_by_their_length():
    conditions.taken(reset=True)
    conditions._WINDOWS.extend([Load(1.0, 2, 1.0, 0.0, 0.0), Load(3.0, 2, 0.0, 2.0, 0.0)])
    load = conditions.taken(reset=True)
    assert (load.seconds, load.own, load.others) == (4.0, 0.25, 1.5)


def test_a_busy_machine_is_noted_in_the_rows_the_table_and_the_verdicts(monkeypatch, isolated_results):
    busy = Load(5.0, 2, 1.0, 1.2, 0.0)
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy)
    verdict = measure.verdict([1.0] * 5, [2.0] * 5, claim="A vs B", expected="A faster", lab="00")
    assert verdict.notes == busy.note()[0] and busy.note()[0] in str(verdict)
    row = measure.Result(lab="00", framework="torch", strategy="single-device", world_size=1, device="cpu",
                         batch_size=8, samples_per_s=100.0, wall_s=0.08, workload="w")
    text = measure.record([row, row])
    assert busy.line() in text and text.count(busy.note()[0]) == 0  # one machine line, not a note per row
    assert all(busy.note()[0] in r.flags for r in measure.read_results(isolated_results))
    verdict.record()
    assert measure.read_verdicts(isolated_results)[0]["notes"] == busy.note()[0]


def test_launch_and_the_timers_count_as_measuring():
    from lab_utils.launch import launch

    conditions.taken(reset=True)
    measure.time_interleaved({"a": lambda: None}, warmup=0, repeats=2)
    launch(_rank, 1, timeout=60)
    load = conditions.taken(reset=True)
    if conditions.sample() is not None:
        assert load is not None and load.seconds > 0


def _rank(rank, world_size):
    return os.getpid()
