"""Command line: python -m lab_utils {info,labs,course,outputs,run-times,assign,bench,gpu-check,cluster,classroom,grade}."""
from __future__ import annotations

import argparse
import sys

from .course.headless import DEFAULT_CELL_TIMEOUT_S


def cmd_info(args) -> int:
    from .. import hardware

    hw = hardware.detect()
    print(hw.describe())
    print()
    for world_size in (1, 2, 4):
        print(hardware.plan(world_size, hw).describe())
    return 0


def cmd_labs(args) -> int:
    from . import labs

    chosen = [labs.find_lab(n) for n in args.labs.split(",")] if args.labs else labs.all_labs()
    print("\n\n".join(lab.describe() for lab in chosen))
    return 0


def cmd_course(args) -> int:
    from .course import headless

    return headless.main_course(args.labs, args.out, args.cell_timeout, args.size)


def cmd_grade(args) -> int:
    from pathlib import Path

    from .grading import grade

    missing = [p for p in args.submissions if not Path(p).is_file() and not Path(p).is_symlink()]
    if missing:
        raise ValueError(f"no such submission file(s): {missing}")
    if args.tests and not Path(args.tests).is_dir():
        raise ValueError(f"--tests {args.tests}: not a folder of instructor test files (*.py)")
    if args.roster and not Path(args.roster).is_file():
        raise ValueError(f"--roster {args.roster}: no such file")
    rows = grade.grade(args.submissions, args.lab, args.out, tests_dir=args.tests, timeout=args.timeout,
                       cell_timeout=args.cell_timeout, jobs=args.jobs, execute_notebooks=not args.probes_only,
                       unsandboxed=args.unsandboxed, slurm={"partition": args.partition} if args.slurm else None,
                       probe_timeout=args.probe_timeout, roster=args.roster, lms=args.lms,
                       assignment=args.assignment, regrade=args.regrade, roster_column=args.roster_column)
    names = [grade.gradebook.clean(r.student) for r in rows]  # a file name that is not UTF-8 prints as its escape
    width = max(map(len, names))
    for name, r in zip(names, rows):
        print(f"{name:<{width}}  {r.score:g}/{r.max_score:g}  {r.status}")
    out = Path(args.out)
    print(f"gradebook: {out / 'gradebook.csv'}; class summary: {out / 'class-summary.md'}"
          + (f"; {args.lms}: {out / grade.gradebook.LMS[args.lms]}" if args.lms else ""))
    return 0


def cmd_cluster(args) -> int:
    from .cluster import local

    return local.main(args.action, args.state_dir, accounting=not args.no_accounting)


def cmd_classroom(args) -> int:
    from .classroom import local

    try:
        return local.main(args.action, args.learners, args.cpu_limit, args.mem_limit, args.state_dir)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def cmd_outputs(args) -> int:
    from .course import committed_outputs

    return committed_outputs.outputs(args.labs, args.cell_timeout)


