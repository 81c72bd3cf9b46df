"""Lab 06's reporting: the sentences its measured sections start with, its all-reduce table, fits and figure
(solutions/06_collectives_tensor_parallel.ipynb calls these; the lesson's code stays in the notebook)."""
from __future__ import annotations

import dataclasses
import re
import statistics
from pathlib import Path

from ... import detectors, learner_code, measure, report

__all__ = ["verdict_brief", "plain_verdict", "takeaway", "lab04_source", "gap_split", "busy_cores", "allreduce_table",
           "fit_report", "fit_halves", "details", "draw_allreduce", "training_lines"]

CLOSE = 0.10  # "within 10 % of each other": the same margin as the no-slower verdicts


def size_text(nbytes: int) -> str:
    """A message size in words: KiB below 1 MiB, MiB from there."""
    return f"{nbytes // 1024} KiB" if nbytes < 1 << 20 else f"{nbytes / (1 << 20):g} MiB"


def takeaway(sizes, leads, decided=None, ranges=None) -> str:
    """The all-reduce table in one sentence, from its library-lead cells ('1.12x', or n/m where refused): at which
    sizes the ring and the library are within 10 % of each other, and where either is ahead by more. `decided`:
    {size: its verdict's word} for the sizes a verdict tests, said with that word, never as a lead alone (learner
    s12r4e, lab 06 finding 1: 'faster by more at 64 MiB' above 'not distinguishable here' for 64 MiB). `ranges`:
    {size: (low, high)} of each lead's paired range: whether a lead past 10 % is clear of this run's noise (learner
    s13r7e, lab 06 finding 2: the ring 1.3x faster at 1 MiB, above the crossover, went unremarked)."""
    decided = decided or {}
    tested = {s: float(cell.rstrip("x")) for s, cell in zip(sizes, leads) if cell != measure.N_M and s in decided}
    read = {s: float(cell.rstrip("x")) for s, cell in zip(sizes, leads) if cell != measure.N_M and s not in decided}
    verdicts = [f"{size_text(s)}, which the verdict below tests: {decided[s]}"
                + ("" if decided[s] == measure.CANNOT_SEE else f" (lead {lead:.2f}x)")  # no figure beside a refusal
                for s, lead in tested.items()]
    if not read:
        if verdicts:
            return "the ring against the library: " + "; ".join(verdicts)
        return "the ring against the library: no size's lead could be read here (n/m: see under the table)"
    close = [s for s, lead in read.items() if 1 - CLOSE <= lead <= 1 + CLOSE]  # as printed: 0.90x-1.10x
    # learner s15r9e, lab 06 finding 4: a 2.48x lead printed, then called noise: such a lead prints no figure
    noisy = [s for s in read if s not in close and ranges and across_one(ranges[s])]
    library = [s for s, lead in read.items() if lead > 1 + CLOSE and s not in noisy]
    ring = [s for s, lead in read.items() if lead < 1 - CLOSE and s not in noisy]

    def listed(chosen):
        return ", ".join(f"{size_text(s)} ({read[s]:.2f}x)" for s in chosen)

    parts = [f"the ring and dist.all_reduce within {CLOSE:.0%} of each other (library lead {1 - CLOSE:.2f}x-"
             f"{1 + CLOSE:.2f}x) at {len(close)} of {f'the {len(read)} other' if tested else len(read)} sizes".replace("%", " %")]
    if library:
        parts.append(f"the library faster by more at {listed(library)}")
    if ring:
        parts.append(f"the ring faster by more at {listed(ring)}")
    if noisy:
        parts.append(f"{NOT_DISTINGUISHABLE} at {', '.join(size_text(s) for s in noisy)} (a median lead past "
                     f"{CLOSE:.0%}, but its paired range reaches across 1)".replace("%", " %"))
    refused = len(sizes) - len(read) - len(tested)
    if refused:
        parts.append(f"{refused} size(s) n/m")
    return "; ".join(parts + verdicts)


NOT_DISTINGUISHABLE = "not distinguishable here"


