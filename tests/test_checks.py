import statistics
import time

import torch
import torch.nn.functional as F

from lab_utils import checks, measure, train


def test_train_step_check_passes_the_reference():
    result = checks.check_train_step(train.train_step)
    assert result and repr(result).startswith("PASS") and "hint" not in repr(result)


def test_train_step_check_catches_missing_zero_grad():
    def no_zero_grad(model, x, y, optimizer):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()
    result = checks.check_train_step(no_zero_grad)
    assert not result and repr(result).startswith("FAIL") and "zero_grad" in result.hint


def test_train_step_check_catches_missing_step():
    def no_step(model, x, y, optimizer):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss
    result = checks.check_train_step(no_step)
    assert not result and "optimizer.step()" in result.hint


def test_throughput_check():
    assert checks.check_throughput(measure.throughput_from_step_times)
    result = checks.check_throughput(lambda b, times, w: b / (sum(times) / len(times)))
    assert not result and "drop step_times[:warmup]" in result.hint
    assert not checks.check_throughput(lambda b, times, w: None)


def test_profiler_check():
    from torch.profiler import profile

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10))
    with profile() as prof:
        model(torch.rand(32, 1, 16, 16)).sum().backward()
    events = prof.key_averages()
    best = max(events, key=lambda e: e.self_cpu_time_total).key
    assert checks.check_top_self_cpu_op(best, prof)
    result = checks.check_top_self_cpu_op("not-an-op", prof)
    assert not result and "self_cpu_time_total" in result.hint


def test_median_timer_check():
    def right(fn, warmup, repeats):
        return measure.time_it(fn, warmup=warmup, repeats=repeats).median
    def mean_with_warmup(fn, warmup, repeats):
        times = []
        for _ in range(warmup + repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.mean(times)
    assert checks.check_median_timer(right)
    result = checks.check_median_timer(mean_with_warmup)
    assert not result and "statistics.median" in result.hint
