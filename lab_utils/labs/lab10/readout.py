"""Lab 10's one-sentence answers, computed from the table's rows and the fits: which way of splitting a batch pays
here (under the main table), and how far the two projections lie apart and why (under the projections)."""
from __future__ import annotations

import re

WORKLOAD = "CNN-3conv/synthetic28 step"  # the model all three ways split (labs 02 and 03), one batch, 2 ranks
SPLITS = (("dp", "DataParallel"), ("ddp", "DDP"), ("horovod-style", "Horovod-style"))


def _readable(c) -> bool:
    """A row with a speedup the table prints as a result: not a baseline, not refused, not n/m, not flagged."""
    return not (c.is_baseline or c.speedup is None or c.refused or c.not_measurable or getattr(c, "flags", ()))


def split_answer(compared, batch: int = 256, ranks: int = 2, others=()) -> str:
    """'answer: batch 256 over 2 ranks, ...: lab 02: DataParallel 1.67x ~ DDP 1.58x; ...' from the table's rows only,
    then one note line each: what '~' hides (the spreads), other labs' threads (`others`, threads_elsewhere) and
    theory's reason Horovod-style trails DDP; '' where the table holds none of the three (learner s13r5g: four
    figures for one threads row in one 9-line sentence)."""
    def ours(c, readable=True) -> bool:
        return (c.row.batch_size == batch and c.row.workload.startswith(WORKLOAD) and not c.is_baseline
                and _readable(c) == readable)

    picked: dict[str, list[str]] = {}
    for c in sorted((c for c in compared if ours(c) and c.row.world_size == ranks), key=lambda c: c.row.lab):
        name = dict(SPLITS).get(c.row.strategy)
        if name:
            picked.setdefault(name, []).append(f"{c.speedup:.2f}x (lab {c.row.lab})")
    unread = sorted({f"{dict(SPLITS)[c.row.strategy]} (lab {c.row.lab}" + other_run(c, [*compared, *others]) + ")"
                     for c in compared
                     if ours(c, readable=False) and c.row.world_size == ranks and c.row.strategy in dict(SPLITS)})
    if not picked:
        return ""
    threads = [f"{c.speedup:.2f}x (lab {c.row.lab})" for c in compared
               if ours(c) and c.row.world_size == 1 and (c.row.threads or 1) == ranks]
    text = (f"answer: batch {batch} over {ranks} ranks, speedup over its own lab's one process: "
            + within_each_lab(compared, ours, ranks))
    if threads:
        text += f"; one process with {ranks} threads, no split: {' and '.join(threads)}"
    if unread:  # n/m, refused or flagged in the table: no figure of theirs is an answer
        text += f"; not read here (n/m or [!] in the table): {', '.join(unread)}"
    notes = [why_not_ranked(compared, ours, ranks)]
    if threads:  # other labs' figures for the threads row: one note line, never in the answer (issue 51)
        notes.append(threads_elsewhere(compared, list(others), ranks, batch))
    if "Horovod-style" in picked and "DDP" in picked:
        notes.append("theory: Horovod-style makes one all-reduce call per gradient tensor, DDP one per bucket "
                     "(section Communication against compute times the calls' cost)")
    return text + "".join(f"\n  note: {n}" for n in notes if n)
    return text


def other_run(c, rows) -> str:
    """'; its flag: its two runs disagree, and it reads 1.23x (batch 256, step in one process)': for a flagged row,
    the same lab's readable row of the same way, devices and batch in another workload, the figure its flag points
    to; '' where there is none (learner s13r6g: three DataParallel figures at batch 256, none named the one to read)."""
    if not getattr(c, "flags", ()):
        return ""
    twin = next((o for o in rows if _readable(o) and o.row.lab == c.row.lab and o.row.strategy == c.row.strategy
                 and o.row.world_size == c.row.world_size and o.row.batch_size == c.row.batch_size
                 and o.row.workload != c.row.workload and o.row.workload.startswith(WORKLOAD)), None)
    if twin is None:
        return ""
    how = twin.row.workload[len(WORKLOAD):].lstrip(", ") or "step"
    return (f"; its two runs at batch {c.row.batch_size} disagree, and lab {c.row.lab} reads the other one: "
            f"{twin.speedup:.2f}x ({how})")