def across_one(paired_range) -> bool:
    """Whether a lead's paired range (low, high) reaches across 1: no order can be read from it."""
    return paired_range[0] <= 1 <= paired_range[1]


def lead_cell(cell: str, paired_range) -> str:
    """The table's lead cell: the ratio, or where it is past 10 % but its paired range reaches across 1, the
    takeaway's word for it (no figure that the line above calls noise)."""
    if cell == measure.N_M or 1 - CLOSE <= float(cell.rstrip("x")) <= 1 + CLOSE or not across_one(paired_range):
        return cell
    return "not dist."


SCATTER = "these pairs scatter by"  # the note of a no-worse-than claim too noisy to test: only a win decided


def _won_past_noise(v: measure.Verdict) -> bool:
    """Whether v held as a win on pairs too noisy to test a cost: its only note is that scatter note."""
    notes = [n for n in v.notes.split("; ") if n]
    return len(notes) == 1 and notes[0].startswith(SCATTER) and v.low > 1


def verdict_brief(v: measure.Verdict) -> str:
    """A verdict that held, after the plain sentence that said its result: word and figure on one line, then, for a
    win on pairs too noisy to test a cost, how it was decided in one plain line (learner s13r5e, lab 06 finding 1:
    'holds' beside 'too noisy to test a cost up to 30%' and three noise figures). Any other verdict prints whole."""
    plain_direction = v.holds_from is None and not v.notes
    claim = f"{v.claim} [{v.workload}]" if v.workload else v.claim
    if _undecided_past_noise(v):  # learner s13r6e, lab 06 finding 2: a three-part hedge under 'not distinguishable'
        return undecided_brief(v, claim)
    if v.verdict != measure.HOLDS or detectors.reverses_theory(v) or not (plain_direction or _won_past_noise(v)):
        return str(v)
    head = measure.short_lines(f"verdict, {claim}: holds as predicted at {v.figure_text()}x (range {v.range_text()} "
                               f"over {v.repeats} paired repeats)")
    if plain_direction:
        return head
    found = re.search(r"scatter by ([\d.]+)%", v.notes)
    if found is None:  # a note of another wording: the whole block says it
        return str(v)
    scatter = found[1]
    # learner s13r8e: "across the whole range" read as every size, and the 3x behind "too much" was in the README only
    how = (f"{v.claim.split(' vs ')[0]} faster over the whole paired range at this size; the pairs scatter by "
           f"{scatter} %, so only a cost above {measure.RESOLVE:g}x that ({measure.RESOLVE * float(scatter):.0f} %) "
           "would stand out: only a win could decide")
    return head + "\n" + measure.short_lines("    " + how, indent="        ")


def _undecided_past_noise(v: measure.Verdict) -> bool:
    """Whether v is a no-worse-than claim left undecided because its pairs scatter too much to test a cost."""
    notes = [n for n in v.notes.split("; ") if n]
    return (v.verdict == measure.UNDECIDED and v.holds_from == 1.0 and not detectors.reverses_theory(v)
            and len(notes) == 1 and re.match(SCATTER + r" [\d.]+%: a cost would have to exceed \d+%", notes[0]) is not None)


def undecided_brief(v: measure.Verdict, claim: str) -> str:
    """An undecided no-worse-than verdict on noisy pairs: its word and figure on one line, then in one plain line
    what would have decided it (a clear win) and why a cost could not be tested (the pairs' scatter, measured)."""
    found = re.match(SCATTER + r" ([\d.]+)%: a cost would have to exceed (\d+)%", v.notes)
    rule = re.search(r"more than the (\d+)% the course", v.notes)
    if found is None or rule is None:  # a note of another wording: the whole block says it
        return str(v)
    scatter, cost = float(found[1]), found[2]
    first = v.claim.split(" vs ")[0]
    head = measure.short_lines(f"verdict, {claim}: {v.verdict} at {v.figure_text()}x (range {v.range_text()} over "
                               f"{v.repeats} paired repeats)")
    # learner s13r7e, lab 06 finding 1: the rule's 30 % (markdown) beside this run's 108 %, neither named
    why = (f"not a clear win for {first} (the range reaches {v.low:.2f}x, below 1); these pairs scatter by "
           f"{scatter:.0f} %: a cost must exceed {cost} % to stand out here, past the rule's {rule[1]} % limit")
    return head + "\n" + measure.short_lines("    " + why, indent="        ")


