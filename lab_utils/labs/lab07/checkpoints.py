"""Instruments for sharded checkpoints: a model's weights by name, a check that names the tensor a wrong load changed,
the files a checkpoint wrote, the order a training reads its samples in, and how ranks that paired their collectives
wrongly ended."""
from __future__ import annotations

import os

import numpy as np
import torch

from ...launch.errors import short_error

MISMATCH = "op.preamble.length"  # gloo's abort, on the rank's stderr, when two paired collectives' sizes differ


def named_weights(model) -> dict[str, np.ndarray]:
    """Every parameter, whole (an FSDP shard is gathered), by name, as float32 numpy arrays."""
    return {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().cpu().numpy().copy()
            for name, p in model.named_parameters()}


def weights_mismatch(saved: dict, loaded: dict, tolerance: float = 0.0) -> str | None:
    """None when every tensor loaded equals the one saved within `tolerance`; else a line naming the worst tensor."""
    missing, extra = sorted(set(saved) - set(loaded)), sorted(set(loaded) - set(saved))
    if missing or extra:
        return f"the loaded weights lack {missing} and have extra {extra}"
    shapes = [name for name in saved if np.shape(saved[name]) != np.shape(loaded[name])]
    if shapes:
        name = shapes[0]
        return f"{name}: saved with shape {tuple(np.shape(saved[name]))}, loaded {tuple(np.shape(loaded[name]))}"
    diffs = {name: float(np.abs(np.asarray(loaded[name]) - np.asarray(saved[name])).max(initial=0.0)) for name in saved}
    worst = max(diffs, key=lambda name: (bool(np.isnan(diffs[name])), diffs[name]), default=None)  # NaN first
    if worst is None or diffs[worst] <= tolerance:  # a NaN is never <= anything: caught
        return None
    wrong = [name for name in saved if not diffs[name] <= tolerance]
    return (f"max |loaded - saved| = {diffs[worst]:.3g} in {worst} (tolerance {tolerance:g}); tensors that differ: "
            + ", ".join(wrong))


def checkpoint_files(path) -> dict[str, int]:
    """The files a checkpoint folder holds and their bytes, by name (sorted)."""
    return {name: os.path.getsize(os.path.join(path, name)) for name in sorted(os.listdir(path))}


def file_layout(path) -> dict[str, dict[str, int]]:
    """What fills each shard file of a torch.distributed.checkpoint folder, from its .metadata: `sharded`, the data
    bytes of tensors split over the ranks (this file's shard); `once`, the data bytes of tensors every rank holds whole
    (Adam's step counters), which one rank writes for all; `pickled`, the whole records of Python values every rank
    holds (the optimizer's settings, a count), each saved by torch.save in a container of its own, also written once;
    `records`, the items it holds; `overhead`, the rest: each tensor is a record of its own, with its header. The four
    byte counts add up to the file's size."""
    import math

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = dcp.FileSystemReader(str(path)).read_metadata()
    layout: dict[str, dict[str, int]] = {}
    for index, info in metadata.storage_data.items():
        row = layout.setdefault(info.relative_path, {"sharded": 0, "once": 0, "pickled": 0, "records": 0,
                                                     "overhead": 0})
        item = metadata.state_dict_metadata[index.fqn]
        if isinstance(item, TensorStorageMetadata):
            chunk = next(c for c in item.chunks if tuple(c.offsets) == tuple(index.offset or c.offsets))
            data = math.prod(chunk.sizes) * torch.empty((), dtype=item.properties.dtype).element_size()
            row["sharded" if len(item.chunks) > 1 else "once"] += data
            row["overhead"] += info.length - data
        else:  # a pickled Python value (an optimizer setting): its whole record, container and all
            row["pickled"] += info.length
        row["records"] += 1
    return dict(sorted(layout.items()))


def epoch_order(n_samples: int, seed: int, epoch: int) -> list[int]:
    """The global order in which one epoch reads the samples: the permutation DistributedSampler draws."""
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)  # what torch.utils.data.DistributedSampler seeds with
    return torch.randperm(n_samples, generator=generator).tolist()


def repeats_and_skips(read: list[int], expected: list[int]) -> tuple[int, int]:
    """Samples read more often than expected (repeats) and less often (skips), counted with multiplicity."""
    got, want = np.bincount(read, minlength=1), np.bincount(expected, minlength=1)
    size = max(len(got), len(want))
    got, want = np.pad(got, (0, size - len(got))), np.pad(want, (0, size - len(want)))
    return int(np.clip(got - want, 0, None).sum()), int(np.clip(want - got, 0, None).sum())


def paired_wrongly(said: str | None, stderr_text: str) -> str:
    """One line on how a launch whose ranks paired collectives wrongly ended (`said`: its error, None if it finished;
    `stderr_text`: what its ranks wrote to stderr): gloo's abort, a collective that gave up waiting, or the error."""
    if said is None:
        return "it finished: in this run the ranks' calls happened to pair alike (a race: run it again)"
    first = short_error(said.splitlines()[0] if said.strip() else "no message", 160, sentences=1)
    aborted = [line[line.index(MISMATCH):] for line in stderr_text.splitlines() if MISMATCH in line]
    if aborted:
        return f"a rank aborted: {short_error(aborted[0], 160)} Its peer: {first}"
    if any(s in said.lower() for s in ("timed out", "timeout", "did not finish within")):
        return f"deadlocked until a timeout: {first}"
    return first
