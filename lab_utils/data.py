"""Pixel CSVs (validated line by line), built-in datasets, and torch adapters."""
from __future__ import annotations

import csv
import itertools
import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np


class Split(NamedTuple):
    """Train/test images (N, C, H, W) float32 and labels (N,) int64; `scaling`: how pixels were brought to [0, 1]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    scaling: str = ""

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        return tuple(self.x_train.shape[1:])

    @property
    def num_classes(self) -> int:
        """Classes the labels use (the largest label + 1)."""
        return int(max(self.y_train.max(), self.y_test.max())) + 1

    def datasets(self):
        """(train, test) torch TensorDatasets over the arrays."""
        return to_dataset(self.x_train, self.y_train), to_dataset(self.x_test, self.y_test)


def datasets_dir() -> Path:
    """The course's datasets/ folder ($LAB_DATASETS_DIR overrides)."""
    override = os.environ.get("LAB_DATASETS_DIR")
    return Path(override) if override else Path(__file__).resolve().parent.parent / "datasets"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _parse_row(path: Path, line: int, row: list[str]) -> np.ndarray:
    """One CSV row as float64, or a ValueError naming the file, line and bad cell."""
    try:
        values = np.array(row, dtype=np.float64)  # fast path; the loop below finds the culprit
        if np.isfinite(values).all():
            return values
    except ValueError:
        pass
    values = np.empty(len(row), dtype=np.float64)
    for col, cell in enumerate(row, start=1):
        text = cell.strip()
        if not text:
            raise ValueError(f"{path}, line {line}: column {col} is empty; every cell must be a number")
        try:
            values[col - 1] = float(text)
        except ValueError:
            raise ValueError(f"{path}, line {line}: column {col} is not a number: {text!r}") from None
        if not math.isfinite(values[col - 1]):
            raise ValueError(f"{path}, line {line}: column {col} is {text!r};\n"  # under 100 columns as 'ValueError: ...'
                             "    pixels and labels must be finite numbers (NaN or inf found)")
    return values


def _image_shape(path: Path, line: int, n_pixels: int, image_shape) -> tuple[int, int, int]:
    """Resolve the (C, H, W) shape of one row's pixels."""
    if image_shape is None:
        side = math.isqrt(n_pixels)
        if side * side != n_pixels:
            raise ValueError(
                f"{path}, line {line}: rows have {n_pixels} pixels, which is not a square image; "
                "pass image_shape=(channels, height, width)")
        return (1, side, side)
    try:
        shape = () if isinstance(image_shape, str) else tuple(int(s) for s in image_shape)
        whole = all(int(s) == s for s in image_shape)
    except (TypeError, ValueError):
        shape, whole = (), False
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3 or min(shape) < 1 or not whole:
        raise ValueError(f"image_shape must be (height, width) or (channels, height, width) in whole numbers, got "
                         f"{image_shape!r} (with papermill, pass it as YAML: -y 'image_shape: [28, 28]')")
    if math.prod(shape) != n_pixels:
        raise ValueError(
            f"{path}, line {line}: image_shape {shape} needs {math.prod(shape)} pixels "
            f"but rows have {n_pixels} pixel columns; image_shape must multiply out to the row's pixel count")
    return shape


def _data_rows(handle):
    """(line number, cells) of every non-blank row; a first line without any number is a header, yielded as line 0."""
    for line, row in enumerate(csv.reader(handle), start=1):
        if not row or all(not c.strip() for c in row):
            continue  # blank lines, e.g. a trailing newline
        if line == 1 and not any(_is_number(c) for c in row):
            yield 0, row  # the header: its width is what the data rows must match
            continue
        yield line, row


def _parsed_rows(path: Path, rows, label_column: str, width: int | None):
    """Validate and parse (line, cells) rows into (line, float64 values); `width` is the header's, if any."""
    for line, row in rows:
        width = width or len(row)
        if len(row) != width:
            raise ValueError(f"{path}, line {line}: ragged row with {len(row)} columns, expected {width} like the rows above")
        if width < 2:
            raise ValueError(f"{path}, line {line}: a row needs at least one pixel and a label, found {width} column(s)")
        values = _parse_row(path, line, row)
        label = values[-1] if label_column == "last" else values[0]
        if label < 0 or label != int(label):
            raise ValueError(f"{path}, line {line}: label {label:g} must be a non-negative integer class index "
                             f"(label_column={label_column!r}; is the label in the other column?)")
        yield line, values


def _open_csv(path, label_column: str):
    """The file, opened, after checking the arguments (a clear error for a wrong path or label_column)."""
    if label_column not in ("last", "first"):
        raise ValueError(f"label_column must be 'last' or 'first', got {label_column!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such CSV file (working directory is {Path.cwd()})")
    return path, path.open(newline="")