def within_each_lab(compared, ours, ranks: int) -> str:
    """'lab 02: DataParallel 1.65x > DDP 1.55x; lab 03: DDP 1.83x > Horovod-style 1.20x': each lab's ways, fastest
    first, ranked only against the others it timed beside its own baseline (learner s12r3g: 'highest here' ranked
    across two baselines)."""
    by_lab: dict[str, list] = {}
    for c in compared:
        if ours(c) and c.row.world_size == ranks and c.row.strategy in dict(SPLITS):
            by_lab.setdefault(c.row.lab, []).append(c)
    said = []
    for lab, rows in sorted(by_lab.items()):
        rows = sorted(rows, key=lambda c: -c.speedup)
        text = f"{dict(SPLITS)[rows[0].row.strategy]} {rows[0].speedup:.2f}x"
        for faster, c in zip(rows, rows[1:]):
            text += f" {'>' if apart(faster.row, c.row) else '~'} {dict(SPLITS)[c.row.strategy]} {c.speedup:.2f}x"
        said.append(f"lab {lab}: {text}")
    return "; ".join(said)


def why_not_ranked(compared, ours, ranks: int) -> str:
    """'~: the rates lie within their repeats' spreads (DDP 38%, Horovod-style 86%), so not ranked; ...': each '~'
    of the answer with the spreads that make it (learner s13r5g: DDP 1.60x ~ Horovod-style 1.05x read as a contradiction
    beside the 17.7 ms loss section Communication analyses)."""
    from ... import detectors
    pairs, by_gap = [], False
    for lab in sorted({c.row.lab for c in compared}):
        rows = sorted((c for c in compared if c.row.lab == lab and ours(c) and c.row.world_size == ranks
                       and c.row.strategy in dict(SPLITS)), key=lambda c: -c.speedup)
        for faster, c in zip(rows, rows[1:]):
            if not apart(faster.row, c.row):
                pairs.append(f"{dict(SPLITS)[faster.row.strategy]} {faster.row.spread or 0:.0%}, "
                             f"{dict(SPLITS)[c.row.strategy]} {c.row.spread or 0:.0%} (lab {lab})")
            else:
                by_gap = by_gap or faster.row.samples_per_s * (1 - (faster.row.spread or 0) / 2) <= \
                    c.row.samples_per_s * (1 + (c.row.spread or 0) / 2)
    said = []
    if by_gap:  # ranked by the gap of the medians, not by the spreads
        said.append(f">: faster, the medians lie more than {detectors.TWICE_TOLERANCE:.0%} apart (more than two "
                    "timings of one step differ by) or apart beyond their spreads")
    if pairs:
        said.append(f"~: not ranked, the two medians lie within {detectors.TWICE_TOLERANCE:.0%} of each other and "
                    "within their repeats' spreads (" + "; ".join(pairs) + ")")
    return "; ".join(said + ["speedups of two labs read two baselines, so none ranks across labs"])


def apart(faster, slower) -> bool:
    """True where '>' ranks two rows: their rates lie apart beyond their repeats' spreads (each rate +- half its
    spread; learner s12r4g: 'DataParallel 1.70x > DDP 1.62x' with half the table's medians noisy), or their medians
    lie further apart than two medians of one quantity ever do (detectors.TWICE_TOLERANCE, whatever the spreads: a
    spread is the range of single steps, a median ignores its few slow ones; learner s13r7g: DDP 1.63x ~
    Horovod-style 1.09x, 1.49x apart, called a tie)."""
    from ... import detectors
    beyond_spreads = (faster.samples_per_s * (1 - (faster.spread or 0.0) / 2)
                      > slower.samples_per_s * (1 + (slower.spread or 0.0) / 2))
    return beyond_spreads or faster.samples_per_s > (1 + detectors.TWICE_TOLERANCE) * slower.samples_per_s


