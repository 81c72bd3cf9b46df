"""Lab 12's exercises: the right answers get full marks; each plausible wrong answer scores 0 with its message."""
import contextlib
import re

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.algorithms import Join

from lab_utils import exercises
from answers import grade, named


def _first_difference(text):
    return text.split("first difference: ")[1]


@named("hang_culprit")
def culprit_right(text):
    clauses = _first_difference(text).split(": ")[0].split("; ")
    ops = [re.search(r"is in (\w+) #", c).group(1) for c in clauses]
    odd = next(i for i, op in enumerate(ops) if ops.count(op) == 1)
    waited = next(op for op in ops if ops.count(op) > 1)
    return odd, waited, re.search(r" at (.+)$", clauses[odd]).group(1)


@named("hang_culprit")
def culprit_rank_zero(text):
    _, op, line = culprit_right(text)
    return 0, op, line


@named("hang_culprit")
def culprit_its_own_op(text):
    rank, _, line = culprit_right(text)
    return rank, "barrier", line


@named("hang_culprit")
def culprit_others_line(text):
    rank, op, _ = culprit_right(text)
    other = _first_difference(text).split(": ")[0].split("; ")[(rank + 1) % 3]
    return rank, op, re.search(r" at (.+)$", other).group(1)


@named("hang_culprit")
def culprit_rank_as_string(text):
    rank, op, line = culprit_right(text)
    return str(rank), op, line


@named("hang_culprit")
def culprit_differs_from_rank_zero(text):  # H5: the first rank whose call differs from rank 0's
    clauses = _first_difference(text).split(": ")[0].split("; ")
    ops = [re.search(r"is in (\w+) #", c).group(1) for c in clauses]
    odd = next(i for i, op in enumerate(ops) if op != ops[0])
    return odd, ops[0], re.search(r" at (.+)$", clauses[odd]).group(1)


@named("hang_culprit")
def culprit_in_barrier(text):  # H8: the rank that is in barrier
    clauses = _first_difference(text).split(": ")[0].split("; ")
    odd = next(i for i, c in enumerate(clauses) if "in barrier" in c)
    waited = re.search(r"is in (\w+) #", clauses[(odd + 1) % len(clauses)]).group(1)
    return odd, waited, re.search(r" at (.+)$", clauses[odd]).group(1)


@named("hang_culprit")
def culprit_file_line_rows_only(text):  # learner s11f: reads the rows, and only places written file:line
    rows = re.findall(r"^(\d+)\s*\|[^|]*\|\s*(\w+)[^|]*\|\s*(\S+:\d+)", text, re.M)
    ops = [o for _, o, _ in rows]
    odd = [r for r in rows if ops.count(r[1]) == 1][0]
    return int(odd[0]), [o for o in ops if o != odd[1]][0], odd[2]


def test_hang_culprit_reads_a_notebook_cells_place_as_the_table_writes_it():
    """Learner s11f, lab 12 finding 8: a reading that understands only 'file:NN' passed, though the notebook's own
    tables write 'cell [n], line k'. One case's lines are now a notebook cell's."""
    from lab_utils.labs.lab12 import debugging, exercises as lab12

    cases = lab12._table_cases(__import__("random").Random(0))
    (cell,) = [c for c in cases if c["cell"]]
    table = debugging.hang_table(cell)
    assert f"cell [{cell['cell']}], line {cell['line_odd']}" in table and "train.py" not in table
    score, message = grade(culprit_file_line_rows_only)
    assert score == 0.0 and "notebook cell" in message, message


def test_hang_culprit_wrong_readings_are_named():
    score, message = grade(culprit_rank_as_string)
    assert score == 0.0 and "is a str: give it as an int" in message, message
    score, message = grade(culprit_differs_from_rank_zero)
    assert score == 0.0 and "here rank 0 is the odd one" in message, message
    result = exercises.check(culprit_in_barrier)
    assert not result and "not in barrier" in result.message, result.message


def test_reading_a_hang_table():
    assert grade(culprit_right)[0] == 1.0
    assert "one of the ranks that agree" in grade(culprit_rank_zero)[1] or "not the rank" in grade(culprit_rank_zero)[1]
    assert grade(culprit_rank_zero)[0] == 0.0
    assert grade(culprit_its_own_op) == (0.0, "barrier is where the odd rank is now; the collective it skipped is the "
                                              "one every other rank waits in")
    score, message = grade(culprit_others_line)
    assert score == 0.0 and "other ranks' line" in message


