"""The committed outputs: one run of the labs in order, clean of the build machine's details, and the scaling report's
table showing exactly the figures the source labs printed."""
import re
import socket
from pathlib import Path

import nbformat
import pytest

from lab_utils import spec, workloads
from lab_utils.instructor import labs
from lab_utils.instructor.course import committed_outputs

ROOT = Path(__file__).resolve().parent.parent
LEAKS = {
    "an absolute path": re.compile(r"(?<![\w.~])/(?:tmp|home|root|work|Users|private|var|opt)/"),
    "a process id": re.compile(r"\bpid[ =:]+\d+", re.I),
    "a port number": re.compile(r"\bport[ =:]+\d{4,5}\b", re.I),
    "a peer's address and port (a gloo error)": re.compile(r"\[[\w.:]+\]:\d{2,5}\b"),
    "a build path (a gloo error)": re.compile(r"/__w/|third_party/|\.(?:cc|cpp):\d+"),
    "a date": re.compile(r"(?<!\d)20\d\d-[01]\d-[0-3]\d(?!\d)"),  # also inside an ISO time stamp (2026-12-03T18:04)
    # A Slurm time limit (--time=HH:MM:SS) is a duration the lesson asks for, not the run's clock.
    "a clock time": re.compile(r"(?<!time=)(?<![\d:])[0-2]\d:[0-5]\d:[0-5]\d(?![\d:])"),
    "a host name": re.compile(rf"\b{re.escape(socket.gethostname())}\b|\bhost(?:name)?: +\S+", re.I),
}


def outputs(path):
    """(cell index, output) of every committed output."""
    nb = nbformat.read(path, 4)
    return [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.get("outputs", [])]


def text_of(output) -> str:
    parts = [output.get("text", "")] + output.get("traceback", [])
    parts += [v for k, v in output.get("data", {}).items() if k.startswith("text/") and k != "text/html"]
    return "".join("".join(p) if isinstance(p, list) else str(p) for p in parts)


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name)
def test_committed_outputs_show_no_build_machine_details_and_no_stderr(path):
    problems = []
    for index, output in outputs(path):
        if output.get("name") == "stderr":
            problems.append(f"cell {index}: output on stderr: {text_of(output)[:120]!r}")
        text = text_of(output)
        for what, pattern in LEAKS.items():
            found = pattern.search(text)
            if found:
                problems.append(f"cell {index}: {what}: {text[max(0, found.start() - 40):found.end() + 20]!r}")
    assert problems == []


def test_the_leak_detectors_catch_what_slurm_and_the_clock_print_and_spare_durations():
    caught = {what for what, pattern in LEAKS.items()
              for text in ("530 lab11-req+ REQUEUED 0:0 2026-12-03T18:04:02", "it is 17:52:05 now",
                           "0: node1 task 0 of 2 python in /work/wt-lab11/.venv", "task 0 waits on port 10405")
              if pattern.search(text)}
    assert caught == {"a date", "a clock time", "an absolute path", "a port number"}
    assert LEAKS["an absolute path"].search("export SLURM_CONF=/var/tmp/lab-cluster/slurm.conf")  # lab 11 printed it
    spared = ("#SBATCH --time=00:05:00", "524 overrun short 1 TIMEOUT 0:0 70", "TotalCPU 00:02.952",
              "rendezvous at 127.0.0.1:10537", "python in .venv")
    assert [t for t in spared for pattern in LEAKS.values() if pattern.search(t)] == []


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name)
def test_committed_notebooks_name_no_build_machine_folder_in_their_metadata(path):
    record = nbformat.read(path, 4).metadata.get("papermill", {})
    assert not [value for value in (record.get("input_path"), record.get("output_path"))
                if value and LEAKS["an absolute path"].search(value)]


