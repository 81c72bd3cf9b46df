"""Lab 05's reporting: the plain sentences its measured sections end with, and the optional framework side check's
table and verdicts (solutions/05_tf_distribute.ipynb calls these; the lesson's code stays in the notebook)."""
from __future__ import annotations

import textwrap

from ... import detectors, measure, tf_distribute, workloads

WIDTH = 100


def wrapped(text: str) -> str:
    """`text` wrapped at 100 columns, its later lines indented."""
    return textwrap.fill(text, width=WIDTH, subsequent_indent="    ")


def print_summary(text: str, flags=()) -> None:
    """Print one summary line, wrapped at 100 columns (its flags, if any, under it)."""
    print(measure.flagged(wrapped(text), flags))


def brief(v: measure.Verdict) -> str:
    """A verdict that holds, after the plain sentence that said its result: its word and figure on one line; a second
    line says what held only where the range reaches past 1, so the bound decided it (learner s13r5e, lab 05 finding 6:
    'what held: at most 10 % faster' restated a 32 % slowdown the plain line had said).
    Any other verdict (reversed, undecided, refused, with notes or flags) prints whole: its notes are its reading."""
    if v.verdict != measure.HOLDS or v.notes or detectors.reverses_theory(v):
        return str(v)
    first, _, second = v.claim.partition(" vs ")
    past_one = v.high < 1 if v.upper else v.low > 1  # the whole range beyond 1, on the side the claim allows
    if v.holds_from is None or past_one:  # the direction alone decided it: the plain line above said it
        held = ""
    else:  # a bound: how far ahead (an upper bound) or behind (a cost) the first named was allowed to be
        margin = v.holds_from - 1 if v.upper else 1 / v.holds_from - 1
        if margin < 0.005 or not second:  # no margin tested: the whole block says what was
            return str(v)
        bound = measure.verdicts.shown(v.holds_from, (v.low, v.high))
        held = (f"{first} at most {margin * 100:.0f} % {'faster' if v.upper else 'slower'} than {second} (the whole "
                f"range {'below' if v.upper else 'above'} {bound})")
    claim = f"{v.claim} [{v.workload}]" if v.workload else v.claim
    head = (f"verdict, {claim}: holds as predicted at {v.figure_text()}x (range {v.range_text()} over {v.repeats} "
            "paired repeats)")
    return wrapped(head) + ("\n" + textwrap.fill("what held: " + held, width=WIDTH, initial_indent="    ",
                                                   subsequent_indent="        ") if held else "")


def kernel_table(rates: dict, paired: dict, load, kind: str, verdicts: dict) -> None:
    """Print section 5's kernel comparison: one plain sentence per setup, then the table (rate, the verdict's figure
    'vs one device' or n/m, spread), its noise and load lines, then each setup's verdict."""
    for name, v in verdicts.items():  # one line each: the result in plain words
        print(wrapped(measure.in_plain_words(v, name, "one device", f"for {kind} devices")))
    print(f"{'keras, this kernel (' + kind + ')':<36} {'samples/s':>10} {'vs one device':>14} {'spread':>7}")
    for name, rate in rates.items():  # one figure per comparison: its verdict's (the median of the paired ratios)
        cell = "-" if name == "one device" else measure.table_ratio(measure.paired_ratios(paired[name],
                                                                                          paired["one device"]), load)
        print(f"{name:<36} {rate.samples_per_s:10.0f} {cell:>14} {rate.spread:6.0%}")
    under = [detectors.noise_line(rate.spread for rate in rates.values())
             or "noise: every rate above came from repeats within 25 %", measure.n_m_line(load),
             load.line() if load is not None else ""]  # the conditions: one line
    for line in filter(None, under):
        print(wrapped(line))
    for v in verdicts.values():
        print(brief(v))


def no_slower(a, b, claim: str, expected: str, results_dir, load=None) -> measure.Verdict:
    """The verdict that step times `a` are no slower than `b` (within 10 %) on the paired steps, restated weaker as
    far as their noise needs (as section 5's upper bounds are), under `load`; recorded in `results_dir`."""
    return measure.decide(measure.paired_ratios(a, b), lab="05", no_worse_than=0.10, max_restated=float("inf"),
                          workload=workloads.STEP_DIGITS, claim=claim, expected=expected,
                          load=load).record(results_dir)


