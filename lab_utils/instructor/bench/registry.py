"""Every benchmark, registered by its function objects (`python -m lab_utils bench NAME` runs one). Kept apart from the
package's __init__: a rank that runs one benchmark's worker imports only that benchmark's module."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import collectives, data_parallel, memory, parameter_server, pipeline, serving, training


@dataclass(frozen=True)
class Bench:
    """One benchmark: measure(repeats=..., **options) -> dict, then show(that dict)."""

    measure: Callable[..., object]
    show: Callable[[Any], None]
    options: tuple[str, ...] = ()  # the CLI options it takes, by their argparse dest
    repeats: int = 3  # default timed repeats

    def run(self, repeats: int | None, options: dict) -> None:
        """Measure with `repeats` (None: the default) and the options this benchmark takes out of `options`, then show."""
        self.show(self.measure(repeats=repeats or self.repeats, **{k: options[k] for k in self.options}))


BENCHES: dict[str, Bench] = {
    "overhead": Bench(training.overhead, training.print_overhead, ("samples",), 15),
    "dp": Bench(data_parallel.sweep, data_parallel.show, ("n_devices", "batch_sizes"), 15),  # lab 02's sweep
    "ddp": Bench(training.ddp, training.print_ddp, ("world_size", "steps"), 3),
    "pipeline": Bench(pipeline.pipeline, pipeline.print_pipeline, ("batch_size",), 5),
    "tf": Bench(training.tf, training.print_tf, ("steps", "global_batch"), 3),
    "collectives": Bench(collectives.bench, collectives.print_bench, ("world_size",), 9),
    "memory": Bench(memory.bench, memory.print_bench, ("world_size",), 5),
    "async": Bench(parameter_server.bench, parameter_server.print_bench, (), 3),
    "inference": Bench(serving.bench, serving.print_bench, (), 3),
    "cluster": Bench(training.cluster, training.print_cluster, (), 5),
}