def test_papermill_paths_are_made_relative_to_the_repository(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": str(labs.ROOT / "solutions" / "x.ipynb"), "output_path": "y.ipynb"}
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    committed_outputs.relative_papermill_paths(path)
    record = nbformat.read(path, 4).metadata["papermill"]
    assert (record["input_path"], record["output_path"]) == ("solutions/x.ipynb", "y.ipynb")


RECORD_ROW = re.compile(r"^(\d\d) +.*? +(\d+) +(\d+|-) +(\d+) +(\d+\.\d)(?: \*)?$")
# the accuracy column is printed only when some row has an accuracy; 1.8: a rate below 10
REPORT_ROW = re.compile(r"^(\d\d) +\S+ +.*? +(\d+) +(\d+|kernel) +(\d+) +(?:(?:[\d.]+%|-) +)?(\d+(?:\.\d)?) ")


def printed_rows(path, pattern) -> set:
    """(lab, ranks, threads, batch, samples/s rounded) of every results row a notebook printed."""
    rows = set()
    for _, output in outputs(path):
        for line in text_of(output).splitlines():
            m = pattern.match(line.strip())
            if m:
                lab, ranks, threads, batch, rate = m.groups()
                rows.add((lab, int(ranks), None if threads in ("-", "kernel") else int(threads), int(batch),
                          round(float(rate))))
    return rows


def test_the_scaling_report_shows_exactly_what_the_labs_printed():
    notebooks = labs.solution_notebooks()
    report = next(p for p in notebooks if "scaling_report" in p.name)
    shown = printed_rows(report, REPORT_ROW)
    assert shown, "the committed scaling report shows no results table: run `make outputs`"
    recorded = set().union(*(printed_rows(p, RECORD_ROW) for p in notebooks if p != report))
    unmatched = sorted(row for row in shown
                       if not any(row[:4] == r[:4] and abs(row[4] - r[4]) <= 1 for r in recorded))
    assert unmatched == [], ("rows of the scaling report that no lab printed in the same committed run "
                             "(lab, ranks, threads, batch, samples/s): run `make outputs`")


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_nbval_reads_a_tag_not_a_comment_line(path):
    """A cell whose output varies carries the cell tag nbval-ignore-output (hidden from the learner), not a comment."""
    cells = nbformat.read(path, as_version=4).cells
    commented = [i for i, c in enumerate(cells) if c.cell_type == "code" and "NBVAL_" in c.source]
    assert commented == [], f"{path.name}: cells {commented} mark nbval with a comment; use the cell tag"
    tagged = [c for c in cells if "nbval-ignore-output" in c.metadata.get("tags", [])]
    assert all(c.cell_type == "code" for c in tagged)


# ---- one comparison, one figure: a table's ratio for a pair a verdict decides is the verdict's figure ----------------

VERDICT_LINE = re.compile(r"^\s*verdict, (?P<claim>.+?)(?:, (?:tested as|too noisy to test) .*?)?: (?P<ratio>\d+\.\d\d)x \(.*? over (?P<pairs>\d+) "
                          r"paired repeats\)")  # a bounded claim names the claim tested after its own
# a verdict the conditions rule out prints one line and no figure: "verdict, CLAIM (EXPECTED): cannot be seen here: CAUSE.
# Rerun with nothing else running" (the pairs' figure is recorded in verdicts.csv, never printed beside a refusal)
UNSEEN_LINE = re.compile(r"^\s*verdict, (?P<claim>.+?): cannot be seen here(?:: \S.*| predicted: .*)?$")  # or stacked
OLD_FIGURE = re.compile(r"^  .*figure, not a result: \d+\.\d\dx|these pairs gave \d+\.\d\dx")  # the formats before


# measure.lines.stacked prints a verdict as its claim and outcome first, then indented lines (the claim tested, the
# figure and its range, the note), each wrapped at 100 columns: read joined, its words on one line
STACKED_LINE = re.compile(r"^\s*verdict, (?P<claim>.+?): (?:holds|reversed|not distinguishable here)(?: \(flagged above\))? "
                          r"(?:.*? )?(?P<ratio>\d+\.\d\d)x \([^()]*?(?:\([^()]*\)[^()]*?)*? over (?P<pairs>\d+) paired repeats\)")


def joined(lines: list[str], i: int) -> str:
    """lines[i] and the lines under it indented deeper (a wrapped line, a verdict's own lines), as one line."""
    depth = len(lines[i]) - len(lines[i].lstrip())
    below = [x for x in __import__("itertools").takewhile(
        lambda x: x.strip() and len(x) - len(x.lstrip()) > depth, lines[i + 1:])]
    return " " * depth + " ".join(" ".join([lines[i]] + below).split())


def verdict_at(lines: list[str], i: int):
    """The verdict printed at lines[i] as {claim, ratio, pairs}, None if none starts there; a refused verdict has
    ratio and pairs None, and one printed with a figure is an error (the format changed: update this). Reads the
    one-line format (before measure.lines) and the stacked one."""
    v = VERDICT_LINE.match(lines[i])
    if v:
        return v
    text = joined(lines, i)
    v = STACKED_LINE.match(text)
    if v or not UNSEEN_LINE.match(text):
        return v
    said = lines[i:i + 2] + [text]
    assert not any(OLD_FIGURE.search(x) for x in said), f"a refused verdict prints a figure: {said}"
    return {"claim": UNSEEN_LINE.match(text)["claim"], "ratio": None, "pairs": None}


FIGURE = r"(\d+\.\d\d)x"
# claim of a verdict -> (how to find the table row of the same pair, in the same cell's output, and whether the row
# states the pair the other way round: B's advantage over A)
SAME_PAIR = {
    "02": [(re.compile(r"one device vs (?P<candidate>.+), batch (?P<batch>\d+)$"),
            lambda m: rf"^\s*{m['batch']}\s+{re.escape(m['candidate'])}\s+[\d.]+\s+\d+%\s+{FIGURE}", True),
           (re.compile(r"(?P<candidate>.+) vs one device, batch (?P<batch>\d+)$"),  # read from DataParallel's side
            lambda m: rf"^\s*{m['batch']}\s+{re.escape(m['candidate'])}\s+[\d.]+\s+\d+%\s+{FIGURE}", False)],
    "06": [(re.compile(r"dist\.all_reduce vs the ring, (?P<kib>\d+ [KM]iB)$"),  # MiB from 1 MiB (learner s13r7e)
            # the spread columns are optional: the table dropped them (learner s12r4e); older outputs print them; the
            # median columns too: the table prints the lead alone (learner s13r6e)
            lambda m: rf"^\s*{m['kib']}\s+(?:[\d.]+\s+(?:\d+%\s+)?[\d.]+\s+(?:\d+%\s+)?)?{FIGURE}", False)],
    # lab 08's theory column reads '≤1.24x' where theory predicts a lead of at most that (k = 1, the idle share)
    "08": [(re.compile(r"async vs sync, straggler x(?P<k>\d+)$"), lambda m: rf"^\s*{m['k']}\s+[\d.]+x.*?{FIGURE}\s+≤?[\d.]+x", False),
           (re.compile(r"sync vs async, no straggler$"), lambda m: rf"^\s*1\s+[\d.]+x.*?{FIGURE}\s+≤?[\d.]+x", True),
           (re.compile(r"async vs sync, no straggler$"), lambda m: rf"^\s*1\s+[\d.]+x.*?{FIGURE}\s+≤?[\d.]+x", False)],
    "09": [(re.compile(r"bf16 autocast vs fp32 forward$"), lambda m: rf"^bf16 autocast\s+\d+\s+[\d.]+\s+\d+%\s+{FIGURE} eager fp32", False),
           (re.compile(r"batch (?P<n>\d+) unpadded vs padded to (?P<to>\d+) \(eager\)$"),
            lambda m: rf"^batch {m['n']} padded to {m['to']}\s+\d+\s+[\d.]+\s+\d+%\s+{FIGURE} batch {m['n']}(?!\d)", True),
           (re.compile(r"batch (?P<n>\d+) unpadded vs padded to (?P<to>\d+) \(eager\)$"),  # read from the unpadded side
            lambda m: rf"^batch {m['n']}\s+\d+\s+[\d.]+\s+\d+%\s+{FIGURE} batch {m['n']} padded to {m['to']}", False),
           (re.compile(r"TF tf\.function vs eager$"), lambda m: rf"^tf\.function\s+[\d.]+\s+[\d.]+\s+\d+%\s+{FIGURE}$", False)],
}


NAMED = re.compile(r"^(?P<claim>.*?) \[(?P<workload>[^\]]+)\](?P<rest>(?: \(.*)?)$")


def split_workload(claim: str) -> tuple[str, str]:
    """(the claim as measure.verdict was given it, the workload it names in [..] or ""), from a verdict line's claim
    part (an unseen verdict's keeps its " (expected)" after the claim)."""
    m = NAMED.match(claim)
    return (m["claim"] + m["rest"], m["workload"]) if m else (claim, "")


def agrees(table: float, verdict: float, inverse: bool) -> bool:
    """Whether two printed figures (2 decimals) can be one median of paired ratios, the table's possibly inverted."""
    if not inverse:
        return table == verdict
    # an odd number of pairs: the median of the inverses is the inverse of the median, up to both roundings
    return 1 / (table + 0.005) - 0.005 <= verdict <= 1 / (table - 0.005) + 0.005


def figure_conflicts(path, lab: str) -> tuple[list[str], int]:
    """(the verdicts whose pair a table in the same cell's output states with another figure, how many were compared)."""
    conflicts, compared = [], 0
    for index, output in outputs(path):
        lines = text_of(output).splitlines()
        for i in range(len(lines)):
            v = verdict_at(lines, i)
            said = split_workload(v["claim"])[0] if v else ""
            for claim, row_of, inverse in SAME_PAIR.get(lab, []) if v else []:
                # an unseen verdict's claim is followed by " (expected)": try the claim before each " ("
                m = next(filter(None, (claim.match(c) for c in [said] + [
                    said[:i] for i in range(len(said)) if said.startswith(" (", i)])), None)
                if not m or (v["pairs"] and inverse and int(v["pairs"]) % 2 == 0):  # even pairs: a median of
                    continue  # inverses may differ
                rows = [r for r in (re.match(row_of(m), x.strip() if lab != "09" else x) for x in lines) if r]
                for r in rows:
                    compared += 1
                    if v["ratio"] is None:  # refused: the table's row must read n/m, not print the figure refused
                        conflicts.append(f"cell {index}: {v['claim']}: the table says {r[1]}x, the verdict refuses it")
                    elif not agrees(float(r[1]), float(v["ratio"]), inverse):
                        conflicts.append(f"cell {index}: {v['claim']}: the table says {r[1]}x"
                                         f"{' (the other way round)' if inverse else ''}, the verdict {v['ratio']}x")
    return conflicts, compared


def test_a_tables_figure_for_a_verdicts_pair_is_the_verdicts():
    table = "   8  DataParallel, 2 devices        6.53     55%    {}x"
    verdict = ("verdict, one device vs DataParallel, 2 devices, batch 8: 2.23x (above 1 means one device faster; "
               "range 1.28-2.43 over 5 paired repeats) -> holds")
    unseen = ("verdict, one device vs DataParallel, 2 devices, batch 8 (one device faster (a small batch's compute)): "
              "cannot be seen here: other programs used 1.6 of 2 cores while it was measured. Rerun with nothing else running")
    for figure, conflicts in (("0.45", 0), ("0.46", 1)):  # 1 / 2.23 = 0.448; 0.46 is a ratio of medians
        cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                         text=f"{table.format(figure)}\n{verdict}\n")])
        assert [len(x) if isinstance(x, list) else x for x in figure_conflicts_of([cell], "02")] == [conflicts, 1]
    # a refused verdict prints no figure, so a table row that prints one for its pair is a second figure (issue 51)
    for row, conflicts, compared in ((table.format("0.45"), 1, 1), ("   8  DataParallel, 2 devices   6.53   55%   n/m", 0, 0)):
        cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout", text=f"{row}\n{unseen}\n")])
        assert [len(x) if isinstance(x, list) else x for x in figure_conflicts_of([cell], "02")] == [conflicts, compared]
    old = unseen.replace(". Rerun", "\n  the load's figure, not a result: 2.23x (range 0.41-2.26 over 5 pairs). Rerun")
    cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout", text=f"{old}\n")])
    with pytest.raises(AssertionError, match="a refused verdict prints a figure"):
        figure_conflicts_of([cell], "02")


