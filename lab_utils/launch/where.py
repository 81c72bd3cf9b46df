"""The launcher's side of a hang or a failure: one table of where every rank was (from each rank's record of its
collectives) and the first call where the ranks went different ways."""
from __future__ import annotations

import os

from .record import POINT_TO_POINT


def place(where) -> str:
    """A learner's line in words: "cell [12], line 5" for a notebook cell (the number Jupyter shows at its left:
    CELL_LEGEND), else "file.py:5" (no absolute path)."""
    if not where:
        return "-"
    filename, line = where[0], where[1]
    from ..variants import original_line

    edited = original_line(filename, line)
    if edited is not None:  # a line of variant(fn, ...)'s copy: the line it stands for in fn, and the edit's name
        return f"{place(edited[:2])} (edited: {edited[2]})"
    cell = _cell_number(filename)
    if cell is not None:
        return f"cell [{cell}], line {line}"
    try:
        shown = os.path.relpath(filename)
    except ValueError:
        shown = filename
    if shown.startswith(".."):
        shown = os.path.basename(filename)
    return f"{shown}:{line}"


CELL_LEGEND = ("cell [n]: the cell Jupyter shows with [n] at its left (its execution count, which grows each time a\n"
               "    cell runs), not the n-th cell of the notebook")  # two lines under 100 columns, the second indented


def _cell_number(filename: str):
    """The execution count of the notebook cell that compiled `filename` (ipykernel's cell files), or None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename) if shell else None


def call_text(call) -> str:
    """`all_reduce #7 [[4]] float32`."""
    if not call:
        return "-"
    shapes = " ".join(str(s) for s in call["shapes"]) if call["shapes"] else ""
    return " ".join(p for p in (f"{call['op']} #{call['seq']}", shapes, call["dtype"]) if p)


def _waiting_in(report):
    """The call this rank is blocked in (the last one in progress), or None."""
    calls = [c for c in report.get("calls", []) if c["state"] == "in progress" or c["state"].startswith("failed")]
    return calls[-1] if calls else None


def _last_completed(report):
    calls = [c for c in report.get("calls", []) if c["state"] == "completed"]
    return calls[-1] if calls else None


def _learners_line(report) -> str:
    """The learner's line of the call the rank waits in; for a call a background thread made from no line of the
    learner's, the main thread's line, said to be the main thread's (it is not the line that made the call)."""
    call = _waiting_in(report)
    if call and call["where"]:
        return place(call["where"])
    line = place(report.get("line"))
    return f"main thread: {line}" if call and call.get("thread") and line != "-" else line


def _key(call):
    """What must match across ranks: the op, shapes and dtype (point-to-point calls pair a send with a recv)."""
    if call["op"] in POINT_TO_POINT:
        return ("point-to-point",)
    return call["op"], str(call["shapes"]), call["dtype"]


def _doing(rank: int, report, seq: int, state: str) -> str:
    """What rank `rank` did at call #seq, in words."""
    call = next((c for c in report.get("calls", []) if c["seq"] == seq), None)
    if call is not None:
        verb = "is in" if call["state"] == "in progress" else call["state"].replace("failed (", "it failed: ").rstrip(")")
        at = place(call["where"])
        return (f"rank {rank} is in {call['op']} #{seq} at {at}" if verb == "is in"
                else f"rank {rank} made {call['op']} #{seq} at {at} ({verb})")
    last = report.get("count", 0)
    waiting = _waiting_in(report)
    now = (f"{state} at {place(report.get('line'))}" if state.startswith("raised")
           else f"is in {waiting['op']} #{waiting['seq']} at {place(waiting['where'])}" if waiting
           else f"is not in a recorded collective, at {place(report.get('line'))}")
    return (f"rank {rank} finished #{last} and {now}" if last
            else f"rank {rank} made no recorded collective call and {now}")


def _calls_backward(where) -> bool:
    """Whether a learner's line (filename, line) calls backward(), read from its source (a cell's too: linecache)."""
    import linecache

    return bool(where) and ".backward(" in linecache.getline(where[0], where[1])


