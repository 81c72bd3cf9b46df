"""Shared fixtures: results and datasets never touch the working tree during tests."""
import pytest


@pytest.fixture(autouse=True)
def isolated_results(tmp_path, monkeypatch):
    """Every test writes results into its own temporary folder."""
    monkeypatch.setenv("LAB_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture(autouse=True)
def flags_not_yet_said():
    """Each test starts with no [!] said before it (the results store remembers what a process has printed)."""
    from lab_utils import measure
    measure.forget()


@pytest.fixture(autouse=True)
def no_load_from_earlier_tests():
    """Each test starts with no measuring window of an earlier test (lab_utils.conditions sums them until taken), nor
    the load an earlier test's record() read (summaries and verdicts fall back on it)."""
    from lab_utils import conditions
    from lab_utils.measure import results_table
    conditions.taken(reset=True)
    results_table.forget_recorded()
