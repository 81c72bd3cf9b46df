"""Lab 07's activation-checkpointing report: the steps' and the blocks' tables, the prediction line and the chart. The
lesson (what is timed, and how) stays in the notebook; these read its timings under one load and print them, with
the busy-machine rule of the lab's verdicts (a time the load refuses reads n/m everywhere; bytes are never refused)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import conditions, detectors, measure, memory


@dataclass
class StepReading:
    """The checkpoint choices' fwd+bwd steps (`times`, label -> Timing, 'none' first) and the bytes each keeps for
    backward (`saved`), read under `load`: each step against none's in the same round, one figure per comparison."""

    saved: dict
    times: dict
    load: conditions.Load | None = None
    # (the speed section's training step timed in these rounds, the same step as the speed section timed it): every
    # ms printed goes on the speed section's scale, so that one step has one time in the lab
    anchor: tuple | None = None
    scale: float = field(init=False)    # these rounds' seconds -> the speed section's
    vs_none: dict = field(init=False)   # label -> median of the rounds' own ratios (checkpointed / none)
    cell: dict = field(init=False)      # label -> that figure as a table cell ('1.40x'), or n/m
    refused: dict = field(init=False)   # label -> True where the load refuses the time
    flags: dict = field(init=False)     # label -> detector flags: more work in less time

    def __post_init__(self):
        none = self.times["none"]
        self.scale = 1.0 if self.anchor is None else speed_scale(none, *self.anchor)
        self.vs_none = {k: measure.paired_median(none, t) for k, t in self.times.items()}
        self.cell = {k: measure.table_ratio(measure.paired_ratios(none, t), self.load) for k, t in self.times.items()}
        self.refused = {k: c == measure.N_M for k, c in self.cell.items()}
        # a checkpointed step does the step's work plus one more forward of the block: faster than none beyond the
        # spreads is more work in less time, which no checkpoint can earn (a busy machine slowed the step without)
        self.flags = {k: [] if k == "none" or self.refused[k] else detectors.more_work_less_time(
            1, none.median, 2, t.median, what=f"forward passes of {k} in a step", small_spread=none.spread,
            large_spread=t.spread) for k, t in self.times.items()}

    def time_of(self, label: str) -> str:
        """A step's time against none's as a sentence's figure ('1.80x the time'), or why it cannot be read here."""
        if self.refused[label]:
            return f"the time {measure.N_M} here (the line under the table)"
        if detectors.impossible(self.flags[label]):
            return "the time not measurable here (more work in less time: the machine's, not the checkpoint's)"
        return f"{self.cell[label]} the time"

    def sentence(self, label: str = "all", prefix: str = "") -> str:
        """The section's plain sentence: what checkpointing `label` keeps and costs against no checkpoint."""
        what = "every block" if label == "all" else label
        return measure.short_lines(f"{prefix}checkpointing {what}: {self.saved[label] / self.saved['none']:.2f}x the "
                                   f"activations, {self.time_of(label)} of a step without checkpoints")

    def table(self, batch: int) -> str:
        """The sentence, then one row per choice: bytes kept and time, each against none (one figure each)."""
        none = self.times["none"]
        lines = [self.sentence(), f"{'checkpoint':<10} {'MiB saved for backward':>22} {'MiB x none':>10} "
                 f"{'time x none':>11} {'spread':>7}"]
        for label, t in self.times.items():
            spread = f"{measure.N_M:>7}" if self.refused[label] else f"{t.spread:7.0%}"
            lines.append(measure.table_row(f"{label:<10} {self.saved[label] / memory.MIB:22.2f} "
                                           f"{self.saved[label] / self.saved['none']:9.2f}x {self.cell[label]:>11} "
                                           f"{spread}", self.flags[label]))
        lines += measure.table_lines(self.flags.values(), list(self.times), "checkpoints")
        said = (f"batch of {batch} images. time x none: the median of the {len(none.times)} rounds' own ratios (each "
                f"round timed every choice once, back to back)")
        if self.anchor is None:
            base = measure.N_M if self.refused["none"] else f"{none.median * 1e3:.2f} ms"
            said += f"; the step without checkpoints: {base} (median)"
        lines.append(measure.short_lines(said))
        noisy = [t.spread for k, t in self.times.items() if not self.refused[k]]
        if sum(detectors.noisy_as_printed(x) for x in noisy):  # learner s13r7f: these rounds' noise in plain words
            lines.append(measure.short_lines(
                f"noise: {sum(detectors.noisy_as_printed(x) for x in noisy)} of the {len(noisy)} steps spread more "
                f"than {detectors.NOISY_SPREAD:.0%} over their {len(none.times)} rounds (the widest {max(noisy):.0%}: "
                "a few slow rounds); time x none, a median of per-round ratios, is not moved by a few"))
        if self.anchor is not None:
            lines.append(anchor_line(self))
        if any(self.refused.values()):
            lines.append(measure.short_lines(measure.n_m_line(self.load)))
        return "\n".join(lines)

    def draw(self, ax):
        """Memory against time, one point per choice read; a refused time still shows where its bytes lie."""
        drawn = [k for k in self.times if not self.refused[k]]
        none = self.times["none"]
        spots: dict = {}  # points that would print their labels on top of each other share one label
        for k in drawn:  # the bar: the range of the rounds' own ratios (the verdicts' range), around their median
            low, high = measure.ratio_range(measure.paired_ratios(none, self.times[k]))[:2]
            at = self.saved[k] / memory.MIB
            ax.errorbar(at, self.vs_none[k], yerr=[[self.vs_none[k] - low], [high - self.vs_none[k]]], fmt="o",
                        capsize=3)
            near = next((s for s in spots if abs(s[0] - at) < 0.3 and abs(s[1] - self.vs_none[k]) < 0.06), None)
            spots.setdefault(near or (at, self.vs_none[k]), []).append(k)
        for (at, ratio), labels in spots.items():
            ax.annotate(", ".join(labels), (at, ratio), xytext=(4, 2), textcoords="offset points", fontsize=8)
        at_bytes: dict = {}  # memory is counted, never n/m: one line per size
        for k in self.times:
            if self.refused[k]:
                at_bytes.setdefault(self.saved[k], []).append(k)
        for kept, labels in at_bytes.items():
            ax.axvline(kept / memory.MIB, color="grey", linestyle=":", linewidth=1)
            ax.annotate(f"{', '.join(labels)} (time n/m)", (kept / memory.MIB, 0.5), xycoords=("data", "axes fraction"),
                        rotation=90, fontsize=8, va="center", ha="right")
        ax.set(xlabel="activations saved for backward (MiB)", ylabel="fwd + bwd time / no checkpoint\n(bar: range of rounds)",
               title="activation checkpointing: memory against time" + (
                   "" if len(drawn) == len(self.times) else f" ({len(self.times) - len(drawn)} times n/m: memory only)"))
        if not drawn:
            ax.set_yticks([])  # no time read: no time scale


