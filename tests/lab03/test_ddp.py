"""lab_utils.ddp in real gloo ranks: lab 03's worker (generated from its notebook) equals one process, the timed
hook, BatchNorm, checkpoints."""
import re
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from lab_utils import data, ddp, spec, tensors
from lab_utils.launch import launch, launch_jobs, process_group
from lab_utils.labs.lab03.lesson import DDPConfig, ddp_worker
from lab_utils.train import train_step
from lab_utils.variants import variant

CFG = DDPConfig(data={"kind": "digits", "n_train": 256}, layers=spec.cnn2d_2layer_fullconnected_2layer(), epochs=2,
                per_rank_batch=16, lr=0.05, seed=3, warmup_steps=0, accumulation=1, timeout_s=120, checkpoint=None)
# lab 03's summed-gradients bug as an edit of its worker: the timed hook all-reduces without dividing
summing_worker = variant(ddp_worker, {"ddp.AllReduceTimer(ddp_model, optimizer)":
                                      "ddp.AllReduceTimer(ddp_model, optimizer, average=False)"},
                         name="summed gradients", show=False)
# gradient accumulation over 2 epochs whose micro-batches leave one over (280 / 2 / 8 = 17, 4 a step)
ACC = replace(CFG, data={"kind": "digits", "n_train": 280}, per_rank_batch=8, accumulation=4)
# the recipe before its fix: no zero_grad at an epoch's start, so the left-over micro-batch leaks into the next epoch
leaky_worker = variant(ddp_worker, {"optimizer.zero_grad()  # micro-batches left over": "pass  #"},
                       name="no zero_grad per epoch", show=False)


def one_process(cfg, world_size):
    """No DDP: the global batches of a world_size-rank run, the same learning rate."""
    split = data.load_split(cfg.data)
    train_set = split.datasets()[0]
    model = spec.build_torch(cfg.layers, split.image_shape, seed=cfg.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr * world_size, momentum=0.9)
    sampler = DistributedSampler(train_set, 1, 0, shuffle=True, seed=cfg.seed, drop_last=True)
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(train_set, batch_size=cfg.per_rank_batch * world_size, sampler=sampler, drop_last=True):
            train_step(model, x, y, optimizer)
    return tensors.flat_weights(model).numpy()


@pytest.fixture(scope="module")
def runs():
    jobs = [(ddp_worker, (CFG,)), (summing_worker, (replace(CFG, epochs=1),)), (ddp_worker, (replace(CFG, epochs=1),)),
            (ddp_worker, (ACC,)), (leaky_worker, (ACC,))]
    return launch_jobs(jobs, 2, timeout=240)


def test_the_lessons_worker_equals_one_process_on_the_global_batch(runs):
    reference = one_process(CFG, 2)
    assert all(np.abs(r["weights"] - reference).max() <= 1e-5 for r in runs[0])
    assert runs[0][0]["samples_per_s"] > 0 and runs[0][0]["allreduce_ms"] > 0


def test_accumulation_over_epochs_with_a_remainder_equals_one_process(runs):
    reference = one_process(replace(ACC, per_rank_batch=ACC.per_rank_batch * ACC.accumulation), 2)
    assert all(np.abs(r["weights"] - reference).max() <= 1e-5 for r in runs[3])
    assert runs[3][0]["optimizer_steps"] == 2 * (280 // 2 // 8 // 4)
    assert np.abs(runs[4][0]["weights"] - reference).max() > 1e-3  # the unfixed recipe fails the same check


def test_summed_gradients_move_further_than_averaged_ones(runs):
    start = tensors.flat_weights(spec.build_torch(CFG.layers, (1, 8, 8), seed=CFG.seed)).numpy()
    summed, averaged = (np.linalg.norm(r[0]["weights"] - start) for r in (runs[1], runs[2]))
    assert summed > 1.3 * averaged


def timer_worker(rank, world_size, steps):
    """DDP with the timed hook: calls and per-step times, against the step times."""
    import time

    with process_group(30):
        model = nn.parallel.DistributedDataParallel(nn.Linear(64, 64))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        timer = ddp.AllReduceTimer(model, optimizer)
        step_seconds = []
        for _ in range(steps):
            start = time.perf_counter()
            model(torch.ones(4, 64)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            step_seconds.append(time.perf_counter() - start)
        plain = nn.Linear(2, 2)
        untimed = ddp.AllReduceTimer(plain, torch.optim.SGD(plain.parameters(), lr=0.1))
        return {"calls": timer.calls, "per_step": timer.seconds_per_step, "steps": step_seconds,
                "weights": model.module.weight.detach(), "plain_calls": untimed.calls}


def test_the_timed_hook_averages_and_times_one_figure_per_step():
    ranks = launch(timer_worker, 2, args=(5,), timeout=60)
    for r in ranks:
        assert r["calls"] == 5 and len(r["per_step"]) == 5 and r["plain_calls"] == 0
        assert all(0 < c < s for c, s in zip(r["per_step"], r["steps"]))
    assert np.array_equal(ranks[0]["weights"], ranks[1]["weights"])


def test_linear_warmup_ramps_from_one_devices_rate():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.4)
    scheduler = ddp.linear_warmup(optimizer, 4, 3)
    rates = []
    for _ in range(5):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.4])
    assert ddp.linear_warmup(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.4), 4, 0).get_last_lr() == [0.4]


def bn_worker(rank, world_size, x):
    """A forward and backward of AllReduceBatchNorm2d on this rank's half of x."""
    with process_group(30):
        layer = ddp.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3)), "cpu")[0]
        half = torch.tensor(x[rank * 4:(rank + 1) * 4], requires_grad=True)
        out = layer(half)
        (out * torch.arange(out.numel()).reshape(out.shape)).sum().backward()
        return {"type": type(layer).__name__, "out": out.detach(), "grad": half.grad, "mean": layer.running_mean,
                "var": layer.running_var}


def test_allreduce_batchnorm_equals_batchnorm_on_the_global_batch():
    x = torch.randn(8, 3, 2, 2, generator=torch.Generator().manual_seed(0))
    ranks = launch(bn_worker, 2, args=(x.numpy(),), timeout=60)
    reference = nn.BatchNorm2d(3)
    xr = x.clone().requires_grad_(True)
    out = reference(xr)
    weights = torch.cat([torch.arange(out[:4].numel()).reshape(out[:4].shape)] * 2)
    (out * weights).sum().backward()
    assert ranks[0]["type"] == "AllReduceBatchNorm2d"
    assert np.allclose(np.concatenate([r["out"] for r in ranks]), out.detach().numpy(), atol=1e-5)
    assert np.allclose(np.concatenate([r["grad"] for r in ranks]), xr.grad.numpy(), atol=1e-4)
    assert np.allclose(ranks[0]["mean"], reference.running_mean.numpy(), atol=1e-6)
    assert np.allclose(ranks[0]["var"], reference.running_var.numpy(), atol=1e-5)


def test_checkpoint_keys_and_running_mean():
    model = spec.build_torch(spec.with_batchnorm(spec.cnn2d_2layer_fullconnected_2layer()), (1, 8, 8), seed=0)
    prefixed = {"module." + k: v for k, v in model.state_dict().items()}
    assert list(ddp.strip_module_prefix(prefixed)) == list(model.state_dict())
    fresh = spec.build_torch(spec.with_batchnorm(spec.cnn2d_2layer_fullconnected_2layer()), (1, 8, 8), seed=1)
    fresh.load_state_dict(ddp.strip_module_prefix(prefixed))
    assert np.array_equal(tensors.flat_weights(fresh), tensors.flat_weights(model))
    assert ddp.bn_running_mean(model) == [0.0] * 16
    assert ddp.bn_running_mean(spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(), (1, 8, 8))) is None


