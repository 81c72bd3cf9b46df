import numpy as np
import pytest
import torch

from lab_utils import data
from lab_utils.instructor.course import datasets


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
    for bad in [(1, 1, 2, 2), "[2, 2]", 4, (2, 2.5), (0, 4), ("a", 2)]:
        with pytest.raises(ValueError, match=r"image_shape must be \(height, width\) or \(channels, height, width\)"):
            data.load_csv(write(tmp_path, "1,2,3,4,0\n"), image_shape=bad)
    assert data.load_csv(write(tmp_path, "1,2,3,4,0\n"), image_shape=[2, 2.0])[0].shape == (1, 1, 2, 2)
    with pytest.raises(FileNotFoundError, match="no such CSV file"):
        data.load_csv(tmp_path / "missing.csv")


def test_write_then_load_round_trip(tmp_path):
    images = np.arange(2 * 9, dtype=np.float32).reshape(2, 1, 3, 3)
    path = datasets.write_csv(tmp_path / "r.csv", images, np.array([4, 1]))
    x, y = data.load_csv(path)
    assert np.array_equal(x, images) and y.tolist() == [4, 1]


def test_committed_digits_are_reproducible(tmp_path):
    train, test = datasets.write_digits_csv(tmp_path)
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


def test_write_csv_with_the_label_first(tmp_path):
    images = np.arange(2 * 4, dtype=np.float32).reshape(2, 1, 2, 2)
    path = datasets.write_csv(tmp_path / "first.csv", images, np.array([3, 1]), label_column="first")
    assert path.read_text().splitlines()[:2] == ["label,pixel0,pixel1,pixel2,pixel3", "3,0,1,2,3"]
    x, y = data.load_csv(path, label_column="first")
    assert np.array_equal(x, images) and y.tolist() == [3, 1]
    with pytest.raises(ValueError, match="label_column must be 'last' or 'first'"):
        datasets.write_csv(tmp_path / "bad.csv", images, np.array([3, 1]), label_column="middle")


# ---- reading a row range by streaming ------------------------------------------------------------------------------

def numbered_csv(tmp_path, n=11, *, label_column="last", header=True):
    """n 2x2 images whose pixels identify their row, labels row % 3; with blank lines in the middle and at the end."""
    images = np.arange(n * 4, dtype=np.float32).reshape(n, 1, 2, 2)
    path = datasets.write_csv(tmp_path / "rows.csv", images, np.arange(n) % 3, header=header, label_column=label_column)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:4] + [""] + lines[4:]) + "\n\n")
    return path


@pytest.mark.parametrize("label_column, header", [("last", True), ("first", True), ("last", False)])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_each_rank_streams_its_own_rows_equal_to_the_in_memory_shard(tmp_path, label_column, header, world_size):
    path = numbered_csv(tmp_path, label_column=label_column, header=header)
    x_all, y_all = data.load_csv(path, label_column=label_column)
    n = data.csv_row_count(path)
    assert n == len(y_all) == 11
    parts = []
    for rank in range(world_size):
        start, stop = data.row_range(n, rank, world_size)
        x, y = data.read_csv_rows(path, start, stop, label_column=label_column)
        assert np.array_equal(x, x_all[start:stop]) and np.array_equal(y, y_all[start:stop])
        parts.append(y)
    assert np.array_equal(np.concatenate(parts), y_all)


def test_rows_outside_the_range_are_not_parsed(tmp_path):
    path = write(tmp_path, "p0,p1,p2,p3,label\n1,2,3,4,0\n1,x,3,4,0\n5,6,7,8,1\n9,9,9,9,2\n", name="broken.csv")
    x, y = data.read_csv_rows(path, 2, 4)
    assert y.tolist() == [1, 2] and x[0].reshape(-1).tolist() == [5, 6, 7, 8]
    with pytest.raises(ValueError, match=r"broken.csv, line 3: column 2 is not a number: 'x'"):
        data.read_csv_rows(path, 0, 2)


def test_read_csv_rows_checks_its_range(tmp_path):
    path = numbered_csv(tmp_path, n=4)
    for start, stop in [(2, 2), (3, 1), (-1, 2)]:
        with pytest.raises(ValueError, match="need 0 <= start < stop"):
            data.read_csv_rows(path, start, stop)
    with pytest.raises(ValueError, match=r"line 1: no data rows in 4..5; the file has fewer than 5"):
        data.read_csv_rows(path, 4, 6)
    assert len(data.read_csv_rows(path, 3, 100)[1]) == 1  # a range past the end stops at the end


