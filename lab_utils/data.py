"""Pixel CSVs (validated line by line), built-in datasets, and torch adapters."""
from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

DIGITS_MAX_PIXEL = 16.0  # scikit-learn's digits use 17 grey levels, 0..16


class Split(NamedTuple):
    """Train and test arrays: images (N, C, H, W) float32, labels (N,) int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

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
            raise ValueError(f"{path}, line {line}: column {col} is {text!r}; pixels and labels must be finite numbers (NaN or inf found)")
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
    shape = tuple(int(s) for s in image_shape)
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"image_shape must be (height, width) or (channels, height, width), got {image_shape!r}")
    if math.prod(shape) != n_pixels:
        raise ValueError(
            f"{path}, line {line}: image_shape {shape} needs {math.prod(shape)} pixels "
            f"but rows have {n_pixels} pixel columns; image_shape must multiply out to the row's pixel count")
    return shape


def load_csv(path, *, label_column: str = "last", image_shape=None) -> tuple[np.ndarray, np.ndarray]:
    """Read a pixel CSV (one sample per row; label last or first; optional header) into images and labels."""
    if label_column not in ("last", "first"):
        raise ValueError(f"label_column must be 'last' or 'first', got {label_column!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such CSV file (working directory is {Path.cwd()})")
    rows: list[np.ndarray] = []
    width = None
    first_data_line = None
    with path.open(newline="") as handle:
        for line, row in enumerate(csv.reader(handle), start=1):
            if not row or all(not c.strip() for c in row):
                continue  # blank lines, e.g. a trailing newline
            if width is None and line == 1 and not any(_is_number(c) for c in row):
                width = len(row)  # a header row: only its width matters
                continue
            if width is None:
                width = len(row)
            if len(row) != width:
                raise ValueError(f"{path}, line {line}: ragged row with {len(row)} columns, expected {width} like the rows above")
            if width < 2:
                raise ValueError(f"{path}, line {line}: a row needs at least one pixel and a label, found {width} column(s)")
            first_data_line = first_data_line or line
            values = _parse_row(path, line, row)
            label = values[-1] if label_column == "last" else values[0]
            if label < 0 or label != int(label):
                raise ValueError(f"{path}, line {line}: label {label:g} must be a non-negative integer class index "
                                 f"(label_column={label_column!r}; is the label in the other column?)")
            rows.append(values)
    if not rows:
        raise ValueError(f"{path}, line 1: the file is empty (no data rows); expected one sample per row")
    table = np.stack(rows)
    if label_column == "last":
        pixels, labels = table[:, :-1], table[:, -1]
    else:
        pixels, labels = table[:, 1:], table[:, 0]
    shape = _image_shape(path, first_data_line, pixels.shape[1], image_shape)
    return pixels.reshape(len(table), *shape).astype(np.float32), labels.astype(np.int64)


def write_csv(path, images: np.ndarray, labels: np.ndarray, *, header: bool = True) -> Path:
    """Write images and labels as a pixel CSV (label in the last column)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = images.reshape(len(images), -1)
    integral = np.all(flat == np.round(flat))
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        if header:
            writer.writerow([f"pixel{i}" for i in range(flat.shape[1])] + ["label"])
        for pixels, label in zip(flat, labels):
            cells = [str(int(p)) for p in pixels] if integral else [f"{p:.6g}" for p in pixels]
            writer.writerow(cells + [str(int(label))])
    return path


def write_digits_csv(out_dir=None, *, test_fraction: float = 0.2, seed: int = 0) -> tuple[Path, Path]:
    """Write scikit-learn's bundled handwritten digits as train.csv and test.csv (fixed stratified split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    out = Path(out_dir) if out_dir else datasets_dir() / "digits"
    digits = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        digits.data, digits.target, test_size=test_fraction, random_state=seed, stratify=digits.target)
    return write_csv(out / "train.csv", x_tr, y_tr), write_csv(out / "test.csv", x_te, y_te)


def load_digits_split(directory=None) -> Split:
    """The course's digits CSVs, pixels scaled to [0, 1]."""
    folder = Path(directory) if directory else datasets_dir() / "digits"
    x_tr, y_tr = load_csv(folder / "train.csv")
    x_te, y_te = load_csv(folder / "test.csv")
    return Split(x_tr / DIGITS_MAX_PIXEL, y_tr, x_te / DIGITS_MAX_PIXEL, y_te)


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
    images += rng.normal(0.0, noise, size=images.shape).astype(np.float32)
    return np.clip(images, 0.0, 1.0), labels.astype(np.int64)


def synthetic_split(n_train: int, n_test: int, *, image_shape=(1, 28, 28), num_classes: int = 10, seed: int = 0) -> Split:
    """A train/test split of `synthetic_images` sharing the same class patterns."""
    x, y = synthetic_images(n_train + n_test, image_shape=image_shape, num_classes=num_classes, seed=seed)
    return Split(x[:n_train], y[:n_train], x[n_train:], y[n_train:])


def load_split(source: dict) -> Split:
    """A split from plain data that can travel to a rank: {"kind": "digits"} (optionally "n_train": the first n
    training images only) or {"kind": "synthetic", "n_train": ..., "n_test": ..., "side": 28, "seed": 0}."""
    kind = source.get("kind") if isinstance(source, dict) else None
    if kind == "digits":
        split = load_digits_split(source.get("directory"))
        n = source.get("n_train")
        return split._replace(x_train=split.x_train[:n], y_train=split.y_train[:n]) if n else split
    if kind == "synthetic":
        side = source.get("side", 28)
        return synthetic_split(source["n_train"], source.get("n_test", 256), image_shape=(1, side, side),
                               seed=source.get("seed", 0))
    raise ValueError(f"a data source is a dict with kind 'digits' or 'synthetic', got {source!r}")


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