def plain_verdict(v: measure.Verdict, setup: str, baseline: str) -> str:
    """measure.in_plain_words, without the scatter note of a win or an undecided verdict on noisy pairs (brief says
    how it was decided; learner s13r6e: the summary repeated the whole note)."""
    noisy = _won_past_noise(v) or _undecided_past_noise(v)
    if v.verdict == measure.UNDECIDED:  # the word first: its figure is no finding
        return (f"too noisy to decide: {setup} {v.ratio:.2f}x the speed of {baseline} (range {v.range_text()}); "
                f"predicted: {v.expected}")
    return measure.in_plain_words(dataclasses.replace(v, notes="") if noisy else v, setup, baseline)


def training_lines(tp_losses, single_losses, tolerance: float = 1e-5) -> str:
    """The tensor-parallel training check in two lines: how many steps' losses equal one device's within
    `tolerance`, then the first and the last loss, and whether the loss fell between them."""
    if not tp_losses or len(tp_losses) != len(single_losses):
        raise ValueError(f"{len(tp_losses)} tensor-parallel losses against {len(single_losses)} of one device: "
                         "give one per step for both, from the same run")
    equal = sum(abs(a - b) <= tolerance for a, b in zip(tp_losses, single_losses))
    steps, first, last = len(tp_losses), tp_losses[0], tp_losses[-1]
    moved = f"it fell by {(1 - last / first):.0%}".replace("%", " %") if last < first else "it did not fall"
    within = f"{tolerance:.0e}".replace("e-0", "e-")
    return (f"losses equal to one device's within {within}, step by step: {equal} of {steps} steps\n"
            f"loss at step 1: {first:.3f}; at step {steps}: {last:.3f}: {moved}")


def lab04_source(codes, cwd=None) -> str:
    """Whose Lab 04 code counted the pipeline's bytes: the learner's copy beside this notebook, or the course's
    solution, and why, in words true wherever the notebook ran (a learner's notebooks/, solutions/, build/outputs)."""
    functions = ", ".join(f"{code.function.__name__} (cell {code.cell})" for code in codes)
    notebook = Path(codes[0].notebook)
    here = Path(cwd or Path.cwd()).resolve()
    if notebook.resolve().parent != (learner_code.COURSE / "solutions").resolve():
        return f"Lab 04's pipeline step: {functions} from your {notebook.name} beside this notebook"
    said = f"Lab 04's pipeline step: {functions} from the course's solution of Lab 04"
    if here in ((learner_code.COURSE / "solutions").resolve(), learner_code.COURSE.resolve()):
        return said
    # learner s13r6e, lab 06 finding 11: 'of yours' read as work the learner should have done: it is lesson code
    # learner s13r7e, lab 06 finding 6: 'nothing for you to write' left open whether an unfinished Lab 04 matters
    # learner s15r9e: 'no ... beside this notebook' was false for a reader whose folder holds Lab 04: say where
    return (f"{said}: the folder this run was made in held no {notebook.name} of yours (run here, the cell reads "
            "the one beside this notebook; these are lesson cells, no exercise of yours)")


FIT_USED = {"library": "the alpha-beta model of dist.all_reduce",
            "ring": "the alpha-beta model of the ring (dist.all_reduce's fit was refused above; the ring's was "
                    "accepted, and it sends the same bytes in the same steps)"}