def figure_conflicts_of(cells, lab):
    """figure_conflicts on a notebook made of these cells."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nb.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
        return figure_conflicts(path, lab)


@pytest.mark.parametrize("lab", sorted(SAME_PAIR))
def test_committed_outputs_print_one_figure_per_comparison(lab):
    path = next(p for p in labs.solution_notebooks() if p.name.startswith(lab))
    conflicts, compared = figure_conflicts(path, lab)
    assert compared, f"{path.name}: no verdict beside a table row of its pair found: did the table or claim change?"
    assert conflicts == [], "a table and a verdict print two figures for one comparison: run `make outputs`"


# labs whose tables print each side's median beside a verdict on the pair: the cell that prints those medians says
# that the comparison's figure is the verdict's, the median of the paired ratios (lab 00's words), or prints one side only
MEDIANS_BESIDE_A_VERDICT = {"02": "step_timings = {n: measure.Timing(", "11": "speed = side_by_side(", "13": "speed_ranks = launch("}
REPORTED_BY = {"02": ("report.launched_table(", "labs/lab02/report.py"),  # (the call, the module printing the table)
               "13": ("spatial.speed_table(", "labs/lab13/spatial.py")}
# lab 12 (learner s11f): its cell prints one median, the step's time with the record off, and no pair of medians


@pytest.mark.parametrize("lab", sorted(MEDIANS_BESIDE_A_VERDICT))
def test_medians_printed_beside_a_verdict_say_the_comparisons_figure_is_the_verdicts(lab):
    """Learner s5C: lab 12 printed 13.44 vs 10.61 ms beside a verdict of 0.81x, lab 13 34x beside 26.06x, lab 11 1.10x
    beside 1.06x, and nothing said why."""
    path = next(p for p in labs.solution_notebooks() if p.name.startswith(lab))
    cells = [c.source for c in nbformat.read(path, 4).cells
             if c.cell_type == "code" and MEDIANS_BESIDE_A_VERDICT[lab] in c.source]
    assert len(cells) == 1, f"{path.name}: the cell that measures the pair was not found: did it change?"
    import lab_utils
    call, module = REPORTED_BY.get(lab, (None, None))  # a cell that hands its table to the lab's report module
    said = cells[0] + (Path(lab_utils.__file__).parent.joinpath(module).read_text() if call and call in cells[0] else "")
    assert "median of the paired ratios (lab 00)" in said


def test_lab_12_prints_no_pair_of_medians_beside_its_verdicts():
    """Lab 12's cost cell prints the step's time once (record off): no median of the other sides to divide."""
    path = next(p for p in labs.solution_notebooks() if p.name.startswith("12"))
    (cell,) = [c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code" and "cost = launch(cost_worker"
               in c.source]
    assert "report.cost_report(cost" in cell and "median(cost[" not in cell  # the report prints it (s12r3f)
    import lab_utils
    module = Path(lab_utils.__file__).parent.joinpath("labs/lab12/report.py").read_text()
    assert module.count("median(cost[") == 1 and 'statistics.median(cost["record off"])' in module


# ---- one name per workload: every results row names a registered workload; "course CNN" one preset; no "speed test" --

ROW_WORKLOAD = re.compile(r"workload: (?P<name>.+?)  \(rate:\s")  # the rate may wrap to the next line
COURSE_CNN_DEFINED = re.compile(rf"course CNN.{{0,80}}?(?:{workloads.model_name(workloads.COURSE_CNN)}(?![\w-])|"
                                rf"{workloads.COURSE_CNN})", re.S)


def other_presets() -> list[str]:
    """What "course CNN" must not stand beside: another preset's name, short name, parameter count or gradient bytes
    (the 3-conv CNN has 106,058 parameters on 28x28 images, 424 kB of gradients; the course CNN 105,866 and 423 kB)."""
    said = []
    for preset in spec.PRESETS:
        if preset != workloads.COURSE_CNN:
            said += [preset, workloads.model_name(preset)]
            for side in (8, 28):
                n = sum(spec.parameter_counts(spec.preset(preset), (1, side, side)))
                said += [f"{n:,} ", f"{n:,}\n", f" {4 * n / 1000:.0f} kB", f" {4 * n / 1e6:.2f} MB"]
    return said


def cells_of(path) -> list[tuple[int, str, str]]:
    """(cell index, source, committed outputs' text) of every cell."""
    cells = nbformat.read(path, 4).cells
    return [(i, c.source, "".join(text_of(o) for o in c.get("outputs", []))) for i, c in enumerate(cells)]


def unregistered_rows(path) -> list[str]:
    return [f"cell {i}: {m['name']!r}" for i, _, out in cells_of(path) for m in ROW_WORKLOAD.finditer(out)
            if workloads.find(m["name"]) is None]


def course_cnn_misuses(path) -> list[str]:
    """A cell's source or a line of output that says "course CNN" beside another preset; a notebook whose prose or code
    says it without tying it to its preset in one sentence (lab 10's outputs repeat other labs' labels: lines only)."""
    others, wrong, said = other_presets(), [], []
    for i, source, out in cells_of(path):
        lines = [line + "\n" for line in out.splitlines() if "course CNN" in line]
        if "course CNN" in source:
            said.append((i, source))
            lines.append(source)
        wrong += [f"cell {i}: 'course CNN' beside {o.strip()}" for o in others if any(o in text for text in lines)]
    if said and not any(COURSE_CNN_DEFINED.search(t) for _, t in said):
        wrong.append(f"says 'course CNN' (cells {[i for i, _ in said]}) without naming it "
                     f"{workloads.model_name(workloads.COURSE_CNN)} in the same sentence")
    return wrong


def speed_tests(path) -> list[str]:
    return [f"cell {i}" for i, source, out in cells_of(path) if re.search(r"speed[ -]test", source + out, re.I)]


def test_the_name_checks_catch_an_unregistered_row_a_second_course_cnn_and_a_speed_test():
    table = "    workload: {}  (rate: training samples/s)\n"
    cells = [nbformat.v4.new_code_cell("print(rows)", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text=table.format(workloads.STEP_3CONV.name) + table.format("speed test: cnn2d_3layer"))]),
        nbformat.v4.new_markdown_cell("The course CNN (CNN-2conv) of Lab 01."),
        nbformat.v4.new_code_cell('models = {"course CNN": spec.cnn2d_3layer_fullconnected_3layer()}'),
        nbformat.v4.new_code_cell("print(report)", outputs=[nbformat.v4.new_output(  # lab 10 lists other labs' rows
            "stream", name="stdout", text="07 course CNN float32 1 1 64\n01 CNN-3conv/synthetic28 step\n")]),
        nbformat.v4.new_code_cell("print(models)", outputs=[nbformat.v4.new_output(  # lab 02's old mix-up, by numbers
            "stream", name="stdout", text="course CNN          106,058 float32 parameters =  0.42 MB of weights\n"
                                          "course CNN       gradients 0.42 MB; ring all-reduce\n")])]
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nb.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
        assert unregistered_rows(path) == ["cell 0: 'speed test: cnn2d_3layer'"]
        assert course_cnn_misuses(path) == ["cell 2: 'course CNN' beside cnn2d_3layer_fullconnected_3layer",
                                            "cell 4: 'course CNN' beside 106,058", "cell 4: 'course CNN' beside 0.42 MB"]
        assert speed_tests(path) == ["cell 0"]
        nbformat.write(nbformat.v4.new_notebook(cells=cells[2:3]), path)  # never tied to its preset either
        assert len(course_cnn_misuses(path)) == 2


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_every_results_row_names_a_registered_workload(path):
    assert unregistered_rows(path) == [], "rows whose workload is not in lab_utils.workloads.REGISTRY: run `make outputs`"


