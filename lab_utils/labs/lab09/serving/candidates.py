"""Strategy 3's report on the optimisation candidates timed side by side (lab 09 cell 'Side by side'): the table of
each candidate's median and paired speed-up, the shares read as verdicts, the baseline against its two earlier runs,
padding's and bf16's verdicts. The notebook times the candidates; this module reads and words what they measured."""
from __future__ import annotations

from dataclasses import dataclass, field

from .... import detectors, measure, memory, report, workloads
from .figures import allowance_outcome, summary_lines

BASELINE = "eager fp32 (baseline)"
STATIC_COST = 0.10  # the cost static torch.compile may show against dynamic=True at its own size (two programs differ)


@dataclass
class CandidatesRead:
    """What the candidates' report printed (`lines`, in order) and decided, for the record and the summary."""

    lines: list = field(default_factory=list)
    speedups: dict = field(default_factory=dict)  # candidate: median of its paired ratios over its reference
    flags: dict = field(default_factory=dict)  # candidate: its [!] (recorded with its row)
    refused: dict = field(default_factory=dict)  # candidate: the table's refusal (n/m), recorded with its row
    shares: dict = field(default_factory=dict)  # channels_last and the compiled versions: their verdicts
    pad_verdicts: dict = field(default_factory=dict)  # n: padding's verdict, where the pairs can resolve it
    bf16_verdict: measure.Verdict | None = None

    def speedup_read(self, name: str):
        """`name`'s speed-up where the table read it, None where it refused it (every candidate has a `refused` entry,
        empty when read: learner s13r8h found `name in refused` true on every run)."""
        return None if self.refused.get(name) else self.speedups.get(name)


def references(opt, pad_sizes, bucket) -> dict:
    """Each candidate's reference: the baseline, and for an unpadded batch its padded twin (read from that side)."""
    ref = {name: BASELINE for name in opt if not name.startswith("batch")}
    ref.update({f"batch {n}": f"batch {n} padded to {bucket(n)}" for n in pad_sizes})
    return ref


def candidates_table(opt, ref, pad_sizes, max_batch: int, load, read: CandidatesRead) -> None:
    """The table: each candidate's real requests (a padded batch computes more rows: learner s13r5h), median ms, spread and speed-up over its reference (n/m where refused)."""
    baseline = opt[BASELINE]
    read.lines += [f"{'candidate':<28}{'requests':>9}{'ms':>9}{'spread':>8}  speed-up over its reference",
                   "speed-up: the median of the paired rounds' ratios, the reference's time / the candidate's"]
    for name, t in opt.items():
        size = int(name.split()[1]) if name.startswith("batch") else max_batch
        flags = []
        if name in {f"batch {n}" for n in pad_sizes}:  # unpadded: against the baseline's time for max_batch images
            flags += report.batch_time_flags(size, t.median, max_batch, baseline.median)
        versus = "    -"
        if ref.get(name, name) != name:
            ratios = measure.paired_ratios(t, opt[ref[name]])
            read.speedups[name] = measure.paired_median(t, opt[ref[name]])  # the rounds are paired: as a verdict
            cell = measure.table_ratio(ratios, load)  # n/m: refused here
            read.refused[name] = measure.refusal(measure.as_paired_result(cell, ratios, load))
            versus = f"{cell:>5} {ref[name]}"
        read.flags[name] = flags
        read.lines.append(measure.flagged(f"{name:<28}{size:>9}{t.median * 1e3:9.2f}{t.spread:8.0%}  {versus}", flags))
    read.lines.append(measure.lines.wrap(detectors.noise_line((t.times for t in opt.values()), paired=True)
                                         or detectors.medians_stand_line()))
    if measure.n_m_line(load):
        read.lines.append(measure.lines.wrap(measure.n_m_line(load)))