def threads_elsewhere(compared, others, ranks: int, batch: int = 256) -> str:
    """' (other labs timed it: 1.75x (lab 01, batch 256) ...; the table's 1.52x lies 1.15x below the highest ...)':
    where labs outside the table's threads row timed one process with as many threads on this model, their figures
    and how far the table's lies from the highest, and whether that flips threads against its lab's DDP (learner
    s12r4g: lab 03's low two-thread row decided 'threads vs DDP'; labs 01 and 02 timed it higher)."""
    def threads_row(c) -> bool:
        return (c.row.workload.startswith(WORKLOAD) and c.row.world_size == 1 and (c.row.threads or 1) == ranks
                and _readable(c))
    table = [c for c in compared if threads_row(c) and c.row.batch_size == batch]
    seen = {(c.row.lab, c.row.batch_size) for c in table}
    per_lab: dict = {}  # one figure per lab: its row at the table's batch, else its largest batch
    for c in sorted((c for c in [*compared, *others] if threads_row(c) and (c.row.lab, c.row.batch_size) not in seen),
                    key=lambda c: (c.row.batch_size == batch, c.row.batch_size)):
        per_lab[c.row.lab] = c
    elsewhere = [per_lab[lab] for lab in sorted(per_lab)]
    if not table or not elsewhere:
        return ""
    ours, high = table[0], max(elsewhere, key=lambda c: c.speedup)
    text = (f"other labs timed {ranks} threads over their own baselines (rows not in this table): "
            + ", ".join(f"{c.speedup:.2f}x (lab {c.row.lab}, batch {c.row.batch_size})" for c in elsewhere))
    if high.speedup <= ours.speedup:
        return text + f"; lab {ours.row.lab}'s is the highest"
    ddp = [c for c in compared if c.row.lab == ours.row.lab and c.row.strategy == "ddp" and c.row.world_size == ranks
           and c.row.batch_size == ours.row.batch_size and _readable(c)]
    if ddp and ours.speedup < ddp[0].speedup < high.speedup:
        text += (f"; threads trail lab {ours.row.lab}'s DDP ({ddp[0].speedup:.2f}x) on its own row, beat it on lab "
                 f"{high.row.lab}'s, so threads against DDP is not settled on this machine")
    return text


def implied_s(speedup: float, n: float) -> float:
    """The serial fraction Amdahl's law gives one speedup on n devices: (1/S - 1/n) / (1 - 1/n)."""
    return (1 / speedup - 1 / n) / (1 - 1 / n)


def projections_apart(n: int, amdahl: float, compute_ar: float, m: float, measured: float, model_m: float) -> str:
    """Why Amdahl's projection and compute+all-reduce's differ on n devices, computed: at the fitted device count m,
    each as a serial fraction (the measured row's s against the one compute+all-reduce's own figure implies); what
    the model leaves out, Amdahl carries to n devices."""
    s, s_model = implied_s(measured, m), implied_s(model_m, m)
    return (f"why the two differ on {n} devices ({amdahl:.2f}x vs {compute_ar:.2f}x): on {m:g} the row measured "
            f"{measured:.2f}x, compute+AR predicts {model_m:.2f}x; as serial fractions, s = {s:.3f} measured, "
            f"{s_model:.3f} in the model (one rank's compute and the all-reduce"
            + ("; below 0: one rank's share ran faster per image than the whole batch" if s_model < 0 else "")
            + f"): the other {s - s_model:.3f} is time the measured step lost that the model leaves out, and Amdahl "
            "carries it to more devices")


def s_range(speedup: float, n: float, spread: float) -> tuple[float, float] | None:
    """The serial fraction's range where one row's speedup moves by `spread` with its repeats (half each way); None
    where the spread is unknown (inf)."""
    if spread == float("inf"):
        return None
    low, high = speedup * (1 - spread / 2), speedup * (1 + spread / 2)
    return max(0.0, implied_s(high, n)), min(1.0, implied_s(max(low, 1e-9), n))  # s means something in 0..1 only


def amdahl_projection(fit, devices: int, rows, speedup_spread) -> tuple[float, float, float] | None:
    """(low, fitted, high) Amdahl speedup on `devices`: for a fit to one row, the range from its s's range (its speedup's
    spread, as s_range_line prints it; learner s12r3g: a bare 3.12x under 's could lie anywhere in 0.00-0.43');
    otherwise the fit's own range over the rows' serial fractions; None at a bound."""
    from ... import report
    projection = fit.projection(devices)
    if projection is None or len(rows) != 1:
        return projection
    span = s_range(rows[0].speedup, rows[0].hardware_ratio, speedup_spread(rows[0]))
    if span is None:
        return projection
    return (float(report.amdahl_speedup(span[1], devices)), projection[1], float(report.amdahl_speedup(span[0], devices)))


