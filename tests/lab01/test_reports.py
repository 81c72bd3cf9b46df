"""Lab 01's reports (lab_utils/labs/lab01/reports.py) on made-up timings: quiet, noisy, busy, one core only."""
import torch

from lab_utils import conditions, measure, spec
from lab_utils.labs.lab01 import reports, steps
from lab_utils.measure.timing import Timing

THREADS = {"1 process x 1 thread": 1, "1 process x 2 threads": 2}


def timings(one_ms, two_ms, spread=0.05):
    def t(ms):
        return Timing(times=[ms / 1e3 * (1 - spread / 2), ms / 1e3, ms / 1e3 * (1 + spread / 2)], warmup=3)
    return {"1 process x 1 thread": t(one_ms), "1 process x 2 threads": t(two_ms)}


def test_a_quiet_run_names_each_row_and_reads_the_ratio(monkeypatch):
    """Learner s11r2a, lab 01 finding 1: the rows say which reference they are (one-rank reference, row to beat)."""
    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    report = reports.reference_report(THREADS, timings(42.9, 24.3), "cpu", 2, 2, 8)
    assert report.lines[0].startswith("1 process x 1 thread") and report.lines[0].endswith("one-rank reference")
    assert report.lines[1].endswith("row to beat") and "1.77x" in report.lines[1]
    assert report.lines[-1].startswith("1 process x 2 threads vs 1 thread: 1.77x, within the predicted at most 2x")
    assert report.threaded == "1 process x 2 threads" and report.row_flags("1 process x 1 thread") == []
    assert all(len(line) <= 100 for text in report.lines for line in text.splitlines())


def test_a_noisy_row_gets_its_noise_line():
    report = reports.reference_report(THREADS, timings(42.9, 24.3, spread=0.6), "cpu", 2, 2, 8)
    noise = [line for line in report.lines if line.startswith("noise:")]
    assert len(noise) == 1 and noise[0].startswith("noise: 2 of 2 rows spread more than 25% over their 8 steps"), noise


def test_a_busy_machine_refuses_the_ratio_and_prints_n_m(monkeypatch):
    busy = conditions.Load(0.3, 2, 1.0, 1.8, 0.0)  # others took 1.8 of 2 cores
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy)
    report = reports.reference_report(THREADS, timings(42.9, 16.0), "cpu", 2, 2, 8)
    assert measure.N_M in report.lines[1] and "2.68x" not in "\n".join(report.lines)
    assert measure.NOT_MEASURABLE in report.lines[-1]
    assert report.flags["1 process x 2 threads"] == []  # no [!] reads a refused ratio
    assert report.row_flags("1 process x 2 threads") == measure.refusal(report.threads_line)


def test_one_free_core_says_why_the_row_to_beat_is_missing():
    one = {"1 process x 1 thread": 1}
    report = reports.reference_report(one, {"1 process x 1 thread": timings(42.9, 24.3)["1 process x 1 thread"]},
                                      "cpu", 2, 1, 8)
    assert report.threaded is None and "skipped, the thread count fitted" in report.lines[-1].replace("\n    ", " ")


def test_the_profile_lines_read_the_backward_against_the_layers_arithmetic():
    model = spec.build_torch(spec.preset("cnn2d_2layer_fullconnected_2layer", num_classes=10), (1, 8, 8), seed=0)
    macs = reports.conv_macs(model, torch.zeros(4, 1, 8, 8))
    assert len(macs) == 2 and round(steps.backward_arithmetic(macs), 2) == 1.89  # the prose's figure

    class Event:
        def __init__(self, key, total_us, self_us=1.0):
            self.key, self.cpu_time_total, self.self_cpu_time_total, self.count = key, total_us, self_us, 20

    class Profile:
        def key_averages(self):
            return [Event("aten::conv2d", 1620.0), Event("aten::convolution_backward", 2560.0)]

    lines = reports.profile_lines(Profile(), macs)
    assert lines[0].startswith("operator (top 12 by total CPU time)") and "backward/forward 1.58x" in lines[-1]
    assert "predicted 1x to 1.89x: within the range" in lines[-1].replace("\n    ", " ")
    assert reports.profile_lines(Profile(), [])[-1].startswith("convolutions: this profile has no")


def test_the_loader_row_is_whole_and_a_longer_name_ends_in_an_ellipsis():
    """Learner s12r3a, lab 01 finding 8: '..._SingleProcessDataLoaderIter.__next_' read as a typo of __next__; learner
    s12r4a, finding 10: '...Iter.__ne...' still looked like a glitch: the column now fits the loader's whole name."""
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"

    class Event:
        def __init__(self, key):
            self.key, self.cpu_time_total, self.self_cpu_time_total, self.count = key, 2921.0, 1517.0, 10

    class Profile:
        def __init__(self, key):
            self.key = key

        def key_averages(self):
            return [Event(self.key)]

    row = reports.profile_lines(Profile(loader), [])[1]
    assert row.startswith(loader + " ") and len(row) <= 100, row
    longer = reports.profile_lines(Profile(loader + "_and_more_text"), [])[1]
    assert longer[:60].rstrip().endswith("...") and len(longer) == len(row), longer


def test_the_summary_names_each_reference_row_by_role_and_repeats_the_loader_line(monkeypatch):
    """Issue 51 structure: the summary's plumbing lives here; the DataLoader verdict or refusal is said '(from above)'."""
    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    t = timings(42.9, 24.3)
    report = reports.reference_report(THREADS, t, "cpu", 2, 2, 8)
    rates = {name: 256 / timing.median for name, timing in t.items()}
    verdict = "fastest here: num_workers=0, as predicted for small in-memory data"
    said = reports.summary_rows(rates, report, t, "cpu", 8, ["row", verdict])
    assert said[0].startswith("one-rank reference, CNN-3conv/synthetic28 step (batch 256), 1 process x 1 thread:")
    assert said[1].startswith("row to beat, CNN-3conv/synthetic28 step (batch 256), 1 process x 2 threads:")
    assert said[-1].replace("\n    ", " ") == f"DataLoader (3 interleaved epochs each), {verdict} (from above)"
    refused = reports.summary_rows(rates, report, t, "cpu", 8, ["row", f"{measure.N_M}: {measure.NOT_MEASURABLE}: x"])
    assert refused[-1] == f"DataLoader settings: {measure.NOT_MEASURABLE} (from above)"
    assert all(len(line) <= 100 for text in said for line in text.splitlines())


def test_the_summary_keeps_a_rows_flag():
    t = timings(42.9, 24.3)
    report = reports.reference_report(THREADS, t, "cpu", 2, 2, 8)
    flag = measure.plausibility(speedup=2.5, devices=2, threads=2)
    report.flags["1 process x 2 threads"] = flag
    said = reports.summary_rows({n: 1.0 for n in t}, report, t, "cpu", 8, ["fastest here: x"])
    assert "[!]" in said[1] and "[!]" not in said[0], said
