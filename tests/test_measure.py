import csv
import time

import pytest

from lab_utils import hardware, measure

HW = hardware.HardwareReport("h", 2, (), "3.11", "2.13.0", "2.21.0")


def counting(durations):
    calls = []
    def fn():
        calls.append(1)
        time.sleep(durations[min(len(calls) - 1, len(durations) - 1)])
    return fn, calls


def test_time_it_excludes_warmup_and_reports_median():
    fn, calls = counting([0.05, 0.05, 0.002, 0.003, 0.002])
    t = measure.time_it(fn, warmup=2, repeats=3)
    assert len(calls) == 5 and len(t.times) == 3 and t.warmup == 2
    assert t.median < 0.02  # the slow warm-up calls are not in it
    assert "median" in str(t) and "2 warm-up" in str(t)


def test_time_it_rejects_bad_counts():
    with pytest.raises(ValueError, match="repeats >= 1"):
        measure.time_it(lambda: None, repeats=0)


def test_time_interleaved_alternates_order_and_runs_setup():
    log = []
    timings = measure.time_interleaved({"a": lambda: log.append("a"), "b": lambda: log.append("b")},
                                       warmup=1, repeats=2, before={"b": lambda: log.append("setup-b")})
    assert log == ["a", "setup-b", "b", "setup-b", "b", "a", "a", "setup-b", "b"]
    assert set(timings) == {"a", "b"} and all(len(t.times) == 2 for t in timings.values())


def test_throughput_helpers():
    assert measure.samples_per_second(100, 0.5) == 200
    with pytest.raises(ValueError, match="duration must be positive"):
        measure.samples_per_second(100, 0)
    assert measure.throughput_from_step_times(10, [9.0, 1.0, 2.0, 100.0], warmup=1) == 5.0
    with pytest.raises(ValueError, match="all 2 step times are warm-up"):
        measure.throughput_from_step_times(10, [1.0, 2.0], warmup=2)


def test_synchronize_on_cpu_is_a_no_op():
    measure.synchronize("cpu")
    measure.synchronize(None)


def row(**overrides):
    args = dict(lab="01", framework="torch", strategy="single-device", world_size=1, device="cpu", batch_size=64,
                samples_per_s=1234.5678, wall_s=1.5, accuracy=0.95, epochs=3, threads=1, hw=HW)
    args.update(overrides)
    return measure.result_row(**args)


def test_result_row_carries_hardware_and_all_columns():
    r = row()
    assert tuple(r) == measure.RESULT_COLUMNS
    assert r["host"] == "h" and r["cpu_count"] == 2 and r["tf_version"] == "2.21.0"


def test_write_and_read_results(isolated_results):
    path = measure.write_result(row())
    measure.write_result(row(strategy="ddp", world_size=2, accuracy=None, epochs=None))
    assert path == isolated_results / "lab01.csv"
    assert path.read_text().count("timestamp") == 1  # one header
    rows = measure.read_results(isolated_results)
    assert [r["strategy"] for r in rows] == ["single-device", "ddp"]
    assert rows[0]["samples_per_s"] == pytest.approx(1234.568) and rows[1]["accuracy"] is None


def test_write_result_rejects_incomplete_rows(tmp_path):
    with pytest.raises(ValueError, match="lacks column"):
        measure.write_result({"lab": "01"}, tmp_path)


def test_read_results_explains_malformed_files(tmp_path):
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"other.csv, line 1: not a results CSV"):
        measure.read_results(tmp_path / "other.csv")
    good = measure.write_result(row(), tmp_path / "r")
    lines = good.read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([lines[0], lines[1].replace("1234.568", "fast")]) + "\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 2: column 'samples_per_s' must be a number, got 'fast'"):
        measure.read_results(bad)
    bad.write_text("\n".join([lines[0], lines[1].rsplit(",", 3)[0]]) + "\n")
    with pytest.raises(ValueError, match="line 2: ragged row"):
        measure.read_results(bad)


def test_results_dir_resolution(monkeypatch, tmp_path):
    assert measure.results_dir(tmp_path) == tmp_path
    monkeypatch.setenv("LAB_RESULTS_DIR", str(tmp_path / "x"))
    assert measure.results_dir() == tmp_path / "x"
    monkeypatch.delenv("LAB_RESULTS_DIR")
    assert measure.results_dir().name == "results"