LOOP = "torch, Lab 01's loop"
WHERE = {"torch": "own process, no TensorFlow", LOOP: "own process, no TensorFlow",
         "keras": "own process", "torch after TensorFlow": "the Keras process"}
KERAS_COMPANY = ("each Keras step here first waits until its threads are idle (a settle, as in Lab 02), then wakes "
                 "them")


def steps_of(turns, name: str) -> list[float]:
    """Every step time of setup `name`, round by round, from whichever process of `turns` timed it."""
    return next([t for r in process["times"][name] for t in r] for process in turns if name in process["times"])


def keras_twins(kernel_rate: float, own_rate: float, busy: bool = False) -> str:
    """Keras' one-device step measured twice (section 5 in this kernel, the side check in its own process): how far
    apart, in the results table's direction ('1.65x apart'), and whether on the side theory puts it (learner s13r6e,
    lab 05 finding 2: 1.65x in one line, 0.61x in the next, explained in three places)."""
    apart = max(own_rate, kernel_rate) / min(own_rate, kernel_rate)
    figures = f"section 5's {kernel_rate:,.0f} from back-to-back steps ({apart:.2f}x apart)"
    if busy:
        return (f"keras' {own_rate:,.0f} samples/s beside {figures}: a busy machine refused one of the comparisons, "
                "so no order is read from them")
    if apart > detectors.CONDITION_FACTOR:  # the results table flags the pair: say so here, not 'as theory puts it'
        return (f"keras' {own_rate:,.0f} samples/s beside {figures}: more than the {detectors.CONDITION_FACTOR:g}x "
                "that these conditions may explain (the results table below flags it)")
    if own_rate < kernel_rate:
        return f"keras' {own_rate:,.0f} samples/s lies below {figures}, as theory puts it"
    return (f"keras' {own_rate:,.0f} samples/s is not below {figures}, though theory puts it below: the wake-up cost "
            "nothing measurable here")


def settled_note(kernel_rate: float | None, own_rate: float) -> str:
    """The Keras row's note in the results table: why it was timed otherwise than section 5's one-device row, and how
    far apart the two came out, in one line (learner s13r7e, lab 05 finding 2: a second note 'allowed ... up to 2x')."""
    if not kernel_rate:
        return KERAS_COMPANY
    apart = max(kernel_rate, own_rate) / min(kernel_rate, own_rate)
    side = "below" if own_rate < kernel_rate else "above"
    return (f"{KERAS_COMPANY}: {apart:.2f}x {side} the one-device row's {detectors.figure_text(kernel_rate)}, whose "
            "steps ran back to back")