def s_range_line(s: float, speedup: float, n: float, spread: float) -> str:
    """'  s = 0.252 moves with its row's speedup: 0.02-0.61 ...' for a fit to one row (learner s11r2g: s read as
    precise beside speedups that spread ~50 %); '' where the spread is unknown."""
    span = s_range(speedup, n, spread)
    if span is None:
        return ""
    return (f"  how precise: the row's speedup moves {spread:.0%} with its repeats (its rate's spread plus its "
            f"baseline's), so s = {s:.3f} could lie anywhere in {span[0]:.2f}-{span[1]:.2f}: read it, and what it "
            "projects, as that range")


def spread_parts(c) -> str:
    """' (rate 26 % + baseline 21 %)': which of a row's two spreads makes its speedup's (learner s12r3g: lab 02's 147 %
    came from its baseline's 75 %, unsaid); '' where either is unknown."""
    if c.row.spread is None or c.baseline is None or c.baseline.spread is None:
        return ""
    return f" (rate {c.row.spread:.0%} + baseline {c.baseline.spread:.0%})"


def amdahl_fits(compared, this_host: str, lesson):
    """Print Amdahl's fit per machine (one configuration's rows, the rows left beside it with their own s, one setup
    timed by two labs); return (candidates, per_machine, serial, configuration, twin_projection) for the cells after.
    `lesson`: the notebook's own functions (amdahl_rows, one_configuration, speedup_spread, speedups_apart,
    spread_said), passed in: a core module imports no generated lesson."""
    from ... import measure, report
    amdahl_rows, one_configuration, speedup_spread, speedups_apart, spread_said = lesson

    candidates, left_out = amdahl_rows(compared)  # every plausible data-parallel row, per machine
    per_machine, serial, configuration = {}, {}, {}  # the rows of the one configuration fitted, per machine
    twin_projection = {}  # per machine: (lab, its projection on 4) of the fitted setup timed by another lab
    for host, chosen in candidates.items():
        name = "this machine" if host == this_host else host
        per_machine[host], others = one_configuration(chosen)
        first = per_machine[host][0].row
        configuration[name] = f"lab {first.lab} {first.strategy} on {first.workload}, batch {first.batch_size}"
        points = [(c.hardware_ratio, c.speedup) for c in per_machine[host]]
        serial[name] = report.serial_fit(points)
        counts = sorted({n for n, _ in points})
        print(measure.flagged(measure.short_lines(
            f"{name}: Amdahl fit to {configuration[name]} ({len(points)} row(s), "
            f"{' and '.join(f'{n:g}' for n in counts)}x the hardware): serial fraction "
            f"{serial[name].describe()}"), serial[name].flags))  # own s outside 0..1: a note, or [!]
        for c, (n, sp) in zip(per_machine[host], points):
            print(measure.short_lines(f"  lab {c.row.lab} {c.row.strategy} {c.row.variant}, batch {c.row.batch_size}: {sp:.2f}x on {n:g}x the "
                  "hardware" + "".join(f"\n    note: {note}" for note in c.notes)))  # a note is no implausibility
        if len(counts) == 1:
            print(measure.short_lines(f"  one device count ({counts[0]:g}x): s is what these rows lost there; it projects "
                                      "Amdahl's law, it does not test it", indent="      "))
        if len(points) == 1:  # one row: its s moves with that row's speedup
            rough = s_range_line(serial[name].per_row[0], points[0][1], points[0][0],
                                         speedup_spread(per_machine[host][0]))
            if rough:
                print(measure.short_lines(rough, indent="      "))
        if others:  # not mixed in: another workload or strategy loses other things
            print(measure.short_lines(
                f"  not in the fit ({len(others)} row(s) of other configurations; each row's own s, and where it lies "
                "in 0..1, what it projects on 4 devices):", indent="      "))
            for c in others:
                own_s = report.serial_fit([(c.hardware_ratio, c.speedup)]).per_row[0]
                print(measure.short_lines(f"    lab {c.row.lab} {c.row.strategy} {c.row.variant}, batch {c.row.batch_size} "
                                          f"({c.row.workload}): {c.speedup:.2f}x on {c.hardware_ratio:g}x, s = {own_s:.3f}"
                                          + (f" -> {report.amdahl_speedup(own_s, 4):.2f}x on 4" if 0 <= own_s <= 1 else ""),
                                          indent="        "))
            # after the rows it reads (learner s12r4g: the list of rows was cut by this paragraph)
            print(measure.short_lines(
                f"  which s to believe: for {first.strategy} on this machine, the fit's; each row above describes only "
                "its own strategy (how much more a Horovod-style all-reduce after the backward, or a framework's "
                "workers, lose here), not this one", indent="      "))
            twins = [c for c in others if c.row.strategy == first.strategy and c.row.batch_size == first.batch_size
                     and c.row.workload.split(" ")[0] == first.workload.split(" ")[0]]  # the same model, strategy, batch
            if twins and 0 <= serial[name].per_row[0] <= 1:  # one setup, two labs: both projections, side by side
                twin_s = report.serial_fit([(twins[0].hardware_ratio, twins[0].speedup)]).per_row[0]
                theirs = (f"{report.amdahl_speedup(twin_s, 4):.2f}x" if 0 <= twin_s <= 1 else "none (its s lies outside 0..1)")
                twin_projection[name] = (twins[0].row.lab, theirs)
                fit_row, twin_row = per_machine[host][0], twins[0]
                print(measure.short_lines(
                    f"  {first.strategy} at batch {first.batch_size} on this model, timed by two labs: "
                    f"{rates_or_baselines(fit_row, twin_row)}; the two speedups "
                    f"{speedups_apart(fit_row, twin_row)}", indent="      "))
                print(measure.short_lines(
                    f"  rule: the fit reads the row whose speedup moves least with its repeats (its rate's spread plus "
                    f"its baseline's): lab {first.lab} {spread_said(fit_row)}{spread_parts(fit_row)}, lab "
                    f"{twin_row.row.lab} {spread_said(twin_row)}{spread_parts(twin_row)}. On 4 devices: "
                    f"{report.amdahl_speedup(serial[name].per_row[0], 4):.2f}x over lab {first.lab}'s baseline, "
                    f"{theirs} over lab {twin_row.row.lab}'s", indent="      "))
    for c in left_out:
        print(measure.short_lines(f"left out (an impossible figure, flagged in the table): lab {c.row.lab} {c.row.strategy} {c.row.variant}, "
              f"batch {c.row.batch_size}, {c.speedup:.2f}x on {c.hardware_ratio:g}x the hardware"))
    return candidates, per_machine, serial, configuration, twin_projection


