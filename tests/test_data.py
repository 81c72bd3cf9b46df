import numpy as np
import pytest
import torch

from lab_utils import data


def write(tmp_path, text, name="d.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_label_last_without_header(tmp_path):
    x, y = data.load_csv(write(tmp_path, "1,2,3,4,7\n5,6,7,8,2\n"))
    assert x.shape == (2, 1, 2, 2) and x.dtype == np.float32
    assert y.tolist() == [7, 2] and y.dtype == np.int64
    assert x[1, 0].tolist() == [[5, 6], [7, 8]]


def test_label_first_with_header_like_kaggle_mnist(tmp_path):
    x, y = data.load_csv(write(tmp_path, "label,p0,p1,p2,p3\n3,0,1,2,3\n"), label_column="first")
    assert y.tolist() == [3] and x.reshape(-1).tolist() == [0, 1, 2, 3]


def test_explicit_image_shapes(tmp_path):
    path = write(tmp_path, ",".join(["1"] * 12) + ",0\n")
    assert data.load_csv(path, image_shape=(3, 4)).__getitem__(0).shape == (1, 1, 3, 4)
    assert data.load_csv(path, image_shape=(3, 2, 2))[0].shape == (1, 3, 2, 2)


def test_trailing_blank_lines_are_ignored(tmp_path):
    assert len(data.load_csv(write(tmp_path, "1,2,3,4,0\n\n\n"))[1]) == 1


MALFORMED = [
    ("ragged", "1,2,3,4,0\n1,2,3,0\n", {}, 2, "ragged row with 4 columns, expected 5"),
    ("non-numeric", "1,2,3,4,0\n1,x,3,4,0\n", {}, 2, "column 2 is not a number: 'x'"),
    ("empty cell", "1,2,,4,0\n", {}, 1, "column 3 is empty"),
    ("NaN", "1,2,3,4,0\n1,2,3,nan,1\n", {}, 2, "NaN or inf"),
    ("inf", "1,2,3,inf,1\n", {}, 1, "NaN or inf"),
    ("negative label", "1,2,3,4,0\n1,2,3,4,-1\n", {}, 2, "label -1 must be a non-negative integer"),
    ("non-integer label", "1,2,3,4,0.5\n", {}, 1, "label 0.5 must be a non-negative integer"),
    ("label in the other column", "p0,p1,p2,p3,label\n0,1,2,3,4\n0.5,1,2,3,4\n", {"label_column": "first"}, 3,
     "is the label in the other column"),
    ("shape does not divide", "1,2,3,4,5,6,0\n", {"image_shape": (2, 2)}, 1, "needs 4 pixels but rows have 6"),
    ("not square", "1,2,3,4,5,6,0\n", {}, 1, "not a square image; pass image_shape"),
    ("header only", "p0,p1,label\n", {}, 1, "the file is empty"),
    ("empty file", "", {}, 1, "the file is empty"),
    ("blank lines only", "\n\n", {}, 1, "the file is empty"),
    ("label only", "3\n", {}, 1, "needs at least one pixel and a label"),
]


@pytest.mark.parametrize("case, text, kwargs, line, problem", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_csv_names_file_line_and_problem(tmp_path, case, text, kwargs, line, problem):
    path = write(tmp_path, text, name="broken.csv")
    with pytest.raises(ValueError) as info:
        data.load_csv(path, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}:"), message
    assert problem in message


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="label_column must be 'last' or 'first'"):
        data.load_csv(write(tmp_path, "1,0\n"), label_column="middle")
    with pytest.raises(ValueError, match="image_shape must be"):
        data.load_csv(write(tmp_path, "1,2,3,4,0\n"), image_shape=(1, 1, 2, 2))
    with pytest.raises(FileNotFoundError, match="no such CSV file"):
        data.load_csv(tmp_path / "missing.csv")


def test_write_then_load_round_trip(tmp_path):
    images = np.arange(2 * 9, dtype=np.float32).reshape(2, 1, 3, 3)
    path = data.write_csv(tmp_path / "r.csv", images, np.array([4, 1]))
    x, y = data.load_csv(path)
    assert np.array_equal(x, images) and y.tolist() == [4, 1]


def test_committed_digits_are_reproducible(tmp_path):
    train, test = data.write_digits_csv(tmp_path)
    committed = data.datasets_dir() / "digits"
    assert train.read_bytes() == (committed / "train.csv").read_bytes()
    assert test.read_bytes() == (committed / "test.csv").read_bytes()


def test_digits_split_is_scaled_and_stratified():
    split = data.load_digits_split()
    assert split.x_train.shape == (1437, 1, 8, 8) and split.x_test.shape == (360, 1, 8, 8)
    assert split.x_train.min() == 0.0 and split.x_train.max() == 1.0
    assert set(np.unique(split.y_test)) == set(range(10))


def test_synthetic_images_are_deterministic_by_seed():
    a = data.synthetic_images(50, image_shape=(1, 16, 16), seed=3)
    b = data.synthetic_images(50, image_shape=(1, 16, 16), seed=3)
    c = data.synthetic_images(50, image_shape=(1, 16, 16), seed=4)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    assert a[0].shape == (50, 1, 16, 16) and 0 <= a[0].min() and a[0].max() <= 1


def test_synthetic_images_are_learnable():
    from sklearn.linear_model import LogisticRegression

    split = data.synthetic_split(600, 200, image_shape=(1, 12, 12), seed=0)
    clf = LogisticRegression(max_iter=300).fit(split.x_train.reshape(600, -1), split.y_train)
    assert clf.score(split.x_test.reshape(200, -1), split.y_test) > 0.8  # chance is 0.1


def test_synthetic_images_reject_bad_sizes():
    with pytest.raises(ValueError, match="need n >= 1"):
        data.synthetic_images(0)


def test_loader_order_depends_only_on_seed():
    ds = data.to_dataset(*data.synthetic_images(40, image_shape=(1, 4, 4)))
    def order(seed):
        return torch.cat([y for _, y in data.make_loader(ds, 8, seed=seed)]).tolist()
    assert order(1) == order(1)
    assert order(1) != order(2)


def test_adapters_check_lengths_and_batch_size():
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        data.to_dataset(np.zeros((3, 1, 2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        data.make_loader(data.to_dataset(np.zeros((3, 1, 2, 2)), np.zeros(3)), 0)
