"""The committed outputs: one run of the labs in order, clean of the build machine's details, and the scaling report's
table showing exactly the figures the source labs printed."""
import re
import socket
from pathlib import Path

import nbformat
import pytest

from lab_utils.instructor import labs
from lab_utils.instructor.course import committed_outputs

ROOT = Path(__file__).resolve().parent.parent
LEAKS = {
    "an absolute path": re.compile(r"(?<![\w.~])/(?:tmp|home|root|work|Users|private|var/folders|opt)/"),
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
REPORT_ROW = re.compile(r"^(\d\d) +\S+ +.*? +(\d+) +(\d+|kernel) +(\d+) +(?:[\d.]+%|-) +(\d+) ")


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
