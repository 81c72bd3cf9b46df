"""Lab 10: speedup and efficiency, Amdahl's serial fraction, a prediction."""
from __future__ import annotations

from ...exercises.core import Exercise, FROM_LESSON, register


# ---- speedup and efficiency ----------------------------------------------------------------------------------------

def _speedup_cases(rng):
    fixed = [  # each tells one classic mistake from the right answer
        [{"samples_per_s": 3000.0, "world_size": 4, "threads": 2}, {"samples_per_s": 1000.0, "world_size": 1, "threads": 1}],
        [{"samples_per_s": 1500.0, "world_size": 2, "threads": 2}, {"samples_per_s": 1000.0, "world_size": 1, "threads": 2}],
        [{"samples_per_s": 1800.0, "world_size": 2, "threads": None}, {"samples_per_s": 1000.0, "world_size": 1, "threads": None}],
        # a row whose batch is twice its baseline's (wall_s is one batch's time): a speedup from wall_s is wrong here
        [{"samples_per_s": 2000.0, "world_size": 2, "threads": 1, "batch_size": 512},
         {"samples_per_s": 1000.0, "world_size": 1, "threads": 1, "batch_size": 256}],
    ]
    drawn = []
    for _ in range(4):
        base = {"samples_per_s": round(rng.uniform(100, 1000), 2), "world_size": 1, "threads": rng.choice([1, 2, None])}
        row = {"samples_per_s": round(rng.uniform(100, 4000), 2), "world_size": rng.choice([2, 4, 8]),
               "threads": rng.choice([1, 2, None])}
        drawn.append([row, base])
    return fixed + drawn


def _as_result(fields: dict):
    """A results row (measure.Result) from the plain-data fields of a case."""
    from ...measure import Result

    return Result(lab="10", framework="torch", strategy="ddp" if fields["world_size"] > 1 else "single",
                  world_size=fields["world_size"], device="cpu", batch_size=_batch(fields),
                  samples_per_s=fields["samples_per_s"], wall_s=_batch(fields) / fields["samples_per_s"],
                  workload="exercise", threads=fields["threads"])


def _batch(fields: dict) -> int:
    return fields.get("batch_size", 256)


NONE_THREADS = "TypeError on threads None"  # a case's answer where the function did arithmetic on threads = None


def _speedup_run(speedup_and_efficiency, cases):
    """Each case's (speedup, efficiency); NONE_THREADS where a row with threads None raised a TypeError (the judge
    names it: the bare error did not say which field was None)."""
    got: list[list[float] | str] = []
    for row, base in cases:
        try:
            got.append([float(v) for v in speedup_and_efficiency(_as_result(row), _as_result(base))])
        except TypeError as exc:
            if "NoneType" not in str(exc) or None not in (row["threads"], base["threads"]):
                raise
            got.append(NONE_THREADS)
    return got


def _hardware(fields: dict) -> float:
    return fields["world_size"] * (fields["threads"] or 1)


