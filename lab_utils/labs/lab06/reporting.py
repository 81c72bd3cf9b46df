"""Lab 06's reporting: the plain sentences its measured sections end with (solutions/06_collectives_tensor_parallel.ipynb
calls these; the lesson's code stays in the notebook)."""
from __future__ import annotations

import statistics
from pathlib import Path

from ... import learner_code, measure

CLOSE = 0.10  # "within 10 % of each other": the same margin as the no-slower verdicts


def size_text(nbytes: int) -> str:
    """A message size in words: KiB below 1 MiB, MiB from there."""
    return f"{nbytes // 1024} KiB" if nbytes < 1 << 20 else f"{nbytes / (1 << 20):g} MiB"


def takeaway(sizes, leads) -> str:
    """The all-reduce table in one sentence, from its library-lead cells ('1.12x', or n/m where refused): at which
    sizes the ring and the library are within 10 % of each other, and where either is ahead by more."""
    read = {s: float(cell.rstrip("x")) for s, cell in zip(sizes, leads) if cell != measure.N_M}
    if not read:
        return "the ring against the library: no size's lead could be read here (n/m: see under the table)"
    close = [s for s, lead in read.items() if 1 - CLOSE <= lead <= 1 + CLOSE]  # as printed: 0.90x-1.10x
    library = [s for s, lead in read.items() if lead > 1 + CLOSE]
    ring = [s for s, lead in read.items() if lead < 1 - CLOSE]

    def listed(chosen):
        return ", ".join(f"{size_text(s)} ({read[s]:.2f}x)" for s in chosen)

    parts = [f"the ring and dist.all_reduce within {CLOSE:.0%} of each other (library lead {1 - CLOSE:.2f}x-"
             f"{1 + CLOSE:.2f}x) at {len(close)} of {len(read)} sizes".replace("%", " %")]
    if library:
        parts.append(f"the library faster by more at {listed(library)}")
    if ring:
        parts.append(f"the ring faster by more at {listed(ring)}")
    refused = len(sizes) - len(read)
    if refused:
        parts.append(f"{refused} size(s) n/m")
    return "; ".join(parts)


def lab04_source(codes, cwd=None) -> str:
    """Whose Lab 04 code counted the pipeline's bytes: the learner's copy beside this notebook, or the course's
    solution, and why, in words true wherever the notebook ran (a learner's notebooks/, solutions/, build/outputs)."""
    functions = ", ".join(f"{code.function.__name__} (cell {code.cell})" for code in codes)
    notebook = Path(codes[0].notebook)
    here = Path(cwd or Path.cwd()).resolve()
    if notebook.resolve().parent != (learner_code.COURSE / "solutions").resolve():
        return f"Lab 04's pipeline step: {functions} from your {notebook.name} beside this notebook"
    said = f"Lab 04's pipeline step: {functions} from the course's solutions/{notebook.name}"
    if here in ((learner_code.COURSE / "solutions").resolve(), learner_code.COURSE.resolve()):
        return said
    return (f"{said}: this run's folder ({here.name}/) holds no {notebook.name}; run beside your own Lab 04 to count "
            "your pipeline's bytes")


def gap_split(step_times, comm_model_s, fit_readable: bool, refused: bool) -> str:
    """Tensor parallel's step-time gap to DDP split in two measured parts (its collectives: the step minus the same
    step with them local no-ops; the rest: the no-op step minus DDP's), beside what the α–β model gives the bytes."""
    tp, ddp = step_times["tensor parallel"], step_times["DDP"]
    gap = statistics.median(a - b for a, b in zip(tp, ddp))  # paired rounds' differences
    if refused or gap <= 0:
        return "no step-time gap to split here: the speed verdict above says why"
    local = step_times.get("tensor parallel, no communication")
    said = f"tensor parallel's step took {gap * 1e3:.1f} ms longer than DDP's (median of the paired rounds)"
    if local is not None:
        comm = statistics.median(a - b for a, b in zip(tp, local))
        rest = statistics.median(a - b for a, b in zip(local, ddp))
        said += (f": {comm * 1e3:.1f} ms of it its collectives (the step minus the same step with every collective a "
                 f"local no-op), {rest * 1e3:.1f} ms its layers' compute and copies (that no-op step minus DDP's); "
                 "each part is a median of its own paired rounds, so the two need not add up to the gap exactly")
    if fit_readable and comm_model_s is not None:
        said += (f". The alpha-beta model of dist.all_reduce gives the collectives {comm_model_s * 1e3:.1f} ms of it "
                 "(tensor parallel's minus DDP's)")
    elif not fit_readable:
        said += ". No alpha-beta fit of the library to turn the bytes into time (refused above)"
    return measure.short_lines(said)
