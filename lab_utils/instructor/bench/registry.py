"""Every benchmark by name (`python -m lab_utils bench NAME` runs one): the benchmarks the labs declare in
their packages (lab_utils/labs/labNN/__init__.py, read by lab_utils.instructor.labs), each resolved here to its
functions. Kept apart from the package's __init__: a rank that runs one benchmark's worker imports only that
benchmark's module."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .. import labs


@dataclass(frozen=True)
class Bench:
    """One benchmark: measure(repeats=..., **options) -> dict, then show(that dict)."""

    measure: Callable[..., object]
    show: Callable[[Any], None]
    options: tuple[str, ...] = ()  # the CLI options it takes, by their argparse dest
    repeats: int = 3  # default timed repeats
    lab: str = ""  # the lab that declares it

    def run(self, repeats: int | None, options: dict) -> None:
        """Measure with `repeats` (None: the default) and the options this benchmark takes out of `options`, then show."""
        self.show(self.measure(repeats=repeats or self.repeats, **{k: options[k] for k in self.options}))


def function(reference: str) -> Callable:
    """The function a full dotted name names ("lab_utils.labs.lab04.bench.pipeline")."""
    module, name = reference.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


BENCHES: dict[str, Bench] = {b.name: Bench(function(b.measure), function(b.show), b.options, b.repeats, lab)
                             for lab, b in labs.benchmarks()}