def gap_split(step_times, comm_model_s, fit_used: str | None, refused: bool, tp_model_s=None) -> str:
    """Tensor parallel's step-time gap to DDP split in two measured parts (its collectives: the step minus the same
    step with them local no-ops; the rest: the no-op step minus DDP's), beside what the α–β model gives the bytes
    (`comm_model_s`: tensor parallel's minus DDP's; `tp_model_s`: tensor parallel's own, set beside its measured).
    `fit_used`: whose accepted fit turned the bytes into time, "library" or, where it was refused, "ring" (learner
    s12r4e, lab 06 finding 5: a refused library fit left the lab's last point unmade); None: both refused."""
    tp, ddp = step_times["tensor parallel"], step_times["DDP"]
    gap = statistics.median(tp) - statistics.median(ddp)  # the table's medians: one figure per step (issue 51)
    if refused or gap <= 0:
        return "no step-time gap to split here: the speed verdict above says why"
    local = step_times.get("tensor parallel, no communication")
    said = f"tensor parallel's step took {gap * 1e3:.1f} ms longer than DDP's"
    lines = []
    if local is not None:  # the table's medians again (learner s13r5e, lab 06 finding 2: a paired 1.7 ms beside them)
        comm = statistics.median(tp) - statistics.median(local)
        rest = statistics.median(local) - statistics.median(ddp)
        if comm <= 0:  # the step without its collectives took as long: nothing left for them that this run sees
            said += (": the same step with every collective a local no-op took as long or longer, so this run sees "
                     f"no time in the collectives; that no-op step took {rest * 1e3:.1f} ms more than DDP's")
        else:
            said += f": {comm * 1e3:.1f} ms in its collectives, {compute_sentence(rest, paired_range(local, ddp))}"
            lines.append("(collectives: the step minus the no-op step; compute and copies: the no-op step minus "
                         "DDP's; all three from the medians in the table above)")
    if fit_used and local is not None and comm > 0 and tp_model_s is not None:
        # one model figure, set beside the one measured figure it models (learner s13r6e, lab 06 finding 4: 'the
        # collectives 4.8 ms of the gap' beside 'tensor parallel's own 5.3 ms' read as two answers to one question)
        lines.append(f"of the {comm * 1e3:.1f} ms in its collectives, {FIT_USED[fit_used]} explains "
                     f"{model_share_sentence(tp_model_s, comm)}")
    elif fit_used and comm_model_s is not None:
        lines.append(f"{FIT_USED[fit_used]} gives the collectives {comm_model_s * 1e3:.1f} ms of the gap (tensor "
                     "parallel's minus DDP's)")
    elif not fit_used:
        lines.append("no alpha-beta fit to turn the bytes into time: the ring's and the library's were both refused "
                     "above")
    return "\n".join(measure.short_lines(line) for line in [said] + lines)


def paired_range(a, b) -> tuple[float, float]:
    """The 90 % range of a - b over paired rounds (seconds): how far this run's noise moves their difference."""
    low, high, _ = measure.ratio_range([x - y for x, y in zip(a, b)])
    return low, high


def compute_sentence(rest_s: float, noise=None) -> str:
    """Whether tensor parallel's compute and copies (its no-op step minus DDP's) cost more than DDP's, in words;
    `noise`: the paired rounds' range of that difference: a range holding 0 cannot tell a cost from none."""
    figure = f"{rest_s * 1e3:.1f} ms in its compute and copies"
    if noise is not None and noise[0] <= 0 <= noise[1]:
        return (f"{figure}: within this run's noise (paired rounds {noise[0] * 1e3:+.1f} to {noise[1] * 1e3:+.1f} "
                "ms), so no compute cost is seen")
    if rest_s > 0:
        return f"{figure} (more than DDP's, as theory allows: sliced layers, copies)"
    return f"{figure} (no more than DDP's: the gap is its collectives)"


def model_share_sentence(model_s: float, measured_s: float) -> str:
    """The model's time for the collectives as a share of their measured time, and what it leaves, in words."""
    share = model_s / measured_s
    said = f"{model_s * 1e3:.1f} ms ({share * 100:.0f} %)"
    if share > 1.1:
        return f"{said}: more than this run measured"
    if share >= 0.9:
        return f"{said}: the bytes and calls explain them"
    return (f"{said}; the other {(measured_s - model_s) * 1e3:.1f} ms is waiting and Python work the model does not "
            "count (see below)")


def busy_cores(load) -> tuple[float, int] | None:
    """(cores other programs and steal used, cores) while `load` was measured: can that load explain a flag?"""
    return None if load is None else (load.others + load.steal, load.cores)