def per_tensor_cost_line(compared, tensors: int, call_s: float, batch: int = 256, ranks: int = 2,
                         spread: float | None = None) -> str:
    """Theory's reason Horovod-style trails DDP (one all-reduce per gradient tensor, each paying a call's fixed cost),
    computed: the extra calls at the fit's fixed cost against the time per step lab 03's Horovod-style row lost to its
    DDP row; '' where the table lacks either row (or one is not read)."""
    from ... import detectors

    def found(strategy):
        return next((c.row for c in compared if c.row.lab == "03" and c.row.strategy == strategy
                     and c.row.world_size == ranks and c.row.batch_size == batch and not c.is_baseline
                     and _readable(c)), None)

    ddp_row, horovod_row = found("ddp"), found("horovod-style")
    if not ddp_row or not horovod_row:
        return ""
    ddp, horovod = ddp_row.samples_per_s, horovod_row.samples_per_s
    lost = batch / horovod - batch / ddp  # seconds per step, the whole batch
    extra = (tensors - 1) * call_s
    calls = (f"Horovod-style (lab 03): {tensors} all-reduce calls per step, one per gradient tensor, where DDP makes "
             f"one: {tensors - 1} extra calls at the fit's fixed cost per call, 2(N-1) x alpha = {call_s * 1e3:.2f} ms "
             f"(N = {ranks}), = {extra * 1e3:.1f} ms per step")
    if not apart(ddp_row, horovod_row):  # a gap the table does not rank: no share of it is read
        return (calls + ", a loss theory expects; the table does not rank the two rows (its ~), so no share of "
                "a measured loss is read")
    if lost <= 0:
        return (f"Horovod-style (lab 03) was not slower than DDP here ({horovod:,.0f} vs {ddp:,.0f} samples/s): no "
                "per-tensor cost to explain")
    return (f"{calls}, of the {lost * 1e3:.1f} ms it lost to DDP (a batch of {batch} at {horovod:,.0f} vs "
            f"{ddp:,.0f} samples/s): the fixed cost explains {min(extra / lost, 9.99):.0%} of it"
            + (f" (a share read as {detectors.spread_reading(spread)}: the sweep's medians spread up to "
               f"{detectors.spread_text(spread)} over their repeats)"
               if spread is not None and detectors.spread_reading(spread) else "")
            + ("" if extra >= 0.5 * lost else f"; the rest, theory says, is {tensors} waits per step for the slower "
               "rank (DDP's one) and the Python around each call, none timed here"))