def buffers_worker(rank, world_size, sync):
    """Plain BatchNorm under DDP: its running mean after a training forward on this rank's own batch, and after one
    more forward in eval mode."""
    with process_group(30):
        model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.BatchNorm2d(3)), forward_sync_buffers=sync)
        model(torch.randn(4, 3, 2, 2, generator=torch.Generator().manual_seed(rank)) + rank)
        after_training = model.module[0].running_mean.clone()
        model.eval()
        with torch.no_grad():
            model(torch.zeros(4, 3, 2, 2))
        return {"after_training": after_training, "after_one_more": model.module[0].running_mean.clone()}


@pytest.mark.parametrize("sync", [True, False])
def test_ddp_broadcasts_buffers_at_the_start_of_a_forward(sync):
    """Lab 03's explanation of its running means: the ranks differ after a training forward (each updated rank 0's
    copy from its own batch) and agree after the next forward only where DDP syncs buffers."""
    ranks = launch(buffers_worker, 2, args=(sync,), timeout=60)
    assert not np.allclose(ranks[0]["after_training"], ranks[1]["after_training"])
    assert np.array_equal(ranks[0]["after_one_more"], ranks[0]["after_training"])  # eval mode changes no statistic
    assert np.array_equal(ranks[1]["after_one_more"], ranks[0]["after_training"]) == sync


def test_the_recipe_run_beside_lab_01_says_what_theory_predicts_and_checks_it():
    """Learner s9d: 2 ranks at 15,710 samples/s against lab 01's 37,167 on the same digits, CNN and batch, and nothing
    said why. Theory: the ranks split the compute and add the all-reduce, so they lose while it exceeds half a step."""
    from lab_utils.labs.lab03 import versus_one

    slow = versus_one.lines(ddp_rate=16000, allreduce_ms=1.5, batch=64, world_size=2, lab01_rate=37000)
    assert "slower than one process" in " ".join(slow[4].split()) and "as predicted" in slow[0], slow
    fast = versus_one.lines(ddp_rate=60000, allreduce_ms=0.1, batch=64, world_size=2, lab01_rate=37000)
    assert "faster than one process" in " ".join(fast[4].split()) and "faster than one process's 1.73 ms, as predicted" in fast[0], fast
    against = versus_one.lines(ddp_rate=16000, allreduce_ms=0.1, batch=64, world_size=2, lab01_rate=37000)
    assert "against the prediction" in against[0], against
    close = versus_one.lines(ddp_rate=35000, allreduce_ms=1.5, batch=64, world_size=2, lab01_rate=37000)
    assert "too close to tell" in close[0], close
    refused = versus_one.lines(ddp_rate=16000, allreduce_ms=1.5, batch=64, world_size=2, lab01_rate=37000,
                               refused="other programs used 1.5 of 2 cores")
    assert "not measurable here (other programs used 1.5" in refused[0] and "predicted" not in refused[0]
    assert len(versus_one.lines(ddp_rate=1, allreduce_ms=1, batch=64, world_size=2, lab01_rate=None)) == 1
    assert all(len(line) <= 100 for text in slow + refused for line in text.split("\n")), slow + refused


def test_the_recipe_runs_check_prints_prediction_measured_and_one_verdict_naming_both():
    """Learners s10a and s10i, cell 26: theory's total step (0.61 + 0.96 = 1.57 ms) was never printed, 'not the
    figure' named no figure, and the leftover '+0.61 ms these two parts leave out' equalled theory's 0.61 ms compute
    share and read as the same quantity. Now: prediction (total and parts), measured (total and parts, the leftover
    labelled unaccounted), one verdict naming both totals."""
    from lab_utils.labs.lab03 import versus_one

    # s10i's quiet run: lab 01 1.22 ms (52,636/s), 2 ranks 3.01 ms (21,293/s), all-reduce 0.96 ms, one rank alone
    # on 32 samples 1.43 ms (22,378/s)
    off = versus_one.lines(ddp_rate=21293, allreduce_ms=0.96, batch=64, world_size=2, lab01_rate=52636,
                           alone_rate=22378)
    text = "\n".join(off)
    assert "prediction: 0.61 ms compute (1.22 / 2) + 0.96 ms all-reduce = 1.57 ms a step, slower" in text, off
    measured = " ".join(text.split("measured:")[1].split("verdict:")[0].split("compute alone:")[0].split())
    assert measured.startswith("1.43 ms compute (one rank alone, launched, on its 32 samples) + 0.96 ms all-reduce "
                               "+ 0.62 ms unaccounted"), measured
    assert measured.endswith("= 3.01 ms a step"), measured
    # learner s13r6c: the unaccounted part was blamed on an unmeasured cause; it is said plainly to be unexplained
    assert "unaccounted (neither part times it; this lab does not say where it goes)" in measured, measured
    assert "leave out" not in text and "not the figure" not in text, off
    verdict = " ".join(off[0].split())
    assert verdict.startswith("verdict: 2 ranks slower than one process's 1.22 ms, as predicted"), verdict
    # learner s12r3c: 'as predicted' beside '1.92x the predicted' read as one claim; the size is its own clause,
    # and the gap is split into the measured parts that made it (1.43 - 0.61 = 0.82 compute, 0.62 unaccounted)
    assert ("as predicted; but 1.92x slower than predicted (3.01 vs 1.57 ms): the compute took 0.82 ms more than "
            "theory's, and 0.62 ms is unaccounted") in verdict, verdict
    assert "is above theory's 0.61 ms, before any all-reduce: half the batch did not halve the step" in " ".join(text.split()), off
    assert sum(line.startswith("verdict") for line in off) == 1 and off[0].startswith("verdict"), off
    # the step near the prediction: the figure agrees, said with both figures
    near = versus_one.lines(ddp_rate=64 / 1.65e-3, allreduce_ms=0.96, batch=64, world_size=2, lab01_rate=52636,
                            alone_rate=22378)
    assert "as predicted; the measured 1.65 ms within 25% of the predicted 1.57 ms" in " ".join(near[0].split())
    # more parts than the step: the leftover is negative, not a '+' that hides it
    over = versus_one.lines(ddp_rate=64 / 2.0e-3, allreduce_ms=0.96, batch=64, world_size=2, lab01_rate=52636,
                            alone_rate=22378)
    assert "- 0.39 ms unaccounted" in " ".join("\n".join(over).split()), over
    # a wrong direction stays 'against the prediction', whatever the parts say
    against = versus_one.lines(ddp_rate=16000, allreduce_ms=0.1, batch=64, world_size=2, lab01_rate=37000,
                               alone_rate=60000)
    assert "against the prediction" in " ".join(against[0].split()), against
    refused = versus_one.lines(ddp_rate=21293, allreduce_ms=0.96, batch=64, world_size=2, lab01_rate=52636,
                               alone_rate=22378, refused="other programs used 1.5 of 2 cores")
    assert "unaccounted" in refused[5] and "not measurable here" in refused[0] and "predicted" not in refused[0]
    assert all(len(line) <= 100 for t in off + near + refused for line in t.split("\n")), off + near + refused


def test_the_prediction_gives_each_one_thread_rank_the_work_lab_01_did_on_its_threads():
    """Learner s11c, cell 26: lab 01's step ran on 2 threads, yet theory halved it as one 1-thread rank's compute
    (0.56 ms, 'the measured 2.53 ms is 1.70x the predicted 1.49 ms'). With perfect threads, one thread takes 2x as
    long, so each rank's half batch costs a whole lab 01 step: 1.11 + 0.93 = 2.04 ms."""
    from lab_utils.labs.lab03 import versus_one

    run = dict(ddp_rate=64 / 2.53e-3, allreduce_ms=0.93, batch=64, world_size=2, lab01_rate=64 / 1.11e-3,
               alone_rate=32 / 1.25e-3)
    said = [" ".join(line.split()) for line in versus_one.lines(**run, lab01_threads=2, rank_threads=1)]
    assert said[1].startswith("lab 01, one process with 2 threads, same CNN"), said
    assert said[2].startswith("these 2 ranks, 1 thread each:"), said
    assert "1 thread takes 2x as long" in said[3], said
    assert said[4].startswith("prediction: 1.11 ms compute (1.11 x 2 / 2) + 0.93 ms all-reduce = 2.04 ms a step, "
                              "slower"), said
    assert said[0].endswith("the measured 2.53 ms within 25% of the predicted 2.04 ms"), said
    assert versus_one.rank_compute_ms(1.11, 2, 2, 1) == pytest.approx(1.11)
    assert versus_one.rank_compute_ms(1.2, 4, 4, 2) == pytest.approx(0.6)
    # lab 01 on as many threads as each rank: theory halves its step, as before
    same = [" ".join(line.split()) for line in versus_one.lines(**run, lab01_threads=1, rank_threads=1)]
    assert same[4].startswith("prediction: 0.56 ms compute (1.11 / 2)"), same
    # ranks on GPUs: no thread count printed
    gpu = versus_one.lines(**run, rank_threads=None)
    assert "thread" not in gpu[1] + gpu[2], gpu
    raw = versus_one.lines(**run, lab01_threads=2, rank_threads=1)
    assert all(len(line) <= 100 for t in raw for line in t.split("\n")), raw