COLUMNS = {"ring": "the ring's median", "library": "dist.all_reduce's median"}  # the figure's points, by side


def named_column(flags, name: str) -> list:
    """`flags` on one side's medians, each starting with the side it read (learner s12r4e, lab 06 finding 4: a bare
    '16 KiB took less time than 4 KiB' had to be matched to its side by its numbers)."""
    return [detectors.Flag(detectors.kind_of(f), f"{COLUMNS[name]}: {f}") for f in flags]


def allreduce_table(sizes, runs, medians, spreads, load, oversubscribed: bool, decided=None) -> None:
    """Print the all-reduce table: its one-sentence takeaway, then per size the library lead (n/m where `load` or a
    suspect median refuses it), then its flags and refusal lines. The medians are drawn, not printed (learner s13r6e,
    lab 06 'make it a 5': medians beside the lead disagreed by up to 2x); their noise is under details().
    `decided`: {size: verdict word} for the sizes a verdict below tests (the takeaway says them with that word)."""
    busy = busy_cores(load)
    size_flags = {name: [named_column(flags, name) for flags in  # more bytes, less time: named by its side
                         report.allreduce_flags(sizes, medians[name], spreads[name], busy)]
                  for name in medians}
    row_flags = [size_flags["ring"][i] + size_flags["library"][i] for i in range(len(sizes))]  # '*': suspect
    leads = {s: measure.paired_ratios(runs[s]["library"], runs[s]["ring"]) for s in sizes}
    lead_cells = [measure.table_ratio(leads[s], load, row_flags[i])
                  for i, s in enumerate(sizes)]  # the comparison's one figure per size
    ranges = {s: measure.ratio_range(leads[s])[:2] for s in sizes}
    print(measure.short_lines(takeaway(sizes, lead_cells, decided, ranges)))
    print(f"{'size':>9} {'library lead':>13}")
    for i, s in enumerate(sizes):
        flags = measure.plausibility(oversubscribed=oversubscribed) if i == 0 else []  # said once, on the first row
        cell = lead_cells[i] if s in (decided or {}) else lead_cell(lead_cells[i], ranges[s])
        print(measure.table_row(f"{size_text(s):>9} {cell:>13}", flags + row_flags[i]))
    for line in measure.table_lines(row_flags, [size_text(s) for s in sizes], "sizes"):
        print(line)
    if measure.n_m_line(load):
        print(measure.short_lines(measure.n_m_line(load)))
    if any(detectors.impossible(flags) for flags in row_flags):
        print(measure.verdicts.SUSPECT_N_M)


def fit_report(sizes, medians, world_size: int, backend: str, load):
    """Fit t(S) to each side's medians and print, per side, where latency and where bandwidth dominates (alpha, B
    and the crossover), or its refusal; returns the fits, their flags and whether each may be read (a refused fit
    prints no alpha or B and is not drawn). How a fit is refused is said under details()."""
    fits = {name: report.fit_allreduce(sizes, medians[name], world_size) for name in medians}
    fit_flags = {name: fit.contradictions(sizes, medians[name], world_size, busy_cores(load))
                 for name, fit in fits.items()}
    fit_read = {name: fit.readable(fit_flags[name]) for name, fit in fits.items()}
    print(f"where each term of the alpha-beta fit t(S) = 2(N-1) alpha + 2(N-1)/N S / B dominates (N = {world_size}, "
          f"{backend}):")
    for name, fit in fits.items():
        label = "ring" if name == "ring" else "dist.all_reduce"
        said = (shape_text(fit, world_size) if fit_read[name]
                else "no alpha or B: refused, not drawn (why: the flags under this line)")
        print(measure.flagged(measure.short_lines(f"  {label:<16} {said}", indent=" " * 19), fit_flags[name]))
    if len(set(fit_read.values())) > 1:  # one read, one refused: the same rule, said once
        print(measure.short_lines(ONE_RULE))
    return fits, fit_flags, fit_read


ONE_RULE = ("one rule for both fits (the section's end): a fit is refused where its line misses one of its own "
            "medians by more than 2x, never for their spread; how far a read fit's alpha and B move with that spread: "
            "the line fitting the even and the odd rounds alone, where enough rounds ran")


