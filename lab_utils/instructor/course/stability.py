"""Do the course's conclusions hold from run to run? Several runs' verdicts.csv, claim by claim.

    python -m lab_utils.instructor.course.stability build/run1/results build/run2/results ...

Each argument is a results folder (or a verdicts.csv). For every (lab, claim tested) the table shows each run's
verdict, ratio and range; a claim that is 'holds' in one run and 'reversed' in another is a contradiction, and the
command exits 1. 'not distinguishable here' beside either is no contradiction: it is what noise is allowed to say.
A claim a noisy run restated to a weaker tolerance ('no worse by more than 29 %') stays on its claim's line, its cell
marked with the tolerance it tested and the line saying the runs tested different claims (their ranges, which measure
the same ratio, are still compared); a claim measured on another workload is on a line of its own (the verdicts.csv `workload` column; a row of an older file, which has
none, joins the one workload the other runs name for its claim). Two runs whose ranges do not overlap are marked: each range promised to hold the ratio, and one of them did not.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ... import measure

SHORT = {measure.HOLDS: "holds", measure.REVERSED: "REVERSED", measure.UNDECIDED: "n.d.",
         measure.CANNOT_SEE: "not here"}


@dataclass(frozen=True)
class Claim:
    """One claim's verdicts across runs: per run (verdict, ratio, low, high), or None where that run did not decide
    it."""

    lab: str
    claim: str
    runs: tuple
    workload: str = ""  # the registered workload the runs measured it on ("": older rows that named none)
    tested: tuple = ()  # per run, the weaker claim it tested instead when it restated this one ("": as claimed)

    @property
    def restated(self) -> bool:
        """True when the runs that decided it did not all test the same claim (one restated its tolerance)."""
        return len({t for t, run in zip(self.tested, self.runs) if run}) > 1

    @property
    def contradicts(self) -> bool:
        """True when one run says 'holds' and another 'reversed'."""
        said = {run[0] for run in self.runs if run}
        return {measure.HOLDS, measure.REVERSED} <= said

    @property
    def ranges_apart(self) -> bool:
        """True when two runs' ranges of the ratio do not overlap."""
        ranges = [(run[2], run[3]) for run in self.runs if run]
        return bool(ranges) and max(low for low, _ in ranges) > min(high for _, high in ranges)


WIN_ONLY = "only a win (too noisy to test a cost)"  # never 'no cost at all': a stronger claim than any tolerance
RESTATED = re.compile(r"the claim tested is '([^']+)'")
TOLERANCE = re.compile(r"(\d+) ?%")


def restated_as(row: dict) -> str:
    """The weaker claim the row's run tested instead of its claim ('no worse by more than 14%'; WIN_ONLY where its
    pairs were too noisy to test any cost: only a win could decide), or "" as claimed."""
    notes = row.get("notes") or ""
    restated = RESTATED.search(notes)
    if restated:
        return restated.group(1)
    too_noisy = ("too much to test a cost", "cannot tell a cost below", "so only a win could decide",
                 "these pairs cannot decide")
    return WIN_ONLY if any(words in notes for words in too_noisy) else ""  # the last: measure's wording since s9


def newest_per_claim(rows: list[dict]) -> dict:
    """(lab, claim tested, workload) -> the newest row of that claim in one verdicts.csv (a lab run twice appends
    twice)."""
    newest: dict
    newest = {}
    for row in rows:
        key = (row["lab"], row["claim"], row.get("workload") or "")
        if key not in newest or row["timestamp"] >= newest[key]["timestamp"]:
            newest[key] = row
    return newest


def _named(runs: list[dict]) -> list[dict]:
    """The runs with each row of no workload (an older verdicts.csv) keyed by the one workload the other runs name
    for its lab and claim, where there is exactly one."""
    named: dict = {}
    for run in runs:
        for lab, claim, workload in run:
            if workload:
                named.setdefault((lab, claim), set()).add(workload)
    def key(lab, claim, workload):
        only = named.get((lab, claim), set())
        return (lab, claim, next(iter(only))) if not workload and len(only) == 1 else (lab, claim, workload)

    return [{key(*k): row for k, row in run.items()} for run in runs]


def compare_runs(sources) -> list[Claim]:
    """Every claim any of the runs decided (per workload it was measured on), in lab order, with each run's
    (verdict, ratio, low, high) or None."""
    runs = _named([newest_per_claim(measure.read_verdicts(source)) for source in sources])
    keys = sorted({key for run in runs for key in run})
    def cell(row: dict) -> tuple:
        return row["verdict"], float(row["ratio"]), float(row["low"]), float(row["high"])

    return [Claim(lab, claim, tuple(cell(run[(lab, claim, w)]) if (lab, claim, w) in run else None for run in runs), w,
                  tuple(restated_as(run[(lab, claim, w)]) if (lab, claim, w) in run else "" for run in runs))
            for lab, claim, w in keys]


def claims_table(claims: list[Claim], names) -> str:
    """The claims as text: one line per claim tested, a column per run (verdict, ratio and its range)."""
    said = {c: f"{c.lab} {c.claim}" + (f" [{c.workload}]" if c.workload else "") for c in claims}
    width = max([len("lab claim")] + [len(text) for text in said.values()]) + 2
    column = 34
    lines = [f"{'lab claim':<{width}}" + "".join(f"{name:>{column}}" for name in names)]
    for c in claims:
        tested = c.tested or ("",) * len(c.runs)
        cells = "".join(f"{_cell(r, t) if r else '-':>{column}}" for r, t in zip(c.runs, tested))
        marks = (["holds in one run, reversed in another"] if c.contradicts else []) + \
                (["the runs' ranges do not overlap"] if c.ranges_apart else []) + \
                ([f"the runs tested different claims ({', '.join(sorted({t or 'as claimed' for t, r in zip(tested, c.runs) if r}))}; '<=N%': the cost a run tested; 'win only': too noisy to test a cost)"]
                 if c.restated else [])
        lines.append(f"{said[c]:<{width}}{cells}" + (f"   <- {'; '.join(marks)}" if marks else ""))
    bad = sum(c.contradicts for c in claims)
    apart = sum(c.ranges_apart for c in claims)
    restated = sum(c.restated for c in claims)
    lines.append(f"{len(claims)} claims over {len(names)} runs: {bad} contradicted (holds in one run, reversed in "
                 f"another); {apart} with ranges that do not overlap (the range is {measure.CONFIDENCE:.0%} of one "
                 "run's pairs: a machine that changed between runs moves it)"
                 + (f"; {restated} tested as different claims in different runs (a restated tolerance)" if restated else ""))
    return "\n".join(lines)


def _cell(run: tuple, tested: str) -> str:
    """One run's verdict on a claim: its word, ratio and range, and the cost it tested if it restated the claim."""
    text = SHORT.get(run[0], run[0]) + f" {run[1]:.2f}x [{run[2]:.2f}-{run[3]:.2f}]"
    cost = TOLERANCE.search(tested)
    return f"{text} <={cost.group(1)}%" if cost else f"{text} win only" if tested else text


def main(argv=None) -> int:
    sources = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if len(sources) < 2 or any(not s.exists() for s in sources):
        print(__doc__.strip())
        return 2
    claims = compare_runs(sources)
    print(claims_table(claims, [s.parent.name if s.name in ("results", measure.VERDICTS_CSV) else s.name for s in sources]))
    return 1 if any(c.contradicts for c in claims) else 0


if __name__ == "__main__":
    sys.exit(main())
