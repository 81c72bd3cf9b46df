"""The course's workloads, one registry: each has one short name, printed beside every figure measured on it and
written in the `workload` column of every results row (what a row's batch, ranks and threads ran)."""
from __future__ import annotations

import dataclasses

# the short name of each model a workload runs: the spec presets (lab_utils.spec.PRESETS) and the labs' own models
MODELS = {
    "cnn2d_3layer_fullconnected_3layer": "CNN-3conv",
    "cnn2d_2layer_fullconnected_2layer": "CNN-2conv",
    "wide_cnn": "CNN-2conv-wide",  # memory.wide_cnn: 4x the channels, a 1024-unit classifier (lab 07)
    "wide_head_cnn": "CNN-widehead",  # serving.wide_head_cnn: CNN-2conv's convolutions, two wide dense layers (lab 09)
    "spatial_cnn": "CNN-spatial",  # lab 13's CNN, images split into slabs of rows
    "allreduce": "all-reduce",  # no model: a collective on float32 messages (lab 06's sweep)
    "file_read": "file read",  # no model: reading a dataset's files from a disk (lab 11's staging)
}
DATA = {"synthetic": "synthetic", "digits": "digits",  # data.synthetic_images (28x28 by default); the 8x8 digits
        "float32": "float32"}  # messages of float32 numbers
COURSE_CNN = "cnn2d_2layer_fullconnected_2layer"  # the model the prose calls "the course CNN": Lab 01's, CNN-2conv


@dataclasses.dataclass(frozen=True)
class Workload:
    """What a row measured: a model on data of one image side, what was timed and whether fetching the batch was in
    it. Batch, ranks and threads are the row's configuration; the name is unique in the registry."""

    model: str  # a key of MODELS
    data: str  # a key of DATA
    side: int | None  # image side in pixels; None: the lab's parameter sets it (lab 13's image sizes)
    timed: str  # what one timed repeat is, in a few words ("step", "training run", "forward pass", ...)
    computes: str = ""  # what one repeat computes, shared by workloads that time it in other ways: "step" (forward,
    # backward, update), "forward"; "" (each serving load, lab 13's sizes): this workload's alone
    loading: bool = False  # the timed step includes fetching its batch (a DataLoader); False: batches in memory
    batch: int | None = None  # the global batch every row of it has; None: the lab's parameters set it

    @property
    def name(self) -> str:
        """'CNN-3conv/synthetic28 step': model/data and image side, then what is timed."""
        return f"{MODELS[self.model]}/{DATA[self.data]}{self.side or ''} {self.timed}"

    @property
    def measures(self) -> tuple:
        """What a figure of it is, whatever the lab times around it: the same model on the same data and image size,
        computing the same, with or without fetching the batch (an image size the lab's parameters set, or a
        computation of its own, is known by this workload alone)."""
        alone = self.timed if not (self.side and self.computes) else ""
        return self.model, self.data, self.side, self.computes, self.loading, alone

    def at(self, batch: int) -> str:
        """The name with a batch, as a sentence names a figure's workload: 'CNN-3conv/synthetic28 b256 step'."""
        head, _, timed = self.name.partition(" ")
        return f"{head} b{batch} {timed}"


def _w(model: str, data: str, side: int | None, timed: str, computes: str = "", *, loading: bool = False,
       batch: int | None = None) -> Workload:
    return Workload(model, data, side, timed, computes, loading, batch)


