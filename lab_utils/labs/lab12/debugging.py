"""Lab 12's shared pieces, beside the lesson: a hang table built from made-up records, the uneven-data problem (its
worker and one process's reference), and a model with a layer it never uses."""
from __future__ import annotations

LAYERS = ("stem", "left", "right", "head")


NOTEBOOK_CELL_FILE = "<lab12: a notebook cell>"  # a case with "cell": its lines are a notebook cell's, named as such


def hang_table(case) -> str:
    """The launcher's table for one case (built by the same code that prints it after a hang); a case with "cell" (an
    execution count) names its lines as a notebook's table does, "cell [n], line k", else "train.py:k"."""
    from unittest import mock

    from ...launch import where

    filename = NOTEBOOK_CELL_FILE if case.get("cell") else "train.py"

    def call(seq, op, state, line):
        return {"seq": seq, "op": op, "shapes": [[4]] if op != "barrier" else [], "dtype": "float32" if op != "barrier"
                else "", "where": (filename, line, "step"), "state": state}

    history = [call(s, "all_reduce", "completed", 5) for s in range(1, case["done"] + 1)]
    seq = case["done"] + 1
    reports = {r: {"calls": history + [call(seq, case["now"] if r == case["odd"] else case["waited"], "in progress",
                                            case["line_odd"] if r == case["odd"] else case["line_others"])],
                   "count": seq} for r in range(case["world"])}
    cell = {NOTEBOOK_CELL_FILE: case.get("cell")}.get
    with mock.patch.object(where, "_cell_number", cell):
        return where.rank_table(reports, {r: "running" for r in range(case["world"])})


def place_of(case, line: int) -> str:
    """How a case's table writes `line`: "cell [n], line k" for a notebook cell's case, else "train.py:k"."""
    return f"cell [{case['cell']}], line {line}" if case.get("cell") else f"train.py:{line}"


def uneven_problem(case, world_size: int = 2):
    """A seeded small model and each rank's batches: rank r has `steps` batches, the last rank one more."""
    import torch

    from ... import spec

    gen = torch.Generator().manual_seed(case["seed"])
    per_rank = [[(torch.rand(case["batch"], 1, 8, 8, generator=gen), torch.randint(0, 10, (case["batch"],), generator=gen))
                 for _ in range(case["steps"] + (1 if r == world_size - 1 else 0))] for r in range(world_size)]
    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8), seed=case["seed"])
    return model, per_rank


