"""Instruments for sharded checkpoints: a model's weights by name, a check that names the tensor a wrong load changed,
the files a checkpoint wrote, the order a training reads its samples in, and how ranks that paired their collectives
wrongly ended, with the tables that print them."""
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
    holds (the optimizer's settings), each saved by torch.save in a container of its own, also written once;
    `records`, the items it holds; `overhead`, the rest: each tensor is a record of its own, with its header. The four
    byte counts add up to the file's size. A count saved as a tensor (torch.tensor(samples)) is `once`, not pickled."""
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


def once_items(path) -> dict[str, int]:
    """The tensors of a checkpoint that every rank holds whole (one chunk), by name, with their data bytes."""
    import math

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = dcp.FileSystemReader(str(path)).read_metadata()
    return {fqn: math.prod(item.size) * torch.empty((), dtype=item.properties.dtype).element_size()
            for fqn, item in sorted(metadata.state_dict_metadata.items())
            if isinstance(item, TensorStorageMetadata) and len(item.chunks) == 1}


def file_table(files: dict, layout: dict, whole: dict, weights_bytes: int) -> str:
    """The checkpoint's files, what fills each, and what the 'once' column holds, item by item (from `whole`,
    once_items: Adam's step counters, the sample count), in lines of at most 100 columns."""
    from ... import measure

    lines = [f"{'file':<14} {'bytes':>9} {'sharded':>9} {'once':>5} {'pickled':>8} {'records':>8} {'headers':>8}"]
    for name, size in files.items():
        row = layout.get(name)
        lines.append(f"{name:<14} {size:9,}" + (f" {row['sharded']:9,} {row['once']:5,} {row['pickled']:8,} "
                                                f"{row['records']:8} {row['overhead']:8,}" if row else
                                                "  (the index: each item's file, offset, shape)"))
    lines.append(f"{'all':<14} {sum(files.values()):9,}")
    sharded = sum(row["sharded"] for row in layout.values())
    once = sum(row["once"] for row in layout.values())
    writer = next((name for name, row in layout.items() if row["once"] or row["pickled"]), "no file")
    counters = {fqn: n for fqn, n in whole.items() if fqn.endswith(".step")}
    others = {fqn: n for fqn, n in whole.items() if fqn not in counters}
    sizes = sorted(set(counters.values()))
    named = {"samples": "the sample count (torch.tensor(samples): an int64 tensor)"}
    parts = [f"{len(counters)} step counters of Adam (one per parameter tensor) x "
             f"{'/'.join(map(str, sizes)) or 0} bytes"] + [f"{named.get(fqn, fqn)} {n}" for fqn, n in others.items()]
    text = (f"  sharded: each rank's shard of the weights and of Adam's two states, {sharded:,} bytes in all = 3 x "
            f"the weights' {weights_bytes:,}: {sharded == 3 * weights_bytes}\n"
            f"  once: the tensors every rank holds whole, written by one rank for all (here {writer}: the save gives "
            f"each such item to the rank with the fewest bytes planned so far): {' + '.join(parts)} = "
            f"{sum(whole.values())} bytes = the column's {once}: {sum(whole.values()) == once}"
            "\n  pickled: Python values every rank holds (Adam's settings), each saved with torch.save in a "
            "container of its own, by the same rank"
            "\n  records: the items a file holds, one per tensor or pickled value (a rank's shard file: one per "
            "parameter tensor for each of the weights, exp_avg and exp_avg_sq)"
            "\n  headers: each tensor is a record of its own with a header whatever its size, so a 4-byte step "
            "counter's record is mostly header")
    return "\n".join(lines) + "\n" + measure.short_lines(text)


def fold_table(text: str, width: int = 100) -> str:
    """A rank table (columns between ' | ') wider than `width`: its right-hand columns, from the last, go on lines
    of their own under each row ('    name: value', '-' left out) until every row fits; other lines as they are."""
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if " | " in line]
    if not rows:
        return text
    cells = {i: [c.strip() for c in lines[i].split(" | ")] for i in rows}
    head, n = cells[rows[0]], len(cells[rows[0]])
    for keep in range(n, 1, -1):
        widths = [max(len(cells[i][k]) for i in rows if k < len(cells[i])) for k in range(keep)]
        if sum(widths) + 3 * (keep - 1) <= width or keep == 2:
            break
    out = []
    for i, line in enumerate(lines):
        if i not in cells:
            out.append(line)
            continue
        row = cells[i]
        out.append(" | ".join(c.ljust(w) for c, w in zip(row[:keep], widths)).rstrip())
        if i != rows[0]:
            out += [f"    {head[k]}: {row[k]}" for k in range(keep, min(n, len(row))) if row[k] != "-"]
    return "\n".join(out)


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