def _speedup_judge(got, expected, cases):
    def near(a, b):
        return abs(a - b) <= 1e-9 * max(1.0, abs(b))

    none = next(((row, base) for g, (row, base) in zip(got, cases) if g == NONE_THREADS), None)
    if none:
        return 0.0, (f"a row with threads None (rows on GPUs record none; here {none[0]} against {none[1]}) raised "
                     "a TypeError: None is no number; count it as one thread per rank, (row.threads or 1)")
    times = [(_batch(row) / row["samples_per_s"]) / (_batch(base) / base["samples_per_s"]) for row, base in cases]
    if all(len(g) == 2 and near(g[0], t) for g, t in zip(got, times)):  # row.wall_s / baseline.wall_s
        return 0.0, ("that is row.wall_s / baseline.wall_s, a ratio of times: more speed takes less time, so it runs "
                     "the other way round, and wall_s is one batch's time, different work where the batches differ; "
                     "speedup is the row's samples/s over the baseline's")
    for g, e, (row, base) in zip(got, expected, cases):
        if len(g) != 2:
            return 0.0, "return two numbers: (speedup, efficiency)"
        if not near(g[0], e[0]):
            if near(g[0], 100 * e[0]):
                return 0.0, "the speedup is a ratio (1.8 for 1.8x), not a percentage: leave out the factor 100"
            if near(g[0], 1 / e[0]):
                return 0.0, "speedup is the row's samples/s over the baseline's, not the other way round"
            wall_ratio = (_batch(base) / base["samples_per_s"]) / (_batch(row) / row["samples_per_s"])
            if near(g[0], wall_ratio):
                return 0.0, (f"that compares wall_s, the time of one batch: the row ran batches of {_batch(row)}, its "
                             f"baseline {_batch(base)}, so the times compare different work; speedup is the row's "
                             "samples/s over the baseline's")
            return 0.0, (f"the speedup of {row} over {base} should be {e[0]:.3f}, got {g[0]:.3f}: the row's "
                         "samples_per_s over the baseline's")
        if not near(g[1], e[1]):
            if near(g[1], 100 * e[1]):
                return 0.0, ("efficiency is a fraction (0.9 for 90 %, 1.0 for perfect scaling), not a percentage: "
                             "leave out the factor 100")
            if near(g[1], e[0] / row["world_size"]):
                return 0.0, "efficiency divides by the extra hardware: ranks x threads of the row, not ranks alone"
            if near(g[1], e[0] / _hardware(row)):
                return 0.0, ("efficiency divides by the row's hardware over the baseline's: the baseline used "
                             f"{_hardware(base):g} thread(s) too")
            return 0.0, ("efficiency = speedup / (ranks x threads of the row over those of the baseline), threads None "
                         "counting as 1: a fraction (0.9, not 90)")
    return 1.0, "speedup and efficiency right"


# no hint: every message above names its mistake or the rule (check() adds a hint only where an exercise has one)
SPEEDUP = Exercise("10", "speedup_and_efficiency", _speedup_cases, _speedup_run, FROM_LESSON, _speedup_judge, "")


# ---- Amdahl's serial fraction ---------------------------------------------------------------------------------------

def _serial_cases(rng):
    s = rng.uniform(0.02, 0.4)
    return [[n, 1 / (s + (1 - s) / n) * rng.uniform(0.95, 1.05)] for n in (2, 4, 8, 16)]


SLOWER_THAN_ONE = ((2, 0.7), (4, 0.8))  # rows slower than one device (a busy machine): least squares gives s > 1


def _serial_run(fit_serial_fraction, points):
    """The fit on the case's points, then on rows slower than one device, whose s lies above 1 (lab 10 reports it)."""
    return [float(fit_serial_fraction([tuple(p) for p in points])),
            float(fit_serial_fraction([tuple(p) for p in SLOWER_THAN_ONE]))]


def _serial_expected(points):
    from ... import report

    return [report.fit_serial_fraction(points), report.fit_serial_fraction(SLOWER_THAN_ONE)]


def _fit_on_speedups(points) -> float:
    """The s that least squares on S itself gives (the plausible mistake: curve-fitting the speedups, not 1/S)."""
    import numpy as np

    grid = np.linspace(-0.5, 1.5, 20001)
    errors = [sum((speedup - 1 / (s + (1 - s) / n)) ** 2 for n, speedup in points) for s in grid]
    return float(grid[int(np.argmin(errors))])


def _lines(points, ys):
    """Every coefficient a line y = a x (+ b) fitted to `ys` gives, for x = 1/N and x = 1 - 1/N: (name, value)."""
    import numpy as np

    found = []
    for x in ([1 / n for n, _ in points], [1 - 1 / n for n, _ in points]):
        xs = np.array(x)
        slope, intercept = np.polyfit(xs, ys, 1)
        found += [("slope", float(slope)), ("intercept", float(intercept)), ("slope", float(xs @ ys / (xs @ xs)))]
    return found


def _lines_on_speedups(points) -> list[float]:
    """The s a straight line through the speedups S (not 1/S) gives: the plausible 'least squares on S'."""
    import numpy as np

    speedups = np.array([s for _, s in points])
    return [v for ys in (speedups, speedups - np.array([1 / n for n, _ in points])) for _, v in _lines(points, ys)]


