"""Lab 07's exercises: the solutions pass and score 1; each plausible wrong answer fails its check and scores 0."""
import random
import textwrap

import pytest

from lab_utils.exercises import check, get, to_plain
from lab_utils.labs.lab07 import exercises as lab07
from lab_utils.labs.lab07 import lesson as lesson07
from lab_utils.variants import source_of
from test_judges import solution_source


def learner(source: str, name: str):
    """A function defined as the grader's probe defines it: the exercise's set-up, then the learner's source."""
    namespace = {"__name__": "__learner__"}
    exec(get(name).setup, namespace)
    exec(textwrap.dedent(source), namespace)
    return namespace[name]


def edited(source: str, name: str, edits: dict):
    """`source` with each old text (found exactly once) replaced by the new, defined as the grader's probe would."""
    for old, new in edits.items():
        assert source.count(old) == 1, f"{old!r} occurs {source.count(old)} times"
        source = source.replace(old, new)
    return learner(source, name)


def score(fn, seed: int = 7) -> float:
    exercise = get(fn.__name__)
    inputs = exercise.cases(random.Random(seed))
    return exercise.score(to_plain(exercise.run(fn, inputs)), inputs)[0]


def fails(fn, words: str):
    result = check(fn)
    assert not result.passed and words in result.message, result.message
    # the grader's judge: on the self-check's own draw for an in-rank answer (one launch, not two)
    assert (result.details.get("fraction", 0.0) if get(fn.__name__).ranks else score(fn)) == 0.0
    return result


# ---- memory_per_rank ------------------------------------------------------------------------------------------------

FORMULA = solution_source(get("memory_per_rank"))  # the solution notebook's


def formula(**replace):
    return edited(FORMULA, "memory_per_rank", replace)


def test_memory_per_rank_solution_passes():
    assert check(formula()).passed
    assert score(formula()) == 1.0


def test_memory_per_rank_counting_numbers_not_bytes_fails():
    fails(formula(**{'"parameters": 4 *': '"parameters":', '"gradients": 4 *': '"gradients":', "4 * states": "states"}),
          "not bytes")


def test_memory_per_rank_adam_with_one_state_fails():
    fails(formula(**{'"adam": 2': '"adam": 1'}), "two numbers per parameter")


def test_memory_per_rank_adam_with_three_states_is_told_the_master_copy_is_mixed_precisions():
    # learner s9a: Adam as 3 states (the mixed-precision table's master copy) got only 'check optimizer' and the
    # sharding rule
    fails(formula(**{'"adam": 2': '"adam": 3'}), "not three: the mixed-precision table's third is a float32 master copy")


def test_memory_per_rank_momentum_without_state_fails():
    fails(formula(**{'"momentum": 1': '"momentum": 0'}), "one velocity")


def test_memory_per_rank_shard_rounded_down_fails():
    fails(formula(**{"-(-n_params // world_size)": "n_params // world_size"}), "rounded down")


def test_memory_per_rank_fractional_shard_fails():
    fails(formula(**{"-(-n_params // world_size)": "n_params / world_size"}), "whole number")


def test_memory_per_rank_zero1_sharding_gradients_fails():
    fails(formula(**{'"zero1": ("optimizer",)': '"zero1": ("optimizer", "gradients")'}), "zero1 shards the optimizer")


def test_memory_per_rank_unsharded_optimizer_fails():
    fails(formula(**{'"zero1": ("optimizer",)': '"zero1": ()'}), "each rank keeps 1/")


# ---- sharded_step (2 real ranks per check) --------------------------------------------------------------------------

STEP = solution_source(get("sharded_step"))  # the solution notebook's: reduce to the owner
REDUCE = "        dist.reduce(p.grad, dst=owner)"


def step(old: str = "", new: str = ""):
    return edited(STEP, "sharded_step", {old: new} if old else {})


def test_sharded_step_stub_is_not_written_yet():
    result = check(step(REDUCE, "        raise NotImplementedError('Exercise')\n" + REDUCE))
    assert not result.passed and "not written yet" in result.message


