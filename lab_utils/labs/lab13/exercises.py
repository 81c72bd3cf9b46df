"""Lab 13: the halo rows a convolution needs on a slab, the halo exchange in 2 and 3 real ranks (= the zero-padded
whole image, and a convolution of it = the unsplit convolution), the halo bytes of one training step, the slab split
that balances rows when the height does not divide."""
from __future__ import annotations

from ...exercises.core import ANY, Exercise, FROM_LESSON, Named, last_line, max_abs_diff, register

SETUP = "import torch\nimport torch.distributed as dist\nfrom torch import nn\nimport torch.nn.functional as F"
EXCHANGE_TIMEOUT_S = 10  # an exchange that waits for a message nobody sends is stopped after this long


# ---- halo_rows -------------------------------------------------------------------------------------------------------

def _rows_cases(rng):
    fixed = [(3, 1, 1), (3, 1, 2), (5, 2, 1), (2, 0, 2), (1, 0, 1), (3, 0, 1), (7, 3, 2), (1, 0, 2)]
    drawn = [(k, rng.randint(0, k // 2), rng.choice([1, 2])) for k in (rng.choice([3, 5, 7]), rng.choice([3, 5]))]
    return [list(c) for c in fixed + drawn]


def _rows_run(halo_rows, cases):
    return [[int(v) for v in halo_rows(k, p, s)] for k, p, s in cases]


ROWS_MISTAKES = (  # a wrong formula the answer follows in every case: named, whichever case shows it first
    (lambda k, p, s: [k // 2, k // 2], "k // 2 on each side holds only for a stride-1 convolution padded by k // 2: "
     "the rows above are the padding, the rows below shrink with the stride"),
    (lambda k, p, s: [p, p], "the padding on both sides: above is right (the first output row reads p rows above "
     "the slab), but the rows below are not the padding: count which input rows the last output row reads"),
    (lambda k, p, s: [p, k - 1 - p], "below = k - 1 - p holds for stride 1 only: the slab's last output row i reads "
     "input rows up to i*s - p + k - 1, and the slab's last input row is i*s + s - 1: count the rows between"),
)


def _rows_judge_said(got, expected, cases):
    for g, e, (k, p, s) in zip(got, expected, cases):
        if g == e:
            continue
        where = f"kernel {k}, padding {p}, stride {s}: you gave {tuple(g)}, "
        for formula, said in ROWS_MISTAKES:
            if all(gg == formula(*c) for gg, c in zip(got, cases)):
                return 0.0, where + said
        if s > 1 and g == [p, k - 1 - p]:
            return 0.0, where + ("right for stride 1; with stride s the slab's last output row starts s - 1 rows "
                                 "earlier than its last input row")
        if g == [k // 2, k // 2]:
            return 0.0, where + ("k // 2 on each side holds only for a stride-1 convolution padded by k // 2: the rows "
                                 "above are the padding, the rows below shrink with the stride")
        if g == [p, p]:
            return 0.0, where + "the rows below are not the padding: count which input rows the last output row reads"
        if g == [p, k - p - s] and k - p - s < 0:
            return 0.0, where + "a negative row count: a slab never needs fewer than 0 rows"
        if g == [e[1], e[0]]:
            return 0.0, where + "above and below are swapped: the padding is what the first output row reads above"
        if g == [k - 1, k - 1]:
            return 0.0, where + "a kernel of k rows reaches k - 1 rows beyond its centre only in total, not per side"
        return 0.0, where + ("not the rows the slab's first and last output rows read beyond it: list the input rows "
                             "each reads and count those outside the slab")
    return 1.0, "the rows above are the padding, the rows below k - p - s (never negative), for every case"


def _rows_judge(got, expected, cases):
    """_rows_judge_said's score; a message that names the mistake is Named, so check() adds no hint repeating it."""
    fraction, message = _rows_judge_said(got, expected, cases)
    generic = fraction >= 1.0 or "not the rows the slab's first and last" in message
    return fraction, message if generic else Named(message)


HALO_ROWS = Exercise("13", "halo_rows", _rows_cases, _rows_run, FROM_LESSON, _rows_judge,
                     "the first output row of the slab reads rows from i*s - p; the last one reads up to "
                     "i*s - p + k - 1, with the slab's last input row at i*s + s - 1")


# ---- exchange_halo, in 2 and 3 real ranks ----------------------------------------------------------------------------

def _exchange_cases(rng):
    cases = []
    for n, height in ((2, rng.choice([13, 15, 17])), (3, rng.choice([19, 22, 25]))):
        cases.append({"world_size": n, "height": height, "width": rng.randint(5, 9), "channels": rng.randint(1, 3),
                      "kernel": 3, "padding": 1, "stride": 1, "seed": rng.randrange(10**6)})
    cases.append(dict(cases[-1], kernel=5, padding=2, seed=rng.randrange(10**6)))
    # stride 2, kernel 5, padding 2: 2 rows from above, 1 from below, so an answer that mixes up `above` and `below`
    # fails (the stride-1 cases need as many rows on each side and cannot tell them apart); no side needs 0 rows,
    # so a wrong-ends answer's slab[:, :, -below:] stays the rows it means, not the whole slab
    cases += [dict(c, kernel=5, padding=2, stride=2, seed=rng.randrange(10**6)) for c in cases[:2]]
    return cases


def _exchange_problem(case):
    import torch
    from torch import nn

    from ... import spec

    gen = torch.Generator().manual_seed(case["seed"])
    images = torch.randn(2, case["channels"], case["height"], case["width"], generator=gen, dtype=torch.float64)
    conv = spec.init_weights(nn.Conv2d(case["channels"], 2, case["kernel"], stride=case["stride"],
                                       padding=case["padding"]),
                             case["seed"]).double()
    return images, conv


def _rows_of(height: int, rank: int, world_size: int, stride: int) -> tuple[int, int]:
    from .lesson import slab_bounds

    return slab_bounds(height, rank, world_size, stride)  # borders on multiples of the stride, as halo_rows assumes


def exchange_exercise_worker(rank, world_size, exchange_halo, cases):
    """Each case: this rank's slab through the learner's exchange, and the unsplit convolution's rows of it."""
    out: list[dict] = []
    checked = _CheckedPointToPoint(rank, world_size)
    try:  # a receive left unwaited times out later, in the next case or at the group's end: translate it there too
        with checked.installed():
            _exchange_cases_in_group(rank, world_size, exchange_halo, cases, out, checked)
    except RuntimeError as exc:
        if "timed out" in str(exc).lower():
            deadlock = ("a deadlock, if every rank called a blocking dist.send before its receive: each waits for a "
                        "neighbour that is itself sending; post the receives (irecv) and sends (isend) without "
                        "waiting, then wait for all of them. Also, " if checked.blocking else "")
            raise RuntimeError(f"rank {rank} waited {EXCHANGE_TIMEOUT_S} s for a message that never came: {deadlock}"
                               "every irecv needs the neighbour's matching isend (rows going up are the slab's first "
                               "rows, rows going down its last), and every request needs .wait() before its buffer "
                               "is used") from None
        raise
    return out


BLOCKING_SEND = ("rank {rank} used a blocking dist.send (to rank {peer}), a deadlock when every rank sends first: it "
                 "waits until that rank receives, and an order that avoids it makes the ranks exchange one after "
                 "another instead of at once. Post irecv and isend, then .wait() on each")


class _Waited:
    """A request returned by isend / irecv inside exchange_halo, with whether it was waited for."""

    def __init__(self, name: str, work):
        self.name, self.work, self.waited = name, work, False

    def wait(self, *args, **kwargs):
        self.waited = True
        return self.work.wait(*args, **kwargs)

    def __getattr__(self, attribute):
        return getattr(self.work, attribute)


class _CheckedPointToPoint:
    """dist's send and receive calls, checked before gloo sees them: a peer that is no rank, a buffer whose rows are not
    the rows that neighbour sends (gloo would abort the process with a size mismatch that names neither); notes a
    blocking send or recv (a deadlock's usual cause)."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size, self.blocking = rank, world_size, False
        self.above = self.below = 0
        self.requests: list = []  # this case's isend / irecv requests: each must be waited for before the return

    def check_waited(self) -> None:
        """After exchange_halo returned: every request it started was waited for (lab 06's ring step, the same words)."""
        names = {request.name for request in self.requests if not request.waited}
        if "irecv" in names:
            raise ValueError(f"rank {self.rank} returned from the step without waiting for its dist.irecv: irecv only "
                             "starts the receive, so the halo buffer may not hold the rows yet. Keep its request and "
                             "call .wait() on it before using the buffer")
        if "isend" in names:
            raise ValueError(f"rank {self.rank} returned from the step without waiting for its dist.isend: the send "
                             "may still be reading the slab's rows, and gloo needs every request waited for. Keep its "
                             "request and call .wait() on it before returning")

    def installed(self):
        import contextlib
        from unittest import mock

        import torch.distributed as dist
        from torch.distributed import distributed_c10d

        stack = contextlib.ExitStack()
        for name, receives in (("isend", False), ("irecv", True), ("send", False), ("recv", True)):
            checked = self._checked(getattr(dist, name), receives, name in ("send", "recv"))
            for module in (dist, distributed_c10d):  # both: P2POp checks its op against distributed_c10d's
                stack.enter_context(mock.patch.object(module, name, checked))
        return stack

    def _checked(self, call, receives: bool, blocking: bool):
        def checked(tensor, *args, **kwargs):
            peer = kwargs.get("src" if receives else "dst", args[0] if args else None)
            if isinstance(peer, int):
                self._check(tensor, peer, receives)
            if blocking and not receives:
                raise ValueError(BLOCKING_SEND.format(rank=self.rank, peer=peer))
            self.blocking = self.blocking or blocking
            work = call(tensor, *args, **kwargs)
            if blocking:
                return work
            self.requests.append(_Waited("irecv" if receives else "isend", work))
            return self.requests[-1]
        return checked

    def _check(self, tensor, peer: int, receives: bool) -> None:
        verb, to = ("receives from", "from") if receives else ("sends to", "to")
        if not 0 <= peer < self.world_size:
            edge = "above rank 0" if peer < 0 else f"below rank {self.world_size - 1}"
            raise ValueError(f"rank {self.rank} {verb} rank {peer}, and there is no rank {edge}: at the image's own "
                             "edge the halo is zero rows; guard that call (rank > 0 for rank - 1, rank < world_size - 1 "
                             "for rank + 1)")
        # from rank - 1 come `above` rows (and to it go `below` rows); from rank + 1 `below` rows (to it `above`)
        want = (self.above if peer == self.rank - 1 else self.below) if receives else \
            (self.below if peer == self.rank - 1 else self.above)
        rows = tensor.shape[2] if tensor.dim() == 4 else None
        if peer in (self.rank - 1, self.rank + 1) and rows is not None and rows != want:
            side = "above" if peer == self.rank - 1 else "below"
            what = (f"a receive buffer of {rows} row(s) for the rows {to} rank {peer} (the neighbour {side}), which "
                    f"sends {want}" if receives else f"{rows} row(s) {to} rank {peer} (the neighbour {side}), which "
                    f"expects {want}")
            raise ValueError(f"rank {self.rank} posts {what}: the sizes must match on both ends (gloo aborts on a "
                             "mismatch); the rows from rank - 1 are `above` rows, those from rank + 1 `below` rows")


def _exchange_cases_in_group(rank, world_size, exchange_halo, cases, out, checked):
    """The worker's cases in one process group, each rank's entries appended to `out`."""
    import torch.nn.functional as F

    from .lesson import halo_rows
    from ...launch import process_group

    with process_group(timeout_s=EXCHANGE_TIMEOUT_S):
        for case in cases:
            if case["world_size"] != world_size:
                continue
            images, conv = _exchange_problem(case)
            start, stop = _rows_of(case["height"], rank, world_size, case["stride"])
            above, below = halo_rows(case["kernel"], case["padding"], case["stride"])
            checked.above, checked.below = above, below
            slab = images[:, :, start:stop].contiguous()
            checked.requests = []
            haloed = exchange_halo(slab, above, below, case["padding"], rank, world_size)
            checked.check_waited()
            entry = {"rows": [start, stop], "haloed": haloed.detach().tolist(), "conv": None}
            try:
                entry["conv"] = F.conv2d(haloed, conv.weight, conv.bias, case["stride"],
                                         (0, case["padding"])).detach().tolist()
            except Exception:  # noqa: BLE001  # a wrongly shaped result cannot be convolved: conv stays None
                pass
            out.append(entry)


def _exchange_run(exchange_halo, cases):
    from ...launch import launch

    return [launch(exchange_exercise_worker, n, args=(exchange_halo, cases), timeout=60)
            for n in sorted({c["world_size"] for c in cases})]


def _exchange_expected(cases):
    import torch
    import torch.nn.functional as F

    from .lesson import halo_rows

    out = []
    for n in sorted({c["world_size"] for c in cases}):
        per_rank: list[list] = [[] for _ in range(n)]
        for case in (c for c in cases if c["world_size"] == n):
            images, conv = _exchange_problem(case)
            p = case["padding"]
            above, below = halo_rows(case["kernel"], p, case["stride"])
            padded = F.pad(images, (0, 0, p, p))  # zero rows at the image's top and bottom only
            whole = conv(images)
            s = case["stride"]
            bounds = [_rows_of(case["height"], r, n, s) for r in range(n)]
            for rank, (start, stop) in enumerate(bounds):
                top = p if rank == 0 else above
                bottom = p if rank == n - 1 else below
                slab = images[:, :, start:stop]
                # what a rank gets when its neighbours send the wrong end of their slabs
                above_start = bounds[rank - 1][0] if rank > 0 else 0
                wrong_top = padded[:, :, :p] if rank == 0 else images[:, :, above_start:above_start + above]
                wrong_bottom = padded[:, :, -p:] if rank == n - 1 else \
                    images[:, :, bounds[rank + 1][1] - below:bounds[rank + 1][1]]
                per_rank[rank].append({"rows": [start, stop], "top": top, "bottom": bottom,
                                       "haloed": padded[:, :, p + start - top:p + stop + bottom].tolist(),
                                       "swapped": torch.cat([wrong_top, slab, wrong_bottom], 2).tolist(),
                                       "conv": whole[:, :, start // s:-(-stop // s)].detach().tolist()})
        out.append(per_rank)
    return out


def _shape(nested) -> list[int]:
    import numpy as np

    return list(np.asarray(nested).shape)


def _entry_judge(g, e, where):
    """(fraction, message) for one rank's result on one case, or None when it is right."""
    import numpy as np

    start, stop = e["rows"]
    if g.get("rows") != e["rows"]:
        return 0.0, f"{where}: the answer covers rows {g.get('rows')}, not this rank's slab"
    want = np.asarray(e["haloed"])
    if _shape(g["haloed"]) != list(want.shape):
        return 0.0, (f"{where}: your result has shape {_shape(g['haloed'])}, expected {list(want.shape)}: the slab's "
                     f"{stop - start} rows with {e['top']} row(s) on top and {e['bottom']} underneath (the "
                     "neighbours' rows, or `padding` zero rows at the image's own top and bottom edge; `above` rows "
                     "come from rank - 1, `below` rows from rank + 1)")
    mine = np.asarray(g["haloed"])
    if max_abs_diff(mine, want) <= 1e-9:
        if g.get("conv") is None or max_abs_diff(g["conv"], e["conv"]) > 1e-5:
            return 0.0, f"{where}: the convolution of your result differs from the unsplit convolution's rows"
        return None
    if max_abs_diff(mine, e["swapped"]) <= 1e-9:
        return 0.0, (f"{where}: the neighbours' rows are from the wrong end of their slabs: rank + 1 needs your LAST "
                     "`above` rows (they sit just above its first row), rank - 1 your FIRST `below` rows")
    top, bottom = e["top"], e["bottom"]
    if top and np.allclose(mine[:, :, :top], 0) and not np.allclose(want[:, :, :top], 0):
        return 0.0, (f"{where}: your top halo rows are zeros where the neighbour above's last rows belong: zero rows "
                     "only at the image's own top edge (rank 0); between slabs, irecv the neighbour's rows")
    if bottom and np.allclose(mine[:, :, -bottom:], 0) and not np.allclose(want[:, :, -bottom:], 0):
        return 0.0, (f"{where}: your bottom halo rows are zeros where the neighbour below's first rows belong: zero "
                     "rows only at the image's own bottom edge (the last rank); irecv them from rank + 1")
    if max_abs_diff(mine[:, :, top:mine.shape[2] - bottom], want[:, :, top:want.shape[2] - bottom]) > 1e-9:
        return 0.0, f"{where}: the slab's own rows changed: keep them as they are, between the halo rows"
    return 0.0, (f"{where}: your halo rows differ from the zero-padded whole image's rows by up to "
                 f"{max_abs_diff(mine, want):.2e}")


def _exchange_judge(got, expected, cases):
    for run_got, run_want in zip(got, expected):
        for rank, (g_entries, e_entries) in enumerate(zip(run_got, run_want)):
            for g, e in zip(g_entries, e_entries):
                verdict = _entry_judge(g, e, f"{len(run_want)} ranks, rank {rank} (rows {e['rows'][0]}.."
                                             f"{e['rows'][1] - 1})")
                if verdict is not None:
                    return verdict
    return 1.0, ("every rank's slab with its halo equals the zero-padded whole image's rows, on 2 and 3 ranks and "
                 "heights they do not divide; convolved, it equals the unsplit convolution within 1e-5")


EXCHANGE_HALO = Exercise(
    "13", "exchange_halo", _exchange_cases, _exchange_run, _exchange_expected, _exchange_judge,
    "rank r: irecv `above` rows from r - 1 and `below` rows from r + 1 into new buffers; isend its first `below` rows "
    "to r - 1 and its last `above` rows to r + 1; wait for every request; zero rows (padding of them) only at the "
    "image's top and bottom", setup=SETUP, ranks=3,
    shape=lambda right, cases: [[[{"rows": ANY, "haloed": ANY, "conv": ANY} for _ in entries] for entries in run]
                                for run in right])


# ---- halo_bytes_per_step ---------------------------------------------------------------------------------------------

def _bytes_cases(rng):
    # the first case has 3 ranks: on 2, counting N borders and counting each border's rows twice give the same number
    fixed = [(3, 1, 1, 8, 128, 1, 3, 4), (3, 1, 1, 8, 128, 1, 2, 4), (3, 1, 2, 16, 64, 4, 3, 4),
             (5, 2, 1, 3, 50, 2, 4, 8)]
    drawn = [(rng.choice([3, 5]), 1, rng.choice([1, 2]), rng.randint(1, 32), rng.randint(16, 512), rng.randint(1, 8),
              rng.randint(2, 8), rng.choice([2, 4, 8])) for _ in range(3)]
    return [list(c) for c in fixed + drawn]


def _bytes_run(halo_bytes_per_step, cases):
    """The bytes per case, and the rows per border the notebook's halo_rows (exercise 1, which halo_bytes_per_step
    may call) gives for each case: a wrong exercise 1 is named, not this function (the right rows where there is none)."""
    rows = halo_bytes_per_step.__globals__.get("halo_rows") if hasattr(halo_bytes_per_step, "__globals__") else None
    given = []
    for k, p, s, *_ in cases:
        try:
            if not callable(rows):
                raise LookupError("no halo_rows beside it")
            given.append([int(v) for v in rows(k, p, s)])
        except Exception:  # no exercise 1 beside it (a grader's probe), or its stub: nothing to blame there
            given.append([p, max(0, k - p - s)])
    return {"bytes": [float(halo_bytes_per_step(*c)) for c in cases], "halo_rows": given}


def _bytes_judge(answer, reference, cases):
    got, expected = answer["bytes"], reference["bytes"]
    wrong = [(g, e, c) for g, e, c in zip(answer["halo_rows"], reference["halo_rows"], cases) if g != e]
    if wrong and any(abs(g - e) > 1e-9 * max(1.0, e) for g, e in zip(got, expected)):
        given, right, (k, p, s, *_) = wrong[0]
        return 0.0, (f"exercise 1 first: your halo_rows({k}, {p}, {s}) gives {tuple(given)}, which its own check "
                     f"fails (the right rows are {tuple(right)}), and halo_bytes_per_step counts the rows it gives: "
                     "fix halo_rows, rerun its cell, then this one")
    for g, e, case in zip(got, expected, cases):
        if abs(g - e) <= 1e-9 * max(1.0, e):
            continue
        k, p, s, c, w, b, n, itemsize = case
        where = (f"kernel {k}, padding {p}, stride {s}, {c} channels, width {w}, batch {b}, {n} ranks, "
                 f"{itemsize} bytes: ")
        per_border = 2 * (k // 2) * w * c * b * itemsize
        borders = f"{n - 1} border" + ("s" if n > 2 else "")
        candidates = [
            # before "half": an answer that reaches a case whose itemsize is not 4 passed the 4-byte cases
            (e * 4 / itemsize, f"the bytes per number are `itemsize` ({itemsize} here), not a fixed 4"),
            # before "half": with stride 2 the output's width is half the input's, and the earlier stride-1 cases
            # (the first two) passed, so the backward pass is there
            (e * (w // s) / w, f"the halo rows are rows of the layer's input, `width` ({w}) columns wide, not of its "
                               f"output (width // stride = {w // s}): the neighbour sends the rows the convolution "
                               "reads"),
            (e / 2, "half the bytes: the backward pass sends every halo row's gradient back, as many bytes again"),
            (e * n / (n - 1), f"{n} ranks have {borders} between their slabs, not {n}"),
            (e * (w + 2 * p) / w, "the halo rows are the neighbour's own rows: `width` columns, without the padding"),
            (e / b, "the halo carries those rows for every image of the batch"),
            (e / itemsize, "that counts numbers: multiply by the bytes per number (itemsize)"),
            (e / (b * itemsize), "that counts numbers, per image: multiply by the batch and the bytes per number"),
            # the rows per border point at halo_rows (exercise 1), not at its formula: a learner may come here first
            ((n - 1) * per_border, "k // 2 rows from each side (2 x (k // 2) per border) holds for stride 1 "
                                   "only; a border carries the rows halo_rows (exercise 1) gives for this kernel, "
                                   "padding and stride, and the step has a backward pass too"),
            (2 * (n - 1) * per_border, "k // 2 rows from each side (2 x (k // 2) per border) holds only for "
                                       "stride 1 and padding k // 2: a border carries above + below rows, as "
                                       "halo_rows (exercise 1) gives them for this kernel, padding and stride"),
            (e * 2, "twice the bytes: above + below already counts the rows each border carries both ways; the "
                    "factor 2 is the backward pass"),
            (e / n, "that is one border's share: add up every border between the ranks' slabs"),
        ]
        for value, message in candidates:
            if abs(g - value) <= 1e-9 * max(1.0, value) and abs(value - e) > 1e-9 * max(1.0, e):
                return 0.0, where + message
        return 0.0, where + (f"you gave {g:,.0f} bytes: count the rows each border carries (both ways), the "
                             "numbers in a row (width x channels), the images, the bytes per number, the borders and "
                             "the passes")
    return 1.0, "rows per border x width x channels x batch x bytes, over N - 1 borders, forward and backward"


HALO_BYTES_PER_STEP = Exercise("13", "halo_bytes_per_step", _bytes_cases, _bytes_run, FROM_LESSON, _bytes_judge,
                               "each of the N - 1 borders carries the rows the two neighbours need, each row "
                               "width x channels numbers per image; the backward pass returns them")


# ---- slab_bounds -----------------------------------------------------------------------------------------------------

def _bounds_cases(rng):
    fixed = [(45, 3, 4), (30, 2, 4), (62, 3, 4), (13, 3, 1), (100, 4, 8)]
    drawn = [(rng.randint(20, 200), rng.randint(2, 5), rng.choice([1, 2, 4])) for _ in range(3)]
    return [list(c) for c in fixed + drawn]


def _bounds_run(slab_bounds, cases):
    return [[[int(v) for v in slab_bounds(h, r, n, a)] for r in range(n)] for h, n, a in cases]


def _bounds_judge(got, expected, cases):
    for g, e, (h, n, a) in zip(got, expected, cases):
        if g == e:
            continue
        where = f"height {h}, {n} ranks, borders on multiples of {a}: you gave {g}; "
        if g[0][0] == 0 and g[-1][1] == h - 1 and all(x[1] + 1 == y[0] for x, y in zip(g, g[1:])):
            return 0.0, where + (f"each stop is one short (an off-by-one): stop is exclusive, as in a slice "
                                 f"rows[start:stop], so a slab stops where the next one starts and the last at {h}")
        if g[0][0] != 0 or g[-1][1] != h:
            return 0.0, where + (f"the slabs must cover rows 0 to {h}: the last rank also takes the rows left over "
                                 "below the last whole block")
        if any(x[1] != y[0] for x, y in zip(g, g[1:])):
            return 0.0, where + "each slab must start where the one above it stops: no row twice, none missing"
        if any(start % a for start, _ in g):
            return 0.0, where + (f"a slab starts on a row that is not a multiple of {a}: a pooling window or a "
                                 "stride-2 convolution's rows would be split between two ranks")
        blocks = [(stop - start) // a for start, stop in g[:-1]] + [(g[-1][1] - g[-1][0]) // a]
        if max(blocks) - min(blocks) > 1:
            return 0.0, where + (f"the ranks hold {blocks} blocks of {a} row{'s' if a > 1 else ''}: share the blocks "
                                 "so that no two ranks differ by more than one (the extra ones to the first ranks)")
        return 0.0, where + ("the extra blocks go to the first ranks, one each, as torch.tensor_split and "
                             "data.row_range share them")
    return 1.0, "every row once, borders on multiples of the alignment, blocks shared to within one, extras first"


SLAB_BOUNDS = Exercise("13", "slab_bounds", _bounds_cases, _bounds_run, FROM_LESSON, _bounds_judge,
                       "count whole blocks of `align` rows, give each rank blocks // world_size and the first "
                       "blocks % world_size ranks one more; the last rank stops at the height")

register(HALO_ROWS, SLAB_BOUNDS, EXCHANGE_HALO, HALO_BYTES_PER_STEP)
