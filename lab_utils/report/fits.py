"""Models of scaling fitted to measured rows: Amdahl's serial fraction, the all-reduce's latency and bandwidth, and
the projections they give."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import detectors


def amdahl_speedup(serial_fraction: float, devices) -> np.ndarray | float:
    """Amdahl's law: 1 / (s + (1 - s) / N)."""
    n = np.asarray(devices, dtype=float)
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / n)


def fit_serial_fraction(points) -> float:
    """The serial fraction s that best fits measured (devices, speedup) pairs (least squares on 1/speedup); noisy
    rows, or rows slower than one device, can give s outside 0..1, which no machine has (serial_fit says so)."""
    pairs = [(float(n), float(s)) for n, s in points if n > 1]
    if not pairs:
        raise ValueError("need at least one measurement with more than one device to fit a serial fraction")
    # 1/S = s + (1 - s)/N = 1/N + s (1 - 1/N): linear in s
    a = np.array([1 - 1 / n for n, _ in pairs])
    b = np.array([1 / s - 1 / n for n, s in pairs])
    return float(a @ b / (a @ a))


@dataclass(frozen=True)
class SerialFit:
    """Amdahl's serial fraction fitted to rows (least squares), and each row's own: the spread of the per-row values
    gives the projections their range; a fit outside 0..1 hit a bound that no machine has and projects nothing."""

    serial_fraction: float
    per_row: tuple[float, ...]
    devices: tuple[float, ...] = ()  # each row's hardware ratio N, beside per_row

    @property
    def at_bound(self) -> bool:
        """True when the fit fell outside 0..1: the rows contradict Amdahl's law, so it projects nothing."""
        return not 0.0 <= self.serial_fraction <= 1.0

    def projection(self, devices: int) -> tuple[float, float, float] | None:
        """(low, fitted, high) speedup on `devices`, the range from the rows' own serial fractions; None at a bound."""
        if self.at_bound:
            return None
        low_s, high_s = (min(max(v, 0.0), 1.0) for v in (max(self.per_row), min(self.per_row)))
        return (float(amdahl_speedup(low_s, devices)), float(amdahl_speedup(self.serial_fraction, devices)),
                float(amdahl_speedup(high_s, devices)))

    @property
    def flags(self) -> list[detectors.Flag]:
        """Rows whose own serial fraction lies outside 0..1 (the fit itself may still lie inside): a note above 1
        (slower than one device) or just below 0; `[!]` for faster than linear beyond noise."""
        return detectors.serial_fraction_outside(self.per_row, self.devices)

    def describe(self) -> str:
        """The fitted value with the rows' range, or why no projection follows from it."""
        rows = (f"rows' own {min(self.per_row):.3f} to {max(self.per_row):.3f}" if len(self.per_row) > 1 else
                "one row, not a fit over several")
        if self.at_bound:
            side = ("above 1: slower than one device, a cost Amdahl's law leaves out" if self.serial_fraction > 1
                    else "below 0: faster than linear, which no serial share gives")
            return (f"s = {self.serial_fraction:.3f} ({rows}) is outside 0..1 ({side}): Amdahl's law cannot "
                    "describe these rows, so nothing is projected from them")
        return f"s = {self.serial_fraction:.3f} ({rows})"


def serial_fit(points) -> SerialFit:
    """fit_serial_fraction over (devices, speedup) pairs, with each pair's own serial fraction beside it."""
    pairs = [(float(n), float(s)) for n, s in points if n > 1]
    return SerialFit(fit_serial_fraction(pairs), tuple((1 / s - 1 / n) / (1 - 1 / n) for n, s in pairs),
                     tuple(n for n, _ in pairs))