def test_sharded_step_solution_passes():
    assert check(step()).passed
    assert score(step()) == 1.0


def test_sharded_step_with_all_reduce_passes():
    assert check(step(REDUCE, "        dist.all_reduce(p.grad)")).passed


def test_sharded_step_judge_refuses_a_reduce_record_that_differs_between_ranks():
    """make test s13: an answer with one rank's reduce record emptied (or one pair dropped) scored 1.0."""
    exercise = get("sharded_step")
    inputs = exercise.cases(random.Random(7))
    got = to_plain(exercise.run(step(), inputs))
    assert exercise.score(got, inputs)[0] == 1.0 and got["reduced"][0]
    for forged in ([[], got["reduced"][1]], [got["reduced"][0][1:], got["reduced"][1]], [[[]] * 2] * 2, []):
        fraction, message = exercise.score({**got, "reduced": forged}, inputs)
        assert fraction == 0.0, (forged, message)
    all_reduce = {**got, "reduced": [[], []]}  # an all_reduce answer records no reduce on any rank: right
    assert exercise.score(all_reduce, inputs)[0] == 1.0


def test_sharded_step_summed_gradients_fails():
    fails(step("        p.grad /= world_size\n", ""), "divide by world_size")


def test_sharded_step_without_broadcast_fails():
    result = fails(step("    for p, owner in zip(params, owners):\n        dist.broadcast(p.data, src=owner)", ""),
                   "different weights")
    assert "from its owner" in result.message, result.message
    assert "broadcast(" not in result.message.split("Hint")[0], result.message  # learner s10b: it printed the line


def test_sharded_step_broadcast_from_rank_0_fails():
    fails(step("src=owner", "src=0"), "never changed")


def test_sharded_step_reducing_to_rank_0_not_the_owner_is_named():
    """Learner s12r4f: dist.reduce(dst=0) got the generic 'averaged over all ranks', not the wrong destination."""
    result = fails(step("dst=owner", "dst=0"), "(dst=0), but rank 1 owns it")
    assert "reduce each gradient to its owner (dst=owners[i])" in result.message, result.message


def test_sharded_step_without_averaging_fails():
    fails(edited(STEP, "sharded_step", {REDUCE: "        pass  #", "        p.grad /= world_size\n": ""}),
          "averaged over all ranks")


@pytest.mark.slow
def test_sharded_step_broadcast_only_by_the_owner_fails_fast_naming_the_deadlock():
    import time

    start = time.monotonic()
    owner_only = step("        dist.broadcast(p.data, src=owner)",
                      "        if owner == dist.get_rank():\n            dist.broadcast(p.data, src=owner)")
    result = check(owner_only)
    assert not result.passed and "every rank must call every collective" in result.message, result.message
    assert "/" not in result.message.split("Hint:")[0] and "127.0.0.1" not in result.message  # no build path, no address
    assert time.monotonic() - start < 60  # the group's short timeout, not a minute per collective


def test_sharded_step_reducing_only_the_owned_gradients_names_the_mismatched_collectives():
    # learner s5B: this answer got gloo's "Connection reset by peer ... GLHF" as its only explanation
    owned_only = step(REDUCE, "        if owner == dist.get_rank():\n            dist.all_reduce(p.grad)")
    result = check(owned_only)
    assert not result.passed and "collectives did not match" in result.message, result.message
    assert "GLHF" not in result.message and "EVERY gradient on every rank" in result.message


# ---- choose_checkpoints ----------------------------------------------------------------------------------------------

CHOOSE = source_of(lesson07.choose_checkpoints)  # the solution's, the reference

GREEDY = """
def choose_checkpoints(freed, extra, total, budget):
    chosen, held = [], total
    for i in sorted(range(len(freed)), key=lambda i: -freed[i]):
        if held <= budget:
            break
        chosen.append(i)
        held -= freed[i]
    return chosen if held <= budget else None
"""

