"""Lab 01 on a learner's own CSV files: another image size, row count, class count, pixel range (0-255) and label
position (first) than the built-in digits, and no other change than the data parameters."""
from pathlib import Path

import nbformat
import numpy as np
import pytest

from lab_utils import data, measure
from lab_utils.instructor.course import datasets, headless

LAB01 = Path(__file__).resolve().parent.parent / "solutions" / "01_single_device_cnn.ipynb"


def own_csvs(folder: Path) -> tuple[Path, Path]:
    """12x12 images of 4 classes with 0-255 grey levels, the label first, as a learner's own files might be."""
    split = data.synthetic_split(600, 200, image_shape=(1, 12, 12), num_classes=4, seed=1)
    train = datasets.write_csv(folder / "train.csv", np.round(split.x_train * 255), split.y_train, label_column="first")
    test = datasets.write_csv(folder / "test.csv", np.round(split.x_test * 255), split.y_test, label_column="first")
    return train, test


def outputs(nb) -> list[dict]:
    return [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]


def text_of(output) -> str:
    return output.get("text", "") + output.get("data", {}).get("text/plain", "")


@pytest.mark.slow
def test_lab01_trains_on_a_generated_csv_to_its_target(tmp_path):
    train, test = own_csvs(tmp_path / "data")
    results = tmp_path / "results"
    run = headless.run_notebook(LAB01, tmp_path, {**headless.TEST_PARAMETERS.get("01", {}), "train_csv": str(train),
                                                "test_csv": str(test), "label_column": "first",
                                                "results_dir": str(results)}, cell_timeout=300)
    assert run.error is None, run.error
    executed = nbformat.read(tmp_path / LAB01.name, 4)
    printed = "\n".join(text_of(o) for o in outputs(executed))
    assert "image shape (C, H, W) (1, 12, 12); 4 classes" in printed
    assert "scaling: pixels divided by 255, the largest pixel of train.csv" in printed
    assert "4,640" in printed and "(4,)" in printed  # the model's layers and its 4 outputs come from the data
    assert "test accuracy reached the target of 90%: True" in printed
    assert "training: 100%" in printed  # the progress bar's saved text form is the finished bar
    assert not [o for o in outputs(executed) if o.get("name") == "stderr"], "no cell may write to stderr"
    assert str(tmp_path) not in printed, "outputs must not show the machine's absolute paths"
    rows = measure.read_results(results / "lab01.csv")
    training = [r for r in rows if r.variant == "training run"]
    assert len(training) == 1 and training[0].accuracy >= 0.9
    assert training[0].workload == "train.csv 12x12, cnn2d_2layer_fullconnected_2layer: training run, median step"
