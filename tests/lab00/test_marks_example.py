"""Lab 00's marks paragraph quotes a [!] and a note: the quoted lines are what the course's code prints for them."""
import re
from pathlib import Path

import nbformat

from lab_utils import conditions, measure

NOTEBOOK = Path(__file__).resolve().parents[2] / "solutions" / "00_setup_and_devices.ipynb"


def test_the_quoted_flag_and_note_are_the_lines_the_code_prints(monkeypatch):
    """Learner s11a, lab 00 cell 22: no [!] or note ever appears in lab 00, so the paragraph shows one of each."""
    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)  # no load measured: the lines as on a quiet run
    cell = next(c.source for c in nbformat.read(NOTEBOOK, 4).cells if "**Marks beside a figure.**" in c.source)
    quoted = re.search(r"```\n(.*?)\n```", cell, re.S).group(1)
    printed = "\n".join(measure.flagged(f"2 threads vs 1 thread: {ratio:.2f}x",
                                        measure.plausibility(speedup=ratio, devices=2, threads=2))
                        for ratio in (2.5, 2.1))
    assert quoted == printed
    assert "    [!] " in quoted and "    note: " in quoted


def test_the_noise_allowance_the_prose_states_is_the_code_s():
    """Learner s11r2a, lab 00 cell 22: 'tens of percent' beside '10 %': the prose's allowance is the detectors' own."""
    from lab_utils import detectors

    cell = next(c.source for c in nbformat.read(NOTEBOOK, 4).cells if "**Marks beside a figure.**" in c.source)
    prose = " ".join(cell.split())
    assert f"allows it only {detectors.ABOVE_100_NOISE * 100:.0f} %" in prose
    assert f"up to {detectors.NOISY_SPREAD * 100:.0f} % before they get a noise line" in prose  # why two allowances
    assert "tens of percent" not in prose and "(../README.md#results)" in prose
    # a table that keeps its repeats counts their middle half (detectors.noise_line): the prose says so
    assert "its noise line counts the middle half of them" in prose and "one slow repeat widens the spread" in prose


def _cells():
    return [c.source for c in nbformat.read(NOTEBOOK, 4).cells]


def test_the_marks_rule_comes_first_and_its_details_after_the_examples():
    """Learner s12r4a, lab 00 finding 6: one 90-word sentence with a parenthetical exception after the examples; now
    the rule, the two examples, then a 'Details' paragraph with the below-1/N case."""
    cell = next(c for c in _cells() if "**Marks beside a figure.**" in c)
    rule, _, rest = cell.partition("```")
    assert "efficiency" in rule and "1/N" not in rule
    details = rest.split("```")[-1]
    assert details.lstrip().startswith("*Details.*") and "1/N" in details
    assert max(len(s.split()) for s in re.split(r"(?<=[.:])\s", " ".join(details.split()))) <= 40


def test_the_first_cells_define_before_use_and_skip_the_allocator_internals():
    """Learner s12r4a, lab 00 findings 1 and 3: mmap/trim vocabulary in cell 3, and 'rank' used before its definition."""
    cells = _cells()
    machine = next(c for c in cells if "`hardware.detect()` looks once" in c)
    assert "mmap" not in machine and "trim" not in machine and "machine's name" not in machine
    strategy = " ".join(next(c for c in cells if c.startswith("## 4. Strategy")).split())
    assert strategy.index("a **rank** is") < strategy.index("each rank gets one thread")
    assert strategy.index("a **device** is") < strategy.index("play the part of a device")


def test_efficiency_is_defined_before_the_cell_that_prints_it():
    """Learner s13r5a, lab 00 finding 1: cell 23 printed '(efficiency 72%)', defined only in cell 24 after it."""
    cells = _cells()
    prints = next(i for i, c in enumerate(cells) if "reading.thread_ratio(rates, settings, noisy)" in c)
    before = " ".join(cells[prints - 1].split())
    assert "**efficiency**: the speedup divided by the number of threads (1.5x on 2 threads is 75 %" in before
    assert not any("**efficiency**" in c for c in cells[prints:])


def test_exercise_2s_prediction_is_not_answered_before_it():
    """Learner s13r5a, lab 00 finding 2: cell 20 printed whether the cold call was slower than every warm repeat, and
    by how much: Exercise 2's prediction and answer. The timing cell reads the cold call with cold_lines only, and
    the cost is printed after the exercise, by the learner's function."""
    cells = _cells()
    demo = next(c for c in cells if "cold = time.perf_counter() - start" in c)
    assert "reading.cold_lines(cold, right)" in demo and "one_off_cost_lines" not in demo
    after = next(c for c in cells if "cost = one_off_cost(cold, right.times)" in c)
    assert cells.index(after) > next(i for i, c in enumerate(cells) if c.startswith("### Exercise 2"))


def test_the_thread_table_prints_each_rows_spread_where_it_is_measured():
    """Learner s13r6a, lab 00 finding 5: cell 23 printed min and max per row; the spreads (7 %, 15 %) first appeared
    in the summary. Each row now ends with its spread."""
    table = next(c for c in _cells() if "measure.time_interleaved(candidates" in c)
    assert "spread {t.spread:.0%})" in table and "slowest, the spread" in table


