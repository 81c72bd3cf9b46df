"""Lab 09's readings of figures it measured twice or more (issue 51, learner s10k): the batch-1 forward's three
figures in one place, batch-1 serving's capacity from its bursts and from the saturated grid, a larger batch that took
less time without a flag, padding read from one side, and the cells after the exercises after a kernel restart."""
import json
from pathlib import Path

from lab_utils import measure
from lab_utils.labs.lab09 import serving
from lab_utils.measure.timing import Timing
from lab_utils.skipping import Skipper, names_bound, names_used

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "solutions" / "09_inference_throughput.ipynb"


def timing(*ms):
    return Timing(tuple(m / 1e3 for m in ms), 1)


def test_the_batch_1_forward_says_what_each_of_its_three_figures_times():
    lines = serving.forward_1_lines({"the modes' round": timing(2.7, 2.8, 2.9), "the sweep": timing(1.8, 1.9, 2.0),
                                     "back to back": timing(1.6, 1.63, 1.7)})
    text = "\n".join(lines)
    assert "2.80 ms" in text and "1.90 ms" in text and "1.63 ms" in text
    assert "after train mode and no_grad" in text and "after the other sizes" in text and "serving bound" in text
    assert "here it is, 1.72x below the slowest (the modes' round)" in text
    against = "\n".join(serving.forward_1_lines({"the sweep": timing(1.5, 1.5, 1.5), "back to back": timing(2, 2, 2)}))
    assert "it is not: the sweep is" in against and all(len(x) <= 100 for x in against.splitlines())
    assert all(len(line) <= 100 for line in text.splitlines())


def test_the_capacity_measured_twice_agrees_or_is_flagged_never_called_a_bound():
    said, flags = serving.capacity_agreement(529, 0.07, 577, 0.29)  # the learner's run: within the spreads
    assert not flags and "529/s (bursts) and 577/s" in said and "at most" not in said
    from lab_utils import detectors
    said, flags = serving.capacity_agreement(563, 0.16, 417, 0.21)  # a busy run: apart, under another condition
    assert [detectors.kind_of(f) for f in flags] == [detectors.Kind.NOTE] and "see the note" in said
    assert "one by one" in flags[0]
    said, flags = serving.capacity_agreement(563, 0.02, 200, 0.02)  # beyond what the condition explains: [!]
    assert detectors.kind_of(flags[0]) is detectors.Kind.CONTRADICT and "see the flag" in said


def test_a_larger_batch_faster_by_less_than_the_flags_margin_gets_a_line():
    sweep = {2: timing(3.67, 3.67, 3.67), 4: timing(3.42, 3.42, 3.42), 8: timing(4.0, 4.0, 4.0)}
    lines = serving.unflagged_less_time([2, 4, 8], sweep, [[], [], []])
    assert len(lines) == 1 and "batch 4 took less time than batch 2" in lines[0] and "not flagged" in lines[0]
    assert serving.unflagged_less_time([2, 4, 8], sweep, [[], ["a flag"], []]) == []  # the flag says it
    # review 11, item 5: one line, no hard break; the cell wraps it to 100 columns; 'within' is computed
    wide = {64: timing(12.50, 12.50, 12.50), 128: timing(12.34, 12.34, 12.34)}
    said = serving.unflagged_less_time([64, 128], wide, [[], []])
    assert len(said) == 1 and "\n" not in said[0] and "within the 10% by which two medians may differ" in said[0]
    assert all(len(line) <= 100 for line in measure.lines.wrap(said[0]).splitlines())
    beyond = serving.unflagged_less_time([64, 128], {64: wide[64], 128: timing(10.0, 10.0, 10.0)}, [[], []])
    assert "20% less" in beyond[0] and "within" not in beyond[0], beyond
    source = "".join("".join(c["source"]) for c in cells())
    assert "for line in serving.unflagged_less_time(" in source
    assert "    print(measure.lines.wrap(line))" in source.split("for line in serving.unflagged_less_time(")[1][:200]


def cells():
    return json.loads(LAB.read_text())["cells"]


def test_padding_is_read_from_the_unpadded_side_in_the_table_as_in_its_verdict():
    source = next("".join(c["source"]) for c in cells() if "pad_verdicts[n] = measure.verdict(" in "".join(c["source"]))
    assert 'reference.update({f"batch {n}": f"batch {n} padded to {bucket(n)}"' in source
    assert "(eager: padding only adds rows)" in source and "no recompile to avoid" not in source


def test_the_cells_after_the_exercises_say_skipped_after_a_restart_instead_of_a_name_error():
    """A learner who restarts the kernel, runs the parameters and setup cells, then an exercise and its check, runs the
    cells after it: each reads the lab's runs, and the setup's Skipper turns it into a 'skipped' line."""
    code = [(i, "".join(c["source"])) for i, c in enumerate(cells()) if c["cell_type"] == "code"]
    setup = code[0][1] + "\n" + code[1][1]
    assert "skip_cells_needing(serving.MEASURED_NAMES" in setup
    first_exercise = next(i for i, s in code if "### BEGIN SOLUTION" in s)
    namespace = dict.fromkeys(names_bound(setup))
    namespace.update(dict.fromkeys(n for _, s in code if "### BEGIN SOLUTION" in s for n in names_bound(s)))
    namespace.update(dict.fromkeys(dir(__builtins__)))
    after = [s for i, s in code if i > first_exercise and "### BEGIN SOLUTION" not in s
             and not s.lstrip().startswith("check(")]
    uses = [s for s in after if names_used(s) & serving.MEASURED_NAMES]
    assert len(uses) >= 3  # the exercises' own runs (batcher, broken, grid), then the record and the summary
    for source in uses:
        replaced = Skipper(serving.MEASURED_NAMES, serving.RESTART_REASON, namespace, serving.RESTART_HEAD).source(source)
        out = {}
        exec(replaced.replace("print(", "said = (", 1), {}, out)  # what the cell prints instead
        assert out["said"].startswith("skipped: this kernel has not run the sections above"), replaced[:200]
        assert all(len(line) <= 100 for line in out["said"].splitlines())
    full = dict(namespace, **dict.fromkeys(serving.MEASURED_NAMES))  # the notebook run from the top: nothing skipped
    assert all(Skipper(serving.MEASURED_NAMES, "", full).source(s) == s for s in uses)


def test_a_capacity_above_its_bound_but_within_the_flags_margin_is_said():
    """The committed run: batch-1 serving answered 762/s, its forward pass's bound 697/s, and no word (9 % above)."""
    line = serving.within_bound_line(762, 697)
    assert "9% above that bound" in line and "no flag" in line
    assert serving.within_bound_line(690, 697) == "" and serving.within_bound_line(800, 697) == ""  # below; flagged