@pytest.mark.parametrize("n", [0, 1, 7, 8, 100])
@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
def test_row_ranges_cover_every_row_once_and_differ_by_one_at_most(n, world_size):
    ranges = [data.row_range(n, rank, world_size) for rank in range(world_size)]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(stop == next_start for (_, stop), (next_start, _) in zip(ranges, ranges[1:]))
    sizes = [stop - start for start, stop in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_row_range_refuses_impossible_ranks():
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        data.row_range(10, 2, 2)
    with pytest.raises(ValueError, match="world_size >= 1"):
        data.row_range(10, 0, 0)


# ---- scaling and CSV splits ------------------------------------------------------------------------------------------

def test_pixels_are_scaled_by_the_training_files_maximum_or_pixel_max():
    pixels = np.array([[0.0, 100.0], [200.0, 50.0]])
    assert data.pixel_scale(pixels, source="a.csv") == (200.0, "pixels divided by 200, the largest pixel of a.csv "
                                                                "(set pixel_max to choose another)")
    assert data.pixel_scale(pixels, 255) == (255.0, "pixels divided by 255 (pixel_max, as set)")
    divisor, rule = data.pixel_scale(pixels, 100)
    assert divisor == 100 and "has pixels up to 200, above pixel_max" in rule


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "255", True])
def test_pixel_max_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="pixel_max must be a positive number"):
        data.pixel_scale(np.ones((2, 2)), bad)


def test_an_all_black_training_file_is_refused():
    with pytest.raises(ValueError, match="every pixel of the training file is 0"):
        data.pixel_scale(np.zeros((3, 4)))


def write_split(tmp_path, test_pixels=None):
    x = np.array([[[[0, 10], [20, 40]]], [[[40, 0], [0, 0]]]], dtype=np.float32)
    train = datasets.write_csv(tmp_path / "train.csv", x, np.array([0, 1]), label_column="first")
    test = datasets.write_csv(tmp_path / "test.csv", x[:1] * 2 if test_pixels is None else test_pixels, np.array([1]),
                          label_column="first")
    return train, test, x


def test_csv_split_scales_train_and_test_by_the_same_rule(tmp_path):
    train, test, x = write_split(tmp_path)
    split = data.load_csv_split(train, test, label_column="first")
    assert np.array_equal(split.x_train, x / 40) and np.array_equal(split.x_test, x[:1] * 2 / 40)
    assert split.scaling == "pixels divided by 40, the largest pixel of train.csv (set pixel_max to choose another)"
    assert split.image_shape == (1, 2, 2) and split.num_classes == 2
    assert np.array_equal(data.load_csv_split(train, test, label_column="first", pixel_max=80).x_train, x / 80)


def test_csv_split_refuses_test_images_of_another_shape(tmp_path):
    train, test, _ = write_split(tmp_path, test_pixels=np.zeros((1, 1, 3, 3)))
    with pytest.raises(ValueError, match=r"test.csv: images of shape \(1, 3, 3\), but .*train.csv has \(1, 2, 2\)"):
        data.load_csv_split(train, test, label_column="first")


def test_csv_source_loads_the_same_split_as_load_csv_split(tmp_path):
    train, test, _ = write_split(tmp_path)
    source = {"kind": "csv", "train": str(train), "test": str(test), "label_column": "first", "image_shape": [2, 2],
              "pixel_max": 255}
    a, b = data.load_split(source), data.load_csv_split(train, test, label_column="first", image_shape=(2, 2), pixel_max=255)
    assert all(np.array_equal(p, q) for p, q in zip(a[:4], b[:4])) and a.scaling == b.scaling


def test_csv_source_without_files_is_the_built_in_digits():
    split = data.load_split({"kind": "csv", "train": None, "test": None, "label_column": "last", "image_shape": None,
                             "pixel_max": None})
    assert np.array_equal(split.x_train, data.load_digits_split().x_train)
    assert split.scaling.startswith("pixels divided by 16, the largest pixel of train.csv")


@pytest.mark.parametrize("source, message", [
    ({"kind": "csv", "train": "a.csv"}, "needs a test file"),
    ({"kind": "csv", "test": "b.csv"}, "needs its train file too"),
    ({"kind": "csv", "train": "a.csv", "test": "b.csv", "shape": (8, 8)}, r"unknown key\(s\) \['shape'\]"),
    ({"kind": "parquet"}, "kind 'digits', 'csv' or 'synthetic'"),
])
def test_bad_csv_sources_are_explained(source, message):
    with pytest.raises(ValueError, match=message):
        data.load_split(source)
