"""The workload registry: one short name per workload, and rows compared by what their workload computes."""
import pytest

from lab_utils import measure, spec, workloads
from lab_utils.measure.results_table import measured_what


def test_every_registered_workload_has_one_name_a_known_model_and_data():
    assert len(workloads.REGISTRY) == len({w.name for w in workloads.REGISTRY.values()}) >= 20
    for name, w in workloads.REGISTRY.items():
        assert workloads.named(name) is w and w.model in workloads.MODELS and w.data in workloads.DATA
    presets = {w.model for w in workloads.REGISTRY.values()} & set(workloads.MODELS)
    assert set(spec.PRESETS) <= presets  # both presets are measured, each under its own short name
    assert workloads.STEP_3CONV.name == "CNN-3conv/synthetic28 step"
    assert workloads.STEP_3CONV.at(256) == "CNN-3conv/synthetic28 b256 step"
    assert workloads.model_name(workloads.COURSE_CNN) == "CNN-2conv"


def test_an_unregistered_name_is_refused_with_the_registry_named():
    with pytest.raises(KeyError, match="not a registered workload.*CNN-3conv/synthetic28 step"):
        workloads.named("speed test")
    assert workloads.find("speed test") is None


def row(workload, **kw):
    fields = dict(lab="01", framework="torch", strategy="single-process", variant="1 process x 1 thread", world_size=1,
                  device="cpu", batch_size=256, samples_per_s=1000.0, wall_s=0.25, threads=1, workload=workload,
                  machine=measure.Machine("h", 2, "", "2.13", "", "3.11"))
    return measure.Result(**{**fields, **kw})


def test_rows_are_the_same_quantity_when_their_workloads_compute_the_same_in_one_configuration():
    step = row(workloads.STEP_3CONV.name)
    # the same model, data and image size timed by another lab's harness, at the same batch, ranks and threads
    assert measured_what(step) == measured_what(row(workloads.SWEEP_3CONV.name, lab="02", strategy="single"))
    # a row written before the registry, under the old label, is still the same quantity
    legacy = "speed test: cnn2d_3layer_fullconnected_3layer, synthetic 28x28, median step"
    assert measured_what(step) == measured_what(row(legacy, lab="03"))
    # another model, other data, another batch or thread count: not the same quantity
    for other in (row(workloads.TP_VS_DDP.name), row(workloads.TRAINING_RUN.name), row(step.workload, batch_size=128),
                  row(step.workload, threads=2)):
        assert measured_what(other) != measured_what(step)
    # lab 13's one small and one large image, both a batch of 1, sizes set by its parameters: two quantities
    assert measured_what(row(workloads.SPATIAL_ONE_SMALL.name, lab="13")) != \
        measured_what(row(workloads.SPATIAL_ONE_LARGE.name, lab="13"))
    # the two presets behind the old "course CNN" are told apart: 2 convolutions is not 3
    assert workloads.PRECISION.measures != workloads.STEP_3CONV.measures
    # the same digits step in the notebook's TensorFlow and in its own process is one quantity; a training run that
    # fetches each batch is another
    assert workloads.STEP_DIGITS.measures == workloads.STEP_DIGITS_TF.measures != workloads.TRAINING_RUN.measures


def test_serving_loads_and_a_forward_backward_are_not_a_step_measured_twice():
    low, high = row(workloads.SERVE_LOW.name, lab="09", rate=measure.ANSWERED), \
        row(workloads.SERVE_HIGH.name, lab="09", rate=measure.ANSWERED)
    assert measured_what(low) != measured_what(high)  # the offered load is part of what is measured
    assert measured_what(row(workloads.PRECISION.name, lab="07")) != measured_what(row(workloads.CHECKPOINTS.name,
                                                                                       lab="07"))
    # one forward pass at one batch under inference_mode, timed by two sections of lab 09, is one quantity
    assert measured_what(row(workloads.SERVE_MODES.name, lab="09", rate=measure.FORWARD)) == \
        measured_what(row(workloads.SERVE_BATCHES.name, lab="09", rate=measure.FORWARD))
    # a training run that fetches its batches is the same quantity in lab 01 and in a Slurm array task of lab 11
    assert measured_what(row(workloads.TRAINING_RUN.name)) == measured_what(row(workloads.ARRAY_SWEEP.name, lab="11"))