def shape_text(fit, world_size: int) -> str:
    """Where a read fit's latency term dominates and where its bandwidth term does, with alpha and B."""
    return (f"latency below {fit.crossover_bytes(world_size) / 1024:,.0f} KiB (alpha = {fit.latency_s * 1e6:.0f} us "
            f"per step), bandwidth above (B = {fit.bus_bandwidth / 1e9:.2f} GB/s)")


def details(spreads, halves: str) -> str:
    """The all-reduce section's last lines: how far alpha and B move between halves of the rounds (`halves`:
    fit_halves' line, or empty), then the medians' noise in one line (learner s13r7e, lab 06 finding 4: ~20 lines
    of noise and fit rules around the table, the fit and the verdict; the fit rules are in the markdown)."""
    every = [s for s in spreads["ring"] + spreads["library"] if s is not None]
    noisy = sum(detectors.noisy_as_printed(s) for s in every)
    limit = f"{detectors.NOISY_SPREAD:.0%}"
    noise = (f"noise: {noisy} of {len(every)} medians in the figure spread more than {limit} over their repeats "
             f"(widest {detectors.spread_text(max(every))}): the table's leads pair rounds instead" if noisy else
             f"noise: every median in the figure came from repeats within {limit}")
    return "\n".join(measure.short_lines(" ".join(line.split()).replace("%", " %"))
                     for line in ([halves] if halves else []) + [noise])


def fit_halves(sizes, runs, world_size: int, read: dict | None = None) -> str:
    """How far to trust a fit read from noisy medians, measured: each side fitted again to the even and to the odd
    rounds alone, the range alpha and B then span (learner s13r5e, lab 06 finding 8: every median was flagged noisy,
    the fit not). `read`: {side: whether its fit was read}; a refused side is left out (learner s15r9e, lab 06
    finding 4: the library's B printed with no measure of trust beside the ring's refusal). Empty where fewer than 4
    rounds ran, no side was read, or a half's fit is degenerate."""
    rounds = min(len(runs[s][name]) for s in sizes for name in ("ring", "library"))
    if rounds < 4:
        return ""
    said = []
    for name, label in (("ring", "ring"), ("library", "dist.all_reduce")):
        if read is not None and not read.get(name):
            continue
        halves = [report.fit_allreduce(sizes, [statistics.median(runs[s][name][start::2]) for s in sizes], world_size)
                  for start in (0, 1)]
        if any(fit.flags for fit in halves):
            return ""
        alphas = sorted(fit.latency_s * 1e6 for fit in halves)
        bws = sorted(fit.bus_bandwidth / 1e9 for fit in halves)
        said.append(f"{label} alpha {alphas[0]:.0f}-{alphas[1]:.0f} us, B {bws[0]:.2f}-{bws[1]:.2f} GB/s")
    if not said:
        return ""
    return measure.short_lines("alpha and B fitted to the even and to the odd rounds alone: "
                               + "; ".join(said) + " (read alpha and B within these ranges)")


def draw_allreduce(sizes, medians, fits, fit_read, world_size: int) -> None:
    """Both sides' medians against the message size, each with its alpha-beta fit where it was read."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    grid = np.geomspace(min(sizes), max(sizes), 50)
    for name, color in (("ring", "tab:blue"), ("library", "tab:orange")):
        ax.plot(sizes, [t * 1e3 for t in medians[name]], "o", color=color, label=f"{name}: measured (median)")
        if fit_read[name]:  # a refused fit is not drawn: the legend says so
            ax.plot(grid, [fits[name].seconds(s, world_size) * 1e3 for s in grid], "--", color=color,
                    label=f"{name}: α–β fit")
        else:
            ax.plot([], [], " ", label=f"{name}: α–β fit refused, not drawn")
    ax.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="ms per all-reduce",
           title=f"all-reduce over {world_size} ranks")
    ax.yaxis.set_major_formatter("{x:g}")
    ax.yaxis.set_minor_formatter(lambda y, pos: "")  # decades only: minor labels overlapped
    ax.legend(fontsize=8)
    plt.show()
