"""Lab 01: the training step, throughput from step times, reading a profile, the efficiency of threads."""
from __future__ import annotations

import statistics

from ...exercises.core import Exercise, FROM_LESSON, Named, max_abs_diff, register


def tiny_problem(seed: int):
    """A small seeded CNN and a batch shaped like the digits (private generators: thread-safe)."""
    import torch

    from ... import spec

    gen = torch.Generator().manual_seed(seed)
    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=seed)
    x = torch.rand(16, 1, 8, 8, generator=gen)
    y = torch.randint(0, 10, (16,), generator=gen)
    return model, x, y


# ---- train_step ------------------------------------------------------------------------------------------------

def _train_cases(rng):
    return {"seed": rng.randrange(10**6), "lr": rng.choice([0.05, 0.1, 0.2]), "momentum": rng.choice([0.0, 0.9])}


def _train_run(train_step, case, steps: int = 2):
    import torch

    from ... import tensors

    model, x, y = tiny_problem(case["seed"])
    optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"], momentum=case["momentum"])
    before = tensors.flat_weights(model).tolist()
    losses, weights = [], []
    attached = False
    backward = [0]  # backward passes that reached the weights (a hook on the first parameter counts them)
    first = next(model.parameters())
    first.register_post_accumulate_grad_hook(lambda p: backward.__setitem__(0, backward[0] + 1))
    for _ in range(steps):
        loss = train_step(model, x, y, optimizer)
        attached = attached or bool(getattr(loss, "requires_grad", False))
        losses.append(None if loss is None else float(loss.detach() if hasattr(loss, "detach") else loss))
        weights.append(tensors.flat_weights(model).tolist())
    grads_left = any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    return {"before": before, "weights": weights, "losses": losses, "attached": attached,
            "backward": backward[0], "grads_left": grads_left}


def _train_expected(case):
    from ...train import train_step

    return _train_run(train_step, case)