def one_process(case, lone_last_step: bool, halved: bool = False, world_size: int = 2):
    """One process over the global batches (both ranks' batches together); the last rank's extra batch as one more
    step (`halved`: its gradient divided by the world size, as Join's default does), or dropped."""
    import torch
    import torch.nn.functional as F

    from ... import tensors

    model, per_rank = uneven_problem(case, world_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"])
    steps = [(torch.cat([b[s][0] for b in per_rank]), torch.cat([b[s][1] for b in per_rank]), 1.0)
             for s in range(case["steps"])]
    if lone_last_step:
        x, y = per_rank[-1][-1]
        steps.append((x, y, 1.0 / world_size if halved else 1.0))
    for x, y, scale in steps:
        optimizer.zero_grad()
        (F.cross_entropy(model(x), y) * scale).backward()
        optimizer.step()
    return tensors.flat_weights(model).tolist()


def branchy_model(case):
    """Four Linear layers; `unused` is built but never used in forward, `frozen` has requires_grad=False, `zeroed`'s
    output is multiplied by 0 (its gradient exists and is zero)."""
    import torch

    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(case["seed"])
            for name in LAYERS:
                setattr(self, name, torch.nn.Linear(6, 6))
            getattr(self, case["frozen"]).requires_grad_(False)

        def forward(self, x):
            out = 0
            for name in LAYERS:
                if name != case["unused"]:
                    y = getattr(self, name)(x)
                    out = out + (0 * y if name == case["zeroed"] else y)
            return out

    return Branchy()


def branchy_layers(case) -> str:
    """branchy_model(case)'s layers, one a line: its shape, whether it trains, and what forward does with it."""
    model = branchy_model(case)
    role = {case["unused"]: "unused: built, never called in forward: no gradient",
            case["frozen"]: "frozen: requires_grad=False: needs no gradient",
            case["zeroed"]: "zeroed: forward multiplies its output by 0: a gradient of zeros"}
    lines = ["forward(x): the sum of the used layers' outputs, every layer reading x"]
    for name in LAYERS:
        layer = getattr(model, name)
        kind = f"Linear({layer.in_features}, {layer.out_features})"
        lines.append(f"  {name:<6} {kind:<13} {role.get(name, 'used: gets a gradient')}")
    return "\n".join(lines)


def first_lines(err, n: int = 1) -> str:
    """The first n lines of an error a launch raised, as a learner would read them at the top."""
    return "\n".join(str(err).splitlines()[:n])


_LEGEND_SHOWN: list = []  # whether a table's 'cell [n]: ...' legend was printed in this kernel


def legend_once(text: str) -> str:
    """`text` with the launcher's 'cell [n]: ...' legend kept under the first table this kernel prints only
    (learner s13r5f: the same two lines under every table)."""
    from ...launch.where import CELL_LEGEND

    if CELL_LEGEND not in text:
        return text
    if _LEGEND_SHOWN:
        return text.replace("\n" + CELL_LEGEND, "").replace(CELL_LEGEND, "")
    _LEGEND_SHOWN.append(True)
    return text


def folded(text: str, width: int = 100) -> str:
    """Prose longer than `width` cut at spaces and continued indented; a table's row (columns between ' | ') stays
    whole, as the table lines it up; a table wider than `width` gives its last column a line of its own under each
    row ('    last completed: ...'); the 'cell [n]' legend under the first table only (legend_once)."""
    import textwrap

    lines = legend_once(text).splitlines()
    rows = [i for i, line in enumerate(lines) if " | " in line]
    if rows and max(len(lines[i]) for i in rows) > width:
        last = lines[rows[0]].rsplit(" | ", 1)[1].strip()
        for i in rows:
            line, value = lines[i].rsplit(" | ", 1)
            lines[i] = line.rstrip() + (f"\n    {last}: {value.strip()}" if i != rows[0] and value.strip() != "-"
                                        else "")
        # learner s13r7f 12-F7: the moved column read as another layout with a meaning of its own: say why
        lines[rows[-1]] += f"\n({last}: on a line of its own under its row, to fit {width} columns)"
    return "\n".join(textwrap.fill(line, width, subsequent_indent=line[:len(line) - len(line.lstrip())] + "    ")
                     if len(line) > width and " | " not in line else line for line in "\n".join(lines).splitlines())


def table_of(err) -> str:
    """The part of a launch's error that says where every rank was."""
    text = str(err)
    return (text[text.index("where each rank was"):].split("\n\n--- traceback")[0] if "where each rank was" in text
            else "(no table)")


def dumped_frames(dump: str, function: str) -> list[tuple[str, int, str]]:
    """The frames (file, line, function), most recent first, of the thread in a faulthandler dump that runs
    `function` (each rank's main thread: the others are the launcher's); [] when no thread does."""
    import re

    for block in dump.split("\n\n"):
        frames = [(m[1], int(m[2]), m[3]) for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', block)]
        if any(name == function for _, _, name in frames):
            return frames
    return []


def _short_path(path: str, line: int) -> str:
    """A dumped frame's file, cut to what names it: '.../torch/...', the notebook cell ('cell [5]'), or its name."""
    import os

    from ...launch import where

    cut = path.find(f"{os.sep}torch{os.sep}")
    if cut >= 0:
        return f"...{path[cut:]}"
    place = where.place((path, line))
    return place.split(",")[0] if place.startswith("cell [") else os.path.basename(path)


def dump_excerpt(dump: str, function: str) -> list[str]:
    """The thread of a faulthandler dump that runs `function`, as faulthandler writes it but short: its header, then
    its frames from the most recent down to `function`'s (the launcher's frames below it left out), each path cut to
    what names it (.../torch/..., a notebook cell, a file's name)."""
    import re

    frame = re.compile(r'(\s*File ")([^"]+)(", line )(\d+)( in )(\S+)')
    for block in dump.split("\n\n"):
        lines = block.strip("\n").splitlines()
        if not any((m := frame.match(line)) and m[6] == function for line in lines):
            continue
        out = [line for line in lines[:1] if "most recent call first" in line]  # 'Thread 0x... (most recent ...)'
        for line in lines:
            m = frame.match(line)
            if m is None:
                continue
            out.append(f"{m[1]}{_short_path(m[2], int(m[4]))}{m[3]}{m[4]}{m[5]}{m[6]}")
            if m[6] == function:
                return out
    return []


def dump_lines(dumps: dict, function: str) -> list[str]:
    """One line per rank from its faulthandler dump: the torch.distributed call it is in, then the frames of
    `function` (where.place: a notebook cell as 'cell [n], line k'); lab_utils' and Python's own frames left out."""
    import os

    from ...launch import where

    out = []
    for rank, dump in sorted(dumps.items()):
        frames = dumped_frames(dump, function)
        torch_call = next((f"in {name} ({os.path.basename(file)}:{line})" for file, line, name in frames
                           if f"{os.sep}torch{os.sep}distributed{os.sep}" in file and name != "wrapper"), "in -")
        mine = [where.place((file, line)) for file, line, name in frames if name == function]
        out.append(f"rank {rank}: {torch_call}, called from {function} at " + ", from ".join(mine) if frames
                   else f"rank {rank}: no dump")
    return out


def learner_line_per_rank(table: str) -> dict:
    """rank -> the learner's line in the launcher's table ('cell [5], line 9')."""
    import re

    return {int(m[1]): m[2].strip() for m in re.finditer(r"^(\d+)\s+\|[^|\n]*\|[^|\n]*\|([^|\n]+)\|", table, re.M)}


def mismatch_lines(said: str, reporter, stderr_text: str, world_size: int) -> str:
    """What a shape mismatch's launch said, at 100 columns: the rank gloo aborted (from the ranks' stderr), the error
    that came back, and, under DETAIL, the fingerprints that differ and whose shape is first (display only: the
    lesson is the two launches, learner s13r5f finding 7)."""
    import re

    from ...launch import short_error

    lines = []
    aborted = [line for line in stderr_text.splitlines() if "op.preamble.length" in line]
    if aborted:
        peer_lost = "by peer" in said and reporter in (0, 1) and world_size == 2  # the reporter only lost its peer
        other = f"rank {1 - reporter}" if peer_lost else "a rank"
        lines.append(folded(f"   {other} aborted: {short_error(aborted[0][aborted[0].index('op.preamble'):], 150)}"))
    lines.append(folded(f"   {short_error(said.split(chr(10))[0], 150, sentences=1)}"))
    differ = said.split("Collectives differ in the following aspects:")
    if len(differ) > 1:
        lines.append(f"   DETAIL's fingerprints differ in: "
                     f"{short_error(differ[1].split('where each rank was')[0], 200)}")
        shapes = re.search(r"shapes: *\[?(\d+)\]? *vs *\[?(\d+)", differ[1])
        if shapes and reporter in (0, 1) and world_size == 2:
            lines.append(f"   rank {reporter} reported it: its own tensor first ({shapes[1]} elements), then rank "
                         f"{1 - reporter}'s ({shapes[2]})")
    return "\n".join(lines)