EVERYTHING = """
def choose_checkpoints(freed, extra, total, budget):
    if total <= budget:
        return []
    return list(range(len(freed))) if total - sum(freed) <= budget else None
"""


FEWEST_BLOCKS = """
import itertools


def choose_checkpoints(freed, extra, total, budget):
    for k in range(len(freed) + 1):
        for chosen in itertools.combinations(range(len(freed)), k):
            if total - sum(freed[i] for i in chosen) <= budget:
                return list(chosen)
    return None
"""


def test_choose_checkpoints_solution_passes():
    assert check(learner(CHOOSE, "choose_checkpoints")).passed
    assert score(learner(CHOOSE, "choose_checkpoints")) == 1.0


def test_choose_checkpoints_greedy_by_bytes_fails():
    fails(learner(GREEDY, "choose_checkpoints"), "free the most bytes first")


def test_choose_checkpoints_greedy_by_bytes_per_second_fails_with_its_own_message():
    """Learner s12r4f: a greedy pick ranked by bytes freed per second was told 'the most bytes first'."""
    by_rate = GREEDY.replace("key=lambda i: -freed[i]", "key=lambda i: -freed[i] / extra[i]")
    result = fails(learner(by_rate, "choose_checkpoints"), "most bytes per second of recomputation first")
    assert "Hint:" not in result.message, result.message


def test_choose_checkpoints_fewest_blocks_fails_with_its_own_hint():  # learner B got the greedy-by-bytes hint
    fails(learner(FEWEST_BLOCKS, "choose_checkpoints"), "the fewest blocks is not the cheapest")


def test_choose_checkpoints_fewest_blocks_with_an_empty_list_for_none_gets_both_hints():  # learner s6B: greedy hint
    answer = learner(FEWEST_BLOCKS.replace("    return None", "    return []"), "choose_checkpoints")
    fails(answer, "the fewest blocks is not the cheapest")
    fails(answer, "where no set fits, return None")


def test_choose_checkpoints_fewest_blocks_ties_broken_by_time_fails_with_the_fewest_hint():
    ties = FEWEST_BLOCKS.replace(
        "        for chosen in itertools.combinations(range(len(freed)), k):\n"
        "            if total - sum(freed[i] for i in chosen) <= budget:\n                return list(chosen)",
        "        fits = [list(c) for c in itertools.combinations(range(len(freed)), k)\n"
        "                if total - sum(freed[i] for i in c) <= budget]\n"
        "        if fits:\n            return min(fits, key=lambda c: sum(extra[i] for i in c))")
    assert ties != FEWEST_BLOCKS
    fails(learner(ties, "choose_checkpoints"), "the fewest blocks is not the cheapest")


def test_choose_checkpoints_everything_fails():
    fails(learner(EVERYTHING, "choose_checkpoints"), "recomputes more than needed")


def test_choose_checkpoints_ignoring_the_budget_check_fails():
    fails(learner(CHOOSE.replace("total - sum(freed[i] for i in chosen) <= budget", "sum(freed[i] for i in chosen) <= budget"),
                  "choose_checkpoints"), "over the budget")


def test_choose_checkpoints_strictly_under_the_budget_fails():
    fails(learner(CHOOSE.replace("<= budget", "< budget"), "choose_checkpoints"), "not <")


def test_choose_checkpoints_checkpointing_when_it_already_fits_fails():
    fails(learner(CHOOSE.replace("range(len(freed) + 1)", "range(1, len(freed) + 1)"), "choose_checkpoints"),
          "checkpoint nothing")


def test_choose_checkpoints_never_returning_none_fails():
    fails(learner(CHOOSE.replace("return None if best is None else best[1]", "return [] if best is None else best[1]"),
                  "choose_checkpoints"), "return None when nothing fits")


@pytest.mark.parametrize("name", ["memory_per_rank", "sharded_step", "choose_checkpoints"])
def test_exercises_are_registered_for_lab_07(name):
    assert get(name).lab == "07"


# ---- resume_order ----------------------------------------------------------------------------------------------------