def _step_with(loss_of):
    """A right training step with another loss (a classic mistake, so that the judge can name it)."""
    def step(model, x, y, optimizer):
        optimizer.zero_grad()
        loss = loss_of(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step


def _nll_on_logits(logits, y):
    import torch.nn.functional as F

    return F.nll_loss(logits, y)


def _softmax_first(logits, y):
    import torch.nn.functional as F

    return F.cross_entropy(logits.softmax(dim=1), y)


def _summed(logits, y):
    import torch.nn.functional as F

    return F.cross_entropy(logits, y, reduction="sum")


_WRONG_LOSSES = {
    "F.nll_loss on the logits: nll_loss expects log-probabilities (it only picks -input[y]); cross_entropy takes "
    "the logits and applies log_softmax itself": _step_with(_nll_on_logits),
    "a softmax before F.cross_entropy: cross_entropy applies log_softmax itself, so the model's logits go in as they "
    "are (a second softmax flattens the gradients)": _step_with(_softmax_first),
    "a summed loss (reduction='sum'): its gradients are batch-size times the mean's, a step that many times larger; "
    "cross_entropy's default takes the mean": _step_with(_summed)}


def _train_judge(got, expected, case):
    if max_abs_diff(got["weights"][0], got["before"]) == 0 and got.get("backward") and not got.get("grads_left"):
        return 0.0, ("the weights did not change, and the gradients your backward pass computed were gone after your "
                     "step: you zeroed them between loss.backward() and optimizer.step(), so the step had none to "
                     "use; zero them anywhere before loss.backward() (as in: forward, loss, zero, backward, step)")
    if max_abs_diff(got["weights"][0], got["before"]) == 0:
        return 0.0, ("the weights did not change: call optimizer.step() after loss.backward() (a step before it, or "
                     "none, has no gradients to apply)")
    if max_abs_diff(got["weights"][0], expected["weights"][0]) > 1e-5:
        for what, wrong_step in _WRONG_LOSSES.items():
            if max_abs_diff(got["weights"][0], _train_run(wrong_step, case, steps=1)["weights"][0]) <= 1e-5:
                return 0.0, f"after one step your weights equal those of {what}"
        return 0.0, ("after one step the weights differ from the reference: loss = F.cross_entropy(model(x), y), "
                     "then loss.backward(), then optimizer.step()")
    if max_abs_diff(got["weights"][1], expected["weights"][1]) > 1e-5:
        return 0.0, ("the first step is right, the second is not: gradients add up across backward() calls, so "
                     "zero them (optimizer.zero_grad()) before each backward")
    if any(g is None for g in got["losses"]) or max_abs_diff(got["losses"], expected["losses"]) > 1e-5:
        return 0.5, "the weights are right, but return the batch loss (a number) computed before the update"
    if got.get("attached"):
        return 0.5, ("the weights are right, but the returned loss is still attached to the graph: return loss.detach(), "
                     "or every step's graph stays in memory for as long as you keep the loss")
    return 1.0, "weights and loss equal the reference after two steps"


_TRAIN_GENERIC = "after one step the weights differ from the reference: "


def _train_named(got, expected, case):
    """_train_judge's verdict; a message that names the mistake is Named, so no hint repeats the whole recipe."""
    fraction, message = _train_judge(got, expected, case)
    return fraction, message if fraction >= 1.0 or message.startswith(_TRAIN_GENERIC) else Named(message)


TRAIN_STEP = Exercise("01", "train_step", _train_cases, _train_run, _train_expected, _train_named,
                      "one step has five parts (forward, loss, backward, optimizer step, clearing the old gradients): "
                      "which must come before backward, and what does the optimizer step read? Return the loss",
                      setup="import torch\nimport torch.nn.functional as F")


# ---- throughput ---------------------------------------------------------------------------------------------------

def _steady_steps(rng, n):
    """n distinct steady step times (s): ties would let two mistakes give the same rate."""
    times: set[float] = set()
    while len(times) < n:
        times.add(round(rng.uniform(0.04, 0.06), 4))
    return list(times)


def _throughput_cases(rng):
    """An odd number of steady steps, then two even ones: one whose first steady step is its slowest, one whose first
    is its fastest, so that dropping one step too many, the lower middle step and the upper middle step never give
    the same rate in every case."""
    cases = []
    for shape in ("odd", "first slowest", "first fastest"):
        warmup = rng.randint(1, 3)
        n = rng.choice([5, 7, 9]) if shape == "odd" else rng.choice([6, 8])
        steady = _steady_steps(rng, n)
        steady[rng.randrange(n)] = round(rng.uniform(0.2, 0.5), 4)  # one slow step
        rng.shuffle(steady)
        if shape != "odd":
            first = max(steady) if shape == "first slowest" else min(steady)
            steady.remove(first)
            steady.insert(0, first)
        times = [round(rng.uniform(0.3, 1.0), 4) for _ in range(warmup)] + steady
        cases.append({"batch_size": rng.choice([16, 32, 64, 128, 256]), "step_times": times, "warmup": warmup})
    return cases


def _throughput_run(throughput, cases):
    return [throughput(c["batch_size"], list(c["step_times"]), c["warmup"]) for c in cases]


def _throughput_mistakes(case) -> dict:
    """What each mistake learners make returns for one case, by the words that name it."""
    b, t, w = case["batch_size"], case["step_times"], case["warmup"]
    return {"the batch over the mean step time (the same as all samples over all the time: batch x steps over their "
            "sum): one slow step pulls the mean time up, and so the rate down; the median step ignores it":
                b / statistics.mean(t[w:]),
            "the median of every step, warm-up included: drop step_times[:warmup]": b / statistics.median(t),
            "the mean of all steps, warm-up included": b / statistics.mean(t),
            "seconds per sample: the rate is samples per second, batch / time": statistics.median(t[w:]) / b,
            "steps per second (one over the median step time): multiply by the batch size":
                1 / statistics.median(t[w:]),
            "the upper of the two middle steps (sorted(...)[n // 2]): of an even number of steps the median is the "
            "mean of the two middle ones, statistics.median": b / statistics.median_high(t[w:]),
            "statistics.median_low: of an even number of steps the median is the mean of the two middle ones, "
            "statistics.median": b / statistics.median_low(t[w:]),
            "one step too few dropped (step_times[warmup - 1:] keeps the last warm-up step): the warm-up is exactly "
            "the first `warmup` steps, step_times[warmup:]": b / statistics.median(t[w - 1:]),
            "one step too many dropped: the warm-up is exactly the first `warmup` steps, step_times[warmup:]":
                b / statistics.median(t[w + 1:]),
            "the last `warmup` steps dropped; the warm-up steps are the first ones: step_times[warmup:]":
                b / statistics.median(t[:-w]),
            "the median of the per-step rates; the rate is the batch over the median step time (the two differ "
            "for an even number of steps)": statistics.median(b / x for x in t[w:]),
            "the median step time in seconds, not a rate: divide the batch size by it": statistics.median(t[w:]),
            "the batch size times the median step time: divide the batch size by it instead":
                b * statistics.median(t[w:])}


def _throughput_judge(got, expected, cases):
    if any(g is None or not isinstance(g, (int, float)) for g in got):
        return 0.0, "return samples per second, a number"
    if all(abs(g - e) <= 1e-6 * e for g, e in zip(got, expected)):
        return 1.0, "warm-up dropped, median step time used"
    mistakes = [_throughput_mistakes(c) for c in cases]
    same = lambda g, value: abs(g - value) <= 1e-6 * abs(value)  # noqa: E731
    for what in mistakes[0]:  # the mistake that gives every case's answer: one case alone can fit two of them
        if all(same(g, m[what]) for g, m in zip(got, mistakes)):
            return 0.0, Named(f"that is {what}")
    for g, e, c, m in zip(got, expected, cases, mistakes):  # else the first wrong case's
        if abs(g - e) <= 1e-6 * e:
            continue
        for what, value in m.items():
            if same(g, value):
                return 0.0, Named(f"that is {what}")
        return 0.0, f"expected {e:.1f} samples/s for batch {c['batch_size']}, got {g:.1f}"
    return 1.0, "warm-up dropped, median step time used"


THROUGHPUT = Exercise("01", "throughput", _throughput_cases, _throughput_run, FROM_LESSON, _throughput_judge,
                      "the first steps pay one-off costs (rule 1 of Lab 00) and one slow step must not move the figure "
                      "(rule 3); samples per second is samples over the seconds of one step",
                      setup="import statistics")


# ---- the top operator of a profile --------------------------------------------------------------------------------

OPERATORS = ["aten::convolution", "aten::mkldnn_convolution", "aten::addmm", "aten::max_pool2d_with_indices",
             "aten::relu", "aten::threshold_backward", "aten::convolution_backward", "aten::mm", "aten::add_",
             "aten::log_softmax", "aten::nll_loss", "aten::copy_", "aten::t", "aten::empty", "AddmmBackward0",
             "ConvolutionBackward0"]


def _profile_cases(rng):
    """Three made-up profiles (so the answer is known): a different top operator by self time in each, never the
    top by total time, nor by count, nor the first row, nor the largest single call; one top is not an aten:: op."""
    aten = [o for o in OPERATORS if o.startswith("aten::")]
    tops = rng.sample(aten, 2) + [rng.choice([o for o in OPERATORS if o not in aten])]
    rng.shuffle(tops)
    cases = []
    for top in tops:
        names = [top] + rng.sample([o for o in OPERATORS if o != top], rng.randint(7, 9))
        rows = {n: round(rng.uniform(10, 500), 3) for n in names}
        rows[top] = round(max(rows.values()) * rng.uniform(1.2, 2.0), 3)
        totals = {n: round(v + rng.uniform(0, 100), 3) for n, v in rows.items()}
        lowest = sorted(rows, key=lambda n: rows[n])[:2]  # the smallest self time, before or after `single` below is raised
        parent = rng.choice([n for n in names[1:] if n not in lowest])  # calls others: the largest total, not self
        totals[parent] = round(sum(rows.values()) + rng.uniform(1, 50), 3)
        counts = {n: rng.randint(1, 30) for n in names}
        counts[top] = rng.randint(4, 30)
        busiest = rng.choice([n for n in names[1:] if n != parent and n not in lowest])  # called most often
        counts[busiest] = max(counts.values()) + rng.randint(20, 200)
        single = rng.choice([n for n in names[1:] if n not in (parent, busiest)])  # the largest single call
        rows[single] = round(rows[top] * rng.uniform(0.5, 0.8), 3)
        counts[single], totals[single] = 1, round(rows[single] + rng.uniform(0, 10), 3)
        table = [[n, rows[n], totals[n], counts[n]] for n in names]
        rng.shuffle(table)
        # the first row is neither the answer nor what another mistake picks, so each mistake has its own hint
        picked = {top, parent, busiest, single} | {way(table) for what, way in _PROFILE_MISTAKES.items()
                                                    if "first entry" not in what}  # at most 7 of 8-10 names
        first = next(i for i, row in enumerate(table) if row[0] not in picked)
        table.insert(0, table.pop(first))
        cases.append(table)
    return cases


class MadeUpProfile:
    """Stands in for a torch.profiler profile: key_averages() gives torch's own event averages, with given times;
    events() gives one event per call (each call an equal share of its operator's self time)."""

    def __init__(self, table):
        self.table = table

    def key_averages(self, *args, **kwargs):
        from torch.autograd.profiler_util import EventList, FunctionEventAvg

        events = EventList()
        for key, self_us, total_us, count in self.table:
            event = FunctionEventAvg()
            event.key, event.count = key, count
            event.self_cpu_time_total, event.cpu_time_total = self_us, total_us
            events.append(event)
        return events

    def events(self):
        from torch.autograd.profiler_util import EventList, FunctionEvent

        events, start = EventList(), 0.0
        for key, self_us, _, count in self.table:
            for _ in range(count):
                events.append(FunctionEvent(id=len(events), name=key, thread=0, start_us=start,
                                            end_us=start + self_us / count, stack=[], input_shapes=[]))
                start += self_us / count
        events._build_tree()  # as the profiler does: key_averages() works on it too
        return events


def _profile_run(top_self_cpu_op, cases):
    return [top_self_cpu_op(MadeUpProfile(table)) for table in cases]


def _profile_expected(cases):
    return [max(table, key=lambda row: row[1])[0] for table in cases]


_PROFILE_MISTAKES = {
    "that is the largest *total* CPU time, which includes the operators it calls; self CPU time counts only the "
    "operator's own work": lambda table: max(table, key=lambda row: row[2])[0],
    "that is the operator called most often (the largest count); rank by self_cpu_time_total, the time spent in the "
    "operator's own work": lambda table: max(table, key=lambda row: row[3])[0],
    "that is the first entry of key_averages(), which is not sorted by time: take the max by self_cpu_time_total":
        lambda table: table[0][0],
    "that is the smallest self CPU time: take the largest (max, not min)":
        lambda table: min(table, key=lambda row: row[1])[0],
    "that is the top among the aten:: operators only; the top operator can have any name (an autograd node such as "
    "AddmmBackward0 too): rank every entry": lambda table: max((r for r in table if r[0].startswith("aten::")),
                                                              key=lambda row: row[1])[0],
    "that ranks operators by their time per call (self_cpu_time_total / count, or the largest single call of "
    "prof.events()): an operator called many times can add up to more; rank by the operator's whole self time, "
    "self_cpu_time_total of key_averages()": lambda table: max(table, key=lambda row: row[1] / row[3])[0]}


def _profile_judge(got, expected, cases):
    if got == expected:
        return 1.0, "the operator with the largest self CPU time, in every profile"
    wrong_type = [g for g in got if not isinstance(g, str)]
    if wrong_type:
        return 0.0, f"return the operator's name (its .key, a string), not {type(wrong_type[0]).__name__}"
    for what, way in _PROFILE_MISTAKES.items():  # a mistake is named only where it explains every profile
        if got == [way(table) for table in cases]:
            return 0.0, what
    g, e = next((g, e) for g, e in zip(got, expected) if g != e)
    return 0.0, (f"{g!r} is not the operator with the largest self CPU time in that profile ({e!r} is): take the "
                 "entry of key_averages() with the largest self_cpu_time_total")


TOP_OP = Exercise("01", "top_self_cpu_op", _profile_cases, _profile_run, _profile_expected, _profile_judge,
                  "self CPU time counts an operator's own work, not that of the operators it calls; "
                  "prof.key_averages() has one entry per operator, with that figure; return a name (a string)")



# ---- efficiency of threads ----------------------------------------------------------------------------------------

def _efficiency_cases(rng):
    """Four made-up pairs of median step times (s) on 2, 3 and 4 threads, efficiencies drawn apart (so no mistake
    gives every right answer): one pair slower with threads than without (efficiency below 1/N), one a little above
    100 % (noise: returned as measured, never clamped)."""
    cases = []
    for threads, low, high in ((2, 0.55, 0.95), (3, 0.40, 0.90), (4, 0.15, 0.24), (2, 1.03, 1.08)):
        one = round(rng.uniform(0.030, 0.050), 5)
        cases.append({"one_thread_s": one, "many_threads_s": round(one / (threads * rng.uniform(low, high)), 5),
                      "threads": threads})
    return cases


def _efficiency_run(efficiency, cases):
    return [efficiency(c["one_thread_s"], c["many_threads_s"], c["threads"]) for c in cases]


def _efficiency_right(one: float, many: float, threads: int) -> float:
    return one / many / threads


def _efficiency_expected(cases):
    return [_efficiency_right(c["one_thread_s"], c["many_threads_s"], c["threads"]) for c in cases]


_EFFICIENCY_MISTAKES = {
    "the speedup, not divided by the threads: efficiency is speedup / threads":
        lambda one, many, n: one / many,
    "the step times' ratio upside down (many / one): the speedup is the one-thread time over the many-thread time "
    "(the faster step is the shorter one)": lambda one, many, n: many / one / n,
    "the time ratio many / one, not divided either: the speedup is one_thread_s / many_threads_s, then divide by the "
    "threads": lambda one, many, n: many / one,
    "a percentage: return the fraction (0.88, not 88)": lambda one, many, n: 100 * one / many / n,
    "the speedup over threads - 1: every thread, the first too, shares the work, so divide by threads":
        lambda one, many, n: one / many / (n - 1),
    "the speedup minus 1 (the gain) over the threads: the speedup itself is one_thread_s / many_threads_s":
        lambda one, many, n: (one / many - 1) / n,
    "clamped at 1.0: return the efficiency as measured; one above 100 % says the baseline was slowed or noise moved "
    "the ratio, and the course's marks read it": lambda one, many, n: min(one / many / n, 1.0)}


def _efficiency_judge(got, expected, cases):
    if any(g is None or isinstance(g, bool) or not isinstance(g, (int, float)) for g in got):
        return 0.0, "return the efficiency, a number (a fraction: 1.0 is every thread fully used)"
    close = lambda g, value: abs(g - value) <= 1e-6 * abs(value) + 1e-12  # noqa: E731
    if all(close(g, e) for g, e in zip(got, expected)):
        return 1.0, "speedup (one-thread step / N-thread step) over the N threads"
    for what, way in _EFFICIENCY_MISTAKES.items():  # named where it explains every case
        if all(close(g, way(c["one_thread_s"], c["many_threads_s"], c["threads"])) for g, c in zip(got, cases)):
            return 0.0, Named(f"that is {what}")
    rounded = _rounded_to(got, expected)
    if rounded is not None:  # the right figure, rounded: no hint about the ratio, which is the right way up
        return 0.0, Named(f"that is the right efficiency rounded to {rounded} decimal place{'s' * (rounded != 1)} "
                          f"(expected {expected[0]:.6f}, got {got[0]}): return it unrounded; round only where you "
                          "print it")
    g, e, c = next((g, e, c) for g, e, c in zip(got, expected, cases) if not close(g, e))
    return 0.0, (f"for steps of {c['one_thread_s'] * 1e3:.2f} ms on 1 thread and {c['many_threads_s'] * 1e3:.2f} ms on "
                 f"{c['threads']}, expected {e:.3f}, got {g:.3f}")


def _rounded_to(got, expected) -> int | None:
    """The decimal places (0 to 6) that turn every expected efficiency into the one returned, if any."""
    for places in range(7):
        if all(abs(g - round(e, places)) <= 1e-9 for g, e in zip(got, expected)):
            return places
    return None


EFFICIENCY = Exercise("01", "efficiency", _efficiency_cases, _efficiency_run, _efficiency_expected, _efficiency_judge,
                      "efficiency is the speedup shared out over the threads; the speedup is a ratio of step times, "
                      "so the one-thread time goes on top")

register(TRAIN_STEP, THROUGHPUT, TOP_OP, EFFICIENCY)
