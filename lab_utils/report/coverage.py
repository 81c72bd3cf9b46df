"""Which labs' rows lab 10 has, and the sentences that say which it lacks; its checks on the rows two labs share."""
from __future__ import annotations

import statistics

from .. import workloads
from ..measure import Result
from .compared import Compared, timed_launched


RECORDING_LABS = tuple(f"{n:02d}" for n in range(10))  # labs 00-09 each record results rows; lab 10 reads them


def labs_without_rows(rows: list[Result]) -> list[str]:
    """The labs that record results but have no row here yet (not run, or run with another results folder)."""
    have = {r.lab for r in rows}
    return [lab for lab in RECORDING_LABS if lab not in have]


DATA_PARALLEL_LABS = ("02", "03", "05")  # the labs that record data-parallel rows (Amdahl's fit reads them)
TWO_LABS = ("01", "03")  # the labs that time workloads.STEP_3CONV: one workload, two labs


def lab_names(labs) -> str:
    """'lab 02', 'labs 02 and 03', 'labs 01, 02 and 03'."""
    labs = list(labs)
    if len(labs) < 2:
        return f"lab {''.join(labs)}"
    return f"labs {', '.join(labs[:-1])} and {labs[-1]}"


def lacking(rows: list[Result], labs, what: str) -> str:
    """'' when each of `labs` has rows here; else a sentence naming exactly those without rows, which `what` lacks."""
    have = {r.lab for r in rows}
    missing = [lab for lab in labs if lab not in have]
    if not missing:
        return ""
    return (f"{what} lacks the rows of {lab_names(missing)} (none in the results folder): run "
            f"{'it' if len(missing) == 1 else 'them'} from this folder, or name their folder in extra_results, then "
            "this notebook again")


def two_labs(shared: list[Compared]) -> list[Compared]:
    """The rows of across_labs of workloads.STEP_3CONV (labs 01 and 03), the comparison lab 10 describes."""
    return [c for c in shared if c.row.workload == workloads.STEP_3CONV.name]


def ranks_vs_threads(shared: list[Compared]) -> list[str]:
    """Lab 10's prediction checked on the speed test's rows: on a CPU, DDP ranks of one thread each no faster than one
    process with as many threads (the same cores, plus an all-reduce). One line per DDP row against each lab's
    process of as many threads; 'beats it' only beyond both rows' spreads (each rate +- half its spread); a process
    timed the other way (a kernel's against launched ranks: across_labs' refused) is named, not compared."""
    lines = []
    for ddp_c in (c for c in shared if c.row.strategy == "ddp" and c.row.world_size > 1):
        ddp = ddp_c.row
        if ddp.machine and ddp.machine.gpu_names:
            lines.append(f"lab {ddp.lab}'s DDP ran on GPUs: its ranks add devices, so no such prediction")
            continue
        rivals = [c for c in shared if c.row.world_size == 1 and (c.row.threads or 1) == ddp.resources]
        for rival_c in rivals:
            rival = rival_c.row
            if bool(rival_c.refused) != bool(ddp_c.refused):  # one timed in launched processes, one in a kernel
                own = [c.row for c in rivals if bool(c.refused) == bool(ddp_c.refused)]
                lines.append(f"prediction, {ddp.world_size} DDP ranks (lab {ddp.lab}) against 1 process x "
                             f"{ddp.resources:g} threads (lab {rival.lab}): not compared, lab {ddp.lab} timed its ranks "
                             f"in launched processes, lab {rival.lab} its threads in the notebook's kernel"
                             + (f" (its threads' {rival.samples_per_s:,.0f} samples/s lie "  # learner s12r4g: the
                                f"{rival.samples_per_s / own[0].samples_per_s:.2f}x from lab {ddp.lab}'s own "
                                f"{own[0].samples_per_s:,.0f}, read below)"  # no ratio of a comparison declined
                                if own else ""))
                continue
            ratio = ddp.samples_per_s / rival.samples_per_s
            low = ddp.samples_per_s * (1 - (ddp.spread or 0.0) / 2)
            high = rival.samples_per_s * (1 + (rival.spread or 0.0) / 2)
            said = ("reversed: DDP faster beyond both rows' spreads" if low > high else
                    "holds: DDP no faster" if ratio <= 1 else "not distinguishable: within the rows' spreads")
            marked = [name for name, c in (("the DDP row", ddp_c), ("the threads row", rival_c)) if c.flags]
            lines.append(f"prediction, {ddp.world_size} DDP ranks (lab {ddp.lab}) no faster than 1 process x "
                         f"{ddp.resources:g} threads (lab {rival.lab}): {ddp.samples_per_s:,.0f} vs "
                         f"{rival.samples_per_s:,.0f} samples/s, {ratio:.2f}x -> {said}"
                         + (f" (read on {' and '.join(marked)}, marked * above: as shaky as its figure)"
                            if marked else ""))
    return lines