def test_the_machine_and_budget_prose_put_later_detail_last():
    """Learner s13r6a, lab 00 findings 2-4: the allocator line unexplained, a dense cgroup paragraph, and a one-rank
    plan read as 'a process on its own'. The allocator and bf16 lines are marked 'need not read now'; the quota
    paragraph is one claim with one worked number, its four limits in a Details paragraph after."""
    cells = _cells()
    machine = " ".join(next(c for c in cells if "`hardware.detect()` looks once" in c).split())
    assert "you need not read them now" in machine and "**memory allocator** line" in machine
    budget = next(c for c in cells if "`hardware.cpu_budget()` reads each" in c)
    claim, _, details = budget.partition("*Details.*")
    assert "quota of 1 CPU on this 2-core machine" in claim and "throttling" not in claim and "cgroup" not in claim
    assert all(word in details for word in ("**affinity mask**", "**cgroup**", "**throttling**", "Slurm"))
    strategy = " ".join(next(c for c in cells if c.startswith("## 4. Strategy")).split())
    assert "A one-rank plan gets one thread too" in strategy and "A process that is no rank" in strategy


def test_the_thread_paragraph_promises_no_speedup_a_later_run_can_contradict():
    """Lab 03 on a 2-core CPU measures one-thread processes (DDP) slower than two threads in one process; the prose
    said processes 'scale better'. It now says what differs (they wait only where they exchange data) and that the
    parallel labs measure whether it pays."""
    cell = " ".join(next(c for c in _cells() if c.startswith("Read the ratio with care")).split())
    assert "scale better" not in cell and "measure whether that pays on this machine" in cell


def test_the_marks_details_name_not_measurable_and_the_pronouns_are_plain():
    """Learner s13r7a, lab 00 findings 5-7: a busy run printed 'not measurable here' where cell 24 promised only a
    `note:`; 'even a one-rank plan does' and 'even one rank gets one' left the reader to find what 'does' and 'one'
    stood for; cell 5's Details paragraph was more than a newcomer takes in."""
    from lab_utils import measure

    cells = [" ".join(c.split()) for c in _cells()]
    marks = next(c for c in cells if "**Marks beside a figure.**" in c)
    assert f"**{measure.NOT_MEASURABLE}** (**{measure.N_M}** in a table)" in marks
    strategy = next(c for c in cells if c.startswith("## 4. Strategy"))
    plan = next(c for c in cells if "`hardware.plan(world_size)` picks" in c)
    assert "even a one-rank plan does" not in strategy and "A one-rank plan gets one thread too" in strategy
    assert "even one rank gets one" not in plan and "one rank gets a device and a backend too" in plan
    budget = next(c for c in cells if "`hardware.cpu_budget()` reads each" in c)
    assert len(budget.partition("*Details.*")[2].split()) <= 80  # it was 100 words


def test_the_marks_paragraph_defines_each_word_of_its_quoted_lines_before_them():
    """A day-one learner met 'baseline', '2x the hardware', 'another framework in its process', 'the load' and 'the
    parallel labs' in the marks cell, none defined in lab 00: each is now said plainly before its first use."""
    cell = " ".join(next(c for c in _cells() if "**Marks beside a figure.**" in c).split())
    prose, quoted, details = cell.split("```")
    for word in ("baseline", "2x the hardware", "another framework in its process"):
        assert word in quoted and f"**{word}** " in prose, word
    ratio = " ".join(next(c for c in _cells() if c.startswith("Read the ratio with care")).split())
    assert "the parallel labs" not in cell + ratio and "(the ranks of section 4)" in ratio
    assert details.index("(the **load**)") < details.index("the load in place of the figure")


def test_sections_end_with_what_the_learner_now_knows():
    """Lab 00 learned 4/5: the machine, strategy and timing sections ended on a figure or an error with no takeaway;
    each now ends with one, before the next section, and the summary says what the lab taught."""
    cells = _cells()
    takeaways = [i for i, c in enumerate(cells) if c.startswith("**What this section gives you.**")]
    assert len(takeaways) == 3
    for i in takeaways:
        assert cells[i + 1].startswith("#"), cells[i + 1][:60]  # the last cell of its section
    summary = next(c for c in cells if c.startswith("## Summary"))
    assert "What you now know:" in summary and "1/N" in summary
    assert not any(ch.isdigit() for c in (cells[i] for i in takeaways) for ch in c)  # no figure a run can contradict


def test_the_marks_come_before_the_thread_ratio_and_its_noise_is_one_sentence():
    """Learner s15r9a, lab 00 finding 5: the 2.05x ratio printed a `note` and five noise lines ('read the medians
    only', then 'the medians stand') one cell before the marks were explained. The marks now come first, and the
    table's noise line is one sentence that says whether the medians stand (reading.noise_lines, tested)."""
    cells = _cells()
    prints = next(i for i, c in enumerate(cells) if "reading.thread_ratio(rates, settings, noisy)" in c)
    marks = next(i for i, c in enumerate(cells) if "**Marks beside a figure.**" in c)
    assert marks < prints
    assert "noisy = reading.medians_uncertain(timings)" in cells[prints]  # 'the noise line says' only where in doubt