def prediction_line(steps: StepReading, names) -> str:
    """The prediction 'every checkpointed step at least as slow as none', checked on each block's paired rounds."""
    read = [n for n in names if not steps.refused[n]]
    none = steps.times["none"]
    ranges = {n: measure.ratio_range(measure.paired_ratios(none, steps.times[n]))[:2] for n in read}
    at_or_above = [n for n in read if ranges[n][0] >= 1 / (1 + measure.MIN_EFFECT)]  # not faster, however read
    below = [n for n in read if ranges[n][1] < 1]  # faster than the step without, in every plausible reading
    unsure = [n for n in read if n not in at_or_above + below]
    said = [f"holds for {', '.join(at_or_above)}"] if at_or_above else []
    said += ["not distinguishable here for " + ", ".join(f"{n} (range {ranges[n][0]:.2f}-{ranges[n][1]:.2f})"
                                                         for n in unsure)] if unsure else []
    said += [f"contradicted for {', '.join(below)} (" + ("flagged above: " if any(steps.flags.get(n) for n in below)
             else "") + "the step without checkpoints was slowed, so these ratios are the machine's, not the "
             "checkpoint's)"] if below else []
    said += [f"n/m for {', '.join(n for n in names if n not in read)} (the line under the table)"] \
        if len(read) < len(names) else []
    n = len(none.times)
    k = int(measure.ratio_range(range(n))[0])  # the range's low end is the (k + 1)-th lowest ratio (5 rounds: the lowest)
    span = "the lowest of its" if k == 0 else f"the {k + 1}th lowest (its 90 % range's low end) of its"
    return "\n".join([  # the plain claim and its outcome first, the test on one short line
        measure.short_lines("prediction: no checkpointed block makes the step faster: " + "; ".join(said)),
        measure.short_lines(f"    (tested: {span} {n} paired ratios >= {1 / (1 + measure.MIN_EFFECT):.2f}: up to "
                            f"{measure.MIN_EFFECT:.0%} faster counts as equal)", indent="        ")])