@dataclass(frozen=True)
class AllReduceFit:
    """Fitted ring all-reduce time t(bytes, N) = 2 (N - 1) latency + 2 (N - 1) / N x bytes / bus_bandwidth."""

    latency_s: float
    bus_bandwidth: float  # bytes/s; inf when the fitted time per byte is not a positive number (`flags` says why)
    flags: tuple[str, ...] = ()

    def describe(self, devices: int | None = None) -> str:
        """'alpha = ... us, B = ... GB/s' (and, given the ranks, the size where each term dominates), or the refusal
        when the fit is degenerate."""
        alpha = f"alpha = {self.latency_s * 1e6:8.1f} us"
        if self.flags:
            return f"{alpha}, B = not measurable here  {detectors.flag_text(*self.flags)}"
        text = f"{alpha}, B = {self.bus_bandwidth / 1e9:6.2f} GB/s"
        if devices and devices > 1 and self.latency_s > 0:
            text += (f"; latency dominates below {self.crossover_bytes(devices) / 1024:,.0f} KiB, bandwidth above "
                     f"(at N alpha B bytes the fit's two terms are equal; N = {devices} ranks)")
        return text

    def summary(self, sizes, seconds, devices: int, busy_cores: tuple[float, int] | None = None) -> str:
        """read() on the points it was fitted to: the refusal of the fit's table reaches the summary that repeats it,
        with the cause its flag measured (`busy_cores` as in contradictions())."""
        return self.read(devices, self.contradictions(sizes, seconds, devices, busy_cores), busy_cores)

    def readable(self, flags) -> bool:
        """False where the fit is degenerate or `flags` say it misses its own points (Kind.NO_FIT): then no figure
        built from it (a time, a ratio, a projection) is printed either."""
        return not self.flags and not any(detectors.kind_of(f) is detectors.Kind.NO_FIT for f in flags)

    def read(self, devices: int, flags, busy_cores: tuple[float, int] | None = None) -> str:
        """describe(), or, where `flags` say the fit misses its own points (Kind.NO_FIT), no figure: a summary then
        refuses alpha and B as the section that fitted them did, and names the cause its flag measured."""
        if any(detectors.kind_of(f) is detectors.Kind.NO_FIT for f in flags):
            return (f"no alpha or B: the fitted line misses its own points (flagged where it was fitted; cause: "
                    f"{miss_cause(busy_cores, short=True)}): read the measured sizes there")
        return self.describe(devices)

    def crossover_bytes(self, devices: int) -> float:
        """The message size at which the two terms are equal: 2 (N - 1) alpha = 2 (N - 1) / N x bytes / B."""
        return devices * self.latency_s * self.bus_bandwidth

    def contradictions(self, sizes, seconds, devices: int,
                       busy_cores: tuple[float, int] | None = None) -> list[detectors.Flag]:
        """A fit whose line misses its own points (detectors.fit_misses), or whose latency term alone exceeds a measured
        all-reduce (by 10 %): it contradicts the data it came from. `busy_cores`: (others' mean cores, cores) over the
        sweep: a load too light to move a median FIT_MISS times is not named as the cause (the ranks' wake-up is)."""
        floor = 2 * (devices - 1) * self.latency_s
        fastest = min(float(t) for t in seconds)
        missed = detectors.fit_misses([float(t) for t in seconds], [self.seconds(s, devices) for s in sizes],
                                      [_size_name(s) for s in sizes], cause=miss_cause(busy_cores))
        if floor <= 1.1 * fastest:
            return missed
        return missed + [detectors.Flag(detectors.Kind.CONTRADICT,
                               f"the fitted latency alone, 2 (N - 1) alpha = {floor * 1e3:.3g} ms, is longer than a "
                               f"measured all-reduce ({fastest * 1e3:.3g} ms): {detectors.CONTRADICT} (a few slow "
                               "medians pulled the fit, so read it as an order of magnitude)")]

    def seconds(self, nbytes: float, devices: int) -> float:
        if devices < 2:
            return 0.0
        return 2 * (devices - 1) * self.latency_s + 2 * (devices - 1) / devices * nbytes / self.bus_bandwidth


