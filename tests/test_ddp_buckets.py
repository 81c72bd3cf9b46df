"""Lab 03's bucket lesson in 2 real gloo ranks: DDP's default settings give CNN-3conv one bucket, a small
bucket_cap_mb several, and the lesson's hook records each inside the backward() it belongs to."""
import pytest

from lab_utils import spec
from lab_utils.launch import launch
from lab_utils.lessons.lab03 import bucket_worker

CNN = spec.cnn2d_3layer_fullconnected_3layer()  # lab 03 section 6's CNN, 106,058 parameters
CAPS = {"default": None, "small": 0.05}


@pytest.fixture(scope="module")
def rounds():
    """Three rounds of both settings on 2 ranks, a small batch."""
    return launch(bucket_worker, 2, args=(CNN, CAPS, 8, 3, 60), timeout=120)


def test_default_settings_give_one_bucket_holding_every_gradient(rounds):
    gradient_bytes = 4 * sum(p.numel() for p in spec.build_torch(CNN, (1, 28, 28)).parameters())
    for rank in rounds:
        for step in rank["default"]:
            assert [b["bytes"] for b in step["buckets"]] == [gradient_bytes]


def test_small_bucket_cap_gives_several_buckets_covering_every_gradient(rounds):
    gradient_bytes = 4 * sum(p.numel() for p in spec.build_torch(CNN, (1, 28, 28)).parameters())
    for rank in rounds:
        for step in rank["small"][1:]:  # DDP rebuilds its buckets after the first step
            assert len(step["buckets"]) > 1
            assert [b["index"] for b in step["buckets"]] == list(range(len(step["buckets"])))
            assert sum(b["bytes"] for b in step["buckets"]) == gradient_bytes


def test_timeline_is_ordered(rounds):
    """Each bucket's all-reduce lies inside backward(), and the last bucket starts once the last gradient is ready."""
    for rank in rounds:
        for steps in rank.values():
            for step in steps:
                assert step["start"] <= step["computed"] <= step["end"]
                assert all(step["start"] <= b["start"] <= b["end"] <= step["end"] for b in step["buckets"])
                assert step["buckets"][-1]["start"] >= step["computed"]
