"""Lab 07's room: where a rank's memory goes, counted exactly from tensors (parameters, gradients, optimizer state,
saved activations), the per-strategy formulas, stacked bars per rank, the mixed-precision
dtype a device supports. (Lab 07's DDP / ZeRO-1 / FSDP2 workers are its notebook's: lab_utils.labs.lab07.lesson.)"""
from __future__ import annotations

import math

import torch
from torch import nn

from . import plots, spec
from .tensors import local

MIB = 2**20
KINDS = ("parameters", "gradients", "optimizer", "activations")
STATE_NUMBERS = {"sgd": 0, "momentum": 1, "adam": 2}  # optimizer state numbers kept per parameter
SHARDED = {"ddp": (), "zero1": ("optimizer",), "zero2": ("optimizer", "gradients"),
           "zero3": ("optimizer", "gradients", "parameters")}  # what each strategy splits across the ranks
INPUT_SHAPE = (1, 28, 28)


def wide_cnn(num_classes: int = 10) -> list[dict]:
    """The course CNN with 4x the channels and a 1024-unit classifier: a model whose parameters matter."""
    return [spec.conv2d(64), spec.maxpool2d(), spec.conv2d(128), spec.maxpool2d(), spec.flatten(),
            spec.dense(1024), spec.dense(num_classes, activation=None)]


# ---- bytes held, counted from the tensors themselves ----------------------------------------------------------------

def storage_bytes(tensors) -> int:
    """Bytes of the storages behind `tensors`, each storage once (views share their base's storage)."""
    storages = {}
    for t in tensors:
        s = local(t).untyped_storage()
        storages[(str(s.device), s.data_ptr())] = s.nbytes()
    return sum(storages.values())