def _clipped_line(got: float, points) -> str:
    """The hint for a line with an intercept (np.polyfit(..., 1)) whose coefficient was clipped to 0..1, else ''."""
    import numpy as np

    inverse = np.array([1 / s for _, s in points])
    for name, value in _lines(points, inverse):
        if not 0.0 <= value <= 1.0 and abs(got - min(max(value, 0.0), 1.0)) <= 1e-3:
            return (f"that is a line's {name} ({value:.3f}) clipped to {got:g}: two things to undo. No intercept: Amdahl "
                    "ties the line's two terms (1/S = s + (1 - s)/N), so fit the one unknown s to 1/S - 1/N = "
                    "s (1 - 1/N) through the origin. And do not clip: a fit outside 0..1 is how rows say they "
                    "contradict Amdahl's law")
    if got in (0.0, 1.0):
        return (f"you returned exactly {got:g}: is it clipped to 0..1? Do not clip, and fit s alone (no intercept) to "
                "1/S - 1/N = s (1 - 1/N)")
    return ""


def _serial_judge(answers, references, points):
    import numpy as np

    (got, slower), (expected, beyond) = answers, references
    if abs(got - expected) <= 1e-3 and abs(slower - beyond) > 1e-3:
        if abs(slower - min(max(beyond, 0.0), 1.0)) <= 1e-3:
            return 0.0, (f"rows slower than one device {list(SLOWER_THAN_ONE)} fit s = {beyond:.3f}; you returned "
                         f"{slower:.3f}: do not clip s to 0..1, report the least-squares value as it is, so that a fit "
                         "outside 0..1 can say that its rows contradict Amdahl's law (lab 10 does, below)")
        return 0.0, f"rows slower than one device {list(SLOWER_THAN_ONE)} should fit s = {beyond:.4f}, got {slower:.4f}"
    if abs(got - expected) <= 1e-3:
        return 1.0, "serial fraction fitted to every point"
    if abs(got - (1 - expected)) <= 1e-3:
        return 0.0, "that is the parallel fraction; the serial fraction is 1 minus it"
    per_point = [(1 / s - 1 / n) / (1 - 1 / n) for n, s in points]
    if abs(got - per_point[0]) <= 1e-3:
        return 0.0, "that fits the first point only: least squares over all the points"
    if abs(got - float(np.mean(per_point))) <= 1e-3 or abs(got - float(np.median(per_point))) <= 1e-3:
        return 0.0, ("that averages each point's own s: least squares weighs a point by how much its N says about s "
                     "((1 - 1/N)^2), so fit one s to all the points at once")
    unscaled = [1 / s - 1 / n for n, s in points]  # each point's s (1 - 1/N), not its s
    if abs(got - float(np.mean(unscaled))) <= 1e-3 or abs(got - float(np.median(unscaled))) <= 1e-3:
        return 0.0, ("that averages 1/S - 1/N without the factor (1 - 1/N): each point's 1/S - 1/N is s (1 - 1/N), "
                     "not s; fit s to all the points by least squares on 1/S - 1/N = s (1 - 1/N)")
    clipped = _clipped_line(got, points)
    if clipped:
        return 0.0, clipped
    slope, intercept = np.polyfit([1 / n for n, _ in points], [1 / s for _, s in points], 1)
    if abs(got - intercept) <= 2e-3 or abs(got - (1 - slope)) <= 2e-3:
        return 0.0, ("that fits a line 1/S = a + b/N with a free slope; Amdahl ties them (a = s, b = 1 - s): one "
                     "unknown, so fit s alone to 1/S - 1/N = s (1 - 1/N)")
    if abs(got - (1 - float(np.mean([s / n for n, s in points])))) <= 1e-3:
        return 0.0, ("that is 1 minus the mean efficiency (S/N): efficiency falls with N even when s is fixed, so it "
                     "is not the serial share; Amdahl's s comes from 1/S = s + (1 - s)/N, fitted to all the points")
    if any(abs(got - fitted) <= 2e-3 for fitted in [_fit_on_speedups(points), *_lines_on_speedups(points)]):
        return 0.0, ("that fits the speedups S themselves: a least-squares fit too, but of another residual, so "
                     "another s. The task asks for least squares on 1/S, where Amdahl is linear in s: minimise "
                     "the sum of (1/S - 1/N - s (1 - 1/N))^2")
    x = np.array([1 - 1 / n for n, _ in points])
    if abs(got - float(x @ np.array([1 / s for _, s in points]) / (x @ x))) <= 1e-3:  # learner s12r3g, 2E
        return 0.0, ("that regresses 1/S itself on 1 - 1/N: 1/S = s (1 - 1/N) + 1/N, so subtract the 1/N term "
                     "first and fit s to 1/S - 1/N = s (1 - 1/N)")
    return 0.0, "Amdahl: 1/S = s + (1 - s)/N is linear in s; fit s to all points by least squares"