@named("parameters_without_gradient")
def unused_right(model, x):
    model.zero_grad()
    model(x).sum().backward()
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


@named("parameters_without_gradient")
def unused_with_frozen(model, x):
    model(x).sum().backward()
    return [n for n, p in model.named_parameters() if p.grad is None]


@named("parameters_without_gradient")
def unused_with_zero(model, x):
    model(x).sum().backward()
    return [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]


@named("parameters_without_gradient")
def unused_before_backward(model, x):
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is not None]


@named("parameters_without_gradient")
def unused_without_clearing(model, x):
    model(x).sum().backward()
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


@named("parameters_without_gradient")
def unused_without_backward(model, x):
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


@named("parameters_without_gradient")
def unused_as_tensors(model, x):
    model.zero_grad()
    model(x).sum().backward()
    return [p for p in model.parameters() if p.requires_grad and p.grad is None]


@named("parameters_without_gradient")
def unused_clearing_to_zeros(model, x):  # P2: cleared, but to zeros
    model.zero_grad(set_to_none=False)
    model(x).sum().backward()
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


@named("parameters_without_gradient")
def unused_non_scalar_backward(model, x):  # learner s12r4f: backward on the (3, n) output, not one number
    model.zero_grad()
    model(x).backward()
    return [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


def test_a_backward_on_a_non_scalar_output_is_told_how_to_get_one_number():
    from lab_utils.exercises import check

    result = check(unused_non_scalar_backward)
    assert not result and "grad can be implicitly created only for scalar outputs" in result.message, result.message
    assert "backward needs one number, such as model(x).sum()" in result.message, result.message


def test_finding_the_parameter_without_gradient():
    score, message = grade(unused_clearing_to_zeros)
    assert score == 0.0 and "set_to_none=False" in message and "never None" in message, message
    assert grade(unused_right)[0] == 1.0
    assert grade(unused_with_frozen)[0] == 0.0 and "frozen" in grade(unused_with_frozen)[1]
    # learner s6C: the check draws models of its own; a name that is not cell 34's must say whose it is
    assert grade(unused_with_frozen)[1].startswith("in the check's model, ")
    assert grade(unused_with_zero)[0] == 0.0 and "zero, but it exists" in grade(unused_with_zero)[1]
    assert grade(unused_before_backward) == (0.0, "nothing listed: run forward and backward first, then look for "
                                                  "p.grad is None")
    score, message = grade(unused_without_clearing)
    assert score == 0.0 and "gradients from an earlier step" in message
    score, message = grade(unused_without_backward)
    assert score == 0.0 and "before any backward" in message
    assert grade(unused_as_tensors) == (0.0, "return the parameters' names (str, as named_parameters gives them), "
                                             "not the tensors")


def _step(model, optimizer, x, y):
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()


@named("train_all")
def train_all_join(model, batches, optimizer):
    with Join([model], divide_by_initial_world_size=False):
        for x, y in batches:
            _step(model, optimizer, x, y)


@named("train_all")
def train_all_balanced(model, batches, optimizer):
    import torch.distributed as dist

    steps = torch.tensor([len(batches)])
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    for x, y in batches[:int(steps)]:
        _step(model, optimizer, x, y)


@named("train_all")
def train_all_join_divided(model, batches, optimizer):
    with Join([model]):
        for x, y in batches:
            _step(model, optimizer, x, y)


@named("train_all")
def train_all_hangs(model, batches, optimizer):
    for x, y in batches:
        _step(model, optimizer, x, y)


@named("train_all")
def train_all_wrapped_again(model, batches, optimizer):  # J7
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(model)
    with Join([model], divide_by_initial_world_size=False):
        for x, y in batches:
            _step(model, optimizer, x, y)


@named("train_all")
def train_all_wrapped_module_again(model, batches, optimizer):  # J8: a second DDP over the inner module
    from torch.nn.parallel import DistributedDataParallel as DDP

    again = DDP(model.module)
    with Join([again], divide_by_initial_world_size=False):
        for x, y in batches:
            _step(again, optimizer, x, y)


@named("train_all")
def train_all_join_per_batch(model, batches, optimizer):  # J4: Join around each step, not the loop
    for x, y in batches:
        with Join([model], divide_by_initial_world_size=False):
            _step(model, optimizer, x, y)


@named("train_all")
def train_all_join_optimizer(model, batches, optimizer):  # learner s12r4f: the optimizer passed to Join too
    with Join([model, optimizer], divide_by_initial_world_size=False):
        for x, y in batches:
            _step(model, optimizer, x, y)


@named("train_all")
def train_all_join_inner_module(model, batches, optimizer):  # learner s9h: Join over model.module, not the DDP model
    with Join([model.module], divide_by_initial_world_size=False):
        for x, y in batches:
            _step(model, optimizer, x, y)


@named("train_all")
def train_all_join_last_batch(model, batches, optimizer):  # learner s13r6f: Join around the last batch only
    for i, (x, y) in enumerate(batches):
        with Join([model], divide_by_initial_world_size=False) if i == len(batches) - 1 else contextlib.nullcontext():
            _step(model, optimizer, x, y)


@pytest.fixture
def hangs_stopped_sooner(monkeypatch):
    """A hang is stopped after 12 s, not the exercise's 25 s: these answers are known to hang (the ranks are in their
    collective within a few seconds), so the wait proves nothing more past that."""
    from lab_utils.labs.lab12 import exercises as lab12

    monkeypatch.setattr(lab12, "UNEVEN_TIMEOUT_S", 12)


@pytest.mark.slow
def test_train_all_wrapping_again_and_hanging_are_named(hangs_stopped_sooner):
    result = exercises.check(train_all_wrapped_again)
    assert not result and "wrapped the model in DDP again (DDP(model))" in result.message, result.message
    result = exercises.check(train_all_wrapped_module_again)  # its weights equal one process: only the wrapper tells
    assert not result and "wrapped the model in DDP again (DDP(model.module))" in result.message, result.message
    assert "(rank " in result.message and "(in rank" not in result.message, result.message  # s13r5f: no odd tail
    result = exercises.check(train_all_hangs)  # J6: a hang is said to be one, not "raised"
    assert not result and "did not finish: it hung, nothing raised" in result.message, result.message
    assert "first difference" in result.message and " raised " not in result.message.split("Hint")[0], result.message
    # learner s10c: the message was cut mid-sentence ("or waits in a…"); it names the one cause here, whole
    assert "…" not in result.message and "for a rank that left the loop. Hint" in result.message, result.message
    # learner s9h: a Join per batch hung and was told only "the ranks called different collectives"; Join over
    # model.module raised a bare AttributeError ('Sequential' object has no attribute 'join_hook'): each is named
    result = exercises.check(train_all_join_per_batch)
    assert not result and "must wrap the whole loop, not each step" in result.message, result.message
    # learner s13r6f: Join around the last batch only aborted in gloo ('op.preamble.length <= op.nbytes'): named
    result = exercises.check(train_all_join_last_batch)
    assert not result and "step(s) had run outside it" in result.message, result.message
    assert "from the first batch" in result.message and "Hint:" not in result.message, result.message
    result = exercises.check(train_all_join_inner_module)
    assert not result and "the DDP model you were given has the join hooks, not model.module" in result.message, \
        result.message
    assert "join_hook" not in result.message
    result = exercises.check(train_all_join_optimizer)  # learner s12r4f: 'not model.module' beside an optimizer
    assert not result and "Join got a SGD, which cannot join" in result.message, result.message
    assert "an optimizer needs none" in result.message and "model.module" not in result.message, result.message


@pytest.mark.slow
def test_uneven_data_in_real_ranks():
    assert grade(train_all_join)[0] == 1.0
    score, message = grade(train_all_balanced)  # the lesson's fix, copied: it drops the batch the exercise keeps
    assert score == 0.0 and "extra batch was dropped" in message
    score, message = grade(train_all_join_divided)
    # learner s12r4f: the message handed out the whole line; it names the two conventions, not the keyword's value
    assert score == 0.0 and "divided by the initial world size (DDP's default" in message, message
    assert "weighs every step the same" in message and "divide_by_initial_world_size=False" not in message
    assert "divide_by_initial_world_size=False" not in grade(train_all_balanced)[1]
    from lab_utils.labs.lab12 import exercises as lab12

    with pytest.MonkeyPatch.context() as patch:  # a known hang: stopped sooner, as above
        patch.setattr(lab12, "UNEVEN_TIMEOUT_S", 12)
        score, message = grade(train_all_hangs)
    assert score == 0.0 and "did not finish" in message and "first difference: rank" in message  # one line, no table


def test_the_uneven_harness_lives_outside_the_exercise_file_and_the_lab_says_so():
    """Learner s11f, lab 12 finding 4 (and 3): Bug 3's table named the harness's barrier 'exercises.py:26', and the
    prose sent the learner to the exercise file; its wait of hang_s + 4 was unexplained."""
    import os

    import nbformat

    from lab_utils.labs.lab12 import exercises as lab12, harness

    assert os.path.basename(harness.uneven_worker.__code__.co_filename) == "harness.py"  # the table: harness.py:NN
    assert lab12.uneven_worker is harness.uneven_worker
    cells = nbformat.read("solutions/12_debugging_hangs.ipynb", 4).cells
    prose = next(c.source for c in cells if c.source.startswith("### Bug 3"))
    assert "exercises.py" not in prose and "`harness.py:NN`" in prose
    code = next(c.source for c in cells if c.cell_type == "code" and "args=(train_plain, case)" in c.source)
    assert "timeout=hang_s + ddp_start_s" in code and "for DDP to start" in code


def test_the_unused_parameter_models_layers_are_printed_before_the_exercise():
    """Learner s11r2f, lab 12 finding 4: the exercise hinges on unused, frozen and zeroed layers, but the model was
    never shown. The lab prints each layer's role (from the model itself) before the exercise cell."""
    import nbformat

    from lab_utils.labs.lab12.debugging import branchy_layers

    case = {"seed": 0, "unused": "right", "frozen": "stem", "zeroed": "head"}
    text = branchy_layers(case)
    rows = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert list(rows) == ["stem", "left", "right", "head"]
    assert "frozen" in rows["stem"] and "unused" in rows["right"] and "zeroed" in rows["head"]
    assert "used: gets a gradient" in rows["left"]
    assert "frozen" in branchy_layers({**case, "frozen": "left"}).splitlines()[2]  # read from the case, not fixed
    assert max(len(line) for line in text.splitlines()) <= 100
    cells = nbformat.read("solutions/12_debugging_hangs.ipynb", 4).cells
    shown = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "print(branchy_layers(" in c.source)
    exercise = next(i for i, c in enumerate(cells) if c.source.startswith("def parameters_without_gradient"))
    assert shown < exercise
    assert "".join(o.get("text", "") for o in cells[shown].outputs).rstrip("\n") == text  # the committed output


