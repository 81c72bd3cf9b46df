import copy

import pytest
import torch
import torch.nn.functional as F

from lab_utils import data, spec, train
from lab_utils.labs.lab01 import gpu_check as gpu_train


def small_problem(n=256, seed=0):
    split = data.synthetic_split(n, 128, image_shape=(1, 12, 12), seed=seed)
    loader = data.make_loader(data.to_dataset(split.x_train, split.y_train), 32, seed=seed)
    test = data.make_loader(data.to_dataset(split.x_test, split.y_test), 64, shuffle=False)
    model = spec.build_torch(spec.preset("cnn2d_2layer_fullconnected_2layer"), (1, 12, 12), seed=seed)
    return model, loader, test


def test_train_step_equals_a_hand_written_step():
    model, loader, _ = small_problem()
    other = copy.deepcopy(model)
    x, y = next(iter(loader))
    opt_a = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(other.parameters(), lr=0.1)
    loss = train.train_step(model, x, y, opt_a)
    manual = F.cross_entropy(other(x), y)
    manual.backward()
    opt_b.step()
    assert not loss.requires_grad and loss.item() == pytest.approx(manual.item())
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), other.parameters()))


def test_fit_learns_and_records_history():
    model, loader, test = small_problem()
    history = train.fit(model, loader, epochs=6, lr=0.05, test_loader=test, progress=False)
    assert [e.epoch for e in history.epochs] == list(range(1, 7))
    assert history.epochs[-1].train_loss < history.epochs[0].train_loss
    assert history.final_accuracy > 0.5  # chance is 0.1
    assert history.samples_per_s > 0 and history.train_seconds > 0
    assert "test acc" in history.table() and "epoch samples/s" in history.table()


def test_fit_times_every_full_batch_step():
    model, loader, _ = small_problem(n=200)  # batches of 32: 6 full ones and one of 8 per epoch
    history = train.fit(model, loader, epochs=3, progress=False)
    assert history.batch_size == 32 and history.steps_per_epoch == [6, 6, 6] and len(history.step_seconds) == 18
    assert all(t > 0 for t in history.step_seconds)
    assert history.timed_steps == 18 - train.WARMUP_STEPS


def history_of(step_seconds, steps_per_epoch, batch_size=10):
    epochs = [train.EpochStats(i + 1, 1.0, 1.0, rate) for i, rate in enumerate([50.0, 100.0, 300.0][:len(steps_per_epoch)])]
    return train.History(epochs, list(step_seconds), list(steps_per_epoch), batch_size, warmup_steps=2)


def test_the_training_rate_is_the_median_step_warm_up_excluded():
    history = history_of([9, 9, 0.05, 0.2, 0.05, 5, 0.05, 0.05], [4, 4])
    assert history.samples_per_s == pytest.approx(10 / 0.05)  # median of the 6 steps after the 2 warm-up ones
    assert history.epoch_samples_per_s == 100.0  # the second epoch's whole-epoch rate: the first epoch is left out


def test_the_spread_compares_the_epochs_median_steps():
    history = history_of([9, 9, 0.1, 0.1, 0.1, 0.1, 0.1, 8, 0.2, 0.2, 0.2, 0.2], [4, 4, 4])
    assert history.epoch_step_medians() == pytest.approx([0.1, 0.1, 0.2])  # the outlier 8 moves no median
    assert history.spread == pytest.approx((0.2 - 0.1) / 0.1)
    assert history_of([9, 9, 0.1, 0.3], [4]).spread == 0.0  # one epoch: one repeat


def test_the_progress_bar_outside_jupyter_is_a_finished_text_bar_on_stdout(capsys):
    model, loader, _ = small_problem(n=64)
    train.fit(model, loader, epochs=2, progress=True)
    out, err = capsys.readouterr()
    assert "training: 100%" in out and "4/4" in out and err == ""


def test_in_jupyter_the_bar_is_a_widget_whose_text_form_becomes_the_finished_bar(monkeypatch):
    import IPython.display

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(repr(obj))

    def fake_display(obj, display_id=None):
        shown.append(repr(obj))
        return Handle()

    monkeypatch.setattr(train, "_in_jupyter_kernel", lambda: True)
    monkeypatch.setattr(IPython.display, "display", fake_display)
    bar = train.progress_bar(4, "training")
    for _ in range(4):
        bar.update()
    bar.close()
    assert type(bar).__name__ == "FinishedTextBar" and len(shown) == 2
    assert "training:   0%" in shown[0] and "training: 100%" in shown[1] and "4/4" in shown[1]
    bar.close()  # tqdm closes a bar again when it is garbage-collected: nothing more is shown, nothing raises
    assert len(shown) == 2


def test_quiet_profile_drops_the_profilers_log_lines_only(capfd):
    import sys

    from torch.profiler import ProfilerActivity

    with train.quiet_profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(8).sum()
        print("a real warning", file=sys.stderr)
    assert any(e.key == "aten::sum" for e in prof.key_averages())
    err = capfd.readouterr().err
    assert "a real warning" in err and "USDT" not in err and "STAGE" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the checks run (see the test below)")
def test_gpu_check_without_cuda_says_skipped():
    assert gpu_train.gpu_check() == {name: "skipped: no GPU" for name in gpu_train.GPU_CHECKS}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: lab 01's GPU check cannot run")
def test_gpu_check_on_a_gpu_passes():
    results = gpu_train.gpu_check()
    assert list(results) == list(gpu_train.GPU_CHECKS)
    assert all(verdict.startswith("passed") for verdict in results.values()), results


def test_fit_is_deterministic_for_a_seed():
    runs = []
    for _ in range(2):
        model, loader, _ = small_problem(seed=3)
        train.fit(model, loader, epochs=2, seed=3, progress=False)
        runs.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_fit_uses_the_given_step_function():
    model, loader, _ = small_problem()
    calls = []
    def step(model, x, y, optimizer):
        calls.append(len(y))
        return train.train_step(model, x, y, optimizer)
    train.fit(model, loader, epochs=1, step=step, progress=False)
    assert sum(calls) == 256


def test_fit_rejects_zero_epochs():
    model, loader, _ = small_problem()
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        train.fit(model, loader, epochs=0)


def test_evaluate_restores_training_mode():
    model, _, test = small_problem()
    model.train()
    loss, acc = train.evaluate(model, test)
    assert model.training and loss > 0 and 0 <= acc <= 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: fit's GPU path (cuda:0, synchronize) is not exercised")
def test_fit_on_the_planned_gpu():
    from lab_utils import hardware

    device = hardware.plan(1).device(0)
    model, loader, test = small_problem()
    history = train.fit(model, loader, epochs=2, device=device, test_loader=test, progress=False)
    assert next(model.parameters()).device.type == "cuda" and history.final_accuracy is not None