RESUME = source_of(lesson07.resume_order)  # the solution's, the reference
RESUME_LINE = "return list(order[samples_read:][rank::world_size])"


def test_resume_order_solution_passes():
    assert check(learner(RESUME, "resume_order")).passed
    assert score(learner(RESUME, "resume_order")) == 1.0


def test_resume_order_skipping_the_global_index_in_the_own_stride_fails():
    fails(edited(RESUME, "resume_order", {RESUME_LINE: "return list(order[rank::world_size][samples_read:])"}),
          "counts every rank's samples")


def test_resume_order_skipping_by_the_own_stride_fails():
    fails(edited(RESUME, "resume_order",
                 {RESUME_LINE: "return list(order[rank::world_size][samples_read // world_size:])"}),
          "on another number of ranks they did not")


def test_resume_order_every_rank_reading_the_rest_fails():
    fails(edited(RESUME, "resume_order", {RESUME_LINE: "return list(order[samples_read:])"}), "whole rest")


def test_resume_order_contiguous_chunks_fail():
    chunks = ("rest = order[samples_read:]\n    size = -(-len(rest) // world_size)\n"
              "    return list(rest[rank * size:(rank + 1) * size])")
    fails(edited(RESUME, "resume_order", {RESUME_LINE: chunks}), "not in the order of a run without a stop")


@pytest.mark.parametrize("stride", ["world_size + 1", "world_size - 1 or 1"])
def test_resume_order_with_a_wrong_stride_is_told_the_stride(stride):  # learner s6B: got the skip hint
    fails(edited(RESUME, "resume_order", {RESUME_LINE: f"return list(order[samples_read:][rank::{stride}])"}),
          "the stride is world_size")


def test_resume_order_returning_positions_instead_of_samples_is_told_so():
    # learner s9a: range(samples_read, len(order)) strided got 'skip the samples_read first samples' (which it did)
    result = fails(edited(RESUME, "resume_order",
                          {RESUME_LINE: "return list(range(samples_read, len(order))[rank::world_size])"}),
                   "those are positions in the order, not samples")
    # learner s10b: the message printed the solution line itself
    assert "[rank::world_size]" not in result.message and "order[samples_read:]" not in result.message, result.message


def test_resume_order_is_registered_for_lab_07():
    assert get("resume_order").lab == "07"


def test_a_message_that_names_the_mistake_gets_no_hint_and_the_fallback_hands_over_no_recipe():
    """Learner s12r3f, lab 07: every FAIL appended the whole recipe as 'Hint: ...', after a message that had named
    the mistake; the fallback said 'skip the samples_read first samples of the order, then split the rest by
    stride' (the answer)."""
    named = fails(edited(RESUME, "resume_order", {RESUME_LINE: "return list(order[samples_read:])"}), "whole rest")
    assert "Hint:" not in named.message, named.message
    greedy = fails(learner(GREEDY, "choose_checkpoints"), "free the most bytes first")
    assert "Hint:" not in greedy.message, greedy.message
    odd = fails(edited(RESUME, "resume_order", {RESUME_LINE: "return list(order[samples_read + 1:][rank::world_size])"}),
                lab07.RESUME_GENERIC)  # no named mistake: the hint stays, the answer does not come with it
    assert "Hint:" in odd.message and "split the rest by stride" not in odd.message, odd.message


def test_sharded_step_async_broadcast_never_waited_names_the_missing_wait():
    """Learner s15r9f: an un-waited async broadcast got 'no other rank ever received their new values', which reads
    as a missing broadcast; the message now names async_op=True and .wait()."""
    result = fails(step("dist.broadcast(p.data, src=owner)", "dist.broadcast(p.data, src=owner, async_op=True)"),
                   "dist.broadcast ran with async_op=True and was never waited on")
    assert ".wait()" in result.message, result.message


def test_sharded_step_async_broadcast_waited_passes():
    assert check(step("dist.broadcast(p.data, src=owner)",
                      "dist.broadcast(p.data, src=owner, async_op=True).wait()")).passed