def _header_and_rows(handle):
    """(header width or None, iterator over the data rows)."""
    rows = _data_rows(handle)
    first = next(rows, None)
    if first is None:
        return None, iter(())
    if first[0] == 0:
        return len(first[1]), rows
    return None, itertools.chain([first], rows)


def _to_arrays(path: Path, parsed: list, label_column: str, image_shape, empty: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, C, H, W) float32 and labels (N,) int64 from parsed rows."""
    if not parsed:
        raise ValueError(f"{path}, line 1: {empty}")
    table = np.stack([values for _, values in parsed])
    if label_column == "last":
        pixels, labels = table[:, :-1], table[:, -1]
    else:
        pixels, labels = table[:, 1:], table[:, 0]
    shape = _image_shape(path, parsed[0][0], pixels.shape[1], image_shape)
    return pixels.reshape(len(table), *shape).astype(np.float32), labels.astype(np.int64)


def load_csv(path, *, label_column: str = "last", image_shape=None) -> tuple[np.ndarray, np.ndarray]:
    """Read a pixel CSV (one sample per row; label last or first; optional header) into images and labels."""
    path, handle = _open_csv(path, label_column)
    with handle:
        width, rows = _header_and_rows(handle)
        parsed = list(_parsed_rows(path, rows, label_column, width))
    return _to_arrays(path, parsed, label_column, image_shape, "the file is empty (no data rows); expected one sample per row")


def csv_row_count(path) -> int:
    """Number of data rows of a pixel CSV (header and blank lines not counted), streamed without parsing."""
    path, handle = _open_csv(path, "last")
    with handle:
        return sum(1 for _ in _header_and_rows(handle)[1])


def read_csv_rows(path, start: int, stop: int, *, label_column: str = "last", image_shape=None) -> tuple[np.ndarray, np.ndarray]:
    """Data rows start..stop-1 (0-based) of a pixel CSV, parsing only those; same as load_csv(...)[start:stop]."""
    if isinstance(start, bool) or isinstance(stop, bool) or not 0 <= int(start) < int(stop):
        raise ValueError(f"need 0 <= start < stop (data rows, 0-based, header not counted), got start={start!r}, stop={stop!r}")
    path, handle = _open_csv(path, label_column)
    with handle:
        width, rows = _header_and_rows(handle)
        parsed = list(_parsed_rows(path, itertools.islice(rows, int(start), int(stop)), label_column, width))
    return _to_arrays(path, parsed, label_column, image_shape,
                      f"no data rows in {start}..{stop - 1}; the file has fewer than {start + 1} (see csv_row_count)")


def row_range(n_rows: int, rank: int, world_size: int) -> tuple[int, int]:
    """(start, stop) of rank's contiguous share of n_rows; shares cover every row once and differ by one at most."""
    if world_size < 1 or not 0 <= rank < world_size or n_rows < 0:
        raise ValueError(f"need n_rows >= 0, world_size >= 1 and 0 <= rank < world_size, "
                         f"got n_rows={n_rows}, rank={rank}, world_size={world_size}")
    share, extra = divmod(n_rows, world_size)
    start = rank * share + min(rank, extra)  # the first `extra` ranks take one row more
    return start, start + share + (rank < extra)


def digits_csvs(directory=None) -> tuple[Path, Path]:
    """Paths of the course's built-in digits CSVs (train, test)."""
    folder = Path(directory) if directory else datasets_dir() / "digits"
    return folder / "train.csv", folder / "test.csv"


def pixel_scale(train_pixels: np.ndarray, pixel_max=None, *, source: str = "the training file") -> tuple[float, str]:
    """(divisor, rule in words) bringing pixels to [0, 1]: `pixel_max` when given, else the largest training pixel."""
    largest = float(np.abs(train_pixels).max()) if train_pixels.size else 0.0
    if pixel_max is not None:
        if isinstance(pixel_max, bool) or not isinstance(pixel_max, (int, float)) or not math.isfinite(pixel_max) or pixel_max <= 0:
            raise ValueError(f"pixel_max must be a positive number (the value of a white pixel, e.g. 255), got {pixel_max!r}")
        rule = f"pixels divided by {pixel_max:g} (pixel_max, as set)"
        if largest > pixel_max:
            rule += f"; note: {source} has pixels up to {largest:g}, above pixel_max, so they end above 1"
        return float(pixel_max), rule
    if largest == 0:
        raise ValueError(f"every pixel of {source} is 0: there is nothing to learn and nothing to scale by; "
                         "check the file (or its label_column)")
    return largest, f"pixels divided by {largest:g}, the largest pixel of {source} (set pixel_max to choose another)"