def share_lines(opt, max_batch: int, results_dir, read: CandidatesRead) -> None:
    """The shares without a verdict of their own, read as verdicts from the paired rounds; static against dynamic."""
    baseline = opt[BASELINE]
    read.shares = {name: measure.verdict(opt[name], baseline, lab="09", claim=f"{name} vs eager fp32",
                                         expected=f"{name} faster", workload=workloads.SERVE_OPTIMISED
                                         ).record(results_dir)
                   for name in ("channels_last", "torch.compile", "torch.compile dynamic=True") if name in opt}
    items = [(f"{name} vs eager fp32", measure.printed_outcome(v), read.flags[name]) for name, v in read.shares.items()]
    if {"torch.compile", "torch.compile dynamic=True"} <= set(opt):  # theory: at its own size static is no slower
        static_vs_dynamic = measure.verdict(opt["torch.compile"], opt["torch.compile dynamic=True"], lab="09",
                                            claim="static vs dynamic=True torch.compile",
                                            no_worse_than=STATIC_COST,
                                            expected="static no slower (its graph is built for this size)",
                                            workload=workloads.SERVE_OPTIMISED).record(results_dir)
        items.append((f"torch.compile static vs dynamic=True at batch {max_batch} (theory: static no slower)",
                      allowance_outcome(static_vs_dynamic, "static", STATIC_COST), []))
    read.lines += [line.strip() for line in summary_lines(items)]  # a reason not to read one: said once, under them


def baseline_line(earlier, opt, max_batch: int) -> str:
    """The baseline is the batch-max_batch forward a third time: this run's figure is the table's, the earlier runs
    (`earlier`: [(who, Timing)], the modes' run and the sweep) said once beside it, every pair read by one rule; the
    pair at fault named only where one clashes (learner s13r6h: 'the third run of it ... every pair: the widest
    pair ...' for three figures that agreed)."""
    runs = [(who, t.median * 1e3, t.spread) for who, t in earlier] + [
        ("the candidates' run", opt[BASELINE].median * 1e3, opt[BASELINE].spread)]
    flags = detectors.measured_several(runs, what=f"the batch-{max_batch} forward", unit="ms")
    agreed = detectors.several_agree(runs)
    figures = ", ".join(f"{ms:.2f} ms {who.replace('the ', 'in the ', 1)}" for who, ms, _ in runs[:-1])
    head = (f"the baseline, the batch-{max_batch} forward: {runs[-1][1]:.2f} ms here (the table's figure), "
            f"{figures}")
    if agreed and "they agree" in agreed:  # one figure: the others are said by their gap, not printed again
        gap = max(ms for _, ms, _ in runs) / min(ms for _, ms, _ in runs) - 1
        others = " and ".join(who for who, _, _ in runs[:-1])
        return measure.lines.wrap(
            f"the baseline, the batch-{max_batch} forward: {runs[-1][1]:.2f} ms, the table's figure; {others} timed "
            f"it too, all within {gap:.0%} of each other (runs minutes apart may differ by {detectors.TWICE_TOLERANCE:.0%})")
    return measure.flagged(measure.lines.wrap(f"{head};\n  every pair: " + (agreed or "see the flag")), flags)


def padding_lines(opt, pad_sizes, bucket, results_dir, read: CandidatesRead) -> None:
    """Padding's verdicts (theory: in eager mode padding only adds rows), where the pairs can resolve its extra work."""
    for n in pad_sizes:
        extra = bucket(n) / n - 1  # the work padding adds: what the unpadded batch should save
        pairs = measure.paired_ratios(opt[f"batch {n}"], opt[f"batch {n} padded to {bucket(n)}"])
        if extra < measure.RESOLVE * measure.ratio_scatter(pairs):  # too small an effect for these pairs
            read.lines.append(measure.lines.wrap(
                f"batch {n} padded to {bucket(n)}: {extra:.0%} more work, below what these pairs can resolve "
                f"({measure.RESOLVE:g} x their {measure.ratio_scatter(pairs):.0%} scatter): no verdict on this one"))
            continue
        read.pad_verdicts[n] = measure.verdict(opt[f"batch {n}"], opt[f"batch {n} padded to {bucket(n)}"], lab="09",
                                               workload=workloads.SERVE_PADDED,
                                               claim=f"batch {n} unpadded vs padded to {bucket(n)} (eager)",
                                               expected="unpadded faster (eager: padding only adds rows)"
                                               ).record(results_dir)
        read.lines.append(str(read.pad_verdicts[n]))