# lab 10 lists the verdicts of verdicts.csv: "  lab 02 CLAIM [WORKLOAD]: 0.99x (range 0.95-1.06, 24 pairs) -> holds"
REPORTED_VERDICT = re.compile(r"^\s*lab \d\d (?P<claim>.+?): \d+\.\d\dx \(range .*\) -> ")
# ... grouped by lab, outcome first: "  holds: CLAIM [WORKLOAD]: 0.99x (range 0.95-1.06, 24 pairs); above 1 ..."
REPORTED_GROUPED = re.compile(r"^  (?:holds|reversed|not distinguishable here): (?P<claim>.+?): \d+\.\d\dx \(range ")


def unnamed_verdicts(path) -> list[str]:
    """The verdict lines of the committed outputs (and lab 10's list of them) that name no workload, or a name not in
    lab_utils.workloads.REGISTRY."""
    wrong = []
    for i, _, out in cells_of(path):
        lines = out.splitlines()
        for j, line in enumerate(lines):
            v = verdict_at(lines, j) or REPORTED_VERDICT.match(line) or REPORTED_GROUPED.match(line)
            if not v:
                continue
            claim, named = split_workload(v["claim"])
            unknown = [n for n in workloads.verdict_names(named) if workloads.find(n) is None]
            if not named or unknown:
                wrong.append(f"cell {i}: {claim!r} " + (f"names {unknown}" if named else "names no workload"))
    return wrong