def optimizer_state_bytes(optimizer) -> int:
    """Bytes of every tensor the optimizer keeps (momentum buffers, Adam's two moments and step counters)."""
    return storage_bytes(v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


def held_bytes(model, optimizer) -> dict[str, int]:
    """Parameters, gradients and optimizer state this process holds for `model`, in bytes."""
    params = list(model.parameters())
    return {"parameters": storage_bytes(params),
            "gradients": storage_bytes(p.grad for p in params if p.grad is not None),
            "optimizer": optimizer_state_bytes(optimizer)}


def full_weights(model) -> torch.Tensor:
    """Every parameter, whole (an FSDP shard is gathered), as one flat CPU tensor."""
    return torch.cat([(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().cpu().flatten()
                      for p in model.parameters()])


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The byte range [start, end) a tensor's elements occupy in its storage."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    elements = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + elements * t.element_size()


def _union_bytes(spans) -> int:
    """Bytes covered by a set of [start, end) ranges, overlaps counted once."""
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is None or start >= reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


class SavedActivations:
    """In `with SavedActivations(model) as saved:`, `saved.bytes` counts the bytes autograd keeps for backward."""

    def __init__(self, model: nn.Module | None = None):
        self.model = model
        self._spans: dict[tuple, set] = {}
        self._dtypes: dict[tuple, str] = {}  # each storage's element type (as its first saved tensor has it)
        self._hooks: torch.autograd.graph.saved_tensors_hooks | None = None

    def _parameter_storages(self) -> set:
        params = self.model.parameters() if self.model is not None else ()
        return {local(p).untyped_storage().data_ptr() for p in params}  # FSDP swaps parameters during forward

    def _pack(self, tensor):
        storage = local(tensor).untyped_storage()
        # the model's parameters are counted as parameters, not as activations
        if storage.data_ptr() not in self._parameter_storages():
            key = (str(storage.device), storage.data_ptr())
            self._spans.setdefault(key, set()).add(_span(local(tensor)))
            self._dtypes.setdefault(key, str(tensor.dtype).removeprefix("torch."))
        return tensor

    def __enter__(self) -> "SavedActivations":
        self._hooks = hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        assert self._hooks is not None  # set by __enter__
        self._hooks.__exit__(*exc)

    @property
    def bytes(self) -> int:
        # each byte once (a view shares its base's); all is kept until backward, so this is the forward's peak
        return sum(_union_bytes(spans) for spans in self._spans.values())

    @property
    def bytes_by_dtype(self) -> dict[str, int]:
        """The same bytes, by element type ('float32', 'bfloat16', 'int64', ...), largest first."""
        totals: dict[str, int] = {}
        for key, spans in self._spans.items():
            totals[self._dtypes[key]] = totals.get(self._dtypes[key], 0) + _union_bytes(spans)
        return dict(sorted(totals.items(), key=lambda item: -item[1]))


# ---- the formulas ----------------------------------------------------------------------------------------------------

def shard_size(n_params: int, world_size: int) -> int:
    """Numbers per rank when n_params are split evenly: rounded up, the last shard padded with zeros."""
    if n_params < 1 or world_size < 1:
        raise ValueError(f"need n_params >= 1 and world_size >= 1, got {n_params} and {world_size}")
    return math.ceil(n_params / world_size)


def padding(n_params: int, world_size: int) -> int:
    """Zeros added so that n_params split into world_size equal shards."""
    return shard_size(n_params, world_size) * world_size - n_params


def per_rank_bytes(n_params: int, world_size: int, strategy: str = "ddp", optimizer: str = "adam", *,
                   mixed: bool = False) -> dict[str, int]:
    """Bytes of parameters, gradients and optimizer state on each rank; a sharded kind holds shard_size numbers."""
    if strategy not in SHARDED:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {sorted(SHARDED)} (FSDP shards like zero3)")
    if optimizer not in STATE_NUMBERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {sorted(STATE_NUMBERS)}")
    # mixed: 2-byte parameters and gradients, plus an fp32 master copy in the optimizer; Adam mixed under DDP is
    # the Ultra-Scale Playbook's 2 + 2 + 12 = 16 bytes per parameter
    each = {"parameters": 2 if mixed else 4, "gradients": 2 if mixed else 4,
            "optimizer": 4 * STATE_NUMBERS[optimizer] + (4 if mixed else 0)}
    shard = shard_size(n_params, world_size)
    return {kind: b * (shard if kind in SHARDED[strategy] else n_params) for kind, b in each.items()}


def parameter_count(model_spec, input_shape=INPUT_SHAPE) -> int:
    """Psi: the trainable parameters of a spec."""
    return sum(spec.parameter_counts(model_spec, input_shape))


def draw_per_rank(per_rank: dict, ax=None, *, title: str = ""):
    """per_rank[row][kind] -> bytes: one stacked bar per row (a rank of a strategy), in MiB; returns the axes."""
    mib = {row: {kind: parts.get(kind, 0) / MIB for kind in KINDS} for row, parts in per_rank.items()}
    ax = plots.stacked_bars(mib, ax, title=title, unit="s")  # plots' scale 1: the values are already MiB
    ax.set_xlabel("MiB held by the rank")
    return ax


# ---- who owns which parameters, for sharded optimizers -------------------------------------------------------------

def assign_owners(sizes, world_size: int) -> list[int]:
    """Owner rank of each parameter tensor: largest first, to the least-loaded rank (as ZeroRedundancyOptimizer)."""
    load = [0] * world_size
    owners = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        owners[i] = min(range(world_size), key=lambda r: (load[r], r))
        load[owners[i]] += sizes[i]
    return owners


# ---- mixed precision -------------------------------------------------------------------------------------------------

AMP_CHOICES = ("auto", "bfloat16", "float16")


def _cpu_has_float16() -> bool:
    """True when the CPU computes float16 natively (AMX-FP16); otherwise torch emulates it, slower than fp32."""
    probe = getattr(torch.cpu, "_is_amx_fp16_supported", None)
    return bool(probe and probe())


def cpu_bf16_native(features: str | None = None) -> bool:
    """True when this CPU (or the space-separated `features`) has bfloat16 in hardware: avx512_bf16 or AMX-BF16."""
    from . import hardware

    features = hardware.cpu_info()["cpu_features"] if features is None else features
    return bool(set(features.split()) & hardware.NATIVE_BF16)


def amp_note(device_type: str, dtype, features: str | None = None) -> str:
    """One line on what autocast to `dtype` buys here (a CPU may emulate bfloat16); '' when nothing to say."""
    if device_type == "cpu" and dtype == torch.bfloat16 and not cpu_bf16_native(features):
        return ("this CPU has no native bfloat16 (no avx512_bf16, no AMX-BF16): torch emulates it, so here bf16 "
                "shows the mechanics of mixed precision and what emulation costs, not a speed-up; float32 is the "
                "faster choice on this machine")
    return ""


def amp_dtype(device_type: str, requested: str = "auto", *, gpu_capability: tuple[int, int] | None = None):
    """The autocast dtype for `device_type`, or a ValueError naming the alternative when the hardware lacks it."""
    if requested not in AMP_CHOICES:
        raise ValueError(f"amp_dtype={requested!r}: autocast computes in a 16-bit float; choose one of {AMP_CHOICES}")
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device_type must be 'cpu' or 'cuda', got {device_type!r}")
    # auto: bfloat16 on a CPU (float32's exponent range, no GradScaler; emulated without avx512_bf16/AMX), float16
    # on a GPU (fast on every GPU with tensor cores; needs a GradScaler)
    if requested == "auto":
        return torch.bfloat16 if device_type == "cpu" else torch.float16
    dtype = getattr(torch, requested)
    if device_type == "cpu" and dtype == torch.float16 and not _cpu_has_float16():
        bf16 = ("no GradScaler needed" if cpu_bf16_native() else
                "no GradScaler needed; emulated on this CPU too, so slower than float32: use it to learn the mechanics")
        raise ValueError("amp_dtype='float16' on this CPU: it has no float16 arithmetic (AMX-FP16), so torch would "
                         f"emulate float16, slower than float32. Use amp_dtype='bfloat16' (float32's exponent range, "
                         f"{bf16}).")
    if device_type == "cuda" and dtype == torch.bfloat16:
        major, minor = gpu_capability or torch.cuda.get_device_capability()
        if major < 8:
            raise ValueError(f"amp_dtype='bfloat16' on a GPU of compute capability {major}.{minor}: bfloat16 "
                             "arithmetic needs 8.0 (Ampere) or newer. Use amp_dtype='float16' with a GradScaler.")
    return dtype


# ---- activation checkpointing ----------------------------------------------------------------------------------------

def layer_blocks(model: nn.Sequential) -> list[nn.Sequential]:
    """The model cut before every layer with weights: [conv, relu, pool], [conv, relu, pool, flatten], ..."""
    starts = [i for i, m in enumerate(model) if any(True for _ in m.parameters(recurse=False))]
    bounds = [0, *starts[1:], len(model)]
    return [model[a:b] for a, b in zip(bounds, bounds[1:])]  # type: ignore[misc]  # a slice of a Sequential is one


def block_names(model: nn.Sequential) -> list[str]:
    """'conv 1', 'conv 2', 'dense 1', ... for the blocks of layer_blocks(model)."""
    count = {"conv": 0, "dense": 0}
    names = []
    for block in layer_blocks(model):
        kind = "conv" if any(isinstance(m, nn.Conv2d) for m in block) else "dense"
        count[kind] += 1
        names.append(f"{kind} {count[kind]}")
    return names