def step_rest_line(step_s: float, compute_s: float, allreduce_s: float) -> str:
    """What a DDP step holds beyond one rank's compute and its all-reduce, computed (learner s12r3g: 2.49 ms = 1.07
    compute + 0.58 all-reduce + 0.84 ms of nothing named): the optimizer step, the batch, DDP's Python."""
    rest = step_s - compute_s - allreduce_s
    if rest <= 0.1 * step_s:
        return (f"  compute ({compute_s * 1e3:.2f} ms, section Model) and the all-reduce account for the step "
                f"within 10 %")
    said = (f"  the step {step_s * 1e3:.2f} ms - one rank's compute {compute_s * 1e3:.2f} ms (timed alone, section "
            f"Model) - the all-reduce {allreduce_s * 1e3:.2f} ms = {rest * 1e3:.2f} ms ({rest / step_s:.0%}) for the "
            "rest: the optimizer step, reading the batch, and DDP's Python around them, which this lab does not time "
            "apart")
    if abs(rest - compute_s) <= 0.05 * compute_s:  # learner s12r4g: 0.90 ms beside 0.90 ms read as a bug
        said += "; that the rest about equals the compute is a coincidence of this run"
    return said


NEAR_LINEAR, CAPS = 0.10, 0.30  # all-reduce over compute: below the first, room for near-linear scaling; above, a cap


def communication_answer(ratio: dict, noted: tuple | set | list = ()) -> str:
    """'section's answer: CNN-3conv's all-reduce is 2.4 % of one rank's compute: room for near-linear scaling; ...':
    one concluding sentence for section Communication against compute, from its ratios (learner s12r4g: one
    concluding sentence per section); '' where no ratio was read. One figure per model: the digits CNN's is the
    step's; the fit's figure for the same bytes is a cross-check line above it, never a second reading here (learner
    s13r6g: 'the reading rests on which figure one reads' left the choice to the learner). `noted`: the models whose
    ratio stands on a median with a note on its line above (an order of magnitude, or suspect): the answer points
    there rather than saying 'roughly', a word the lab keeps for spreads above 25 %."""
    def reading(r: float) -> str:
        return ("room for near-linear scaling" if r < NEAR_LINEAR else "it caps the scaling" if r > CAPS
                else "a noticeable share of each step")
    read = {name: r for name, r in ratio.items() if r is not None}
    if not read:
        return ""
    from ... import report
    return ("section's answer: " + "; ".join(f"{name}'s all-reduce is {report.percent(r)} of one rank's compute: "
                                             f"{reading(r)}" + (" (read it as its note above says)" if name in noted else "")
                                             for name, r in sorted(read.items(), key=lambda x: x[1]))
            + f" (theory: below {NEAR_LINEAR:.0%} near-linear, above {CAPS:.0%} a cap); what the DDP rows lost "
            "beyond it, section Project reads as Amdahl's serial fraction")


def out_of_order(sizes, seconds, flags, tolerance=0.10) -> list[str]:
    """Per size, '~' where a larger size's median took over `tolerance` less time and no `*` marks it (the spreads
    were too wide for the `*` rule), else '' (learner s13r6g: 65,536 B 0.531 ms above 262,144 B 0.344 ms, unmarked)."""
    return ["" if flags[i] or not any(t < (1 - tolerance) * s for t in seconds[i + 1:]) else "~"
            for i, s in enumerate(seconds)]


