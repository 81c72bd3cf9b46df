"""Lab 00's reports (lab_utils/labs/lab00/reading.py) on made-up timings: quiet, noisy and busy."""
from lab_utils import conditions, measure
from lab_utils.labs.lab00 import reading
from lab_utils.measure.timing import Timing


def timing(times):
    return Timing(times=[t / 1e3 for t in times], warmup=2)


def test_the_cold_call_above_every_repeat_shows_its_one_off_cost():
    lines = reading.cold_lines(0.050, timing([20, 21, 22]))
    assert lines == ["the cold call took 2.38x the warm median; the repeats spread by 10% of the median"]
    said = reading.one_off_cost_lines(0.029, 0.050, timing([20, 21, 22]))[0].replace("\n    ", " ")
    assert "by your one_off_cost: 29.0 ms of one-off cost above the warm median" in said


def test_the_cold_lines_leave_exercise_2s_answer_to_the_exercise():
    """Learner s13r5a, lab 00 finding 2: cell 20 printed 'slower than every warm repeat ... 27.7 ms above the median',
    the answer Exercise 2 asks the learner to predict and compute; the cold lines now say the ratio and the swings."""
    for cold, times in ((0.050, [20, 21, 22]), (0.021, [15, 20, 30])):
        said = " ".join(reading.cold_lines(cold, timing(times)))
        assert "every warm repeat" not in said and "ms above" not in said and "hidden" not in said, said


def test_a_cold_call_within_the_repeats_is_said_to_be_hidden_by_noise():
    lines = reading.cold_lines(0.021, timing([15, 20, 30]))
    assert any("noise:" in line for line in lines)  # spread 75 %: the noise line
    said = reading.one_off_cost_lines(0.0, 0.021, timing([15, 20, 30]))[0].replace("\n    ", " ")
    assert "0.0 ms: the cold call (21.0 ms) lies within the warm repeats' range (15.0-30.0 ms)" in said
    assert "hide its one-off cost" in said
    assert "lies below" in reading.one_off_cost_lines(0.0, 0.010, timing([15, 20, 30]))[0].replace("\n    ", " ")


def test_the_noise_line_names_the_noisy_row():
    """Learner s11r2a, lab 00 cell 21: the noise line did not say which row was noisy."""
    quiet = {"1 thread": timing([19, 20, 21]), "2 threads": timing([11, 11, 11.5])}
    assert reading.noise_lines(quiet) == "noise: every median above came from repeats within 25 %"
    noisy = {"1 thread": timing([19, 20, 21]), "2 threads": timing([10, 11, 14])}
    # learner s13r6a finding 5: each row prints its spread now, so the noise line names the row without a second figure
    # learner s15r9a: the noise text is one sentence now, naming the row and what to read
    assert reading.noise_lines(noisy) == "noise: the row 2 threads spread more than 25 %: read the median only"
    assert reading.medians_uncertain(noisy) and not reading.medians_uncertain(quiet)


def test_noisy_rows_say_whether_their_medians_stand_computed():
    """Learner s13r7a, lab 00 finding 2: both rows of the quiet run spread above 25 %; 'why believe 1.66x?' The line
    now computes it from the middle half of the repeats, and the ratio no longer asserts that the medians stand."""
    few_slow = {"1 thread": timing([20.5, 21.5, 22.1, 22.2, 22.5, 26.0, 28.6]),
                "2 threads": timing([11.0, 12.5, 13.0, 13.3, 13.8, 14.0, 15.5])}
    said = reading.noise_lines(few_slow).replace("\n    ", " ")
    # learner s15r9a, lab 00 finding 2: five lines said 'read the medians only' then 'the medians stand'; one now
    assert said.count("noise:") == 1 and "read the medians only" not in said, said
    assert "2 rows spread more than 25 % (1 thread, 2 threads); the middle half of each row's repeats spans at most " \
           "11 %" in said, said
    assert said.endswith("a few slow repeats, so the medians stand"), said
    assert not reading.medians_uncertain(few_slow)
    throughout = {"1 thread": timing([14, 17, 20, 23, 26, 29, 32]), "2 threads": timing([11, 11, 11.5, 11, 11])}
    rough = reading.noise_lines(throughout).replace("\n    ", " ")
    assert reading.medians_uncertain(throughout)
    assert "so the repeats vary throughout: read the medians as rough" in rough and "a few slow" not in rough, rough
    line = reading.thread_ratio({"1 thread": 1000.0, "2 threads": 1660.0}, {"1 thread": 1, "2 threads": 2}, True)[0]
    assert "so it stands" not in line and "the noise line says whether they stand" in line.replace("\n    ", " ")