def block_table(steps: StepReading, names, forward_times: dict) -> str:
    """The prediction line, then per block: bytes freed, its forward alone, what one more forward predicts (predicted
    x none) beside the step's figure from the table above (measured x none), the gap in ms, and one computed line on
    whether that gap is a cost beyond one forward or the rounds' noise (learner s13r7f: both were said)."""
    none = steps.times["none"]
    base = none.median * steps.scale  # ms on the speed section's scale (the line under the table above)
    lines = [prediction_line(steps, names),
             f"{'block':<8} {'frees MiB':>9} {'forward ms':>10} {'predicted x none':>16} {'measured x none':>15} "
             f"{'gap ms':>7}"]
    flags = {n: [] if steps.refused[n] else detectors.part_longer_than_whole(
        forward_times[n].median, none.median, part=f"{n}'s forward alone", whole="the step without checkpoints",
        part_spread=forward_times[n].spread, whole_spread=none.spread) for n in names}
    for n in names:
        predicted = 1 + forward_times[n].median / none.median  # both from these rounds: the scale cancels
        timings = ([f"{forward_times[n].median * steps.scale * 1e3:10.2f}", f"{predicted:15.2f}x",
                    f"{steps.cell[n]:>15}", f"{(steps.vs_none[n] - predicted) * base * 1e3:7.2f}"]
                   if not steps.refused[n] else [f"{measure.N_M:>10}", f"{measure.N_M:>16}", f"{measure.N_M:>15}",
                                                 f"{measure.N_M:>7}"])
        lines.append(measure.table_row(f"{n:<8} {(steps.saved['none'] - steps.saved[n]) / memory.MIB:9.2f} "
                                       + " ".join(timings), flags[n]))
    flags = {n: flags[n] + steps.flags.get(n, []) for n in names}  # the step's [!] from above, repeated
    lines += measure.table_lines(flags.values(), names, "blocks")
    base_ms = measure.N_M if steps.refused["none"] else f"{base * 1e3:.2f} ms"
    lines.append(measure.short_lines(
        f"predicted x none = 1 + forward ms / {base_ms} (the step without checkpoints); measured: the table "
        "above; gap ms = (measured - predicted) x that step"))
    if any(steps.refused[n] for n in names):
        lines.append(measure.short_lines(measure.n_m_line(steps.load)))
    read = [n for n in names if not steps.refused[n]]
    if read:
        lines.append(gap_line(steps, read, forward_times))
    return "\n".join(lines)


def round_gaps(steps: StepReading, name: str, forward) -> list[float]:
    """Per round: the checkpointed step minus the step without checkpoints minus the block's forward, in seconds on
    the speed section's scale (each round timed all three back to back)."""
    return [(t - n - f) * steps.scale for t, n, f in zip(steps.times[name].times, steps.times["none"].times,
                                                         forward.times)]


def gap_line(steps: StepReading, read, forward_times: dict) -> str:
    """Whether a checkpoint cost more than one forward of its block: seen where every plausible reading of its
    rounds' gaps lies above 0, noise where their range includes 0 (one reading of 'gap ms', computed)."""
    ranges = {n: measure.ratio_range(round_gaps(steps, n, forward_times[n]))[:2] for n in read}
    n_rounds = len(steps.times["none"].times)
    ms = {n: f"{n} ({ranges[n][0] * 1e3:.2f} to {ranges[n][1] * 1e3:.2f} ms)" for n in read}
    seen = [n for n in read if ranges[n][0] > 0]
    below = [n for n in read if ranges[n][1] < 0]
    noise = [n for n in read if n not in seen + below]
    said = [f"seen for {', '.join(ms[n] for n in seen)}: the wrapper's own cost"] if seen else []
    said += [f"not seen for {', '.join(noise)}: the range of {'its' if len(noise) == 1 else 'their'} rounds' gaps "
             "includes 0 ms (noise)"] if noise else []
    said += [f"less than one forward for {', '.join(ms[n] for n in below)}"] if below else []
    return measure.short_lines(f"a cost beyond one forward (each block's range of its {n_rounds} rounds' own gaps): "
                               + "; ".join(said))


def speed_scale(none, training_here, training_there) -> float:
    """The factor that puts these rounds' seconds on the speed section's scale: the step without checkpoints becomes
    the speed section's training step divided by the training step's time x none in these rounds."""
    return training_there.median / (measure.paired_median(none, training_here) * none.median)


def anchor_line(steps: StepReading) -> str:
    """The step without checkpoints in ms on the speed section's scale, as one division of printed figures (one
    figure for one step; learner s15r9f: three ratios for one number buried it)."""
    assert steps.anchor is not None, "anchor_line needs the speed section's step"
    here, there = steps.anchor
    ratio = measure.table_ratio(measure.paired_ratios(steps.times["none"], here), steps.load)
    if ratio == measure.N_M or steps.refused["none"]:
        return measure.short_lines(f"the speed section's training step, timed in these rounds too: {ratio} the step "
                                   "without checkpoints")
    paired = measure.paired_median(steps.times["none"], here)  # unrounded: the division adds up as printed
    return measure.short_lines(
        f"every ms below is on the speed section's scale: the step without checkpoints takes "
        f"{there.median * 1e3:.2f} / {paired:.3f} = {steps.times['none'].median * steps.scale * 1e3:.2f} ms "
        f"(that section's training step, timed in these rounds too, / its paired ratio to this step)")