def test_a_slowed_one_thread_baseline_is_read_one_way():
    """Learner s10a, cells 59/89/91: '[!] 2.24x ... efficiency 112 % ... the baseline was slowed', yet the summary
    printed 'DDP 1.81x one thread' over that baseline. One rule: a row above N x one thread means the baseline ran
    slow, and then no ratio over it is read; DDP over N threads (which does not use it) is."""
    from lab_utils.labs.lab03 import speed

    rates = {"1 process x 1 thread": 4022, "2 ranks, DDP": 7292, "2 ranks, Horovod-style": 5600,
             "1 process x 2 threads": 9013}
    slowed = speed.slowed_baseline(rates, "1 process x 1 thread", 2)
    assert slowed and "1 process x 2 threads got 2.24x" in slowed, slowed
    said = speed.speed_summary(rates, "1 process x 1 thread", 2, slowed)
    assert "over one thread: not read" in said and "0.77x DDP" in said, said
    assert "1.81x" not in said and "x one thread" not in said, said
    fine = dict(rates, **{"1 process x 2 threads": 7500})  # 1.86x: within what 2 threads can give
    assert speed.slowed_baseline(fine, "1 process x 1 thread", 2) is None
    plain = speed.speed_summary(fine, "1 process x 1 thread", 2, None)
    assert plain == "2 DDP ranks 1.81x one thread; Horovod-style 1.39x one thread", plain  # 2 threads: buys_line
    # the row at exactly N x is not above the hardware: no reading of a slowed baseline
    assert speed.slowed_baseline(dict(rates, **{"1 process x 2 threads": 8044}), "1 process x 1 thread", 2) is None


S10I_RATES = {"1 process x 1 thread": 5139, "2 ranks, DDP": 9782, "2 ranks, Horovod-style": 5883,
              "1 process x 2 threads": 6338}  # learner s10i's quiet run, cell 59


def test_ddp_against_threads_is_read_once_in_the_first_line():
    """Learner s10i, finding 7: the prose states theory's prediction (DDP ahead on a CPU); the run reads it. Learner
    s13r5c: one figure per comparison, so the first line reads it and no verdict line repeats the figure."""
    from lab_utils.labs.lab03 import speed

    assert "faster than one process with 2 threads (1.54x it)" in speed.headline(S10I_RATES, 2, 0.25, None, None)
    behind = dict(S10I_RATES, **{"2 ranks, DDP": 4000})
    assert "slower than one process with 2 threads (0.63x it)" in speed.headline(behind, 2, 0.25, None, None)
    close = dict(S10I_RATES, **{"2 ranks, DDP": 7000})
    level = speed.headline(close, 2, 0.25, None, None)
    assert "level with one process with 2 threads (1.10x it: within the 25% two launches may differ by)" in level
    assert "minutes apart" not in level  # learner s11c: they ran seconds apart
    refused = speed.headline(S10I_RATES, 2, 0.25, None, "other programs used 1.5 of 2 cores")
    assert "not measurable here (other programs used 1.5" in refused and "1.54x" not in refused, refused
    reading = speed.report(_fake_speed(close), 2, _fake_hw(), None, 0.25)
    assert sum("1.10x" in line for line in reading.lines) == 1, reading.lines


def test_the_summary_answers_what_two_ranks_buy_from_the_runs_own_ratios():
    """Learner s11c, finding 4: the lab asks what two ranks buy; the run had three answers (digits CNN 2.3x slower
    than lab 01's 2-thread process, 3-conv CNN 1.59x one thread and 1.05x two threads) and no line put them
    together."""
    from lab_utils.labs.lab03 import speed

    rates = {"1 process x 1 thread": 6402, "2 ranks, DDP": 10173, "2 ranks, Horovod-style": 7042,
             "1 process x 2 threads": 9729}
    said = speed.buys_line(rates, 2, 0.25, recipe_ratio=1.11 / 2.53)
    assert said.startswith("what 2 ranks buy here: against one process with 2 threads, no gain: 3-conv CNN 1.05x "
                           "(too close to tell), digits CNN 0.44x (slower). "), said
    # learner s12r3c: sections 4 and 6 settled together, in one computed sentence; learner s13r6c: as one theory
    # (ranks win at most what threads waste: 9729 / 6402 = 1.52x on 2 cores, a ceiling of 2 / 1.52 = 1.32x), then
    # which form this run confirmed, on which CNN
    # learner s13r7c: 'neither form's direction' needed decoding; plain words per CNN, the theory said once
    # lab 03's clarity walk: the ceiling's figure once in the line, not again after 'inside'
    assert ("Section 6's threads left the ranks at most 1.32x to win. 3-conv CNN: level (within 25%), inside that "
            "ceiling; digits CNN: ranks lose: what they pay (the all-reduce, one more process) exceeded what the "
            "threads wasted. The takeaway: on a CPU, ranks and threads share the same cores, so ranks win at most what "
            "threads waste") in said, said
    assert "form" not in said and said.count("at most what") == 1, said
    assert said.endswith("DDP pays off where one process cannot use the other devices (a GPU or a machine per rank)")
    assert "any gain" not in said and "not confirmed" not in said and "prediction" not in said, said
    ahead = speed.buys_line(dict(rates, **{"2 ranks, DDP": 12500}), 2, 0.25)
    assert "digits" not in ahead and "a gain: 3-conv CNN 1.28x (faster)" in ahead, ahead
    assert ahead.endswith("3-conv CNN: ranks win, as threads that waste cores allow, within that ceiling. The takeaway: "
                          "DDP's ranks beat one process's threads even on this CPU"), ahead
    both = speed.buys_line(dict(rates, **{"2 ranks, DDP": 4212}), 2, 0.25, recipe_ratio=0.29)
    assert ("Both CNNs: ranks lose: what they pay (the all-reduce, one more process) exceeded what the threads "
            "wasted.") in both, both  # said once
    assert "waste nothing" not in both, both  # a learner walk: read against section 6's threads that waste 11%
    slowed = speed.buys_line(rates, 2, 0.25, slowed="the one-thread baseline ran slow")
    assert "left at most" not in slowed, slowed  # no ceiling over a slowed baseline
    mixed = speed.buys_line(dict(rates, **{"2 ranks, DDP": 12500}), 2, 0.25, recipe_ratio=0.5)
    assert "a gain on one CNN only" in mixed, mixed
    # learner s13r5c: each figure once in the summary: the ratios over one thread are speed_summary's line
    assert "one thread" not in said and "1.59x" not in said, said
    assert speed.reading(1.25, 0.25) == "too close to tell" and speed.reading(0.7, 0.25) == "slower"


