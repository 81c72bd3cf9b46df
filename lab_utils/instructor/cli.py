"""Command line: python -m lab_utils {info,course,assign,bench,grade}."""
from __future__ import annotations

import argparse
import sys

from .course import DEFAULT_CELL_TIMEOUT_S


def cmd_info(args) -> int:
    from .. import hardware

    hw = hardware.detect()
    print(hw.describe())
    print()
    for world_size in (1, 2, 4):
        print(hardware.plan(world_size, hw).describe())
    return 0


def cmd_course(args) -> int:
    from . import course

    return course.main_course(args.labs, args.out, args.cell_timeout)


def cmd_grade(args) -> int:
    from pathlib import Path

    from . import grade

    missing = [p for p in args.submissions if not Path(p).is_file()]
    if missing:
        raise ValueError(f"no such submission file(s): {missing}")
    if args.tests and not Path(args.tests).is_dir():
        raise ValueError(f"--tests {args.tests}: not a folder of instructor test files (*.py)")
    rows = grade.grade(args.submissions, args.lab, args.out, tests_dir=args.tests, timeout=args.timeout,
                       cell_timeout=args.cell_timeout, jobs=args.jobs)
    width = max(len(r.student) for r in rows)
    for r in rows:
        print(f"{r.student:<{width}}  {r.score:g}/{r.max_score:g}  {r.status}")
    print(f"gradebook: {Path(args.out) / 'gradebook.csv'}")
    return 0


def cmd_assign(args) -> int:
    from . import course

    problems = course.assign(check=args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        if args.check:
            print("notebooks/ is out of date: run `python -m lab_utils assign` and commit the result", file=sys.stderr)
        return 1
    print("notebooks/ matches solutions/" if args.check else "wrote notebooks/ from solutions/")
    return 0


def cmd_bench(args) -> int:
    from . import bench, bench_pipeline
    from .. import dp

    if args.name == "overhead":
        bench.print_overhead(bench.overhead(samples=args.samples, repeats=args.repeats or 15))
    elif args.name == "ddp":
        bench.print_ddp(bench.ddp(world_size=args.world_size, repeats=args.repeats or 3, steps=args.steps))
    elif args.name == "tf":
        bench.print_tf(bench.tf(repeats=args.repeats or 3, steps=args.steps, global_batch=args.global_batch))
    elif args.name == "pipeline":
        bench_pipeline.print_pipeline(bench_pipeline.pipeline(batch_size=args.batch_size, repeats=args.repeats or 5))
    elif args.name == "dp":
        dp.print_sweep(dp.sweep(n_devices=args.devices, batch_sizes=args.batch_sizes, repeats=args.repeats or 15))
    return 0


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 16,256, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be positive, got {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab_utils", description="CNN Parallelism Lab helper")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="hardware report and the rank plan for 1, 2, 4 ranks").set_defaults(fn=cmd_info)
    c = sub.add_parser("course", help="execute every solution notebook headless with papermill")
    c.add_argument("--labs", help="comma-separated lab numbers, e.g. 00,01 (default: all)")
    c.add_argument("--out", help="output folder (default: build/course)")
    c.add_argument("--cell-timeout", type=int, default=DEFAULT_CELL_TIMEOUT_S,
                   help=f"seconds one cell may run (default: {DEFAULT_CELL_TIMEOUT_S})")
    c.set_defaults(fn=cmd_course)
    a = sub.add_parser("assign", help="generate notebooks/ from solutions/")
    a.add_argument("--check", action="store_true", help="only compare; exit 1 when notebooks/ is out of date")
    a.set_defaults(fn=cmd_assign)
    b = sub.add_parser("bench", help="benchmarks measured side by side in one run")
    b.add_argument("name", choices=["overhead", "ddp", "dp", "pipeline", "tf"])
    b.add_argument("--samples", type=int, default=4096, help="overhead: samples per timed epoch")
    b.add_argument("--repeats", type=int, help="timed repeats, median reported (overhead: 15 epochs; ddp: 3 launches; dp: 15 steps; pipeline: 5 steps; tf: 3 launches)")
    b.add_argument("--world-size", type=int, default=2, help="ddp: number of ranks")
    b.add_argument("--steps", type=int, default=20, help="ddp, tf: optimizer steps per launch (first 3 not timed)")
    b.add_argument("--devices", type=int, default=2, help="dp: number of devices (replicas)")
    b.add_argument("--batch-sizes", type=_int_list, default=(16, 256),
                   help="dp: comma-separated batch sizes; the speedup is reported for the last (default: 16,256)")
    b.add_argument("--batch-size", type=int, default=1024, help="pipeline: samples per step (a multiple of 8)")
    b.add_argument("--global-batch", type=int, default=512, help="tf: samples per step over all workers (default: 512)")
    b.set_defaults(fn=cmd_bench)
    g = sub.add_parser("grade", help="execute submitted notebooks and score them outside the student's kernel")
    g.add_argument("--lab", required=True, help="lab number, e.g. 01")
    g.add_argument("submissions", nargs="+", help="submitted .ipynb files (the file stem names the student)")
    g.add_argument("--out", required=True, help="folder for gradebook.csv, feedback and executed notebooks")
    g.add_argument("--tests", help="folder of instructor-only test files (*.py defining EXERCISES)")
    g.add_argument("--timeout", type=float, default=600.0, help="seconds one whole notebook may run (default: 600)")
    g.add_argument("--cell-timeout", type=float, default=120.0, help="seconds one cell may run before it is interrupted (default: 120)")
    g.add_argument("--jobs", type=int, default=1, help="submissions graded at the same time (default: 1)")
    g.set_defaults(fn=cmd_grade)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
