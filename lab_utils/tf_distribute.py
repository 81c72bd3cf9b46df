"""TensorFlow around lab 05's lesson: a quiet start-up, devices configured before TensorFlow initialises, worker
processes with their TF_CONFIG, frameworks timed in processes of their own, step rates, one step checked against one
device. The distributed train step itself is the notebook's (make_train_step, exported to lab_utils.labs.lab05.lesson)."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from dataclasses import dataclass

from . import detectors, hardware, measure
from .compare import max_abs_diff

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # 2: errors only (TF logs to stderr at import; nbval compares stderr)

# TF 2.21 writes these to the C-level stderr while it imports, before its log level applies (absl is not set up yet)
STARTUP_NOISE = ("WARNING: All log messages before absl::InitializeLog()", "port.cc:", "cpu_feature_guard.cc:",
                 "To enable the following instructions:", "rebuild TensorFlow with the appropriate compiler flags")


def quiet() -> None:
    """Silence TensorFlow's log lines below errors; call before the first `import tensorflow`."""
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)


def import_tensorflow():
    """Import TensorFlow with its start-up log lines removed from stderr (anything else still shows); returns it."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    quiet()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode(errors="replace").splitlines()
    kept = [line for line in lines if not any(noise in line for noise in STARTUP_NOISE)]
    if kept:
        print("\n".join(kept), file=sys.stderr)
    import logging

    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # e.g. the eager-MirroredStrategy performance warning
    logging.getLogger("absl").setLevel(logging.ERROR)  # e.g. "Enabling collective ops after program startup"
    return tensorflow


@dataclass(frozen=True)
class TFDevices:
    """The devices a MirroredStrategy will mirror over, and why these."""

    names: tuple[str, ...]
    kind: str  # "gpu" | "logical-gpu" | "logical-cpu"
    reason: str

    def describe(self) -> str:
        """The devices, and why these, in lines of at most 100 columns."""
        import textwrap

        return (f"{len(self.names)} device(s), {self.kind}: {', '.join(self.names)}\n"
                + textwrap.fill(f"why: {self.reason}", width=100, initial_indent="  ", subsequent_indent="    "))


ALREADY_INITIALISED = ("TensorFlow is already initialised in this process, so its devices can no longer be changed. "
                       "Restart the kernel and call lab_utils.tf_distribute.configure_devices(...) before anything "
                       "else touches TensorFlow. (TensorFlow said: {error})")


def configure_devices(n_devices: int = 2, *, gpu_memory_mb: int = 2048,
                      hw: hardware.HardwareReport | None = None) -> TFDevices:
    """Make `n_devices` devices visible to tf.distribute: real GPUs, logical GPUs on one GPU, or logical CPUs."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer, got {n_devices!r}")
    tf = import_tensorflow()
    hw = hw or hardware.detect()
    gpus = tf.config.list_physical_devices("GPU")
    try:
        if len(gpus) >= n_devices:
            tf.config.set_visible_devices(gpus[:n_devices], "GPU")
            kind, reason = "gpu", f"{len(gpus)} GPU(s): one replica per GPU."
        elif gpus:
            config = [tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_mb)] * n_devices
            tf.config.set_visible_devices(gpus[:1], "GPU")
            tf.config.set_logical_device_configuration(gpus[0], config)
            kind, reason = "logical-gpu", (f"{n_devices} replicas but {len(gpus)} GPU: GPU 0 is split into {n_devices} "
                                           f"logical GPUs of {gpu_memory_mb} MB; they share its compute, so expect no speedup.")
        else:
            cpus = tf.config.list_physical_devices("CPU")
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * n_devices)
            kind, reason = "logical-cpu", (f"no GPU: the CPU is split into {n_devices} logical devices. They share one "
                                           f"thread pool over {hw.cpu_count} core(s), so theory predicts that MirroredStrategy "
                                           "runs correctly here but gains no speed, and that separate worker processes "
                                           "can (section 5 measures both)")
    except RuntimeError as err:
        raise RuntimeError(ALREADY_INITIALISED.format(error=err)) from None
    device_type = "GPU" if kind != "logical-cpu" else "CPU"
    names = tuple(d.name for d in tf.config.list_logical_devices(device_type))[:n_devices]
    return TFDevices(names, kind, reason)


# ---- launched processes that run TensorFlow -----------------------------------------------------------------------

TF_PROCESS = "LAB_TENSORFLOW"  # "1" in a launched process that runs TensorFlow
TF_THREADS = "LAB_TF_THREADS"  # the size of its thread pools (unset: TensorFlow's default, all cores)