def test_the_two_allreduce_figures_of_the_same_gradients_say_why_they_differ():
    """Learner s10i, finding 4: the same 424,232-byte all-reduce is 2.3 ms a step in section 6 and 4.3 ms 'after the
    last gradient' in the bucket test, unreconciled. The line names each one's batch per rank and span timed, and the
    sum timed as section 6 times it; learner s13r6c: a 0.0 ms wait was offered as the reason for 4.5 vs 2.0 ms."""
    from lab_utils.labs.lab03 import speed

    line = " ".join(speed.allreduce_pair(table_ms=2.3, table_batch=128, sum_ms=3.9, batch=64).split())
    assert "as section 6 times it: 2.3 ms a step in section 6 (128 samples a rank), 3.9 ms here (64 a rank)" in line
    assert "1.7x apart: this run did not time the wait for the other rank" in line, line
    # learner s12r3c: 'waiting for the slower rank' was taken on trust; where both ranks' times are given, it is shown
    # learner s12r3c: 'waiting for the slower rank' was taken on trust; where both ranks' times are given, it is shown
    shown = " ".join(speed.allreduce_pair(table_ms=3.2, table_batch=128, sum_ms=1.6, batch=64, wait_ms=1.1).split())
    assert "1.6 ms here (64 samples a rank), of which 1.1 ms was rank 0 waiting for the other rank" in shown, shown
    # learner s12r4c: four figures for one all-reduce; no 'sum itself', no 'after the last gradient'
    assert "itself" not in shown and "after the last" not in shown
    # learner s13r7c: 4.2 ms here less a 0.6 ms wait left 3.6 ms against section 6's 3.2 ms, with nothing said; the
    # rest is derived from the printed figures and read against the lab's one 25 % threshold
    rest = " ".join(speed.allreduce_pair(table_ms=3.2, table_batch=128, sum_ms=4.24, batch=64, wait_ms=0.64,
                                         after_ms=4.4).split())
    assert "4.2 ms here (64 samples a rank; the 4.4 ms above spans the last gradient to backward()'s return)" in rest
    assert "of which 0.6 ms was rank 0 waiting" in rest and rest.endswith(
        "the other 3.6 ms is within 25% of section 6's 3.2 ms (128 a rank)"), rest
    # learner s13r6c: a wait too small for the gap is said not to explain it, never offered as the reason
    named = " ".join(speed.allreduce_pair(table_ms=4.5, table_batch=128, sum_ms=2.0, batch=64, wait_ms=0.0,
                                          after_ms=2.2).split())
    # a learner walk: "the other 1.9 ms is 5.1x section 6's 9.8 ms" put the ratio the wrong way round, and blamed the
    # batch for an all-reduce of the same bytes; the larger figure now comes first, and the batch is not offered
    assert named.endswith("section 6's 4.5 ms is 2.2x this 2.0 ms, beyond the 25% two timings may differ by: the "
                          "gradient bytes are the same, and section 6's figure also holds its rank's wait for the "
                          "slower one, which it does not time apart"), named
    assert "does not measure why" not in named and "(128 a rank)" not in named.split("; ")[-1]
    smaller = " ".join(speed.allreduce_pair(table_ms=1.0, table_batch=128, sum_ms=3.0, batch=64, wait_ms=0.5).split())
    assert smaller.endswith("this 2.5 ms is 2.5x section 6's 1.0 ms, beyond the 25% two timings may differ by, for the "
                            "same gradient bytes: this run does not time what else differs"), smaller
    assert "need not agree" not in named and "changes with the batch" not in named
    agree = " ".join(speed.allreduce_pair(table_ms=2.2, table_batch=128, sum_ms=2.0, batch=64, wait_ms=0.0).split())
    assert agree.endswith("(64 a rank): within the 25% two timings apart may differ by"), agree


def test_the_wait_for_the_other_rank_is_read_from_both_ranks_hand_over_times():
    """Rank 0's bucket handed over at 1 ms waits until rank 1 hands over the same bucket (3 ms, then 1 ms: median of
    2 and 0 and 2 ms); a rank that hands over last waits for nobody."""
    from lab_utils.labs.lab03 import buckets

    mine = [_round(0, 0.001, 0.004, [(0.001, 0.004)]) for _ in range(3)]
    theirs = [_round(0, 0.003, 0.004, [(t, 0.004)]) for t in (0.003, 0.001, 0.003)]
    assert abs(buckets.wait_ms(mine, [theirs]) - 2.0) < 1e-9
    assert buckets.wait_ms(theirs, [mine]) == 0.0


def test_lab_03_cells_print_the_lines_learner_s10i_missed():
    """Learner s10i, findings 5, 6, 10 (and 2, 4, 7): the section 6 table has a noise line, lab 01's baseline line and
    the DDP-vs-threads verdict; the learning-rate table says its verdict is the median of paired ratios; the bucket
    lines say why section 6's all-reduce differs; the hang report prints wrapped."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]

    def cell(marker):
        (found,) = [c for c in code if marker in c]
        return found

    speed = cell("speed_reading.report(")  # the table, noise, baseline and verdict lines: in lab_utils (s11r2c)
    assert "unreadable=measure.unreadable(workers=world_size)" in speed and len(speed.splitlines()) <= 30, speed
    assert "paired ratios" in cell("lr_verdict = measure.verdict(")
    assert "buckets.timeline(" in cell("comm_ms=reading.comm_ms")  # the drawing and its lines: lab_utils (s11r2c)
    assert "print(measure.short_lines(str(err)))" in cell("def hanging_worker(")
    prose = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "hard competitor" not in prose and "Theory still predicts DDP ahead" not in prose
    # learner s13r6c: sections 4 and 6 state one theory; the unaccounted part is not blamed on an unmeasured cause
    assert "at most what the threads waste" in prose and "most likely the price of sharing" not in prose


def test_lab_03_cells_say_what_learner_s11c_asked():
    """Learner s11c: the summary computes what two ranks buy (finding 4); cell 58 names one tolerance, not a 2x one
    beside 25% (finding 5); the torchrun script says why it holds the group and exits with os._exit (finding 7)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"]]
    (summary,) = [c for c in cells if c.startswith('print(measure.short_lines(f"DDP on')]
    assert "speed_reading.speed_summary_lines(" in summary and "interleaved launches" not in summary
    (section,) = [c for c in cells if c.startswith("## 6. Measure")]
    assert "2×" not in section and "within 25%" in section
    # learner s13r6c, item 4: the script is written by lab_utils, not built from strings in the cell
    (cell,) = [c for c in cells if "torchrun_script(ddp_worker" in c]
    assert "write_text" not in cell and "hold_process_groups" not in cell, cell
    from lab_utils.labs.lab03 import plumbing
    script = plumbing._MAIN
    assert "hold_process_groups()  # a rank can hang at random in torch's exit teardown (pytorch/pytorch#75097)" in script
    assert "os._exit(0)  # so leave without tearing the group down; where ranks exit cleanly, drop it and" in script


def test_the_torchrun_script_is_the_worker_with_a_main_that_reads_the_environment(tmp_path):
    """plumbing.torchrun_script writes a script that parses, defines the worker as the notebook wrote it, and calls it
    with RANK and WORLD_SIZE from the environment."""
    import ast

    from lab_utils.labs.lab03 import lesson, plumbing

    path = plumbing.torchrun_script(lesson.ddp_worker, tmp_path / "sub" / "ddp_torchrun.py")
    text = path.read_text()
    tree = ast.parse(text)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["ddp_worker"]
    assert "out = ddp_worker(int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), cfg)" in text
    assert max(map(len, text.splitlines())) <= 120


def test_the_spawn_failure_lines_name_the_exit_and_the_childs_error_or_say_the_line_arrived_cut():
    """Learner s13r6c, finding 10: the regexes over captured stderr live in lab_utils; the cell shows the lesson."""
    from lab_utils.labs.lab03 import plumbing

    err = RuntimeError("process 1 terminated with exit code 1")
    said = plumbing.spawn_lines(err, "Traceback ...\nAttributeError: Can't get attribute 'hello_worker' on "
                                     "<module '__main__' (built-in)>\n")
    assert said == ["torch.multiprocessing.spawn: RuntimeError: a process terminated with exit code 1",
                    "a child said: AttributeError: Can't get attribute 'hello_worker' on <module '__main__' "
                    "(built-in)>"], said
    cut = plumbing.spawn_lines(None, "AttributeError: Can't get attr")
    assert cut == ["a child said (cut or mixed with the other's line; its last): \"AttributeError: Can't get attr\""]
    assert all(len(line) <= 100 for line in said + cut)