def _timed_in(lab_rows: list[Result]) -> str:
    """How one lab timed a workload: 'launched' (its own processes) or 'kernel' (the notebook's)."""
    return "launched" if timed_launched(lab_rows) else "kernel"


LEFT_APART = ("two processes timed at different moments (the machine's load then, each process's own "
              "threads)")  # what still parts a kernel's step from a launched one's, the allocator being fixed


def one_process_baselines(rows: list[Result]) -> list[str]:
    """Where several labs timed one quantity (workloads.Workload.measures, one batch, one machine) on one process of
    one thread, their one-device baselines: a line naming each and that every speedup reads against its own lab's,
    and a line saying how far they lie apart (computed) and why: a notebook's kernel and a launched process run a step
    with the same allocator (lab_utils.allocator) but are two processes timed at different moments (lab 03 compares
    the two), and rows timed alike minutes apart move with the machine."""
    groups: dict[tuple, list[Result]] = {}
    for r in rows:
        if r.world_size == 1 and (r.threads or 1) == 1 and r.workload in workloads.REGISTRY:
            machine = r.machine.fingerprint if r.machine else ("",)
            key = (*machine, r.framework, workloads.named(r.workload).measures, r.batch_size, r.rate)
            groups.setdefault(key, []).append(r)
    lines = []
    for group in groups.values():
        if len({r.lab for r in group}) < 2:
            continue
        group = sorted(group, key=lambda r: r.lab)
        way = {id(r): _timed_in([o for o in rows if o.lab == r.lab and o.workload == r.workload]) for r in group}
        unit = group[0].rate or "samples/s"
        twice = {r.lab for r in group if sum(o.lab == r.lab for o in group) > 1}  # a lab with two rows: name each
        named = ", ".join(f"lab {r.lab} {r.samples_per_s:,.0f} "
                          f"({'launched' if way[id(r)] == 'launched' else 'in the kernel'}"
                          + (f", {r.workload.split(' ', 1)[-1]}" if r.lab in twice else "") + ")" for r in group)
        what = workloads.named(group[0].workload).at(group[0].batch_size)
        lines.append(f"one workload, {len(group)} one-process baselines ({what}, 1 thread, {unit}): {named}; each "
                     "speedup above reads against the baseline of its own lab")
        fast, slow = max(group, key=lambda r: r.samples_per_s), min(group, key=lambda r: r.samples_per_s)
        why = []
        kernel = [r for r in group if way[id(r)] == "kernel"]
        launched = [r for r in group if way[id(r)] == "launched"]
        if kernel and launched:
            k = statistics.median(r.samples_per_s for r in kernel)
            la = statistics.median(r.samples_per_s for r in launched)
            why.append(f"the launched rows (their median) ran {max(k, la) / min(k, la):.2f}x "
                       f"{'slower' if la < k else 'faster'} than the kernel's (the same allocator, but "
                       f"{LEFT_APART}; lab 03 compares the two)")
        for same in (kernel, launched):
            if len(same) > 1:
                a, b = max(same, key=lambda r: r.samples_per_s), min(same, key=lambda r: r.samples_per_s)
                apart = a.samples_per_s * (1 - (a.spread or 0) / 2) > b.samples_per_s * (1 + (b.spread or 0) / 2)
                labs = sorted({r.lab for r in same})
                named_labs = lab_names(labs) if len(labs) == len(same) else lab_names(
                    [f"{lab} ({sum(r.lab == lab for r in same)} rows)" if sum(r.lab == lab for r in same) > 1 else lab
                     for lab in labs])
                why.append(f"{named_labs}, timed alike minutes apart: "
                           f"{a.samples_per_s / b.samples_per_s:.2f}x, "
                           + ("beyond" if apart else "within") + " their repeats' spreads ("
                           + ", ".join(f"{r.spread:.0%}" if r.spread is not None else "none" for r in same) + ")")
        lines.append(f"  they lie {fast.samples_per_s / slow.samples_per_s:.2f}x apart (lab {fast.lab} over lab "
                     f"{slow.lab}): " + "; ".join(why))
    return lines