C3, C2 = "cnn2d_3layer_fullconnected_3layer", "cnn2d_2layer_fullconnected_2layer"
FORWARD = _w(C2, "synthetic", 28, "forward pass", "forward")  # lab 00: one forward pass, median
TRAINING_RUN = _w(C2, "digits", 8, "training run", "step", loading=True)  # lab 01: a run's median step
STEP_DIGITS = _w(C2, "digits", 8, "step, own process", "step")  # lab 05: each framework in a process of its own
STEP_DIGITS_TF = _w(C2, "digits", 8, "step in the notebook's TensorFlow", "step")  # lab 05: strategies in the kernel
STEP_3CONV = _w(C3, "synthetic", 28, "step", "step", batch=256)  # labs 01, 03: one optimizer step on a batch in memory
SWEEP_3CONV = _w(C3, "synthetic", 28, "step in one process", "step")  # lab 02: the batch sweep, devices are threads
LAUNCHED_3CONV = _w(C3, "synthetic", 28, "step, launched ranks", "step")  # lab 02: DataParallel vs DDP, ranks launched
DDP_RECIPE = _w(C2, "digits", 8, "DDP recipe run", "step", loading=True)  # lab 03: the whole DDP worker's training run
PIPELINE = _w(C2, "synthetic", 28, "pipeline step", "step")  # lab 04: one step through the stages, median of rounds
WORKERS = _w(C2, "synthetic", 28, "step, Keras workers", "step")  # lab 05: MultiWorkerMirroredStrategy workers' step
TP_VS_DDP = _w(C2, "synthetic", 28, "step, TP vs DDP", "step")  # lab 06: tensor parallel vs DDP, one training step
PRECISION = _w(C2, "synthetic", 28, "step, float32 vs bfloat16", "step")  # lab 07: one training step in each precision
PRECISION_WIDE = _w("wide_cnn", "synthetic", 28, "step, float32 vs bfloat16", "step")  # lab 07: the wide model
CHECKPOINTS = _w(C2, "synthetic", 28, "fwd+bwd with checkpoints")  # lab 07: forward and backward, no update
PS_THROUGHPUT = _w(C2, "synthetic", 28, "parameter server")  # lab 08: gradients applied by the server
PS_DIGITS = _w(C2, "digits", 8, "parameter server")  # lab 08: the accuracy runs (and Hogwild)
SERVE_MODES = _w("wide_head_cnn", "synthetic", 28, "forward pass, train vs no_grad vs inference_mode", "forward")
SERVE_BATCHES = _w("wide_head_cnn", "synthetic", 28, "forward pass per batch size", "forward")  # lab 09
SERVE_LOW = _w("wide_head_cnn", "synthetic", 28, "serving Poisson arrivals, low load")  # lab 09: each load its own
SERVE_HIGH = _w("wide_head_cnn", "synthetic", 28, "serving Poisson arrivals, high load")  # lab 09
SERVE_WORKERS = _w("wide_head_cnn", "synthetic", 28, "serving a burst, batcher and worker processes")  # lab 09
SERVE_OPTIMISED = _w("wide_head_cnn", "synthetic", 28, "forward pass, one optimisation at a time", "forward")  # lab 09
SERVE_PADDED = _w("wide_head_cnn", "synthetic", 28, "forward pass, unpadded vs padded to x32", "forward")  # lab 09
SERVE_KERAS = _w("wide_head_cnn", "synthetic", 28, "forward pass, Keras eager, tf.function and XLA", "forward")  # lab 09
ARRAY_SWEEP = _w(C2, "digits", 8, "job-array sweep of the batch", "step", loading=True)  # lab 11: a task per batch
SLURM_VS_LAUNCH = _w(C3, "synthetic", 28, "step, Slurm vs launch", "step")  # lab 11: lab 03's worker, Slurm vs launch
SPATIAL_ONE_SMALL = _w("spatial_cnn", "digits", None, "step, one small image")  # lab 13: forward and backward
SPATIAL_ONE_LARGE = _w("spatial_cnn", "digits", None, "step, one large image")  # lab 13
SPATIAL_MANY_SMALL = _w("spatial_cnn", "digits", None, "step, many small images")  # lab 13
# the workloads only verdicts name (no results row): what each verdict's two sides both ran
BUCKETS = _w(C3, "synthetic", 28, "DDP backward pass per bucket size")  # lab 03: loss.backward() with 1 vs 3 buckets
ALLREDUCE_SIZES = _w("allreduce", "float32", None, "ring vs dist.all_reduce per message size")  # lab 06, 2 ranks
CHECKPOINT_SAVE = _w(C2, "synthetic", 28, "FSDP2 loop held by a checkpoint save")  # lab 07: save vs async_save
STAGING = _w("file_read", "digits", None, "shared folder vs node-local copy")  # lab 11: a Slurm job reads the files
SERVE_KERAS_FIRST = _w("wide_head_cnn", "synthetic", 28, "first call of a fresh tf.function, graph vs XLA")  # lab 09
RECORD_STEP = _w(C2, "synthetic", 8, "step, an all_reduce per tensor", batch=16)  # lab 12's cost_worker: 16 per rank

_ALL = [v for v in list(globals().values()) if isinstance(v, Workload)]
REGISTRY: dict[str, Workload] = {w.name: w for w in _ALL}
assert len(REGISTRY) == len(_ALL), "two registered workloads share a name"


def named(name: str) -> Workload:
    """The registered workload of this name; an error naming the registry's names otherwise."""
    if name not in REGISTRY:
        raise KeyError(f"{name!r} is not a registered workload (lab_utils.workloads.REGISTRY); register it there "
                       f"with its model, data, image side and what is timed. Registered: {sorted(REGISTRY)}")
    return REGISTRY[name]


def find(name: str) -> Workload | None:
    """The registered workload of this name, None for a label written before the registry (an older results CSV)."""
    return REGISTRY.get(name)


BOTH = " & "  # between the two workloads a verdict compares, where its sides ran different ones (two models)


def verdict_name(workload) -> str:
    """The workload a verdict names, validated: a registered Workload or its name, or two of them (a verdict whose
    sides ran different workloads) joined by BOTH; an unknown name is an error naming the registry."""
    each = list(workload) if isinstance(workload, (tuple, list)) else [workload]
    if not 1 <= len(each) <= 2:
        raise ValueError(f"a verdict names its workload, or the two its sides ran; got {len(each)}: {each}")
    names = [named(w.name if isinstance(w, Workload) else w).name for w in each]
    unlike = [w for w in each if isinstance(w, Workload) and REGISTRY[w.name] != w]
    if unlike:
        raise KeyError(f"{unlike[0]} is not the registered workload of its name (lab_utils.workloads.REGISTRY)")
    return BOTH.join(dict.fromkeys(names))  # one name when both sides ran the same workload


def verdict_names(text: str) -> list[str]:
    """The workload names a verdict's `workload` cell (or its printed [..]) holds."""
    return [n for n in text.split(BOTH) if n]


def model_name(preset: str) -> str:
    """The short name of a model ('CNN-2conv' for cnn2d_2layer_fullconnected_2layer), for prose and tables."""
    return MODELS[preset]


def check_batch(name: str, batch_size: int) -> None:
    """Refuse a row whose batch its registered workload rules out (an unregistered label passes: an older CSV)."""
    w = find(name)
    if w and w.batch is not None and batch_size != w.batch:
        raise ValueError(f"workload {name!r} is timed at batch {w.batch}, this row says {batch_size}: register another "
                         "workload for another batch (lab_utils/workloads.py)")