def side_check(turns, global_batch: int, threads: int, results_dir, load=None, kernel_rate: float | None = None,
               kernel_refused: bool = False) -> dict:
    """The framework side check: one plain sentence per verdict (its figure the comparison's only one), one table
    (step times and rates, no ratio) and one line saying how it was timed
    and why its Keras rate is below section 5's `kernel_rate`, then the two verdicts; returns the rates, their flags
    and the verdicts for the results table and the summary."""
    rates = {name: tf_distribute.step_rate(global_batch, times) for process in turns
             for name, times in process["times"].items()}
    flags: dict[str, list] = {name: [] for name in rates}
    loop_differs = tf_distribute.loop_conditions(turns[0]["omp_wait_policy"])  # said with Lab 01's figure
    flags[LOOP] += loop_differs
    flags["keras"].append(detectors.condition(settled_note(kernel_rate, rates["keras"].samples_per_s)))
    flags["torch after TensorFlow"] += measure.plausibility(other_framework="TensorFlow")
    said_below = [*loop_differs, *flags["keras"], *flags["torch after TensorFlow"]]  # the line under the table
    # theory orders the clean row no slower than torch after TensorFlow: where it reads slower, its own row says so
    flags["torch"] += tf_distribute.slower_alone(rates["torch"].samples_per_s,
                                                 rates["torch after TensorFlow"].samples_per_s)
    trap = no_slower(steps_of(turns, "torch"), steps_of(turns, "torch after TensorFlow"),
                     "PyTorch alone vs PyTorch where TensorFlow ran",
                     "PyTorch alone no slower: TensorFlow's threads can only take cores from it", results_dir, load)
    engines = no_slower(steps_of(turns, "torch"), steps_of(turns, "keras"),
                        "PyTorch vs Keras, one device, own processes",
                        "PyTorch no slower: less work around the same arithmetic on a short step", results_dir, load)
    # one figure per comparison: the verdict's (the median of the paired ratios), never the table's rates' ratio
    for v, setup, baseline, where in ((trap, "PyTorch alone", "PyTorch where TensorFlow ran", ""),
                                      (engines, "PyTorch", "Keras", "for a short step")):
        print(wrapped(measure.in_plain_words(v, setup, baseline, where)))
    print(f"{'setup':<24} {'process':<26} {'ms/step':>8} {'samples/s':>10} {'spread':>7}")
    for name, rate in rates.items():  # the rows' conditions are the one line under the table; any other flag shows
        print(measure.flagged(f"{name:<24} {WHERE[name]:<26} {global_batch / rate.samples_per_s * 1e3:8.2f} "
                              f"{rate.samples_per_s:10.0f} {rate.spread:6.0%}",
                              [f for f in flags[name] if f not in said_below]))
    how = (f"each process runs {threads} thread(s), batch {global_batch} of the digits; torch after TensorFlow "
           f"shares its process with TensorFlow's threads; {KERAS_COMPANY}")
    if kernel_rate:
        how += ": " + keras_twins(kernel_rate, rates["keras"].samples_per_s,
                                  kernel_refused or measure.CANNOT_SEE in (trap.verdict, engines.verdict))
    print(wrapped(how))
    print(wrapped(detectors.noise_line(rate.spread for rate in rates.values())
                  or "noise: every rate above came from repeats within 25 %"))
    print(brief(trap))
    print(brief(engines))
    return {"rates": rates, "flags": flags, "where": WHERE, "trap": trap, "engines": engines}


def lab01_line(rates: dict, flags: dict, lab01_rate, lab01_row, lab01_how, workload: str) -> str:
    """Lab 01's loop timed again in a process of its own, read against Lab 01's own figure (or why it cannot be)."""
    if not lab01_rate:
        return wrapped(f"Lab 01 has not recorded its '{workload}' rate in the results folder: "
                       "run Lab 01 first on this machine to compare")
    loop = rates[LOOP]
    said = detectors.conditions_of(flags[LOOP])  # what differs (the side check's table)
    spread = lab01_row.spread if lab01_row else None
    twice = detectors.measured_twice(lab01_rate, spread, loop.samples_per_s, loop.spread, what="Lab 01's loop",
                                     first_name="Lab 01", second_name="a process of its own",
                                     notes=[lab01_how] if lab01_how else [], condition=" / ".join(said),
                                     when="by two labs' runs")
    agree = detectors.twice_agree(lab01_rate, spread, loop.samples_per_s, loop.spread)
    # one figure for the pair: the agreement's gap where it speaks, else the ratio beside the note or flag
    pair = (f"against Lab 01's {lab01_rate:,.0f}: {agree}" if agree
            else f"= {loop.samples_per_s / lab01_rate:.2f}x Lab 01's {lab01_rate:,.0f}: "
            + ("see the flag" if detectors.impossible(twice) else "see the note"))
    text = f"Lab 01's loop in a process of its own: {loop.samples_per_s:,.0f} samples/s {pair}"
    lines = measure.flagged(wrapped(text), twice + [f for f in flags[LOOP] if f not in said])
    why = process_not_loop(rates.get("torch"), lab01_rate) if twice and not detectors.impossible(twice) else ""
    return lines + ("\n" + wrapped(why) if why else "")


def process_not_loop(step_rate, lab01_rate: float) -> str:
    """Where the launched loop ran below Lab 01's figure, the measured reason: the same process's bare step (no
    fetch, less work than the loop) ran below Lab 01's loop too, so the process is slower, not the loop."""
    if step_rate is None or step_rate.samples_per_s >= lab01_rate:
        return ""
    return (f"why: this process's step without the fetch (the torch row, {step_rate.samples_per_s:,.0f} samples/s) "
            f"also ran below Lab 01's {lab01_rate:,.0f} with it: the gap is this launched process's, taking turns "
            "with TensorFlow, not the loop's")
