"""A lab's pieces, found by its number (`python -m lab_utils labs 09` lists them).

From the files: lab NN is solutions/NN_name.ipynb; its student copy notebooks/NN_name.ipynb and its lesson module
lab_utils/lessons/labNN.py are generated from it by `assign`; its exercises are lab_utils/exercises/labNN.py; the
learner modules it uses are the ones its notebook imports. What no file says is declared once, in DECLARED below: the
parameters its test-size run shrinks, its benchmarks and its GPU check. `course`, `grade`, `bench`, `gpu-check` and
the nbval plugin look a lab up here; "Adding a lab" in lab_utils/instructor/README.md says what a new lab adds.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Benchmark:
    """`python -m lab_utils bench NAME`: measure(repeats=..., **options) -> result, then show(result); both named as
    "module.function" of lab_utils.instructor.bench, imported only when the benchmarks are listed or run."""

    name: str
    measure: str
    show: str
    options: tuple[str, ...] = ()  # the CLI options it takes, by their argparse dest
    repeats: int = 3  # default timed repeats


@dataclass(frozen=True)
class GpuCheck:
    """The lab's GPU branches against their CPU results: gpu_check() of lab_utils.instructor.gpu.<module>."""

    module: str
    limit_s: float = 60.0  # seconds its fresh process may take
    quick: bool = False  # one of the labs `gpu-check --quick` runs


@dataclass(frozen=True)
class Declared:
    """What a lab declares: the parameters its test-size run overrides (nbval, `course --size test`), its benchmarks,
    its GPU check, and whether its exercises' references run TensorFlow (the grader starts it before any submission)."""

    test_size: dict = field(default_factory=dict)
    benchmarks: tuple[Benchmark, ...] = ()
    gpu_check: GpuCheck | None = None
    tensorflow: bool = False


DECLARED: dict[str, Declared] = {
    "00": Declared({"timing_repeats": 3}),
    "01": Declared({"timing_steps": 3},
                   (Benchmark("overhead", "training.overhead", "training.print_overhead", ("samples",), 15),
                    Benchmark("classmates", "classmates.measure_classmates", "classmates.show_classmates", ("steps",), 3)),
                   GpuCheck("train", 60, quick=True)),
    "02": Declared({"timed_steps": 2, "sweep_batches": [8, 64], "compare_rounds": 5},
                   (Benchmark("dp", "data_parallel.bench", "data_parallel.print_bench", ("n_devices", "batch_sizes"), 15),),
                   GpuCheck("data_parallel", 60)),
    "03": Declared({"lr_epochs": 2, "speed_steps": 5, "bucket_rounds": 6, "bucket_batch": 32},
                   (Benchmark("ddp", "training.ddp", "training.print_ddp", ("world_size", "steps"), 3),),
                   GpuCheck("ddp", 90, quick=True)),
    "04": Declared({"rounds": 2},
                   (Benchmark("pipeline", "pipeline.pipeline", "pipeline.print_pipeline", ("batch_size",), 5),),
                   GpuCheck("pipeline", 60)),
    "05": Declared({"repeats": 1, "steps_per_repeat": 3, "speed_steps": 2},
                   (Benchmark("tf", "training.tf", "training.print_tf", ("steps", "global_batch"), 3),),
                   GpuCheck("tf_distribute", 90, quick=True), tensorflow=True),
    "06": Declared({"allreduce_max_bytes": 1 << 16, "allreduce_repeats": 3, "repeats": 3},
                   (Benchmark("collectives", "collectives.bench", "collectives.print_bench", ("world_size",), 9),),
                   GpuCheck("collectives", 60)),
    "07": Declared({"repeats": 3},
                   (Benchmark("memory", "memory.bench", "memory.print_bench", ("world_size",), 5),),
                   GpuCheck("memory", 60)),
    "08": Declared({"tf_steps": 40, "gradients": 80, "throughput_batch": 64, "throughput_gradients": 16},
                   (Benchmark("async", "parameter_server.bench", "parameter_server.print_bench", (), 3),),
                   GpuCheck("parameter_server", 60)),
    "09": Declared({"repeats": 3, "batch_sweep": [1, 8, 64, 512], "rounds": 1, "pool_requests": 600, "run_s": 0.25},
                   (Benchmark("inference", "serving.bench", "serving.print_bench", (), 3),),
                   GpuCheck("serving", 90, quick=True)),
    "10": Declared({"allreduce_repeats": 3, "allreduce_max_bytes": 1 << 18}),
    "11": Declared({"speed_repeats": 1},
                   (Benchmark("cluster", "training.cluster", "training.print_cluster", (), 5),)),
    "12": Declared({"repeats": 3},
                   (Benchmark("record", "debugging.record_cost", "debugging.print_record_cost", ("world_size",), 9),)),
    "13": Declared({"large_side": 256, "repeats": 3}),
}