def verdict_calls_without_workload(source: str) -> list[int]:
    """Line numbers of the measure.verdict / measure.decide calls in `source` that pass no workload=."""
    import ast
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr in ("verdict", "decide")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "measure"
            and not any(k.arg == "workload" for k in node.keywords)]


def test_the_verdict_checks_catch_a_line_and_a_call_that_name_no_workload():
    line = ("verdict, 1F1B vs GPipe, M=8{}: 1.09x (above 1 favours 1F1B; range 1.07-1.14 over 30 paired repeats) -> holds\n"
            "verdict, c{} (e): cannot be seen here: busy. Rerun with nothing else running\n  lab 04 c{}: 1.09x (range 1.07-1.14, 30 pairs) -> holds\n"
            "  holds: c{}: 1.09x (range 1.07-1.14, 30 pairs); above 1 favours 1F1B\n")
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nb.ipynb"
        for named, found in ((f" [{workloads.PIPELINE.name}]", 0), ("", 4), (" [speed test]", 4),
                             (f" [{workloads.PRECISION.name} & {workloads.PRECISION_WIDE.name}]", 0)):
            cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                             text=line.format(*[named] * 4))])
            nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
            assert len(unnamed_verdicts(path)) == found, (named, unnamed_verdicts(path))
    assert split_workload(f"DDP vs DataParallel (gloo) [{workloads.LAUNCHED_3CONV.name}] (e)") == \
        ("DDP vs DataParallel (gloo) (e)", workloads.LAUNCHED_3CONV.name)
    assert verdict_calls_without_workload("v = measure.verdict(a, b, claim='c', expected='e', lab='02')\n"
                                          "w = measure.decide(r, claim='c', expected='e', workload=W)\n") == [1]


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_every_verdict_call_names_its_workload(path):
    from IPython.core.inputtransformer2 import TransformerManager
    python = TransformerManager().transform_cell  # a cell's `!cmd` and %magics as the Python IPython runs
    code = [(i, python(c.source)) for i, c in enumerate(nbformat.read(path, 4).cells) if c.cell_type == "code"]
    assert [(i, n) for i, source in code for n in verdict_calls_without_workload(source)] == [], \
        "verdicts that name no workload: pass workload= (lab_utils.workloads.REGISTRY) to measure.verdict"


def test_every_verdict_call_of_lab_utils_names_its_workload():
    missing = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "lab_utils").rglob("*.py"))
               for n in verdict_calls_without_workload(p.read_text())]
    assert missing == [], "verdicts that name no workload: pass workload= (lab_utils.workloads.REGISTRY)"


def unrecorded_verdicts(cells: list[str]) -> list[str]:
    """The measure.verdict / measure.decide calls in a notebook's code cells whose verdict never reaches verdicts.csv:
    neither `.record(` on the call itself nor on the name it is assigned to (`name.record(` or `name[...].record(`)."""
    import ast
    code, missing = "\n".join(cells), []
    for source in cells:
        tree = ast.parse(source)
        parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("verdict", "decide") and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "measure"):
                continue
            above = parent.get(node)
            if isinstance(above, ast.Attribute) and above.attr == "record":
                continue
            target = above.targets[0] if isinstance(above, ast.Assign) else None
            name = (target.value.id if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    else ast.unparse(target) if target is not None else "")
            if not name or not re.search(re.escape(name) + r"(\[[^\]]*\])?\.record\(", code):
                missing.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return missing