def bf16_lines(opt, device: str, results_dir, read: CandidatesRead) -> None:
    """bf16 autocast against fp32: theory's direction depends on whether this processor computes bf16 natively."""
    import torch

    baseline = opt[BASELINE]
    note = memory.amp_note(device, torch.bfloat16)  # '' where bf16 is native (a GPU, or avx512_bf16/AMX)
    if note:  # emulated: theory predicts fp32 faster
        read.bf16_verdict = measure.verdict(baseline, opt["bf16 autocast"], lab="09",
                                            claim="fp32 vs bf16 autocast forward", workload=workloads.SERVE_OPTIMISED,
                                            expected="fp32 faster (bf16 emulated here)").record(results_dir)
        read.lines += [str(read.bf16_verdict), f"note: {note}"]
        return
    read.lines.append(measure.lines.wrap("bf16 here: " + ("native: this CPU has avx512_bf16 or AMX-BF16 units"
                                                          if device == "cpu" else
                                                          "on the GPU (native from compute capability 8.0)")))
    read.bf16_verdict = measure.verdict(opt["bf16 autocast"], baseline, lab="09", claim="bf16 autocast vs fp32 forward",
                                        workload=workloads.SERVE_OPTIMISED,
                                        expected="bf16 faster (half the bytes, native bf16)").record(results_dir)
    read.lines.append(str(read.bf16_verdict))


def read_candidates(opt, *, pad_sizes, bucket, max_batch: int, earlier, device: str, results_dir,
                    load=None) -> CandidatesRead:
    """The whole report on the candidates' interleaved timings `opt` (measure.Timing each): table, shares, the
    baseline's three runs, padding, bf16; `load` the conditions the rounds ran under (run_conditions() by default)."""
    load = load if load is not None else measure.run_conditions()
    read = CandidatesRead()
    ref = references(opt, pad_sizes, bucket)
    candidates_table(opt, ref, pad_sizes, max_batch, load, read)
    share_lines(opt, max_batch, results_dir, read)
    read.lines.append(baseline_line(earlier, opt, max_batch))
    padding_lines(opt, pad_sizes, bucket, results_dir, read)
    bf16_lines(opt, device, results_dir, read)
    if device != "cuda":
        read.lines.append(measure.lines.wrap(
            "\nfp16 autocast and CUDA graphs: not run — no GPU here. fp16 pays on GPUs with tensor cores; a CUDA graph "
            "replays a recorded sequence of GPU kernel launches and removes their per-launch cost, which only a GPU "
            "has."))
    return read


def conv_share_line(layers: dict, batch: int, speedup: float | None) -> str:
    """The image layers' share of the forward's time (every leaf layer before the flatten, timed alone at `batch`:
    layer_times_by_batch) against what channels_last saved (1 - 1 / its paired speed-up): theory bounds the saving
    by that share, [!] where it saved more (learner s13r7h: 'at most the convolutions' share' was unprinted)."""
    names = list(layers)
    image = names[:next((i for i, n in enumerate(names) if n.startswith("flatten")), len(names))]
    total = sum(t[batch].median for t in layers.values())
    share = sum(layers[n][batch].median for n in image) / total if total > 0 else 0.0
    head = (f"the layers on images (convolutions, their ReLUs and pools) take {share:.0%} of the batch-{batch} "
            "forward's time (each layer timed alone)")
    if speedup is None:
        return measure.lines.wrap(head + "; channels_last's saving was not read here")
    saved = 1 - 1 / speedup
    if saved <= share:
        return measure.lines.wrap(head + f"; channels_last saved {saved:.0%} of the forward: within that share, as "
                                  "theory allows")
    return measure.flagged(measure.lines.wrap(head + f"; channels_last saved {saved:.0%} of the forward"),
                           [detectors.Flag(detectors.Kind.ABOVE_BOUND, "more than that share, the most theory allows "
                                           "it (layers timed alone and in the whole pass differ)")])