def _fake_speed(rates, spread=0.1, allreduce_ms=3.0):
    """Section 6's launches as the report reads them: two launches a row, each a list of rank results."""
    return {name: [[{"samples_per_s": rate, "step_spread": spread, "allreduce_ms": allreduce_ms}]] * 2
            for name, rate in rates.items()}


def _fake_hw():
    from types import SimpleNamespace

    return SimpleNamespace(cpu_count=2, gpus=[])


S11R2C_RATES = {"1 process x 1 thread": 5720, "2 ranks, DDP": 8881, "2 ranks, Horovod-style": 5996,
                "1 process x 2 threads": 8387}  # learner s11r2c's quiet run, cell 59


def test_section_6_reads_its_launches_in_one_report_that_starts_with_one_sentence(tmp_path):
    """Learner s11r2c, findings 3, 5, 7: cell 59's 60 lines of reporting are one call; its first line is the sentence
    to repeat; the table says whose spread it prints; the lines stay within 100 columns."""
    from lab_utils.labs.lab03 import speed

    reading = speed.report(_fake_speed(S11R2C_RATES), 2, _fake_hw(), tmp_path, 0.25)
    first = " ".join(reading.lines[0].split())
    assert first.startswith("2 DDP ranks ran 1.55x one process with one thread; level with one process with 2 "
                            "threads (1.06x it: within the 25% two launches may differ by). 2 threads ran 1.47x "
                            "one thread on 2 cores, wasting 27% of them, so ranks could beat them by at most 1.36x "
                            "here. The lesson: on a CPU, ranks and threads share the same cores"), first
    assert reading.lines[1] == "" and reading.lines[2].startswith("1 process x 1 thread"), reading.lines
    assert "(steps spread 10%)" in reading.lines[2]
    assert any(line.startswith("noise: no row's steps spread more than 25 %") for line in reading.lines)
    # learner s13r5c: one figure per comparison; the other labs' figures are the results table's notes
    assert not any("lab 01" in line or "lab 02" in line for line in reading.lines), reading.lines
    assert reading.lines[-1].startswith("a DDP step took 28.8 ms, of which 3.0 ms (10%)"), reading.lines[-1]
    assert reading.slowed is None and reading.unreadable is None and reading.comm_ms == 3.0
    assert all(len(line) <= 100 for text in reading.lines for line in text.split("\n")), reading.lines


def test_the_sentence_reads_this_runs_own_thread_row_once():
    """Learner s13r5c, findings 1-2: 0.97x this run's 2-thread figure and 0.72x lab 01's in one sentence, which then
    'does not settle' the question. The sentence reads this run's row alone, says level, faster or slower, and
    gives the lesson that reading teaches."""
    from lab_utils.labs.lab03 import speed

    level = speed.headline(S11R2C_RATES, 2, 0.25, None, None)
    assert "level with one process with 2 threads (1.06x it: within the 25%" in level, level
    assert "lab 01" not in level and "settle" not in level and "a GPU or a machine per rank" in level, level
    ahead = speed.headline({**S11R2C_RATES, "2 ranks, DDP": 12000}, 2, 0.25, None, None)
    assert "faster than one process with 2 threads (1.43x it)" in ahead, ahead
    assert "at most what threads waste" not in ahead and "DDP's ranks beat one process's threads" in ahead, ahead
    behind = speed.headline({**S11R2C_RATES, "2 ranks, DDP": 6000}, 2, 0.25, None, None)
    assert "slower than one process with 2 threads (0.72x it)" in behind and "win at most what threads" in behind, behind

def test_the_one_process_rows_wait_as_lab_01s_kernel(monkeypatch, tmp_path):
    """Learner s12r4c, the central item: lab 03's launched 2-thread row ran 1.37x below lab 01's kernel figure while the
    1-thread rows agreed within 2%: forked ranks sleep idle OpenMP threads at once (PASSIVE), the kernel does not. The
    one-process rows start fresh with the kernel's wait policy, both launches of cell 59 use it, the report says so."""
    import json
    from pathlib import Path

    from lab_utils.launch.environment import rank_environment
    from lab_utils.labs.lab03 import speed

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert rank_environment(0, 1, 1234, 2)["OMP_WAIT_POLICY"] == "PASSIVE"  # what a forked rank would get
    assert speed.as_lab01_kernel() == {"start": "spawn", "env": {"OMP_WAIT_POLICY": None}}  # None: unset in the rank
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # a kernel started under the test plugin
    assert speed.as_lab01_kernel()["env"] == {"OMP_WAIT_POLICY": "PASSIVE"}
    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    (cell,) = ["".join(c["source"]) for c in nb["cells"] if "speed_reading.report(" in "".join(c["source"])]
    assert "as_lab01 = speed_reading.as_lab01_kernel()" in cell and cell.count("**as_lab01)") == 2, cell


def test_a_busy_machine_or_a_slowed_baseline_still_refuses_in_the_report(tmp_path):
    """The refusals moved into lab_utils with the report: n/m in the table and the sentence, nothing read over a
    slowed baseline, and the results rows carry the refusal and the conditions."""
    from lab_utils import measure
    from lab_utils.labs.lab03 import speed

    busy = speed.report(_fake_speed(S11R2C_RATES), 2, _fake_hw(), tmp_path, 0.25, unreadable="other programs used 1.5 cores")
    assert measure.NOT_MEASURABLE in busy.lines[0] and "1.55x" not in busy.lines[0], busy.lines[0]
    assert "n/m" in busy.lines[3] and sum(measure.NOT_MEASURABLE in line for line in busy.lines) == 1, busy.lines
    assert not any("x one" in line or "1.55x" in line for line in busy.lines), busy.lines  # no ratio read
    rows = speed.results(busy, _fake_speed(S11R2C_RATES), 2, "cpu", [])
    by_name = {row.variant: row for row in rows}
    assert any(measure.NOT_MEASURABLE in str(f) for f in by_name["2 ranks, DDP"].flags)
    assert not any(measure.NOT_MEASURABLE in str(f) for f in by_name["1 process x 1 thread"].flags)
    slowed_rates = {"1 process x 1 thread": 4022, "2 ranks, DDP": 7292, "2 ranks, Horovod-style": 5600,
                    "1 process x 2 threads": 9013}
    slowed = speed.report(_fake_speed(slowed_rates), 2, _fake_hw(), tmp_path, 0.25)
    assert slowed.slowed and "one thread" not in slowed.lines[0].split("ran")[1].split("and")[0], slowed.lines[0]
    assert " ".join(slowed.lines[0].split()).startswith("2 DDP ranks ran level with one process with 2 threads (0.81x")
    assert any("is inflated by it" in " ".join(line.split()) for line in slowed.lines)
    assert by_name["2 ranks, DDP"].threads == 1 and by_name["1 process x 2 threads"].threads == 2


def test_the_versus_one_lines_say_when_the_compute_alone_exceeds_lab_01s_step():
    """Learner s11r2c, finding 13: 1.50 ms of compute (one rank alone) against lab 01's whole 1.20 ms step is the
    reason 2 ranks lose; the lines say it outright, and the other way round when the compute fits."""
    from lab_utils.labs.lab03 import versus_one

    run = dict(ddp_rate=23561, allreduce_ms=0.70, batch=64, world_size=2, lab01_rate=53169, lab01_threads=2)
    slow = versus_one.lines(**run, alone_rate=32 / 1.50e-3)
    assert " ".join(slow[-1].split()).startswith("compute alone: one rank's 1.50 ms is above theory's 1.20 ms (lab "
                                                 "01's whole step), before any all-reduce"), slow[-1]
    assert slow[0].startswith("verdict: 2 ranks slower"), slow  # the verdict leads (a learner walk)
    fits = versus_one.lines(**run, alone_rate=32 / 0.80e-3)
    assert "is below theory's 1.20 ms (lab 01's whole step): lab 01's threads" in " ".join(fits[-1].split()), fits
    assert not any(line.startswith("compute alone") for line in versus_one.lines(**run, refused="busy"))
    assert not any(line.startswith("compute alone") for line in versus_one.lines(**run))