def test_the_record_check_catches_a_verdict_that_is_only_printed():
    call = "measure.verdict(a, b, lab='09', claim='2 model workers vs 1', expected='e', workload=W)"
    assert len(unrecorded_verdicts([f"v = {call}\nprint(v)"])) == 1  # lab 09's, before issue 52's reading
    assert unrecorded_verdicts([f"v = {call}", "print(v.record(results_dir))"]) == []
    assert unrecorded_verdicts([f"print({call}.record(results_dir))"]) == []
    assert unrecorded_verdicts([f"vs[k] = {call}", "print(vs[k].record(results_dir))"]) == []
    assert len(unrecorded_verdicts([f"print({call})"])) == 1


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_every_verdict_a_lab_decides_is_recorded_so_stability_compares_it(path):
    """Lab 09's '2 model workers vs 1' was printed but never written to verdicts.csv, so `stability` never compared
    it across runs (reader, issue 52)."""
    from IPython.core.inputtransformer2 import TransformerManager
    python = TransformerManager().transform_cell
    cells = [python(c.source) for c in nbformat.read(path, 4).cells if c.cell_type == "code"]
    assert unrecorded_verdicts(cells) == [], "verdicts never recorded: call .record(results_dir) on them"


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_every_committed_verdict_line_names_a_registered_workload(path):
    assert unnamed_verdicts(path) == [], "verdict lines that name no registered workload: run `make outputs`"


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_course_cnn_names_one_preset_and_speed_test_names_none(path):
    assert course_cnn_misuses(path) == []
    assert speed_tests(path) == [], "'speed test' named four workloads: name the registry's workload instead"


def test_a_bounded_verdicts_figure_is_found_after_the_claim_it_tested():
    """A verdict line that names the claim tested after its own claim ('..., tested as ...') still pairs with its row."""
    table = "     1     1.00x         89.8          99.5       {}x   1.00x   17.77, 18.18"
    line = ("verdict, async vs sync, no straggler [W], tested as 'ahead by no more than 25%' (predicted: e; restated "
            "weaker, see the note): 1.11x (above 1 favours async; it holds while the whole range lies below 1.25; "
            "range 1.02-1.20 over 5 paired repeats) -> holds")
    for figure, conflicts in (("1.11", 0), ("0.90", 1)):
        cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                         text=f"{table.format(figure)}\n{line}\n")])
        assert [len(x) if isinstance(x, list) else x for x in figure_conflicts_of([cell], "08")] == [conflicts, 1]


def test_lab_08s_k1_row_with_theorys_bound_pairs_with_its_direction_verdict():
    """Where the idle share rules the tie out, the theory column reads '≤1.24x' and the verdict tests the direction."""
    table = "          1     1.00x         65.0          73.5       {}x  ≤1.24x   16.27, 25.66"
    line = ("verdict, async vs sync, no straggler [W]: 1.13x (above 1 means async ahead: it overlaps the idle share of "
            "sync's rounds; range 1.11-1.32 over 5 paired repeats) -> holds")
    for figure, conflicts in (("1.13", 0), ("1.24", 1)):
        cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                         text=f"{table.format(figure)}\n{line}\n")])
        assert [len(x) if isinstance(x, list) else x for x in figure_conflicts_of([cell], "08")] == [conflicts, 1]


def unrecorded_refusals(cells: list[str]) -> list[str]:
    """The names a notebook gives a measure.as_result(..., workers=...) line (N workers' ratio over one, refused on a
    busy machine) that no cell recording measure.Result rows mentions: the row would reach lab 10 without its
    refusal."""
    import ast
    names = [ast.unparse(node.targets[0]) for source in cells for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and refuses_workers(node.value)]
    recording = [source for source in cells if "measure.Result(" in source]
    return [n for n in names if recording and not any(re.search(rf"\b{re.escape(n)}\b", s) for s in recording)]


def refuses_workers(call) -> bool:
    """True for a call that decides whether N workers' ratio over one is refused: measure.as_result or
    measure.unreadable with `workers`, or a lab's own refused(...) (lab 02's sweep)."""
    import ast
    name = ast.unparse(call.func)
    return (name in ("measure.as_result", "measure.unreadable") and any(k.arg == "workers" for k in call.keywords)
            or name.endswith(".refused"))


def test_the_refusal_check_catches_a_row_recorded_without_its_refusal():
    line = "line = measure.as_result('1.2x', workers=2, load=load)"
    assert unrecorded_refusals([line, "rows = [measure.Result(flags=flags)]"]) == ["line"]  # lab 05 before learner s8
    assert unrecorded_refusals([line, "rows = [measure.Result(flags=flags + measure.refusal(line))]"]) == []
    assert unrecorded_refusals(["x = measure.as_result('1.2x', load=load)", "measure.Result(flags=[])"]) == []
    # lab 02 (learner s8e): the table's refusal (measure.unreadable) and the sweep's (data_parallel.refused) never
    # reached its recorded rows, so lab 10 gave them speedups
    why = "unreadable = measure.unreadable(workers=2, what='devices')"
    assert unrecorded_refusals([why, "rows = [measure.Result(flags=flags)]"]) == ["unreadable"]
    assert unrecorded_refusals([why, "measure.Result(flags=measure.refusal(refusal_line(unreadable)))"]) == []
    sweep = "sweep_refused = data_parallel.refused(sweep)"
    assert unrecorded_refusals([sweep, "recorded = list(sweep.results)", "measure.Result()"]) == ["sweep_refused"]
    assert unrecorded_refusals([sweep, "recorded = data_parallel.recorded(sweep, sweep_refused); measure.Result()"]) == []