def load_csv_split(train_csv, test_csv, *, label_column: str = "last", image_shape=None, pixel_max=None) -> Split:
    """A train/test split from two pixel CSVs, pixels scaled to [0, 1] by one rule (see pixel_scale) for both."""
    x_tr, y_tr = load_csv(train_csv, label_column=label_column, image_shape=image_shape)
    x_te, y_te = load_csv(test_csv, label_column=label_column, image_shape=image_shape)
    if x_te.shape[1:] != x_tr.shape[1:]:
        raise ValueError(f"{test_csv}: images of shape {x_te.shape[1:]}, but {train_csv} has {x_tr.shape[1:]}; "
                         "train and test files must have the same number of pixel columns")
    divisor, rule = pixel_scale(x_tr, pixel_max, source=Path(train_csv).name)
    return Split(x_tr / divisor, y_tr, x_te / divisor, y_te, rule)


def load_digits_split(directory=None) -> Split:
    """The course's digits CSVs (8x8, grey levels 0..16), pixels scaled to [0, 1]."""
    return load_csv_split(*digits_csvs(directory))


def synthetic_images(n: int, *, image_shape=(1, 28, 28), num_classes: int = 10, seed: int = 0,
                     noise: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """Procedural, learnable images of any count: a class-specific blob pattern, jittered, plus noise."""
    if n < 1 or num_classes < 2:
        raise ValueError(f"need n >= 1 and num_classes >= 2, got n={n}, num_classes={num_classes}")
    c, h, w = image_shape if len(image_shape) == 3 else (1, *image_shape)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    templates = np.zeros((num_classes, c, h, w), dtype=np.float32)
    sigma = max(h, w) / 8
    for k in range(num_classes):
        for ch in range(c):
            for cy, cx in rng.uniform(0.15, 0.85, size=(3, 2)) * (h, w):
                templates[k, ch] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2))
    labels = rng.integers(0, num_classes, size=n)
    shift = max(1, min(h, w) // 10)
    images = np.empty((n, c, h, w), dtype=np.float32)
    for i, (label, dy, dx) in enumerate(zip(labels, *rng.integers(-shift, shift + 1, size=(2, n)))):
        images[i] = np.roll(templates[label], (dy, dx), axis=(1, 2))
    images += rng.normal(0.0, noise, size=images.shape).astype(np.float32)  # type: ignore[attr-defined]  # sized: an array
    return np.clip(images, 0.0, 1.0), labels.astype(np.int64)


def synthetic_split(n_train: int, n_test: int, *, image_shape=(1, 28, 28), num_classes: int = 10, seed: int = 0) -> Split:
    """A train/test split of `synthetic_images` sharing the same class patterns."""
    x, y = synthetic_images(n_train + n_test, image_shape=image_shape, num_classes=num_classes, seed=seed)
    return Split(x[:n_train], y[:n_train], x[n_train:], y[n_train:], "generated in [0, 1]: not scaled")


def load_split(source: dict) -> Split:
    """A Split from a plain dict that can travel to a rank: kind "digits", "csv" (train None: digits), "synthetic"."""
    kind = source.get("kind") if isinstance(source, dict) else None
    if kind == "digits":
        split = load_digits_split(source.get("directory"))
        n = source.get("n_train")
        return split._replace(x_train=split.x_train[:n], y_train=split.y_train[:n]) if n else split
    if kind == "csv":
        unknown = set(source) - {"kind", "train", "test", "label_column", "image_shape", "pixel_max"}
        if unknown:
            raise ValueError(f"a csv data source takes train, test, label_column, image_shape, pixel_max; "
                             f"unknown key(s) {sorted(unknown)}")
        if source.get("train") is None:
            if source.get("test") is not None:
                raise ValueError("a csv data source with a test file needs its train file too (train is None)")
            return load_digits_split()
        if source.get("test") is None:
            raise ValueError(f"a csv data source needs a test file beside train={source['train']!r}")
        return load_csv_split(source["train"], source["test"], label_column=source.get("label_column", "last"),
                              image_shape=source.get("image_shape"), pixel_max=source.get("pixel_max"))
    if kind == "synthetic":
        side = source.get("side", 28)
        return synthetic_split(source["n_train"], source.get("n_test", 256), image_shape=(1, side, side),
                               seed=source.get("seed", 0))
    raise ValueError(f"a data source is a dict with kind 'digits', 'csv' or 'synthetic', got {source!r}")


def to_dataset(images: np.ndarray, labels: np.ndarray):
    """A torch TensorDataset over the arrays (no copy)."""
    import torch
    from torch.utils.data import TensorDataset

    if len(images) != len(labels):
        raise ValueError(f"{len(images)} images but {len(labels)} labels; they must match one to one")
    return TensorDataset(torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32)),
                         torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64)))


def make_loader(dataset, batch_size: int, *, shuffle: bool = True, seed: int = 0, drop_last: bool = False, **loader_kwargs):
    """A DataLoader whose shuffle order depends only on `seed`; extra kwargs go to DataLoader."""
    import torch
    from torch.utils.data import DataLoader

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=generator,
                      drop_last=drop_last, **loader_kwargs)