SERIAL = Exercise("10", "fit_serial_fraction", _serial_cases, _serial_run, _serial_expected, _serial_judge, "",
                  setup="import numpy as np")  # no hint: every message names the law it breaks


# ---- predicting a speedup --------------------------------------------------------------------------------------------

def _predict_cases(rng):
    return [[round(rng.uniform(0, 0.5), 3), rng.choice([2, 3, 4, 8, 16])] for _ in range(4)] + [[0.0, 5], [1.0, 4]]


def _predict_run(predict_speedup, cases):
    """Each case's prediction, or the name of the error it raised (s = 1 divides by zero in N / (1 - s)): the judge
    names the formula that raised it instead of a bare ZeroDivisionError."""
    got: list[float | str] = []
    for s, n in cases:
        try:
            got.append(float(predict_speedup(s, n)))
        except ArithmeticError as exc:
            got.append(type(exc).__name__)
    return got


def _predict_expected(cases):
    from ... import report

    return [float(report.amdahl_speedup(s, n)) for s, n in cases]


# wrong formulas learners wrote, each named by its mistake when every case matches it
_PREDICT_MISTAKES = (
    (lambda s, n: s + (1 - s) / n, "that is 1/S: the speedup is its inverse"),
    (lambda s, n: n - s * (n - 1), "that is Gustafson's law, the speedup when the work grows with N; Amdahl's law "
                                   "keeps the work fixed: the time on N devices is s + (1 - s) / N of one device's"),
    (lambda s, n: 1 / ((1 - s) + s / n), "s and 1 - s are swapped: s is the serial share, which N devices do not "
                                         "shrink, so s stays whole and (1 - s) is divided by N"),
    (lambda s, n: (1 - s) * n, "(1 - s) N leaves the serial part out: the speedup is one device's time over N devices' "
                               "time, 1 / (s + (1 - s) / N)"),
    (lambda s, n: 1 / (s + (1 - s) * n), "the parallel share is multiplied by N: N devices divide it, (1 - s) / N"),
    (lambda s, n: n / (1 - s), "N / (1 - s) grows as s grows and divides by zero at s = 1, where nothing "
                               "parallelises and the speedup is 1: a larger serial share must give a SMALLER speedup; "
                               "Amdahl divides one device's time by s + (1 - s) / N"),
)


def _formula_matches(formula, got, cases) -> bool:
    """Every case's answer equals the formula's (an error raised where the formula raises one too)."""
    for x, (a, b) in zip(got, cases):
        try:
            y = formula(a, b)
        except ArithmeticError:
            if isinstance(x, str):
                continue
            return False
        if isinstance(x, str) or abs(x - y) > 1e-9 * max(1.0, abs(y)):
            return False
    return True


def _predict_judge(got, expected, cases):
    for g, e, (s, n) in zip(got, expected, cases):
        if isinstance(g, str) or abs(g - e) > 1e-9 * e:
            for formula, mistake in _PREDICT_MISTAKES:
                if _formula_matches(formula, got, cases):
                    return 0.0, mistake
            if isinstance(g, str):
                return 0.0, (f"predict_speedup({s}, {n}) raised {g}; it should be {e:.4f}: with s = {s} Amdahl's "
                             "denominator s + (1 - s) / N is never zero, so your formula divides by something else")
            return 0.0, f"predict_speedup({s}, {n}) should be {e:.4f}, got {g:.4f}: S(N) = 1 / (s + (1 - s) / N)"
    return 1.0, "Amdahl's law"


PREDICT = Exercise("10", "predict_speedup", _predict_cases, _predict_run, _predict_expected, _predict_judge,
                   "")  # no hint: every message names the formula or the mistake

register(SPEEDUP, SERIAL, PREDICT)