def test_the_summary_marks_every_noisy_row_the_same_way():
    """Learner s13r7a, lab 00 finding 3: the summary's forward rows printed 'spread 37%' unmarked while the training
    step's line added '; noisy: above 25 %, read the median only'; and 'images/s' named cell 23's 'forward
    samples/s' (finding 4)."""
    from pathlib import Path

    import nbformat

    assert reading.marked_spread(0.37) == "spread 37%; noisy: above 25 %, read the median only"
    assert reading.marked_spread(0.17) == "spread 17%" and reading.marked_spread(0.254) == "spread 25%"
    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "00_setup_and_devices.ipynb", 4).cells
    summary = next(c.source for c in cells if c.cell_type == "code" and "one training step of the 3-conv CNN" in c.source)
    assert summary.count("reading.marked_spread(") == 2 and "NOISY_SPREAD" not in summary
    assert "images/s" not in summary and "forward samples/s" in summary


def test_the_thread_ratio_on_a_quiet_and_a_busy_machine(monkeypatch):
    rates, settings = {"1 thread": 1000.0, "2 threads": 1780.0}, {"1 thread": 1, "2 threads": 2}
    monkeypatch.setattr(conditions, "taken", lambda reset=False: None)
    line, flags = reading.thread_ratio(rates, settings, noisy=False)
    assert line == ("2 threads vs 1 thread: 1.78x (of the medians), within the at most 2x that 2 threads can give"
                    " (efficiency 89%)".replace(" (eff", "\n    (eff")) and flags == [], line
    again = reading.thread_ratio(rates, settings, False, source="(from above)")[0].replace("\n    ", " ")
    assert "1.78x (from above), within the at most 2x" in again
    slower = reading.thread_ratio({"1 thread": 1000.0, "2 threads": 980.0}, settings, False)[0]
    assert "0.98x (of the medians); theory: faster than 1 thread, at most 2x" in slower.replace("\n    ", " ")
    assert reading.thread_ratio({"1 thread": 1000.0}, {"1 thread": 1}, False) is None
    busy = conditions.Load(0.3, 2, 1.0, 1.8, 0.0)  # others took 1.8 of 2 cores: the ratio is not read
    monkeypatch.setattr(conditions, "taken", lambda reset=False: busy)
    line, flags = reading.thread_ratio({"1 thread": 1000.0, "2 threads": 2600.0}, settings, noisy=False)
    assert measure.NOT_MEASURABLE in line and "2.60x" not in line and flags == []  # refused: no [!] reads 2.6x


def test_the_budget_cell_says_checked_not_note():
    """Learner s12r4a, lab 00 finding 2: 'note:' named both a budget check (cell 6) and the mark beside an odd but
    possible figure (the marks paragraph); the budget cell's lines now say 'checked:', and the prose defines it."""
    from pathlib import Path

    import nbformat

    cells = nbformat.read(Path(__file__).parents[2] / "solutions" / "00_setup_and_devices.ipynb", 4).cells
    budget = next(c for c in cells if c.cell_type == "code" and "budget.notes" in c.source)
    assert 'f"checked: {note}"' in budget.source and '"note:' not in budget.source
    before = next(c.source for c in cells if "`hardware.cpu_budget()` reads each" in c.source)
    assert "A `checked:` line says" in before