def test_lab12_prose_names_what_its_output_shows():
    """Learner s11r2f, lab 12 findings 2-3: the summary named monitored_barrier for a dead rank (the lab showed the
    launcher's table saying 'exited'), and Bug 5 quoted a gloo hint the output never prints; Bug 2's arithmetic is a
    table (finding 1)."""
    import nbformat

    cells = nbformat.read("solutions/12_debugging_hangs.ipynb", 4).cells
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "remote worker hanging" not in prose
    summary = next(c.source for c in cells if c.source.startswith("**What to remember.**"))
    assert "A dead rank: the launcher's table says *exited*" in summary and "a late one: `monitored_barrier`" in summary
    bug2 = next(c.source for c in cells if c.source.startswith("### Bug 2"))
    assert "| floats (bytes) | 4 (16) | 5 (20) |" in bug2


def test_a_message_that_names_the_mistake_gets_no_hint_after_it():
    """Learner s12r3f, lab 12: a FAIL that had named the mistake appended the exercise's whole 'Hint: ...'."""
    for wrong, said in ((culprit_differs_from_rank_zero, "here rank 0 is the odd one"),
                        (unused_with_frozen, "is frozen"), (unused_with_zero, "gradient is zero, but it exists")):
        result = exercises.check(wrong)
        assert not result and said in result.message and "Hint:" not in result.message, result.message