def paired_wrongly(said: str | None, stderr_text: str, world_size: int | None = None) -> str:
    """One line on how a launch whose ranks paired collectives wrongly ended (`said`: its error, None if it finished;
    `stderr_text`: what its ranks wrote to stderr): gloo's abort, a collective that gave up waiting, or the error.
    With 2 ranks, a rank that only lost its peer names the other as the one that aborted."""
    if said is None:
        return "it finished: in this run the ranks' calls happened to pair alike (a race: run it again)"
    first = short_error(said.splitlines()[0] if said.strip() else "no message", 160, sentences=1)
    aborted = [line[line.index(MISMATCH):] for line in stderr_text.splitlines() if MISMATCH in line]
    if aborted:
        import re

        lost = re.match(r"rank (\d+) failed: .*by peer", first)
        who = (f"rank {1 - int(lost[1])} aborted (the table's 'exited')" if lost and world_size == 2
               else "a rank aborted")
        return f"{who}: {short_error(aborted[0], 160)} Its peer: {first}"
    if any(s in said.lower() for s in ("timed out", "timeout", "did not finish within")):
        return f"deadlocked until a timeout: {first}"
    return first


def trap_report(said: str | None, stderr_text: str, seconds: float, limit_s: float, world_size: int = 2) -> str:
    """How the async_save trap's launch ended (paired_wrongly), then the launcher's rank table folded to 100 columns
    (fold_table) and its prose lines wrapped."""
    from ... import measure

    out = [measure.short_lines(f"after {seconds:.1f} s (the launch's limit: {limit_s:.0f} s): "
                               f"{paired_wrongly(said, stderr_text, world_size)}")]
    if said and "where each rank was" in said:  # the launcher's table: each rank's last collectives and its line
        table = said[said.index("where each rank was"):].split("\n\n--- traceback")[0]
        table = legend_first(table)
        out += [line if " | " in line or line.startswith("    ") and len(line) <= 100 else measure.short_lines(line)
                for line in fold_table(table).splitlines()]
        if "the recorded calls match so far" in " ".join(table.split()):  # learner s12r4f: the table showed no mismatch
            out.append(measure.short_lines(UNRECORDED))
    return "\n".join(out)


def legend_first(table: str) -> str:
    """The launcher's 'cell [n]: ...' legend (and its indented continuation) moved under the table's title, before the
    rows that use it (learner s13r6f: 'cell [35]' read as the notebook's 35th cell before the legend said otherwise)."""
    lines = table.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("cell [n]:")), None)
    if start is None or start == 0:
        return table
    end = start + 1
    while end < len(lines) and lines[end].startswith("    ") and " | " not in lines[end]:
        end += 1
    rest = lines[:start] + lines[end:]
    return "\n".join(rest[:1] + lines[start:end] + rest[1:])


UNRECORDED = ("why the recorded calls match: the record does not hold FSDP's own collectives "
              "(dist.all_gather_single and reduce_scatter_single), so each rank's checkpoint call met the other "
              "rank's FSDP call, outside the record")