@dataclass(frozen=True)
class Lab:
    """One lab's pieces: the files found by its number, and what it declares."""

    number: str
    solution: Path
    root: Path = ROOT

    @property
    def declared(self) -> Declared:
        return declared(self.number)

    @property
    def notebook(self) -> Path:
        """The student notebook `assign` generates."""
        return self.root / "notebooks" / self.solution.name

    @property
    def lesson(self) -> Path | None:
        """lab_utils/lessons/labNN.py, generated by `assign` from the cells tagged `lesson` (None: it has none)."""
        return _existing(self.root / "lab_utils" / "lessons" / f"lab{self.number}.py")

    @property
    def exercises(self) -> Path | None:
        """lab_utils/exercises/labNN.py, its exercises' definitions (None: it has no exercises)."""
        return _existing(self.root / "lab_utils" / "exercises" / f"lab{self.number}.py")

    def learner_modules(self) -> list[str]:
        """The lab_utils modules its notebook imports (lab_utils.labs.lab09.serving, ...), sorted."""
        found: set[str] = set()
        for cell in json.loads(self.solution.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            try:
                tree = ast.parse("\n".join("" if line.lstrip()[:1] in "%!" else line for line in source.splitlines()))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module] if node.module != "lab_utils" else \
                        [f"lab_utils.{a.name}" for a in node.names]
                else:
                    continue
                found.update(name for name in names if name.startswith("lab_utils."))
        return sorted(found)

    def describe(self) -> str:
        """Its pieces, one per line, paths relative to the course."""
        def where(path: Path | None) -> str:
            return str(path.relative_to(self.root)) if path else "none"

        d = self.declared
        bench = self.root / "lab_utils" / "instructor" / "bench"
        lines = [f"lab {self.number}: {where(self.solution)}",
                 f"  student notebook  {where(self.notebook if self.notebook.exists() else None)}",
                 f"  lesson module     {where(self.lesson)}",
                 f"  exercises         {where(self.exercises)}",
                 f"  imports           {', '.join(self.learner_modules()) or 'nothing of lab_utils'}",
                 f"  test size         {', '.join(f'{k}={v!r}' for k, v in d.test_size.items()) or 'its defaults'}"]
        lines += [f"  benchmark         {b.name} ({where(bench / (b.measure.split('.')[0] + '.py'))})"
                  for b in d.benchmarks] or ["  benchmark         none"]
        gpu = d.gpu_check
        lines.append(f"  GPU check         {where(bench.parent / 'gpu' / (gpu.module + '.py'))} ({gpu.limit_s:g} s"
                     f"{', quick' if gpu.quick else ''})" if gpu else "  GPU check         none")
        return "\n".join(lines)


def _existing(path: Path) -> Path | None:
    return path if path.exists() else None


def solution_notebooks(folder=None) -> list[Path]:
    """The labs' source notebooks (NN_name.ipynb) in lab order."""
    return sorted(Path(folder or ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def all_labs(root: Path = ROOT) -> list[Lab]:
    """Every lab of the course at `root`, in order."""
    return [Lab(path.name[:2], path, root) for path in solution_notebooks(root / "solutions")]


def find(number, root: Path = ROOT) -> Lab:
    """Lab `number` ("9", "09" or 9); ValueError naming the course's labs when there is none."""
    wanted = str(number).strip().zfill(2)
    labs = {lab.number: lab for lab in all_labs(root)}
    if wanted not in labs:
        raise ValueError(f"unknown lab {wanted}; this course has {sorted(labs)}")
    return labs[wanted]


def declared(number) -> Declared:
    """What lab `number` declares (nothing, for a lab without a row in DECLARED)."""
    return DECLARED.get(str(number).zfill(2), Declared())


def benchmarks() -> list[tuple[str, Benchmark]]:
    """(lab, benchmark) of every declared benchmark, in lab order."""
    return [(lab, b) for lab, d in sorted(DECLARED.items()) for b in d.benchmarks]


def gpu_checks() -> list[tuple[str, GpuCheck]]:
    """(lab, GPU check) of every lab that declares one, in lab order."""
    return [(lab, d.gpu_check) for lab, d in sorted(DECLARED.items()) if d.gpu_check]