NOT_A_RECORDED_RATIO: dict[str, set[str]] = {"13": {"busy"}}  # lab 13: the spatial code on 1 rank and the floor are lines only
@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_a_workers_comparison_a_lab_refuses_is_recorded_with_its_refusal(path):
    """Lab 05 refused '2 workers vs 1' on a busy run but recorded the row bare, so lab 10 headlined its 1.23x as the
    best plausible speedup and fitted Amdahl's law to it (learner s8); lab 02 did the same with its sweep's and its
    launched table's refusals, which were never assigned as an as_result line (learner s8e)."""
    from IPython.core.inputtransformer2 import TransformerManager
    python = TransformerManager().transform_cell
    cells = [python(c.source) for c in nbformat.read(path, 4).cells if c.cell_type == "code"]
    missing = set(unrecorded_refusals(cells)) - NOT_A_RECORDED_RATIO.get(path.name[:2], set())
    assert missing == set(), "record the row with measure.refusal(<its refusal line>) in its flags"


MORE_CALLS = re.compile(r"the first call compiles the model .*?, then (\d+) more calls")


def announced_and_logged_calls(path) -> list[tuple[int, int]]:
    """(calls announced, calls logged) for each 'then N more calls' line in a notebook's outputs: the first call
    plus N against the log's lines of 'batch NN: graphs traced' in the same cell."""
    found = []
    for index in sorted({i for i, _ in outputs(path)}):
        text = "".join(text_of(o) for i, o in outputs(path) if i == index)
        for m in MORE_CALLS.finditer(text):
            found.append((1 + int(m[1]), len(re.findall(r"batch +\d+: graphs traced", text))))
    return found


def test_lab_09_announces_as_many_compile_calls_as_it_logs():
    """Lab 09 said 'the first call ..., then 9 more calls' above a log of 11 calls (learner s8)."""
    path = next(p for p in labs.solution_notebooks() if p.name.startswith("09"))
    found = announced_and_logged_calls(path)
    assert found, f"{path.name}: no 'then N more calls' line in the committed outputs: did it change?"
    assert all(said == logged for said, logged in found), f"calls announced vs logged: {found}: run `make outputs`"


def test_the_verdict_parser_reads_the_stacked_lines_the_renderer_prints():
    """measure.lines.stacked prints a verdict on several lines (learner s9i): the checks above still find its claim,
    its figure and its pairs, and a refused one's claim without a figure, wrapped or not, indented or not."""
    import textwrap

    from lab_utils import conditions, measure
    busy = conditions.Load(60.0, 2, own=0.4, others=1.5, steal=0.0)
    claim = "DataParallel, 2 devices vs one device, batch 8"
    held = measure.decide([2.1, 2.3, 2.2, 2.25, 2.4], claim=claim, expected="one device faster",
                          workload=workloads.SWEEP_3CONV, timed=False)
    bounded = measure.decide([1.13, 0.95, 1.48, 1.04, 1.30, 0.99, 1.20], claim="1F1B vs GPipe, M=8", timed=False,
                             expected="1F1B at most 10 % slower (1.9x less memory)", no_worse_than=0.10,
                             workload=workloads.PIPELINE)
    refused = measure.decide([0.85, 0.62, 1.09, 0.9, 0.8], claim=claim, expected="one device faster", load=busy,
                             workload=workloads.SWEEP_3CONV)
    for indent in ("", "    "):
        text = textwrap.indent(f"header\n{held}\n{bounded}\n{refused}\nafter", indent)
        lines = text.splitlines()
        found = [(verdict_at(lines, i)["claim"], verdict_at(lines, i)["ratio"], verdict_at(lines, i)["pairs"])
                 for i in range(len(lines)) if verdict_at(lines, i)]
        assert found == [(f"{claim} [{workloads.SWEEP_3CONV.name}]", "2.25", "5"),
                         (f"1F1B vs GPipe, M=8 [{workloads.PIPELINE.name}]", "1.13", "7"),
                         (f"{claim} [{workloads.SWEEP_3CONV.name}]", None, None)], found
        cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])
        import tempfile
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "nb.ipynb"
            nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
            assert unnamed_verdicts(path) == [] and too_long_lines(path) == []


# ---- printed lines a learner can read (issue 51, learners s9i, s9j: verdicts of 250-450 characters on one line) ----

RENDERED = re.compile(r"^\s*\[!\] ")  # a [!] line of measure's (flagged, a table's); a figure's inline flag or note
#  (flagged, table_row) moves under it past lines.WIDTH (test_measure); a lab that builds its own is its lab's to wrap


def too_long_lines(path) -> list[str]:
    """The lines of the committed outputs that measure's renderer printed (a verdict and the lines under it, a [!]
    line) and that are longer than measure.lines.LONGEST."""
    from lab_utils.measure import lines as printed
    long = []
    for i, _, out in cells_of(path):
        lines, verdict = out.splitlines(), set()
        for j, line in enumerate(lines):
            if line.lstrip().startswith("verdict, "):  # the verdict's line and its lines under it (lines.HANG deeper,
                depth = len(line) - len(line.lstrip())  # their wrapped lines twice that)
                verdict |= {j} | set(__import__("itertools").takewhile(
                    lambda k: len(lines[k]) - len(lines[k].lstrip()) in (depth + 4, depth + 8), range(j + 1, len(lines))))
            if len(line) > printed.LONGEST and (j in verdict or RENDERED.search(line)):
                long.append(f"cell {i}: {len(line)} characters: {line[:90]}...")
    return long


