"""Do the course's conclusions hold from run to run? Several runs' verdicts.csv, claim by claim.

    python -m lab_utils.instructor.course.stability build/run1/results build/run2/results ...

Each argument is a results folder (or a verdicts.csv). For every (lab, claim) the table shows each run's verdict
and ratio; a claim that is 'holds' in one run and 'reversed' in another is a contradiction, and the command exits 1.
'not distinguishable here' beside either is no contradiction: it is what noise is allowed to say.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ... import measure

SHORT = {measure.HOLDS: "holds", measure.REVERSED: "REVERSED", measure.UNDECIDED: "n.d.",
         measure.CANNOT_SEE: "not here"}


@dataclass(frozen=True)
class Claim:
    """One claim's verdicts across runs: per run (verdict, ratio), or None where that run did not decide it."""

    lab: str
    claim: str
    runs: tuple

    @property
    def contradicts(self) -> bool:
        """True when one run says 'holds' and another 'reversed'."""
        said = {run[0] for run in self.runs if run}
        return {measure.HOLDS, measure.REVERSED} <= said


def newest_per_claim(rows: list[dict]) -> dict:
    """(lab, claim) -> the newest row of that claim in one verdicts.csv (a lab run twice appends twice)."""
    newest: dict
    newest = {}
    for row in rows:
        key = (row["lab"], row["claim"])
        if key not in newest or row["timestamp"] >= newest[key]["timestamp"]:
            newest[key] = row
    return newest


def compare(sources) -> list[Claim]:
    """Every claim any of the runs decided, in lab order, with each run's (verdict, ratio) or None."""
    runs = [newest_per_claim(measure.read_verdicts(source)) for source in sources]
    keys = sorted({key for run in runs for key in run})
    return [Claim(lab, claim, tuple((run[(lab, claim)]["verdict"], float(run[(lab, claim)]["ratio"]))
                                    if (lab, claim) in run else None for run in runs))
            for lab, claim in keys]


def table(claims: list[Claim], names) -> str:
    """The claims as text: one line per claim, a column per run."""
    width = max([len("lab claim")] + [len(c.lab) + 1 + len(c.claim) for c in claims]) + 2
    lines = [f"{'lab claim':<{width}}" + "".join(f"{name:>18}" for name in names)]
    for c in claims:
        cells = "".join(f"{(SHORT[r[0]] + f' {r[1]:.2f}x') if r else '-':>18}" for r in c.runs)
        lines.append(f"{c.lab + ' ' + c.claim:<{width}}{cells}" + ("   <- holds in one run, reversed in another"
                                                                    if c.contradicts else ""))
    bad = sum(c.contradicts for c in claims)
    lines.append(f"{len(claims)} claims over {len(names)} runs: {bad} contradicted (holds in one run, reversed in "
                 "another)")
    return "\n".join(lines)


def main(argv=None) -> int:
    sources = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if len(sources) < 2 or any(not s.exists() for s in sources):
        print(__doc__.strip())
        return 2
    claims = compare(sources)
    print(table(claims, [s.parent.name if s.name in ("results", measure.VERDICTS_CSV) else s.name for s in sources]))
    return 1 if any(c.contradicts for c in claims) else 0


if __name__ == "__main__":
    sys.exit(main())