def out_of_order_line(sizes, seconds, marks) -> str:
    """The one line under the sweep's table for its '~' rows: which sizes, and what it means for the fit."""
    shown = [f"{n:,} B ({s * 1e3:.3f} ms)" for n, s, m in zip(sizes, seconds, marks) if m]
    if not shown:
        return ""
    largest = max(n for n, m in zip(sizes, marks) if m)
    return (f"~ {', '.join(shown)}: took longer than a larger message, which more bytes cannot; the spreads are too "
            f"wide to say which median is off, so the fit reads them: an order of magnitude up to {largest:,} B")


def one_way_twice(compared, batch: int = 256) -> list[str]:
    """'lab 02 timed DataParallel in 2 workloads: 1.44x (batch 512, step in one process), 1.68x (batch 256, step,
    launched ranks): ...': where one lab's table holds one way of splitting in several workloads, both figures and
    what parts them (learner s12r4g, finding 4: batch 512 scaled 1.29x, batch 256 1.70x, unexplained)."""
    groups: dict = {}
    for c in compared:
        if _readable(c) and c.row.strategy in dict(SPLITS) and c.row.workload.startswith(WORKLOAD):
            groups.setdefault((c.row.lab, c.row.strategy, c.row.world_size), {})[c.row.workload] = c
    lines = []
    for (lab, strategy, ranks), by_workload in sorted(groups.items()):
        if len(by_workload) < 2:
            continue
        rows = sorted(by_workload.values(), key=lambda c: -c.row.batch_size)
        lines.append(f"lab {lab} timed {dict(SPLITS)[strategy]} ({ranks:g} devices) in {len(rows)} workloads: "
                     + ", ".join(f"{c.speedup:.2f}x (batch {c.row.batch_size}, "
                                 f"{c.row.workload[len(WORKLOAD):].lstrip(', ') or 'step'})" for c in rows)
                     + ": each against its own workload's one-device row, timed its own way (the workload names "
                     f"how), so two figures of two setups, not one measured twice; the answer reads batch {batch}'s")
    return lines


def prediction_missed(v: dict) -> str:
    """'; the predicted 5%: missed (median 0.950x below 0.952x = 1/1.05)' for a verdicts.csv row restated to a weaker
    cost whose median lies below its predicted cost's floor; '' otherwise (learner s13r5g: lab 08 said 'the predicted
    5%: missed', this list only 'holds')."""
    found = re.search(r"the claim tested is 'no worse by more than \d+%', not (\d+)%", v.get("notes") or "")
    if not found:
        return ""
    cost = int(found.group(1)) / 100
    floor, ratio = 1 / (1 + cost), float(v["ratio"])
    if ratio >= floor:
        return ""
    d = next((d for d in range(2, 6) if f"{ratio:.{d}f}" != f"{floor:.{d}f}"), 6)
    return f"; the predicted {cost:.0%}: missed (median {ratio:.{d}f}x below {floor:.{d}f}x = 1/{1 + cost:g})"


def step_share_line(step_s: float, alone_s: float, in_step_s: float) -> str:
    """The all-reduce's share of a whole DDP step, said as the same figure over another whole (learner s13r7g: 51 % and
    25 % for one all-reduce, back to back); where the step's figure lies below the one alone, no split into transfer
    and waiting (the note above says why), else report.allreduce_share's split."""
    from ... import report
    if in_step_s < alone_s / 1.1:
        return (f"the DDP digits run: a step took {step_s * 1e3:.2f} ms (median); the same {in_step_s * 1e3:.2f} ms "
                f"all-reduce is {in_step_s / step_s:.0%} of that whole step (above: of one rank's compute)")
    return "the DDP digits run: " + report.allreduce_share(step_s, alone_s, in_step_s)


def alone_line(nbytes: float, alone_s: float, fit_s: float | None, sizes, seconds, spreads,
               other_launch: bool = True) -> str:
    """Why the figures for one all-reduce timed alone differ, measured: this launch's against the sweep's median at
    the nearest size (another launch) and its fit (learner s13r7g: 1.61 ms alone beside 0.46 ms from the fit, 3.5x
    apart, unexplained); '' without a sweep."""
    if not sizes:
        return ""
    i = min(range(len(sizes)), key=lambda k: abs(sizes[k] - nbytes))
    spread = f", spread {spreads[i]:.0%}" if spreads[i] is not None else ""
    fitted = f" (its fit: {fit_s * 1e3:.2f} ms at {nbytes:,.0f} B)" if fit_s is not None else ""
    apart = max(alone_s, seconds[i]) / max(min(alone_s, seconds[i]), 1e-12)
    where = "the sweep's launch" if other_launch else "this launch's sweep"
    return (f"  timed alone, the all-reduce took {alone_s * 1e3:.2f} ms in this launch and {seconds[i] * 1e3:.2f} ms "
            f"in {where} at {sizes[i]:,} B{spread}{fitted}: {apart:.1f}x apart"
            + (" between two launches" if other_launch else "")
            + ", as theory expects of a small all-reduce alone (its ranks wake between calls, the note above); the "
            "step's figure is the lab's")