def test_the_line_check_catches_a_one_line_verdict_and_a_long_flag():
    from lab_utils import measure
    one_line = ("verdict, 1F1B vs GPipe, M=8 [CNN-2conv/synthetic28 pipeline step], too noisy to test a cost up to "
                "30%: only a win could decide (predicted: e): 1.06x (above 1 favours 1F1B; range 0.99-1.41 over 30 "
                "paired repeats) -> not distinguishable here")
    flag = "[!] speed: 2.3x: " + "efficiency 115 %, above 100 %: impossible for the same work " * 3
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nb.ipynb"
        for text, found in ((one_line, 1), (flag, 1), (measure.lines.wrap(flag), 0), ("x" * 200, 0)):
            cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])
            nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
            assert len(too_long_lines(path)) == found, (text, too_long_lines(path))


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_no_printed_verdict_flag_or_note_line_is_longer_than_120_characters(path):
    """Fails on outputs committed before measure.lines (one-line verdicts): the integrator checks it after `make
    outputs` re-makes them, when it must pass."""
    assert too_long_lines(path) == [], "verdict, flag or note lines too long to read: run `make outputs`"


# ---- every printed line a learner can read (issue 51: lines of 200-400 characters in most labs) ---------------------
# No line of the committed outputs is longer than measure.lines.LONGEST (120), prose or not, except
#   - a table's row: after its indent, at least two column gaps (two or more spaces, or ' | ') between its words;
#   - Python's own traceback: from 'Traceback (most recent call last):' to the exception's line (which is checked), and
#     an error output's frames (its 'Name: message' is checked);
#   - printed source code: variants' diff lines ('  -    code', '  +    code'), copied from a function's source.
# Outputs made before this rule (issue 51, the shared renderer's wrapping) are skipped: `make outputs` re-makes them.
TABLE_ROW = re.compile(r"\S(?: \| | {2,})\S.*?\S(?: \| | {2,})\S")
CODE_DIFF = re.compile(r"^\s*[-+] {3,}\S")
TRACEBACK = "Traceback (most recent call last):"
LINES_RULE_SINCE = "2026-12-07T12:10"  # committed outputs started (papermill's start_time) before this: not checked


def checked_lines(output) -> list[str]:
    """The lines of one committed output the length rule reads: an error's message, a stream's or a value's text
    without Python's traceback frames, table rows or printed source."""
    if output.get("output_type") == "error":
        text = f"{output.get('ename', '')}: {output.get('evalue', '')}"
    else:
        text = "".join(output.get("text", "")) + "".join(
            "".join(v) if isinstance(v, list) else str(v) for k, v in output.get("data", {}).items() if k == "text/plain")
    kept, in_traceback = [], False
    for line in text.splitlines():
        if line.strip() == TRACEBACK:
            in_traceback = True
            continue
        if in_traceback and (line[:1].isspace() or not line):  # a frame: '  File ...', its source, '    ^^^'
            continue
        in_traceback = False  # the exception's line: checked
        if TABLE_ROW.search(line.strip()) or CODE_DIFF.match(line):
            continue
        kept.append(line)
    return kept


def overlong_lines(path) -> list[str]:
    """'cell N: length: start' for every checked line over measure.lines.LONGEST in a notebook's committed outputs."""
    from lab_utils.measure import lines as printed
    return [f"cell {i}: {len(line)}: {line[:80]}" for i, output in outputs(path) for line in checked_lines(output)
            if len(line) > printed.LONGEST]


def made_before_the_lines_rule(path) -> bool:
    """Whether the notebook's committed outputs were made (papermill's start_time) before LINES_RULE_SINCE."""
    started = nbformat.read(path, 4).metadata.get("papermill", {}).get("start_time")
    return bool(started) and str(started) < LINES_RULE_SINCE


def test_the_long_line_rule_catches_prose_and_spares_tables_tracebacks_and_source():
    prose = "noise: 8 of 9 medians spread more than 25 % over their repeats (the widest 253 %: " + "a few slow " * 8
    table = "one 32px image         spatial              15.35    123%       3,328            14,932" + " " * 3 + "x" * 40
    piped = "0    | raised RuntimeError | all_reduce #2 [2] float32 (failed) | cell [27], line 6 | " + "y" * 40
    trace = f"{TRACEBACK}\n  File \"x.py\", line 3, in f\n    {'z' * 130}\n    ^^^\nValueError: {'w' * 130}"
    diff = "  -    stats = SumOverSlabs.apply(stats)" + " " * 40 + "# the same, over every rank's slab" + "!" * 20
    stream = nbformat.v4.new_output("stream", name="stdout", text="\n".join([prose, table, piped, trace, diff]))
    found = checked_lines(stream)
    assert found == [prose, f"ValueError: {'w' * 130}"], found
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="v" * 130, traceback=["frame " * 40])
    assert checked_lines(error) == [f"ValueError: {'v' * 130}"]
    assert checked_lines(nbformat.v4.new_output("stream", name="stdout", text="PASS  " + "p " * 70)) != []  # one gap


@pytest.mark.parametrize("path", labs.solution_notebooks(), ids=lambda p: p.name[:2])
def test_no_committed_output_line_is_longer_than_120_characters(path):
    """Every output line fits LONGEST (prose wraps at 100), tables, tracebacks and printed source aside. Outputs made
    before the rule are skipped (they fail it: `make outputs` re-makes them, after which this must pass)."""
    long = overlong_lines(path)
    if made_before_the_lines_rule(path):
        pytest.skip(f"{path.name}: outputs made before {LINES_RULE_SINCE} ({len(long)} long line(s)): run `make outputs`")
    assert long == [], f"{path.name}: output lines over 120 characters: {long}"
