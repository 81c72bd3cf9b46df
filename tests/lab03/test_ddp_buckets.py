"""Lab 03's bucket lesson in 2 real gloo ranks: DDP's default settings give CNN-3conv one bucket, a small
bucket_cap_mb several, and the lesson's hook records each inside the backward() it belongs to."""
import pytest

from lab_utils import ddp, hardware, spec
from lab_utils.launch import launch
from lab_utils.labs.lab03.lesson import bucket_worker

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


def cpu_plan(ranks, threads=1):
    return hardware.Plan(ranks, "gloo", ("cpu",) * ranks, threads, "")


@pytest.mark.parametrize("ranks, cores, threads", [(2, 2, 1), (2, 3, 1), (4, 2, 1), (2, 5, 2)])
def test_cpu_ranks_without_a_free_core_each_are_predicted_faster_with_one_bucket(ranks, cores, threads):
    p = ddp.bucket_prediction(cpu_plan(ranks, threads), cores, several="small (3 buckets)", one="default (1 bucket)")
    assert (p.faster, p.slower) == ("default (1 bucket)", "small (3 buckets)")
    assert p.claim.startswith("default (1 bucket) vs small (3 buckets)") and p.expected.startswith("one bucket faster")


@pytest.mark.parametrize("ranks, cores, threads", [(2, 4, 1), (2, 16, 1), (2, 6, 2)])
def test_a_free_core_per_rank_keeps_the_overlap_claim(ranks, cores, threads):
    p = ddp.bucket_prediction(cpu_plan(ranks, threads), cores, several="small (3 buckets)", one="default (1 bucket)")
    assert (p.faster, p.slower) == ("small (3 buckets)", "default (1 bucket)")
    assert p.expected.startswith("several buckets faster") and "free core" in p.claim


def test_nccl_keeps_the_overlap_claim_whatever_the_cores():
    nccl = hardware.Plan(2, "nccl", ("cuda:0", "cuda:1"), None, "")
    p = ddp.bucket_prediction(nccl, 1, several="small", one="default")
    assert (p.faster, p.slower, p.claim) == ("small", "default", "small vs default, NCCL")


def test_gloo_on_a_shared_gpu_needs_a_free_core_for_its_sums():
    shared = hardware.Plan(2, "gloo", ("cuda:0", "cuda:0"), None, "")
    assert ddp.bucket_prediction(shared, 2, several="small", one="default").faster == "default"
    assert ddp.bucket_prediction(shared, 16, several="small", one="default").faster == "small"


def test_each_hardware_case_is_its_own_claim():
    """verdicts.csv and the stability table tell claims apart by name: a restated prediction must not share one."""
    claims = {ddp.bucket_prediction(plan, cores, several="small", one="default").claim
              for plan, cores in [(cpu_plan(2), 2), (cpu_plan(2), 4), (hardware.Plan(2, "nccl", ("cuda:0", "cuda:1"), None, ""), 2)]}
    assert len(claims) == 3