def prepare() -> None:
    """launch's `prepare`: in a TensorFlow process ($LAB_TENSORFLOW=1), import TensorFlow quietly, size its pools."""
    # runs before the worker is unpickled; a process that is not TensorFlow's never imports it
    if os.environ.get(TF_PROCESS) != "1":
        return
    tf = import_tensorflow()
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)  # workers sharing a GPU take only what they use
    threads = int(os.environ.get(TF_THREADS) or 0)
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def tf_config(ports, index: int, host: str = "127.0.0.1") -> dict:
    """The TF_CONFIG of worker `index` in a cluster of local workers listening on `ports`."""
    return {"cluster": {"worker": [f"{host}:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}


def worker_environment(ports, threads: int | None, gpus: int = 0):
    """The variables of each worker (a function of its rank, for launch's `env`): TF_CONFIG, TensorFlow on, quiet."""
    import json

    def env(rank: int) -> dict:
        # errors too: when a peer ends first, the collective runtime logs that it is gone; real failures still come
        # back as Python exceptions through launch
        values = {"TF_CONFIG": json.dumps(tf_config(ports, rank)), TF_PROCESS: "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
        if threads:
            values[TF_THREADS] = str(threads)
        if gpus:
            values["CUDA_VISIBLE_DEVICES"] = str(rank % gpus)
        return values

    return env


PORT_TAKEN = "Could not start gRPC server"  # a worker's TF_CONFIG port was taken between free_port() and its bind
PORT_TRIES = 3


def launch_worker_jobs(jobs, n_workers: int, timeout: float = 180.0, threads: int = 1) -> list[list]:
    """Run jobs [(worker, args), ...] in turn in the same `n_workers` TF processes; per job, values in rank order.
    A launch whose worker found its port taken by another program (a race no free port can rule out) is started again
    on new ports, up to PORT_TRIES times: never reported as the worker's failure."""
    from .launch import RankError, free_port, launch_jobs
    from .launch.together import run_together

    hw = hardware.detect()
    together = [(run_together, (worker, tuple(args), timeout)) for worker, args in jobs]
    def attempt():
        env = worker_environment([free_port() for _ in range(n_workers)], threads, len(hw.gpus))
        return launch_jobs(together, n_workers, timeout, threads=threads, env=env, prepare=prepare)

    for _ in range(PORT_TRIES - 1):
        try:
            return attempt()
        except RankError as err:
            if PORT_TAKEN not in str(err):
                raise
    return attempt()  # the last try: whatever it raises is reported


def launch_workers(worker, n_workers: int, args: tuple = (), timeout: float = 180.0, threads: int = 1) -> list:
    """Run worker(index, n_workers, *args) in `n_workers` TensorFlow worker processes (see launch_worker_jobs)."""
    return launch_worker_jobs([(worker, args)], n_workers, timeout, threads)[0]


# ---- step rates: one definition ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepRate:
    """Samples/s of the median step over all repeats (warm-up excluded), and the spread of the repeats' medians."""

    samples_per_s: float
    spread: float
    repeats: int
    steps: int


def step_rate(batch_size: int, repeats) -> StepRate:
    """The rate of `batch_size`-sample steps from each repeat's step times in seconds (warm-up already left out)."""
    repeats = [list(r) for r in repeats if len(r)]
    if not repeats:
        raise ValueError("no step times: time at least one step after the warm-up")
    medians = [statistics.median(r) for r in repeats]
    return StepRate(measure.samples_per_second(batch_size, statistics.median([t for r in repeats for t in r])),
                    measure.spread(medians), len(repeats), sum(len(r) for r in repeats))


def loop_conditions(launched_policy: str) -> list:
    """What differs between Lab 01's loop timed in Lab 01's kernel and in take_turns' PyTorch process, as condition
    notes (measured_twice then reads the pair as measured under different conditions): always the launched process
    and its turns, and the OpenMP wait policy where the two processes' differ. Not the memory allocator: lab_utils
    fixes it in every process the course starts (lab_utils.allocator; results rows record its setting)."""
    from .launch.environment import launched_not_kernel

    said = [detectors.condition(f"{launched_not_kernel()}, taking turns with a TensorFlow process")]
    if launched_policy != omp_wait_policy():
        said.append(detectors.condition(f"launched: its idle OpenMP threads sleep at once (OMP_WAIT_POLICY="
                                        f"{launched_policy}), a kernel's spin a while first"))
    return said


def slower_alone(alone_rate: float, after_rate: float) -> list:
    """The note for the clean PyTorch row where it read more than a noisy spread slower than the same step timed where
    TensorFlow ran (theory: TensorFlow's threads can only take cores from it), else nothing."""
    if after_rate <= (1 + measure.MAX_SPREAD) * alone_rate:
        return []
    return [detectors.note(f"over {measure.MAX_SPREAD:.0%} slower than torch after TensorFlow ({after_rate:,.0f}), "
                           "which theory orders no faster: something took this process's cores in its turns")]


def interleaved_steps(steps: dict, *, repeats: int, steps_per_repeat: int, warmup: int = 2,
                      before: dict | None = None) -> dict[str, list]:
    """Each step's times per repeat of `steps_per_repeat` interleaved rounds, after `warmup` untimed calls of each;
    `before[name]()` runs untimed right before each call of step `name`."""
    times: dict[str, list[list[float]]] = {name: [] for name in steps}
    for r in range(repeats):
        timings = measure.time_interleaved(steps, warmup=warmup if r == 0 else 0, repeats=steps_per_repeat,
                                           before=before)
        for name, timing in timings.items():
            times[name].append(list(timing.times))
    return times


# ---- frameworks side by side, each in a process of its own, taking turns ------------------------------------------

class _TurnTimer:
    """One process's steps (built by its builders, once), timed on its turns: work(round) for in_turns."""

    def __init__(self, builders: dict, steps_per_repeat: int, warmup: int, settle: tuple[str, ...] = ()) -> None:
        self.steps = {name: build() for name, build in builders.items()}
        self.steps_per_repeat, self.warmup = steps_per_repeat, warmup
        self.before: dict = {}
        if settle:  # lab 02's wait for spinning threads, untimed: the step starts on idle cores
            from .labs.lab02.data_parallel.threads import settle as wait_idle

            self.before = {name: wait_idle for name in settle if name in self.steps}
        self.times: dict[str, list] = {name: [] for name in self.steps}
        self.turns: list[tuple[float, float]] = []

    def __call__(self, round_: int | None) -> dict | None:
        """Time one turn (round 0 is the warm-up, kept out); None: what the turns measured."""
        import time

        import torch

        if round_ is None:
            return {"times": self.times, "turns": self.turns, "tensorflow_imported": "tensorflow" in sys.modules,
                    "threads": torch.get_num_threads(), "omp_wait_policy": omp_wait_policy(),
                    "parent": os.getppid()}  # the launcher itself: a fresh interpreter, not a fork server's fork
        start = time.time()
        done = interleaved_steps(self.steps, repeats=1, steps_per_repeat=self.steps_per_repeat if round_ else self.warmup,
                                 warmup=0, before=self.before)
        self.turns.append((start, time.time()))
        for name in self.steps:
            self.times[name] += done[name] if round_ else []
        return None


def omp_wait_policy() -> str:
    """How this process's OpenMP threads wait between parallel regions: OMP_WAIT_POLICY, or the default's words."""
    return os.environ.get("OMP_WAIT_POLICY") or "unset (libgomp spins a while, then sleeps)"


def take_turns(processes: list[dict], *, uses_tensorflow: list[bool], repeats: int = 4, steps_per_repeat: int = 20,
               warmup: int = 5, threads: int | None = None, timeout: float = 180.0,
               settle: tuple[str, ...] = ()) -> list[dict]:
    """Time the step functions each process builds, one process at a time; per process, a dict of times and turns.
    `settle`: steps before each of which their process waits, untimed, until its threads stop using CPU (Lab 02's
    settle: OpenMP threads that still spin after the step before would take its cores)."""
    import cloudpickle

    from .launch import launch
    from .launch.together import in_turns

    if len(processes) != len(uses_tensorflow):
        raise ValueError(f"{len(processes)} processes but {len(uses_tensorflow)} uses_tensorflow flags; give one each")
    threads = threads or hardware.usable_cpu_count()
    # processes[i]: name -> builder, called once in process i, returning a step function (one optimizer step)
    payloads = [cloudpickle.dumps(lambda b=builders: _TurnTimer(b, steps_per_repeat, warmup, tuple(settle)))
                for builders in processes]
    # each process waits as this kernel's OpenMP threads do (its OMP_WAIT_POLICY, or none: libgomp's default), not as
    # launched ranks do (sleep at once): on Lab 01's short step that alone made the loop 2.26x slower than Lab 01's.
    # libgomp reads it when torch loads, so the processes start fresh ("spawn"), not forked from the fork server
    policy = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}
    env = lambda rank: {**policy, **({TF_PROCESS: "1"} if uses_tensorflow[rank] else {})}
    # per process: each step's times per repeat, its turns' (start, end), whether TF was imported, torch's threads
    order = measure.numbered_rounds(range(len(processes)), repeats + 1)  # the first round is the warm-up
    return launch(in_turns, len(processes), args=(payloads, order, timeout),
                  timeout=timeout, threads=threads, pin_cores=False, env=env, prepare=prepare, start="spawn")


def replica_weight_spread(model) -> float:
    """The largest difference between the replicas' copies of any variable (0.0 when in sync)."""
    import numpy as np

    spread = 0.0
    for variable in model.weights:
        copies = [np.asarray(c) for c in getattr(getattr(variable, "value", variable), "values", [variable])]
        spread = max([spread] + [max_abs_diff(c, copies[0]) for c in copies[1:]])
    return spread