def cmd_run_times(args) -> int:
    from .course import committed_outputs

    times = committed_outputs.run_times(args.source)
    problems = committed_outputs.update_run_times(times, column=args.column, check=args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if args.check and problems:
        return 1
    print("run times agree with the measured run" if args.check else f"wrote {len(times)} run time(s) ({args.column})")
    return 0


def cmd_gpu_check(args) -> int:
    from . import labs
    from .gpu import registry

    only = None
    if args.labs:
        only = {labs.find_lab(n).number for n in args.labs.split(",")}
        without = sorted(n for n in only if labs.declared(n).gpu_check is None)
        if without:
            raise ValueError(f"lab(s) {', '.join(without)} declare no GPU check; labs with one: "
                             f"{', '.join(lab for lab, _ in labs.gpu_checks())}")
    return registry.main(quick=args.quick, only=only)


def cmd_assign(args) -> int:
    from .course.assign import assign

    problems = assign(check=args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        if args.check:
            print("notebooks/ or lab_utils/labs/*/lesson.py is out of date: run `python -m lab_utils assign` and commit "
                  "the result", file=sys.stderr)
        return 1
    print("notebooks/ matches solutions/, and lab_utils/labs/*/lesson.py their lesson cells" if args.check else
          "wrote notebooks/ and lab_utils/labs/*/lesson.py from solutions/")
    return 0


def cmd_bench(args) -> int:
    from .bench.registry import BENCHES

    if args.list:
        print("\n".join(BENCHES))
        return 0
    if args.name is None:
        raise ValueError(f"name a benchmark: {', '.join(BENCHES)} (or --list)")
    BENCHES[args.name].run(args.repeats, vars(args))
    return 0


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 16,256, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be positive, got {text!r}")
    return values


def parser(with_benches: bool = True) -> argparse.ArgumentParser:
    """The CLI's parser; with_benches=False leaves the benchmark names out, so that any other command starts without
    importing torch and every benchmark module."""
    if with_benches:
        from .bench.registry import BENCHES
    else:
        BENCHES = {}

    from .labs import gpu_checks

    quick = ", ".join(lab for lab, check in gpu_checks() if check.quick)
    p = argparse.ArgumentParser(prog="python -m lab_utils", description="CNN Parallelism Lab helper")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="hardware report and the rank plan for 1, 2, 4 ranks").set_defaults(fn=cmd_info)
    n = sub.add_parser("labs", help="each lab's pieces, found by its number: notebooks, lesson module, exercises, "
                                    "the modules it imports, test size, benchmarks, GPU check")
    n.add_argument("labs", nargs="?", help="comma-separated lab numbers, e.g. 09 (default: all)")
    n.set_defaults(fn=cmd_labs)
    c = sub.add_parser("course", help="execute every solution notebook headless with papermill")
    c.add_argument("--labs", help="comma-separated lab numbers, e.g. 00,01 (default: all)")
    c.add_argument("--out", help="output folder (default: build/course)")
    c.add_argument("--size", choices=["full", "test"], default="full",
                   help="full: each lab's own parameters; test: the smaller sizes make test runs (fewer repeats)")
    c.add_argument("--cell-timeout", type=float, default=None,
                   help=f"seconds one cell may run (default: {DEFAULT_CELL_TIMEOUT_S} times how much slower than the "
                        "course's reference machine this one computes now, at most 10x)")
    c.set_defaults(fn=cmd_course)
    o = sub.add_parser("outputs", help="re-execute the solutions in place as one run, in course order (committed outputs)")
    o.add_argument("--labs", help="comma-separated lab numbers (default: all)")
    o.add_argument("--cell-timeout", type=float, default=None,
                   help=f"seconds one cell may run (default: {DEFAULT_CELL_TIMEOUT_S} times how much slower than the "
                        "course's reference machine this one computes now, at most 10x)")
    o.set_defaults(fn=cmd_outputs)
    t = sub.add_parser("run-times", help="write (or --check) the measured per-lab times into the README and headers")
    t.add_argument("--source", help="folder of executed notebooks (default: solutions/; e.g. build/course after make course)")
    t.add_argument("--column", choices=["cpu", "gpu"], default="cpu", help="README course map column to fill")
    t.add_argument("--check", action="store_true", help="only compare; exit 1 when they disagree")
    t.set_defaults(fn=cmd_run_times)
    a = sub.add_parser("assign", help="generate notebooks/ and lab_utils/labs/*/lesson.py from solutions/")
    a.add_argument("--check", action="store_true", help="only compare; exit 1 when notebooks/ or "
                   "lab_utils/labs/*/lesson.py is out of date")
    a.set_defaults(fn=cmd_assign)
    b = sub.add_parser("bench", help="benchmarks measured side by side in one run")
    b.add_argument("name", nargs="?", choices=sorted(BENCHES) or None)
    b.add_argument("--list", action="store_true", help="print the benchmarks' names, one a line, in lab order")
    b.add_argument("--samples", type=int, default=4096, help="overhead: samples per timed epoch")
    b.add_argument("--repeats", type=int, help="timed repeats, median reported (default: " +
                   ", ".join(f"{name} {bench.repeats}" for name, bench in sorted(BENCHES.items())) + ")")
    b.add_argument("--world-size", type=int, default=2, help="ddp, collectives, memory: number of ranks")
    b.add_argument("--steps", type=int, default=20, help="ddp, tf: optimizer steps per launch (first 3 not timed)")
    b.add_argument("--devices", dest="n_devices", type=int, default=2, help="dp: number of devices (replicas)")
    b.add_argument("--batch-sizes", type=_int_list, default=(16, 256),
                   help="dp: comma-separated batch sizes; the speedup is reported for the last (default: 16,256)")
    b.add_argument("--batch-size", type=int, default=1024, help="pipeline: samples per step (a multiple of 8)")
    b.add_argument("--global-batch", type=int, default=512, help="tf: samples per step over all workers (default: 512)")
    b.set_defaults(fn=cmd_bench)
    gc = sub.add_parser("gpu-check", help="run every GPU branch of the course against its CPU result (skipped without a GPU)")
    gc.add_argument("--quick", action="store_true", help=f"only labs {quick} (about 2 minutes on one GPU)")
    gc.add_argument("--labs", help="comma-separated lab numbers, e.g. 04,09 (default: every lab with a GPU check)")
    gc.set_defaults(fn=cmd_gpu_check)
    cl = sub.add_parser("cluster", help="a real Slurm cluster on this machine for lab 11 (root; Debian's slurm-wlm and munge)")
    cl.add_argument("action", choices=["up", "status", "down", "conf"],
                    help="conf: print only the path of its slurm.conf, for `export SLURM_CONF=$(... cluster conf)`")
    cl.add_argument("--state-dir", help="folder for its configuration, keys, logs and pid files "
                    "(default: $LAB_CLUSTER_DIR or /var/tmp/lab-cluster)")
    cl.add_argument("--no-accounting", action="store_true",
                    help="up: without slurmdbd and its database (sacct then has no records)")
    cl.set_defaults(fn=cmd_cluster)
    cr = sub.add_parser("classroom", help="a real JupyterHub on this machine for N local learner accounts, each "
                        "server under its own cgroup CPU quota and memory limit (root; Node and npm for its proxy)")
    cr.add_argument("action", choices=["up", "down"])
    cr.add_argument("-n", "--learners", type=int, default=2, help="up: number of learner accounts (default: 2)")
    cr.add_argument("--cpu-limit", type=float, default=1.0,
                    help="up: CPUs of time each learner's server may use, a cgroup quota (default: 1)")
    cr.add_argument("--mem-limit", default="3G", help="up: memory each learner's server may use (default: 3G)")
    cr.add_argument("--state-dir", help="folder for its configuration, state and log (default: build/classroom)")
    cr.set_defaults(fn=cmd_classroom)
    g = sub.add_parser("grade", help="execute submitted notebooks and score them outside the student's kernel")
    g.add_argument("--lab", required=True, help="lab number, e.g. 01")
    g.add_argument("submissions", nargs="+", help="submitted .ipynb files (the file stem names the student)")
    g.add_argument("--out", required=True, help="folder for gradebook.csv, feedback and executed notebooks")
    g.add_argument("--tests", help="folder of instructor-only test files (*.py defining EXERCISES)")
    g.add_argument("--timeout", type=float, default=600.0, help="seconds one whole notebook may run (default: 600)")
    g.add_argument("--cell-timeout", type=float, default=120.0, help="seconds one cell may run before it is interrupted (default: 120)")
    g.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time (default: 1)")
    g.add_argument("--probes-only", action="store_true",
                   help="score the exercises without running each whole notebook (faster; no executed copy or run status)")
    g.add_argument("--unsandboxed", action="store_true",
                   help="grade even where no sandbox can be made (no bubblewrap): submissions can then read the "
                        "instructor tests and each other; every gradebook row says so")
    g.add_argument("--slurm", action="store_true",
                   help="run each submission as one task of a Slurm job array (in its sandbox on the node); scored here")
    g.add_argument("--partition", help="with --slurm: the partition to submit to (default: the cluster's default)")
    g.add_argument("--probe-timeout", type=float,
                   help="CPU-seconds (at its share of the CPUs) one exercise's probe may use (default: the larger of "
                        "120 and --cell-timeout)")
    g.add_argument("--roster", help="the class list (CSV with Student, ID, SIS User ID, Section: a Canvas gradebook "
                                    "export has them), for --lms")
    g.add_argument("--roster-column", help="with --roster: the roster column whose values name the submission files "
                                           "(default: Submission, else SIS Login ID); one submission, one row")
    g.add_argument("--lms", choices=["canvas"], help="with --roster: write the LMS's import file (canvas.csv)")
    g.add_argument("--assignment", help="with --lms: the assignment's column name (default: 'Lab NN')")
    g.add_argument("--regrade", metavar="STUDENT",
                   help="grade only STUDENT's submission (one of the files given) into an existing --out folder, "
                        "keeping every other row")
    g.set_defaults(fn=cmd_grade)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(with_benches=argv[:1] == ["bench"]).parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if type(exc).__name__ != "SandboxUnavailable":
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