def _round(start, computed, end, buckets):
    """One fake round of the bucket test: backward() from start to end, the last gradient at computed (seconds)."""
    return {"start": start, "computed": computed, "end": end, "bytes": 0,
            "buckets": [{"index": i, "start": a, "end": b} for i, (a, b) in enumerate(buckets)]}


def test_the_bucket_lines_print_backwards_median_total_beside_its_split():
    """Learner s11r2c, finding 1: 4.7 + 2.8 ms beside 5.8 + 1.1 ms looked like 3 buckets faster while the verdict
    said 1.33x one bucket faster; each setting's line now prints backward()'s median total, what the verdict pairs,
    and says it is not the sum of the split's two medians."""
    import matplotlib

    matplotlib.use("Agg")
    from lab_utils.labs.lab03 import buckets

    one = [_round(0, 0.004 + i * 1e-4, 0.007 + i * 3e-4, [(0.0045, 0.007 + i * 3e-4)]) for i in range(6)]
    many = [_round(0, 0.005, 0.0062 + i * 1e-4, [(0.001, 0.002), (0.003, 0.004), (0.0051, 0.0062 + i * 1e-4)])
            for i in range(6)]
    fig, lines = buckets.timeline({"default": one, "bucket_cap_mb=0.05": many}, comm_ms=3.9, table_batch=128, batch=64)
    # a learner walk: the overlap's lines first, section 6's figure beside this one last
    default, small, _, pair = (" ".join(line.split()) for line in lines)
    assert default.startswith("default, the median of 5 rounds: backward() 7.9 ms = computing 4.3 ms until the "
                              "last gradient + 3.6 ms of all-reduce after it"), default
    assert pair.startswith("the same gradients' all-reduce, from hand-over to sum as section 6 times it: 3.9 ms"), pair
    assert "backward() 6.5 ms = computing 5.0 ms" in small, small  # 5.0 + 1.5 = 6.5
    # learner s13r6c: medians of each part (8.3 beside 5.8 + 0.9) did not add up; the median round's parts do
    uneven = [_round(0, 0.001, 0.002, []), _round(0, 0.002, 0.010, []), _round(0, 0.008, 0.011, [])]
    uneven_line = " ".join(buckets.line("default", uneven).split())  # totals 2, 10, 11 ms: the median round, 10
    assert "backward() 10.0 ms = computing 2.0 ms until the last gradient + 8.0 ms of all-reduce" in uneven_line, \
        uneven_line
    assert "need not add up" not in uneven_line
    assert "overlap: 2 of 3 bucket(s) handed over before the last gradient was ready, and" in small, small
    assert "of the time a bucket was in flight lay before it" in small, small
    assert len(fig.axes) == 2 and fig.axes[1].get_xlabel().startswith("ms since loss.backward() began\n")
    _, with_others = buckets.timeline({"default": one}, comm_ms=3.9, table_batch=128, batch=64,
                                      others=[{"default": one}])
    assert "3.4 ms here" in with_others[1] and "within the 25%" in " ".join(with_others[1].split()), with_others
    # learner s13r7c: the title said 4.4 ms where the line printed 9.0 - 4.5 = 4.5; both now print the line's figures
    assert fig.axes[0].get_title().endswith("4.3 ms computing + 3.6 ms all-reduce after it"), fig.axes[0].get_title()
    assert fig.axes[1].get_xlim()[0] == 0  # the axis starts where backward() began
    # learner s13r7c: small buckets slowed the computing 4.5 -> 8.8 ms and no line said so
    slowed = " ".join(lines[2].split())
    assert slowed.startswith("computing until the last gradient: 4.3 ms with default, 5.0 ms with "
                             "bucket_cap_mb=0.05, with a bucket all-reducing during 2.0 ms of it"), slowed
    assert "did not slow" in slowed  # 5.0 is within 25 % of 4.3
    plain = _round(0, 0.0045, 0.009, [(0.0045, 0.009)])
    slow = _round(0, 0.0088, 0.0102, [(0.001, 0.004), (0.005, 0.0085), (0.0089, 0.0102)])
    said = " ".join(buckets.slowdown_line(("1 bucket", plain), ("3 buckets", slow)).split())
    assert said == ("computing until the last gradient: 4.5 ms with 1 bucket, 8.8 ms with 3 buckets, with a bucket "
                    "all-reducing during 6.5 ms of it: the overlap slowed the computing by 4.3 ms (the next cell's theory "
                    "says why)"), said
    alone = _round(0, 0.0045, 0.009, [(0.0046, 0.009)])
    assert "no all-reduce ran before the last gradient" in buckets.slowdown_line(("a", plain), ("b", alone))
    assert buckets.overlap(many[0])[:2] == (2, 3) and buckets.overlap(_round(0, 1, 1, []))[2] == 0.0


def test_the_measured_compute_says_which_side_of_theory_it_fell_and_why():
    """Learner s12r3c, cell 26: one rank alone took 1.38 ms against theory's 1.12 ms, the opposite of what 'threads
    split small operators less than perfectly' led them to expect, and no line said why. Either side names its cause."""
    from lab_utils.labs.lab03 import versus_one

    above = versus_one.compute_line(alone_ms=1.38, theory_ms=1.12, one_ms=1.12)
    assert ("above theory's 1.12 ms (lab 01's whole step), before any all-reduce: half the batch did not halve the "
            "step, since its fixed costs" in above and "room" not in above), above
    other = versus_one.compute_line(alone_ms=1.38, theory_ms=0.56, one_ms=1.12)
    assert "above theory's 0.56 ms, before" in other and "longer than lab 01's whole step (1.12 ms)" in other, other
    below = versus_one.compute_line(alone_ms=0.9, theory_ms=1.12, one_ms=1.12)
    assert "below theory's 1.12 ms" in below and "less than perfectly" in below and "fixed costs" not in below, below
    faster = versus_one.verdict_line(one_ms=1.12, ddp_ms=1.0, predicted_ms=1.58, world_size=2, compute_gap_ms=-0.3,
                                     unaccounted_ms=0.1)
    assert "0.63x faster than predicted" in " ".join(faster.split()) and "0.30 ms less" in " ".join(faster.split())


def test_the_summary_lines_read_section_6_once_and_refuse_under_load(tmp_path):
    """The summary cell's plumbing moved into speed.speed_summary_lines (issue 51's structure): section 6's figures,
    then what two ranks buy with sections 4 and 6 read together; a busy section 6 prints its refusal once, no ratio."""
    from lab_utils.conditions import Load
    from lab_utils.labs.lab03 import speed

    quiet = Load(5.0, 2, 2.0, 0.0, 0.0)
    reading = speed.report(_fake_speed(S11R2C_RATES), 2, _fake_hw(), tmp_path, 0.25)
    lines = [" ".join(line.split()) for line in speed.speed_summary_lines(
        reading, 2, 2, 0.25, recipe_rate=28644, lab01_rate=56951, lab01_threads=2, load=quiet)]
    assert lines[0].startswith("speed (medians of 2 launches each; the DDP and Horovod-style launches alternating): "
                               "2 DDP ranks 1.55x one thread"), lines
    assert "digits CNN 0.50x (slower)" in lines[1] and "digits CNN: ranks lose" in lines[1], lines
    other = speed.speed_summary_lines(reading, 2, 2, 0.25, recipe_rate=28644, lab01_rate=56951, lab01_threads=1,
                                      load=quiet)
    assert "digits" not in other[1], other  # lab 01 on another thread count: not the same comparison
    busy = speed.report(_fake_speed(S11R2C_RATES), 2, _fake_hw(), tmp_path, 0.25, unreadable="other programs used 1.5")
    refused = speed.speed_summary_lines(busy, 2, 2, 0.25, recipe_rate=28644, lab01_rate=56951, lab01_threads=2,
                                        load=quiet)
    assert len(refused) == 1, refused
    crowded = Load(5.0, 2, 0.5, 1.5, 0.0)
    crowded_lines = speed.speed_summary_lines(reading, 2, 2, 0.25, recipe_rate=28644, lab01_rate=56951,
                                              lab01_threads=2, load=crowded)
    assert "not measurable here" in " ".join(crowded_lines[0].split()) and "1.55x" not in crowded_lines[0]