def miss_cause(busy_cores: tuple[float, int] | None, short: bool = False) -> str:
    """What moved the medians off a fit's line: the ranks' wake-up where the measured load (others' mean cores, cores)
    is too light to move a median FIT_MISS times, else a busy machine; `short`: one clause, for a summary line."""
    if busy_cores is None or detectors.load_reach(*busy_cores) >= detectors.FIT_MISS:
        return "a busy machine"
    others, cores = busy_cores
    if short:
        return f"other programs used {others:.1f} of {cores:g} cores: not the load but the ranks' wake-up"
    return (f"other programs used {others:.1f} of {cores:g} cores, too few to move a median {detectors.FIT_MISS:g}x: "
            "not the load but the ranks' wake-up, which moves a small all-reduce up to 10x between runs")


def _size_name(nbytes: float) -> str:
    """A message size as the all-reduce tables print it (KiB)."""
    return f"{nbytes / 1024:g} KiB"


def bus_bandwidth(nbytes: float, seconds: float, devices: int) -> float:
    """The bus bandwidth of one all-reduce: 2 (N - 1) / N x bytes / time (what each link carries, per second)."""
    return 2 * (devices - 1) / devices * nbytes / seconds


def fit_allreduce(sizes, seconds, devices: int) -> AllReduceFit:
    """Latency and bus bandwidth fitted to all-reduce times of message `sizes` on `devices` ranks: least squares on
    relative errors, the latency term held at or below the fastest measured all-reduce (a few slow small-size medians
    would otherwise pull it above a point the model says cannot be faster)."""
    sizes, seconds = np.asarray(sizes, float), np.asarray(seconds, float)
    if len(sizes) < 2:
        raise ValueError("need all-reduce times for at least two message sizes")
    if np.any(seconds <= 0):
        raise ValueError(f"all-reduce times must be positive, got {seconds.tolist()}")
    steps = 2 * (devices - 1)
    # least squares on relative errors (w=1/time): small sizes set alpha, large ones the bandwidth; unweighted, the
    # largest sizes' noise would decide alpha
    x, weight = sizes * steps / devices, 1 / seconds
    slope, intercept = np.polyfit(x, seconds, 1, w=weight)
    if slope > 0 and intercept > seconds.min():
        intercept, slope = _latency_at_most(x, seconds, weight)
    warnings = tuple(detectors.degenerate_fit(float(slope)))
    return AllReduceFit(max(intercept / steps, 0.0), math.inf if warnings else 1.0 / slope, warnings)


def _latency_at_most(x, seconds, weight) -> tuple[float, float]:
    """The fit with its latency term held at the fastest measured all-reduce, the most the model allows (every
    all-reduce takes at least that term): (intercept, slope), the slope by the same weighted least squares."""
    intercept = float(seconds.min())
    w2 = weight ** 2
    return intercept, float(np.sum(w2 * x * (seconds - intercept)) / np.sum(w2 * x * x))


def data_parallel_speedup(compute_s: float, grad_bytes: float, fit: AllReduceFit, devices: int,
                          share_s: float | None = None) -> float:
    """Compute + all-reduce model: one device takes compute_s; N devices take one rank's compute, `share_s` (its
    share of the batch, measured) or compute_s / N (assumed, where None), plus the all-reduce."""
    return compute_s / ((compute_s / devices if share_s is None else share_s) + fit.seconds(grad_bytes, devices))


def gpipe_speedup(stages: int, micro_batches: int) -> float:
    """Ideal GPipe speedup over one device for K balanced stages: K x (1 - bubble), bubble = (K-1)/(M+K-1)."""
    return stages * (1 - (stages - 1) / (micro_batches + stages - 1))


def parameter_bytes(model) -> int:
    """Bytes of the gradients DDP all-reduces each step (one per trainable parameter)."""
    from ..tensors import tensor_bytes  # torch only when a model is measured

    return tensor_bytes(p for p in model.parameters() if p.requires_grad)


