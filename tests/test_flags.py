"""Each `[!]` detector: a planted impossible figure is flagged, a sound one is not."""
import math

from lab_utils import flags, measure, report


def test_speedup_above_device_count():
    assert flags.above_device_count(2.05, 2)  # 102 %: impossible for the same work
    assert not flags.above_device_count(1.8, 2)
    assert not flags.above_device_count(None, 2)
    assert measure.plausibility(speedup=2.05, devices=2)


def test_a_slow_speedup_or_noise_is_not_a_flag():
    assert measure.plausibility(speedup=0.4, devices=2, spread=0.9) == []


def test_degenerate_fit():
    assert flags.degenerate_fit(-1e-12) and flags.degenerate_fit(0.0) and flags.degenerate_fit(float("nan"))
    assert not flags.degenerate_fit(1e-10)


def test_allreduce_fit_refuses_a_negative_slope():
    sizes = [4096, 65536, 1 << 20]
    fit = report.fit_allreduce(sizes, [6.2e-3, 5e-3, 3.7e-3], 2)  # larger messages faster: no bandwidth here
    assert fit.flags and math.isinf(fit.bus_bandwidth) and "not measurable" in fit.describe()
    truth = report.AllReduceFit(50e-6, 2e9)
    sound = report.fit_allreduce(sizes, [truth.seconds(n, 2) for n in sizes], 2)
    assert not sound.flags and "GB/s" in sound.describe()


def test_more_work_less_time():
    assert flags.more_work_less_time(1, 2e-3, 2, 1e-3)
    assert not flags.more_work_less_time(1, 1e-3, 2, 1.5e-3)
    assert not flags.more_work_less_time(1, 1e-3, 2, 0.99e-3, tolerance=0.05)  # within the tolerance
    assert report.batch_time_flags(1, 2e-3, 2, 1e-3)


def test_saturated():
    assert flags.saturated(200, 120)
    assert not flags.saturated(200, 198)


def test_reverses_theory():
    reversed_ = measure.decide([0.5] * 5, claim="c", expected="A faster")
    holds = measure.decide([2.0] * 5, claim="c", expected="A faster")
    assert flags.reverses_theory(reversed_) and not flags.reverses_theory(holds)


def test_noise_is_one_line_per_table():
    line = flags.noise_line([0.1, 0.3, 0.5, None, 0.2])
    assert line.startswith("noise: 2 of 4 medians spread more than 25 %") and "read the medians only" in line
    assert flags.noise_line([0.1, 0.2]) == ""
    assert flags.count("a\n  [!] x\nb [!] y\n") == 2
