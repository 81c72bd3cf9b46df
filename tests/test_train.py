import copy

import pytest
import torch
import torch.nn.functional as F

from lab_utils import data, spec, train


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
    assert "test acc" in history.table()


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