def test_the_state_dict_numbers_every_module_as_cell_46_says():
    """Learner s12r4c, finding 11: the spec table numbers the second conv 2, the error names "3.weight"; cell 46 says
    the keys number the nn.Sequential's modules, each activation one of its own (so the second conv is 3)."""
    import json
    from pathlib import Path

    model = spec.build_torch(spec.cnn2d_2layer_fullconnected_2layer(10), (1, 8, 8))
    assert list(model.state_dict())[:4] == ["0.weight", "0.bias", "3.weight", "3.bias"]
    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    (text,) = ["".join(c["source"]) for c in nb["cells"] if "".join(c["source"]).startswith("### Saving a checkpoint")]
    assert "the second convolution, `2` in the spec table, is `3` here" in " ".join(text.split()), text


def test_the_versus_one_parts_add_up_as_printed():
    """Learner s13r5c, finding 5: '1.16 ms compute + 1.18 ms all-reduce = 2.35 ms' and '1.75 + 1.18 + 0.90 = 3.84'
    (the quiet run's figures): every printed sum, and the verdict's 'took X ms more', holds to its last digit."""
    from lab_utils.labs.lab03 import versus_one

    said = " ".join(" ".join(versus_one.lines(ddp_rate=16682.4, allreduce_ms=1.1849, batch=64, world_size=2,
                                              lab01_rate=54952.3, alone_rate=32 / 1.7549e-3, lab01_threads=2,
                                              rank_threads=1)).split())
    sums = [re.search(rf"{label}: (.*?)= (\d+\.\d\d) ms", said).groups() for label in ("prediction", "measured")]
    for parts, total in sums:
        terms = re.findall(r"(?:([+-]) )?(\d+\.\d\d) ms", parts)
        assert len(terms) >= 2, parts
        assert round(sum(float(v) * (-1 if sign == "-" else 1) for sign, v in terms), 2) == float(total), (parts, total)
    theory, alone = re.search(r"compute alone: one rank's (\d+\.\d\d) ms is above theory's (\d+\.\d\d)", said).groups()[::-1]
    more = re.search(r"the compute took (\d+\.\d\d) ms more", said).group(1)
    assert round(float(alone) - float(theory), 2) == float(more), said