def fit_margin(ratio: float) -> str:
    """'; the fit would have to be 3.2x too low for it to reach 10 %': how far off the sweep's fit may be before the
    ratio's reading changes (learner s13r7g, finding 5: a fit on medians that spread 42-331 % read with no error)."""
    if ratio <= 0:
        return ""
    if ratio < NEAR_LINEAR:
        return f"; the fit would have to be {NEAR_LINEAR / ratio:.1f}x too low for it to reach {NEAR_LINEAR:.0%}"
    if ratio > CAPS:
        return f"; the fit would have to be {ratio / CAPS:.1f}x too high for it to fall below {CAPS:.0%}"
    return ""


def flips_line(flips) -> str:
    """The summary's `[!]` for claims that held in one run and reversed in another, each named by its lab and claim
    (a flag names its row: 'a claim of lab 08' left the learner to search the list); '' where there is none.
    flips: (lab, claim) pairs."""
    if not flips:
        return ""
    named = "; ".join(f"lab {lab}: {claim}" for lab, claim in sorted(flips))
    return (f"  [!] {len(flips)} claim{'s' if len(flips) > 1 else ''} held in one run and reversed in another "
            f"(this machine's noise decided {'them' if len(flips) > 1 else 'it'}): {named}; each is marked in the "
            "list below")


def rates_or_baselines(a, b) -> str:
    """Why one setup's speedups from two labs differ, computed: 'the DDP rates agree within 1.10x (...); the
    one-process baselines lie 1.29x apart (...): the baselines make the gap' (learner s15r9g: 1.35x vs 1.91x
    read as two answers, the cause left to assemble from two lines); '' without both baselines."""
    if a.baseline is None or b.baseline is None:
        return ""
    unit = "requests/s" if "serving" in a.row.workload else "samples/s"
    name = dict(SPLITS).get(a.row.strategy, a.row.strategy)
    rates = max(a.row.samples_per_s, b.row.samples_per_s) / min(a.row.samples_per_s, b.row.samples_per_s)
    bases = (max(a.baseline.samples_per_s, b.baseline.samples_per_s)
             / min(a.baseline.samples_per_s, b.baseline.samples_per_s))
    each = (lambda rate: ", ".join(f"lab {c.row.lab} {rate(c):,.0f}" for c in (a, b)) + f" {unit}")
    rate_said = f"the {name} rates {'agree within' if rates <= bases else 'lie'} {rates:.2f}x" + (
        "" if rates <= bases else " apart")
    base_said = f"the one-process baselines lie {bases:.2f}x apart"
    cause = "the baselines make most of the gap" if bases > rates else "the rates make most of the gap"
    return (f"{a.speedup:.2f}x (lab {a.row.lab}) vs {b.speedup:.2f}x (lab {b.row.lab}): {rate_said} "
            f"({each(lambda c: c.row.samples_per_s)}); {base_said} ({each(lambda c: c.baseline.samples_per_s)}): "
            f"{cause}")


def two_labs_lines(compared) -> list[str]:
    """One line per setup whose speedup two labs measured (the table's rows): the figures and why they differ."""
    from ... import report
    readable = [c for c in compared if _readable(c)]
    lines, seen = [], set()
    for c in sorted(readable, key=lambda c: c.row.lab):
        for twin in report.same_setup(c, readable):
            key = frozenset((id(c), id(twin)))
            if key not in seen and rates_or_baselines(c, twin):
                seen.add(key)
                lines.append(f"{dict(SPLITS).get(c.row.strategy, c.row.strategy)} at batch {c.row.batch_size} on "
                             f"{c.hardware_ratio:g}x the hardware, timed by two labs: "
                             + rates_or_baselines(c, twin))
    return lines
