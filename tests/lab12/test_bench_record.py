"""The record's cost benchmark (`python -m lab_utils bench record`): paired windows, the median of their ratios, and a
verdict against the 2 % bound; a fake record that costs 10 % is found above it."""
import json

import pytest

from lab_utils import measure
from lab_utils.labs.lab12 import bench as debugging



@pytest.fixture
def quiet(monkeypatch):
    """The verdict's logic without the machine's load (a busy machine makes any timing 'cannot be seen here')."""
    monkeypatch.setattr(measure.verdicts, "run_conditions", lambda: None)


def windows(costs, base=1.0):
    """Paired window seconds: off windows that drift round to round, each on window `cost` slower than its pair."""
    off = [base * (1 + 0.03 * ((i * 7) % 5 - 2)) for i in range(len(costs))]  # +-6 % drift between rounds
    return [o * (1 + c) for o, c in zip(off, costs)], off


def test_a_10_percent_cost_is_found_above_the_bound_and_a_tiny_one_under_it(quiet):
    on, off = windows([0.10, 0.098, 0.102, 0.099, 0.101, 0.100, 0.103, 0.097, 0.100])
    costly = debugging.cost_summary(on, off)
    assert costly["verdict"] == measure.REVERSED and costly["cost_range"][0] > debugging.BOUND
    assert costly["cost"] == pytest.approx(0.10, abs=0.002) and costly["repeats"] == 9
    on, off = windows([0.002, -0.001, 0.001, 0.0, 0.003, 0.001, -0.002, 0.002, 0.001])
    cheap = debugging.cost_summary(on, off)
    assert cheap["verdict"] == measure.HOLDS and cheap["cost_range"][1] < debugging.BOUND
    on, off = windows([0.02, -0.02, 0.05, -0.04, 0.03, 0.0, -0.03, 0.04, 0.01])  # pairs too noisy for 2 %
    noisy = debugging.cost_summary(on, off)
    assert noisy["verdict"] == measure.UNDECIDED and "restated" in noisy["notes"], noisy  # not measure's weaker holds


def test_the_benchmark_prints_its_figures_then_a_json_line_with_cost_range_and_repeats(quiet, capsys):
    on, off = windows([0.10] * 9)
    debugging.print_record_cost({"benchmark": "record", "world_size": 2, "steps": 60, "per_rank_batch": 32,
                                 "step_ms_on": 11.0, "step_ms_off": 10.0, "window_spread_on": 0.01,
                                 "window_spread_off": 0.01, **debugging.cost_summary(on, off)})
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["cost"] == pytest.approx(0.10, abs=1e-3) and len(last["cost_range"]) == 2 and last["repeats"] == 9
    assert last["verdict"] == measure.REVERSED


def test_the_benchmark_runs_the_lessons_worker_not_one_of_its_own():
    assert debugging.cost_worker.__module__ == "lab_utils.labs.lab12.lesson"
