"""Writing pixel CSVs: scikit-learn's digits as the committed datasets/digits/train.csv and test.csv, and the tests'
own-data files. No lab writes a CSV (they read them: lab_utils.data.load_csv).

Moved from lab_utils/data.py: the learner's module holds only what a lab imports."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ... import data


def write_csv(path, images: np.ndarray, labels: np.ndarray, *, header: bool = True, label_column: str = "last") -> Path:
    """Write images and labels as a pixel CSV, the label in the last (or first) column."""
    if label_column not in ("last", "first"):
        raise ValueError(f"label_column must be 'last' or 'first', got {label_column!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = images.reshape(len(images), -1)
    integral = np.all(flat == np.round(flat))
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        if header:
            names = [f"pixel{i}" for i in range(flat.shape[1])]
            writer.writerow(names + ["label"] if label_column == "last" else ["label"] + names)
        for pixels, label in zip(flat, labels):
            cells = [str(int(p)) for p in pixels] if integral else [f"{p:.6g}" for p in pixels]
            writer.writerow(cells + [str(int(label))] if label_column == "last" else [str(int(label))] + cells)
    return path


def write_digits_csv(out_dir=None, *, test_fraction: float = 0.2, seed: int = 0) -> tuple[Path, Path]:
    """Write scikit-learn's bundled handwritten digits as train.csv and test.csv (fixed stratified split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    out = Path(out_dir) if out_dir else data.datasets_dir() / "digits"
    digits = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        digits.data, digits.target, test_size=test_fraction, random_state=seed, stratify=digits.target)
    return write_csv(out / "train.csv", x_tr, y_tr), write_csv(out / "test.csv", x_te, y_te)