SMALL_LAYERS_COST = 0.10  # native 16-bit units, small layers: no clear winner, tested as "no more than 10 % slower"


def medians_note(speed: dict, verdicts: dict, mp_name: str) -> str:
    """Where the ratio of a model's two printed medians is not its verdict's figure, the reason, once (learner
    s13r5f: 'each median comes from other rounds' was cryptic beside 8.0 / 7.8 ms = 1.03 and a verdict of 1.01x)."""
    differ = [(name, speed[name]["float32"].median / speed[name][mp_name].median, v) for name, v in verdicts.items()
              if v.verdict != measure.CANNOT_SEE]
    differ = [(name, r, v) for name, r, v in differ if f"{r:.2f}" != f"{v.ratio:.2f}"]
    if not differ:
        return ""
    said = "; ".join(f"{name}: {r:.2f}, not the verdict's {v.ratio:.2f}x" for name, r, v in differ)
    return measure.short_lines(
        f"(the ratio of the two medians, {said}: a verdict divides the two times of each round, then takes the median "
        f"of those {differ[0][2].repeats} ratios; the two medians can come from different rounds)")


def precision_verdict(name: str, timing: dict, mp_name: str, emulated: bool, small_layers_cost: float = SMALL_LAYERS_COST):
    """The verdict on float32 against autocast for one model's paired rounds (`timing`: 'float32' and `mp_name`
    Timings), with the claim theory makes on this hardware: float32 faster where the 16-bit type is emulated; where it
    is native, the course CNN no more than `small_layers_cost` slower (small layers: the casts eat the gain) and a
    larger model faster."""
    from ... import workloads

    workload = {"course CNN": workloads.PRECISION, "wide CNN": workloads.PRECISION_WIDE}[name]
    if emulated:
        return measure.verdict(timing["float32"], timing[mp_name], lab="07", workload=workload,
                               claim=f"float32 vs {mp_name} autocast, {name} train step",
                               expected=f"float32 faster ({mp_name} emulated on this CPU)")
    if name == "course CNN":  # small layers: the casts' fixed cost per operation can eat the 16-bit gain
        return measure.verdict(timing[mp_name], timing["float32"], lab="07", no_worse_than=small_layers_cost,
                               workload=workload, claim=f"{mp_name} autocast vs float32, {name} train step",
                               expected=f"{mp_name} no more than {small_layers_cost:.0%} slower (small layers: the "
                                        "casts eat the 16-bit gain)")
    return measure.verdict(timing[mp_name], timing["float32"], lab="07", workload=workload,
                           claim=f"{mp_name} autocast vs float32, {name} train step",
                           expected=f"{mp_name} faster (half the bytes, native 16-bit units)")


def accuracy_verdict(gap: float, standard_error: float, mp_name: str) -> str:
    """What a test-accuracy gap (16-bit minus float32) says, against its paired standard error: within two, no
    difference this test set can see; beyond two, different models, but one run of each cannot rank the precisions
    (learner s15r9f read 'beyond two standard errors' as 'bfloat16 is better': the line says what it does not cover)."""
    if abs(gap) <= 2 * standard_error:
        return ("within two standard errors: this test set cannot tell the two precisions apart (another seed could "
                "reverse their order)")
    return ("beyond two standard errors: these two runs learned different models; one run of each cannot say that "
            f"{mp_name if gap > 0 else 'float32'} trains better, because the standard error covers the choice of test "
            "images, not how much one training varies from seed to seed")


def checkpoint_summary(resume_error: dict, save_verdict) -> str:
    """Strategy 5 in one sentence: the worst resumed run's distance to the run without a stop, and async_save's
    verdict against save (its figure only where the verdict read one)."""
    sizes = ", ".join(str(n) for n in resume_error)
    said = f"sharded checkpoint resumed on {sizes} ranks: max |final weights - uninterrupted| " \
           f"{max(resume_error.values()):.1e}; async_save against save: {save_verdict.verdict}"
    if save_verdict.verdict != measure.CANNOT_SEE:
        said += f" (save held the loop {save_verdict.ratio:.2f}x as long: the verdict's figure)"
    return measure.short_lines(said)


def save_noise_note(held: dict, verdict) -> str:
    """One line where a checkpoint kind's times spread widely: which figure to read (the verdict's paired one); ''
    otherwise (learner s13r6f: a noise line and a ratio-of-medians line, three lines of caveat around one figure)."""
    if not any(detectors.noisy_as_printed(measure.spread(times)) for times in held.values()):
        return ""
    read = ("read the verdict's ratio" if verdict.verdict != measure.CANNOT_SEE
            else "no figure read")
    return measure.short_lines(f"noise: spread over {detectors.NOISY_SPREAD:.0%}: a few slow checkpoints, which a "
                               f"median ignores; {read}")