def first_difference(reports: dict, states: dict | None = None) -> str:
    """The first sequence number where the ranks' calls differ, in words (or what they all wait in)."""
    answered = {r: rep for r, rep in reports.items() if rep and "calls" in rep}
    if len(answered) < 2:
        return ""
    seqs = sorted({c["seq"] for rep in answered.values() for c in rep["calls"]})
    for seq in seqs:
        calls = {r: next((c for c in rep["calls"] if c["seq"] == seq), None) for r, rep in answered.items()}
        oldest = {r: min((c["seq"] for c in rep["calls"]), default=0) for r, rep in answered.items()}
        if any(c is None and seq < oldest[r] for r, c in calls.items()):
            continue  # older than what a rank keeps: nothing to compare
        present = [c for c in calls.values() if c is not None]
        if len(present) == len(calls) and len({_key(c) for c in present}) == 1:
            continue
        if len(present) < len(calls):
            missing = sorted(r for r, c in calls.items() if c is None)
            if all(str((states or {}).get(r, "")).startswith("raised") for r in missing):
                why = (f"rank(s) {missing} raised before call #{seq}, so the others' call #{seq} lost its peer: "
                       "the error is the cause, not a skipped collective")
            elif all(_calls_backward(answered[r].get("line")) for r in missing):  # learner s13r7f: as Join's check says
                why = (f"rank(s) {missing} never made call #{seq} and sit at a backward: under DDP that is its gradient "
                       "all-reduce (C++: not in the record), waiting for ranks that never joined it")
            else:
                why = (f"rank(s) {missing} never made call #{seq}: a rank skipped a collective the others made "
                       "(a condition that holds on some ranks only), has not reached it yet, or waits in a call the "
                       "record does not see (DDP's gradient all-reduce, or its buffer broadcast at the start of a "
                       "forward, both in C++)")
        elif len({c["op"] for c in present}) > 1:
            why = "the ranks called different collectives"
        else:
            why = "the ranks passed tensors of different shapes or dtypes to the same collective"
        return "; ".join(_doing(r, answered[r], seq, (states or {}).get(r, "running")) for r in sorted(answered)) + ": " + why
    raised = [r for r in sorted(answered) if str((states or {}).get(r, "")).startswith("raised")]
    if raised:  # the table's state column: a rank that raised waits for nothing, whatever call it was in
        return ("; ".join(_ended(r, answered[r], (states or {}).get(r, "running")) for r in sorted(answered))
                + ": the recorded calls match so far, so no rank skipped one: an error ended the run (read it above)"
                + ("" if len(raised) == len(answered) else ", and a rank still in a collective waits for one that "
                   "raised"))
    waiting = {r: _waiting_in(rep) for r, rep in answered.items()}
    if all(w and w["state"] == "in progress" for w in waiting.values()):
        first = waiting[min(waiting)]
        return (f"every rank is in {first['op']} #{first['seq']} with matching calls so far: each waits for a peer "
                "that is itself waiting (a send whose recv never comes), or the work is only slow")
    return ""


def _ended(rank: int, report, state: str) -> str:
    """What rank `rank` did last, in the table's words: 'rank 0 raised RuntimeError in gather_object #5 (that call
    failed)', 'rank 1 raised RuntimeError while its gather_object #5 was unfinished', 'rank 1 is in gather_object #5'
    (a rank that raised is said so first, never as waiting)."""
    call = _waiting_in(report)
    where = f"{call['op']} #{call['seq']}" if call else ""
    if not state.startswith("raised"):
        return f"rank {rank} is in {where}" if call else f"rank {rank} is not in a recorded collective"
    if call and call["state"].startswith("failed"):
        return f"rank {rank} {state} in {where} (that call failed)"
    unfinished = f" while its {where} was unfinished (that call itself had not failed)"
    return f"rank {rank} {state}" + (unfinished if call else "")


def _waits_cell(waiting, state: str) -> str:
    """The table's 'waits in' cell: the call a running rank waits in; for a rank that raised (it waits for nothing),
    the call it raised in or left unfinished, said so, as the first-difference line says it."""
    if not waiting:
        return "-"
    thread = ", background thread" if waiting.get("thread") else ""  # not the main thread's call
    if state.startswith("raised"):
        return f"{call_text(waiting)} ({'failed' if waiting['state'].startswith('failed') else 'unfinished'}{thread})"
    return (call_text(waiting) + (f" ({thread[2:]})" if thread else "")) if waiting["state"] == "in progress" else "-"


def rank_table(reports: dict, states: dict) -> str:
    """rank | state | the collective it waits in | the learner's line | its last completed collective; then the
    first difference. reports: rank -> the rank's snapshot (or None when it did not answer)."""
    rows = [("rank", "state", "waits in", "learner's line", "last completed")]
    for rank in sorted(states):
        report = reports.get(rank) or {}
        waiting = _waiting_in(report)
        state = states[rank]
        if report and state == "running":
            state = ("in a collective" if waiting and waiting["state"] == "in progress"
                     else "not in a recorded collective")  # learner s12r4f: DDP's C++ all-reduce is one
        rows.append((str(rank), state, _waits_cell(waiting, state),
                     _learners_line(report) if report else "-", call_text(_last_completed(report))))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    finding = first_difference({r: reports.get(r) for r in states}, states)
    legend = [CELL_LEGEND] if any("cell [" in row[3] for row in rows[1:]) else []  # a notebook's cell, said how to find
    shown = [c for r in sorted(states) for c in (_waiting_in(reports.get(r) or {}), _last_completed(reports.get(r) or {}))
             if c]  # a call the table shows
    shaped = next((c for c in shown if c.get("shapes")), None)
    if shaped and legend:  # learner s12r4f: 'all_reduce #3 [1] float32 | cell [5]': [1] read as a cell, like [5]
        legend.insert(0, f"{call_text(shaped)}: the operation, its sequence number, its tensors' shape "
                         f"{' '.join(str(s) for s in shaped['shapes'])}, their dtype")
    return "\n".join(lines + ([f"first difference: {finding}"] if finding else []) + legend)