def test_the_learning_rate_prose_claims_what_the_run_computes():
    """Learner s13r5c, finding 11: the prose said lr x N gets 'most of the way back', the verdict tests only 'more
    accurate'; the prose says 'part of the way', and the cell prints how much of one device's lead was won back."""
    import nbformat

    from pathlib import Path

    cells = nbformat.read(Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb", 4).cells
    prose = " ".join(c.source.replace("\n", " ") for c in cells if c.cell_type == "markdown")
    assert "most of the way back" not in prose and "get part of the way back" in prose
    (cell,) = [c.source for c in cells if "lr_verdict = measure.verdict(" in c.source]
    assert "won back {back * 100:.1f} of the {gap * 100:.1f} accuracy points" in cell and "if gap > 0:" in cell


def test_the_one_process_rows_notes_name_lab_01s_figure_and_how_far_apart(tmp_path, monkeypatch):
    """Learner s13r6c, finding 1: cell 88 promised that each note names the other lab and how far apart the two are;
    lab 01's 2-thread 10,776 against this lab's 9,018 (1.19x, within the 25% the table lets pass silently) was never
    shown. The launched note now names lab 01's figure, read from the results the run wrote; where the table's own
    note names it (further apart than the repeats allow) it is not said twice."""
    from lab_utils import conditions, detectors, measure, workloads
    from lab_utils.labs.lab03 import speed
    from lab_utils.launch import launched_not_kernel

    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    for variant, rate, threads in (("1 process x 1 thread", 6157.3, 1), ("1 process x 2 threads", 10775.9, 2)):
        measure.record(measure.Result(lab="01", framework="torch", strategy="single-process", variant=variant,
                                      world_size=1, device="cpu", batch_size=256, threads=threads, samples_per_s=rate,
                                      wall_s=256 / rate, repeats=8, spread=0.07, workload=workloads.STEP_3CONV.name),
                       tmp_path)
    rates = {"1 process x 1 thread": 5935.1, "2 ranks, DDP": 9221.6, "2 ranks, Horovod-style": 7453.9,
             "1 process x 2 threads": 9018.4}  # the quiet run of f02a368, cell 59
    reading = speed.report(_fake_speed(rates, spread=0.34), 2, _fake_hw(), tmp_path, 0.25)
    rows = {r.variant: r for r in speed.results(reading, _fake_speed(rates, spread=0.34), 2, "cpu",
                                                [detectors.condition(launched_not_kernel())], tmp_path)}
    two = " ".join(detectors.conditions_of(rows["1 process x 2 threads"].flags))
    assert two == f"{launched_not_kernel()}; lab 01 measured 10,776 in its kernel, 1.19x apart", two
    assert "lab 01 measured 6,157 in its kernel, 1.04x apart" in " ".join(
        detectors.conditions_of(rows["1 process x 1 thread"].flags))
    assert not detectors.conditions_of(rows["2 ranks, DDP"].flags)  # no lab 01 row measures ranks
    text = measure.record(list(rows.values()), tmp_path, brief_notes=True)
    assert " ".join(text.split()).count("lab 01 measured 10,776") == 1, text
    # further apart than the repeats allow: the table's own line names lab 01's figure, the note does not repeat it
    far = speed.report(_fake_speed(dict(rates, **{"1 process x 2 threads": 7200.0}), spread=0.05), 2, _fake_hw(),
                       tmp_path, 0.25)
    assert speed.beside_lab01("1 process x 2 threads", 7200.0, 0.05, tmp_path) == "", far


def test_a_launched_note_naming_lab_01s_figure_still_reads_as_launched():
    """The results report tells launched rows from kernel rows by their condition note; lab 03's note now adds lab
    01's figure after '; ' (learner s13r6c) and must still read as launched; lab 05's other wording is unchanged."""
    from lab_utils import detectors, measure
    from lab_utils.launch import launched_not_kernel
    from lab_utils.report.compared import timed_launched

    def row(note):
        return measure.Result(lab="03", framework="torch", strategy="single-process", variant="1 process x 1 thread",
                              world_size=1, device="cpu", batch_size=256, samples_per_s=6000.0, wall_s=0.04,
                              workload="w", flags=[detectors.condition(note)])

    assert timed_launched([row(f"{launched_not_kernel()}; lab 01 measured 6,157 in its kernel, 1.04x apart")])
    assert timed_launched([row(launched_not_kernel())])
    assert not timed_launched([row(f"{launched_not_kernel()}, taking turns with a TensorFlow process")])


def test_the_buffer_copy_theory_gets_its_own_computed_line():
    """Learner s13r6c, finding 13: cell 41's theory (ranks further apart without the buffer copy) had no line of its
    own; cell 43 now computes it from the two runs' running-mean gaps."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    (cell,) = ["".join(c["source"]) for c in nb["cells"] if "def rank_gap(" in "".join(c["source"])]
    assert "if not_copied > copied" in cell and "as theory expects" in cell and "against theory" in cell, cell


def test_the_unaccounted_part_is_measured_as_compute_lost_beside_the_other_rank():
    """Learner s13r7c, cell 26: '1.11 ms unaccounted (this lab does not say where it goes)', a third of the step. The
    run times a rank's compute while both ranks run (each step minus its own all-reduce, median); the lines split the
    step into compute alone + compute lost beside the other rank + all-reduce + what medians leave, adding up."""
    from lab_utils.ddp import AllReduceTimer
    from lab_utils.labs.lab03 import versus_one

    timer = AllReduceTimer(None, torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))
    timer.seconds_per_step = [0.001] * 4 + [0.0009, 0.0008, 0.0007]
    assert timer.compute_ms([0.004] * 4 + [0.0035, 0.0034, 0.0036], warmup=4) == pytest.approx(2.6)
    assert timer.compute_ms([0.004]) is None  # steps that do not pair with the all-reduces: not timed
    lines = versus_one.lines(ddp_rate=64 / 3.51e-3, allreduce_ms=0.86, batch=64, world_size=2,
                             lab01_rate=64 / 1.51e-3, alone_rate=32 / 1.54e-3, lab01_threads=2, beside_ms=2.49)
    text = "\n".join(lines)
    assert "unaccounted" not in text and "does not say" not in text and "computes 1/2 of the batch so," not in text
    measured = text.split("measured:")[1].split("compute alone:")[0]
    parts = [float(line.split("ms")[0].strip(" +-=")) * (-1 if line.strip().startswith("-") else 1)
             for line in measured.split("\n") if "ms" in line]
    assert parts[:3] == [1.54, 0.95, 0.86] and sum(parts[:4]) == pytest.approx(parts[4]) and parts[4] == 3.51, parts
    assert "0.95 ms more beside the other rank" in " ".join(lines[0].split()), lines[0]
    assert all(len(line) <= 100 for line in text.split("\n")), text
    # a busy run's rank alone can be slower than beside the other: the sign is said, never '+ -1.90'
    busy = "\n".join(versus_one.lines(ddp_rate=64 / 3.69e-3, allreduce_ms=2.0, batch=64, world_size=2,
                                      lab01_rate=64 / 1.51e-3, alone_rate=32 / 3.49e-3, lab01_threads=2,
                                      beside_ms=1.59))
    assert "- 1.90 ms less compute beside the other rank" in busy and "+ -" not in busy, busy


def test_section_6_has_one_limit_for_too_far_apart_and_its_noise_line_says_steps():
    """Learner s13r7c, finding 8: '25 %' (two medians), 'spread more than 25 % over their repeats' (a row's steps)
    and 2x (lab 01) read as three thresholds; section 6 defines the one limit once, and the noise line names what
    scattered: the steps. Finding 7: the Horovod row's 'each paying a call's fixed cost' was never measured, and
    finding 12: 'pin' is defined where it is used."""
    import json
    from pathlib import Path

    from lab_utils.labs.lab03 import speed

    reading = speed.report(_fake_speed(S11R2C_RATES, spread=0.5), 2, _fake_hw(), None, 0.25)
    noise = " ".join(next(line for line in reading.lines if line.startswith("noise")).split())
    assert "spread more than 25 % over their steps" in noise and "repeats" not in noise, noise
    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    text = " ".join(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").split())
    assert "one limit for \"too far apart\", **25 %**" in text and "get a wider one" in text, "cell 58"
    assert "fixed cost" not in text.split("Horovod-style edit makes one per tensor")[1][:80]
    assert "**pin** a rank to a core (restrict the process to that one core" in text


def test_buckets_that_overlap_each_other_count_their_time_once():
    """A learner added the bucket bars' lengths and got more all-reduce time than backward() took: buckets overlap
    each other, so the lines count the time some bucket was in flight, and the figure says the bars do not add up."""
    import matplotlib

    matplotlib.use("Agg")
    from lab_utils.labs.lab03 import buckets

    step = _round(0, 0.006, 0.007, [(0.001, 0.004), (0.002, 0.005), (0.0055, 0.007)])  # the first two overlap
    assert round(buckets.hidden_ms(step), 6) == 4.5  # 1-5 ms and 5.5-6 ms, not 3 + 3 + 0.5
    assert buckets.hidden_ms(step) <= 1e3 * (step["computed"] - step["start"])  # never more than the computing
    early, count, share = buckets.overlap(step)
    assert (early, count) == (3, 3) and round(share, 6) == round(4.5 / 5.5, 6)  # 5.5 ms in flight, 4.5 before 6 ms
    assert buckets.in_flight_s([]) == 0.0
    said = " ".join(buckets.slowdown_line(("1 bucket", _round(0, 0.004, 0.007, [(0.004, 0.007)])),
                                          ("3 buckets", step)).split())
    assert "with a bucket all-reducing during 4.5 ms of it" in said, said
    fig, _ = buckets.timeline({"default": [step, step]}, comm_ms=3.0, table_batch=128, batch=64)
    assert "do not add up" in fig.axes[0].get_xlabel()
    assert [line.get_xdata()[0] for line in fig.axes[0].get_lines()] == [6.0, 7.0]  # last gradient, backward() end


def test_the_bucket_verdicts_figure_is_said_beside_the_timelines_medians():
    """A learner saw the timeline's two backward() medians (a 1.06x ratio) a few lines from the verdict's 1.43x for
    the same comparison: the line under the verdict names both figures and why the verdict's is the comparison's."""
    from lab_utils import measure
    from lab_utils.labs.lab03 import buckets

    # paired rounds where one bucket wins every pair by 1.5x, while the medians of each setting lie 1.1x apart
    one_ms = [5, 6, 7, 10, 11, 12, 20]
    many_ms = [7.5, 9, 10.5, 15, 12.1, 13.2, 22]
    rounds = {"default": [_round(0, t / 2e3, t / 1e3, []) for t in [1] + one_ms],
              "small": [_round(0, t / 2e3, t / 1e3, []) for t in [1] + many_ms]}
    v = measure.verdict([t / 1e3 for t in one_ms], [t / 1e3 for t in many_ms], claim="one bucket faster",
                        expected="one bucket faster", lab="03")
    said = " ".join(buckets.medians_line(v, rounds, faster="default", slower="small").split())
    medians = f"{12.1 / 10:.2f}x"
    assert said.startswith("backward() above, 10.0 vs 12.1 ms: the two medians give " + medians), said
    assert f"the verdict {v.ratio:.2f}x" in said and "the comparison's figure is the verdict's" in said, said
    same = {"default": rounds["default"], "small": [_round(0, t / 2e3, t * 1.5 / 1e3, []) for t in [1] + one_ms]}
    alike = measure.verdict([t / 1e3 for t in one_ms], [t * 1.5 / 1e3 for t in one_ms], claim="c", expected="e",
                            lab="03")
    assert buckets.medians_line(alike, same, faster="default", slower="small") == ""  # one figure: nothing to say


def test_lab01s_step_is_named_by_the_ranks_global_batch():
    """A learner read 'batch 64' for one device here and 'one device's batch 32' in section 5: each line now says
    which batch it is."""
    from lab_utils.labs.lab03 import versus_one

    first = " ".join(versus_one.lines(ddp_rate=16000, allreduce_ms=1.5, batch=64, world_size=2,
                                      lab01_rate=37000)[1].split())  # the line after the verdict
    assert "batch 64 (the ranks' global batch, 2 x 32 a rank)" in first, first


def test_the_horovod_style_edit_is_not_said_to_be_what_horovod_does():
    """A learner read 'Horovod-style' as Horovod itself: the lab says its edit is one all-reduce per parameter after
    the backward pass, and that real Horovod overlaps it with the backward pass and fuses small tensors."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "solutions" / "03_ddp.ipynb").read_text())
    text = " ".join(" ".join("".join(c["source"]) for c in nb["cells"]).split())
    assert "Horovod's DistributedOptimizer does this in step()" not in text
    assert "**Tensor Fusion**" in text and "one call per parameter" in text
    assert "one device's batch" not in text and "Lab 01's batch and rate" not in text
