"""Grading round 4: odd inputs that must cost at most their own row (a lone surrogate, a file name that is not UTF-8,
a 250-byte file name, Markdown and HTML in a learner's text), rosters and regrades that cannot give one student
another's grade, instructor folders a sandbox could see, and a disk limit that also bounds file entries and xattrs.

The class is graded by the CLI, in the sandbox (bubblewrap, where it works) and without one (--unsandboxed); .ci/run
runs this file again as an unprivileged uid (tests/as_unprivileged.py)."""
import csv
import html.parser
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lab_utils.instructor.grading import grade, gradebook
from lab_utils.instructor.grading.gradebook import ExerciseScore, Graded
from lab_utils.instructor.grading.sandbox import bubblewrap, machine

from lab10_answers import PREDICT, SERIAL, SPEEDUP

ROOT = Path(__file__).resolve().parent.parent
MARKUP = ('<a href="https://evil.example/x">click</a> <img src=x onerror=alert(1)> **bold** `tick` ``two`` a|b '
          'c\\|d [link](https://evil.example) $x$ www.evil.example &lt; _emph_ __strong__ ~~strike~~ me@evil.example '
          'ftp://evil.example\nsecond line')
HTML_NAME = "<img src=x onerror=alert(1)>"
LONG_NAME = "l" * 244  # 250 bytes with .ipynb
NOT_UTF8 = os.fsdecode(b"caf\xe9-\xff")
SURROGATE = "surrogate"
MANY_FILES = '''
def predict_speedup(serial_fraction, devices):
    for i in range(200_000):
        open(f"f{i}", "w").close()
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / devices)
'''
XATTR = '''
def speedup_and_efficiency(row, baseline):
    import errno, os
    open("x", "w").close()
    try:
        os.setxattr("x", "user.big", b"y" * 1000)
    except OSError as exc:
        raise RuntimeError(f"xattr refused: {errno.errorcode[exc.errno]}")
    raise RuntimeError("xattr stored")
'''
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


def notebook(*cells) -> nbformat.NotebookNode:
    params = new_code_cell("seed = 0\nresults_dir = None")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# a lab 10 submission"), params]
                      + [new_code_cell(textwrap.dedent(c)) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def class_of_odd_inputs(folder: Path) -> list[Path]:
    """Honest classmates with odd file names, and learners whose texts are odd; each its own file."""
    correct = notebook(SPEEDUP, SERIAL, PREDICT)
    submissions = {
        "ann": correct, HTML_NAME: correct, LONG_NAME: correct, NOT_UTF8: correct,
        SURROGATE: notebook(SPEEDUP, SERIAL, PREDICT, "raise ValueError('bad ' + chr(0xDCFF) + ' byte')",
                            "def fit_serial_fraction(points):\n    raise ValueError('odd ' + chr(0xDCFF))"),
        # markup in its texts, and a probe each that stores an xattr and makes 200,000 files (the disk limit's other costs)
        "markup": notebook(XATTR, MANY_FILES, f"raise ValueError({MARKUP!r})",
                           f"def fit_serial_fraction(points):\n    raise ValueError({MARKUP!r})"),
    }
    paths = []
    for name, nb in submissions.items():
        path = folder / f"{name}.ipynb"
        nbformat.write(nb, path)
        paths.append(path)
    return paths


def write_roster(path: Path, rows) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section"])
        writer.writerows(rows)
    return path


def run_cli(args, *, sandboxed: bool) -> subprocess.CompletedProcess:
    """The grader as an instructor runs it (stdout and stderr are pipes: strict UTF-8 is what a terminal gets)."""
    start = ("from lab_utils.instructor import cli; import sys; sys.exit(cli.main(sys.argv[1:]))" if sandboxed else
             "import functools, sys; from lab_utils.instructor.grading.sandbox import machine; "
             "machine.detect_isolation = functools.partial(machine.detect_isolation, use_bubblewrap=False); "
             "from lab_utils.instructor import cli; sys.exit(cli.main(sys.argv[1:]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONIOENCODING")}
    env.update(PYTHONPATH=str(ROOT), LC_ALL="C.UTF-8")
    return subprocess.run([sys.executable, "-c", start, *map(str, args)], capture_output=True, env=env, timeout=800,
                          cwd=ROOT)


@pytest.fixture(scope="module", params=["sandboxed", "unsandboxed"])
def odd_class(request, tmp_path_factory):
    sandboxed = request.param == "sandboxed"
    if sandboxed and not machine.detect_isolation().complete:
        pytest.skip("no sandbox here: " + machine.detect_isolation().describe())
    folder = tmp_path_factory.mktemp("odd")
    paths = class_of_odd_inputs(folder)
    roster = write_roster(tmp_path_factory.mktemp("roster") / "roster.csv",
                          [("Ann A", "1", "S1", "ann", "A"), ("Bob Absent", "2", "S2", "bob", "A")])
    out = tmp_path_factory.mktemp("out")
    # without a sandbox, probes only (the run's own messages are checked in the sandbox): make test stays short
    done = run_cli(["grade", "--lab", "10", "--out", out, "--jobs", "2", "--timeout", "120", "--cell-timeout", "60",
                    "--roster", roster, "--lms", "canvas", *(["--unsandboxed", "--probes-only"] if not sandboxed else []),
                    *paths], sandboxed=sandboxed)
    return {"done": done, "out": out, "paths": paths, "sandboxed": sandboxed}


def _book(out: Path) -> dict:
    with (out / "gradebook.csv").open(newline="", encoding="utf-8") as handle:  # strict UTF-8
        return {r["student"]: r for r in csv.DictReader(handle)}


def test_a_class_with_odd_inputs_is_graded_whole(odd_class):
    done, out = odd_class["done"], odd_class["out"]
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    printed = done.stdout.decode("utf-8")  # what it printed is UTF-8 (a name that is not prints as its escape)
    assert f"its files are {gradebook.file_name(LONG_NAME)}.*" in printed and gradebook.clean(NOT_UTF8) in printed
    book = _book(out)
    assert len(book) == len(odd_class["paths"])
    escaped = gradebook.clean(NOT_UTF8)
    assert set(book) == {"ann", HTML_NAME, LONG_NAME, escaped, SURROGATE, "markup"}
    for name in ("ann", HTML_NAME, LONG_NAME, escaped):  # honest classmates keep their marks
        assert book[name]["score"] == "3", (name, book[name])
    # a name that cannot be a file name gets a stable derived one, shown beside it
    assert book[LONG_NAME]["files"] == gradebook.file_name(LONG_NAME) and "~" in book[LONG_NAME]["files"]
    assert book[escaped]["files"] == gradebook.file_name(NOT_UTF8) and book["ann"]["files"] == ""
    for path in odd_class["paths"]:
        name = gradebook.file_name(path.stem)
        text = (out / f"{name}.feedback.md").read_text(encoding="utf-8")
        assert text.startswith("# Lab 10: ")
    if odd_class["sandboxed"]:  # the whole notebook ran: the learner's exception text is the run's message
        for student in (SURROGATE, "markup"):  # its own row, with a reason
            assert book[student]["status"] == "error" and book[student]["message"], book[student]
        assert "bad \\udcff byte" in book[SURROGATE]["message"] or "bad \ufffd byte" in book[SURROGATE]["message"]
        assert "onerror" in book["markup"]["message"]
    with (out / "exercises.csv").open(newline="", encoding="utf-8") as handle:
        probe = {(r["student"], r["exercise"]): r["message"] for r in csv.DictReader(handle)}
    assert probe[(SURROGATE, "fit_serial_fraction")].endswith("ValueError: odd \\udcff")
    with (out / "canvas.csv").open(newline="", encoding="utf-8") as handle:
        canvas = {r["Student"]: r["Lab 10"] for r in csv.DictReader(handle)}
    assert canvas == {"Ann A": "3", "Bob Absent": ""}
    assert (out / "class-summary.csv").read_text(encoding="utf-8")
    summary = (out / "class-summary.md").read_text(encoding="utf-8")
    check_inert(render_commonmark(summary), summary)
    if odd_class["sandboxed"]:
        for student in ("ann", SURROGATE, NOT_UTF8):
            json.loads((out / f"{gradebook.file_name(student)}.executed.ipynb").read_text(encoding="utf-8"))


def test_file_entries_and_xattrs_are_bounded(odd_class):
    """One sandbox may not make 100,000s of files (each a tmpfs inode in host memory) nor store xattrs."""
    out = odd_class["out"]
    with (out / "exercises.csv").open(newline="", encoding="utf-8") as handle:
        results = {(r["student"], r["exercise"]): r["message"] for r in csv.DictReader(handle)}
    many = results[("markup", "predict_speedup")]
    assert "more than 65536 files" in many or "No space left on device" in many, many
    xattr = results[("markup", "speedup_and_efficiency")]
    assert "xattr refused: EOPNOTSUPP" in xattr or "xattr refused: ENOTSUP" in xattr or "EPERM" in xattr, xattr


# ---- class-summary.md is inert text ---------------------------------------------------------------------------------

class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.rows, self.cells, self.text = [], [], 0, []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.cells = 0
        if tag in ("td", "th"):
            self.cells += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self.rows.append(self.cells)

    def handle_data(self, data):
        self.text.append(data)


def render_commonmark(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(text)


def check_inert(rendered: str, source: str) -> _Tags:
    """Only the summary's own structure: headings, paragraphs, its list, its table (7 cells a row), the histogram."""
    tags = _Tags()
    tags.feed(rendered)
    allowed = {"h1", "h2", "p", "ul", "li", "strong", "table", "thead", "tbody", "tr", "th", "td", "img"}
    assert {t for t, _ in tags.tags} <= allowed, (sorted({t for t, _ in tags.tags} - allowed), rendered)
    assert all(a.get("src") == "class-summary.png" and "onerror" not in a for t, a in tags.tags if t == "img")
    assert tags.rows and set(tags.rows) == {7}, tags.rows
    return tags


def hostile_rows() -> list[Graded]:
    """Rows whose every learner-controlled string is hostile Markdown or HTML."""
    def scores(message):
        return [ExerciseScore("speedup_and_efficiency", 0.0, 1.0, message), ExerciseScore("fit_serial_fraction", 1.0, 1.0, "ok")]

    return [Graded("ann", "10", "completed", 1.0, "", scores(f"running your f failed: ValueError: {MARKUP}")),
            Graded("bea", "10", "completed", 1.0, "", scores(f"running your f failed: ValueError: {MARKUP}")),
            Graded(HTML_NAME, "10", "error", 1.0, f"1 cell(s) raised; the first: {MARKUP}", scores("x")),
            Graded("`a``b|c\\|", "10", "invalid", 0.0, "**not** <b>json</b>\n# heading", scores("x"))]


def test_learner_text_in_the_class_summary_is_inert_in_commonmark():
    rows = hostile_rows()
    labels = ["speedup_and_efficiency", "fit_serial_fraction"]
    summary = gradebook.summary_md(rows, gradebook.exercise_stats(rows, labels), "10", "class-summary.png")
    tags = check_inert(render_commonmark(summary), summary)
    text = "".join(tags.text)
    assert "<img src=x onerror=alert(1)>" in text and "**bold**" in text and "a|b c\\|d" in text
    assert "`a``b|c\\|" in text and "# heading" in text and "[link](https://evil.example)" in text
    assert "_emph_ __strong__ ~~strike~~ me@evil.example ftp://evil.example second line" in text
    assert sum(t == "strong" for t, _ in tags.tags) == 2  # the two failed runs' names, and nothing else bold


def _marked() -> Path | None:
    node = shutil.which("node")
    if node is None:
        return None
    root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip() if shutil.which("npm") else ""
    for folder in (ROOT / "node_modules", Path(root) if root else None):
        if folder is not None and (folder / "marked" / "package.json").is_file():
            return folder
    return None


def test_learner_text_in_the_class_summary_is_inert_in_jupyterlabs_renderer_marked(tmp_path):
    """JupyterLab renders Markdown with marked (GFM): run it with node where node and marked are installed."""
    modules = _marked()
    if modules is None:
        pytest.skip("node or the npm package marked is missing here (npm install -g marked)")
    rows = hostile_rows()
    labels = ["speedup_and_efficiency", "fit_serial_fraction"]
    summary = gradebook.summary_md(rows, gradebook.exercise_stats(rows, labels), "10", "class-summary.png")
    (tmp_path / "summary.md").write_text(summary)
    script = ("const {marked} = require('marked'); const fs = require('fs');"
              "process.stdout.write(marked.parse(fs.readFileSync(process.argv[1], 'utf8'), {gfm: true}));")
    done = subprocess.run(["node", "-e", script, str(tmp_path / "summary.md")], capture_output=True, text=True,
                          env={**os.environ, "NODE_PATH": str(modules)}, timeout=60)
    assert done.returncode == 0, done.stderr
    tags = check_inert(done.stdout, summary)
    text = "".join(tags.text)
    import html as html_module
    text = html_module.unescape(text)
    assert "<img src=x onerror=alert(1)>" in text and "**bold**" in text and "a|b c\\|d" in text


def test_file_names_are_kept_when_safe_else_derived_stable_and_distinct():
    assert gradebook.file_name("ann") == "ann" and gradebook.file_name("Ann Lee") == "Ann Lee"
    odd = [LONG_NAME, LONG_NAME + "x", NOT_UTF8, os.fsdecode(b"caf\xe9-\xfe"), ".hidden", "a~b", "tab\there", "\udcff"]
    derived = [gradebook.file_name(n) for n in odd]
    assert len(set(derived)) == len(odd) and all("~" in d and d.isascii() for d in derived)
    assert derived == [gradebook.file_name(n) for n in odd]  # stable: a regrade finds the same files
    assert all(len((d + s).encode()) <= 255 for d in derived for s in gradebook.SUFFIXES)
    assert gradebook.clean("x" + chr(0xDCFF)) == "x\\udcff"


# ---- rosters ----------------------------------------------------------------------------------------------------

def _row(student, score):
    return Graded(student, "10", "completed", 1.0, "", [ExerciseScore("e", score, 3.0, "")])


def test_a_roster_student_who_handed_nothing_in_never_gets_a_classmates_grade(tmp_path):
    """Quinn's Canvas ID is Pat's SIS User ID, which names Pat's file: matched by one column, never both."""
    roster = gradebook.read_roster(write_roster(tmp_path / "r.csv", [("Pat P", "2002", "1001", "pat", "A"),
                                                                      ("Quinn Q", "1001", "3003", "quinn", "A")]))
    with pytest.raises(ValueError, match=r"line 2 \(Pat P\)'s SIS User ID.*line 3 \(Quinn Q\)'s ID.*--roster-column"):
        gradebook.check_roster(roster, gradebook.roster_column(roster), ["1001"], declared=False)
    column = gradebook.roster_column(roster, "SIS User ID")
    gradebook.check_roster(roster, column, ["1001"], declared=True)
    text, notes = gradebook.canvas_csv([_row("1001", 3)], roster, "Lab 10", column)
    got = {r["Student"]: r["Lab 10"] for r in csv.DictReader(text.splitlines())}
    assert got == {"Pat P": "3", "Quinn Q": ""}
    with pytest.raises(ValueError, match="--roster-column 'Login'.*no such column"):
        gradebook.roster_column(roster, "Login")


def test_one_submission_is_never_credited_to_two_roster_students(tmp_path):
    roster = gradebook.read_roster(write_roster(tmp_path / "r.csv", [("Ann One", "1", "S1", "ann", "A"),
                                                                      ("Ann Two", "2", "S2", "ann", "B")]))
    with pytest.raises(ValueError, match=r"line 2 \(Ann One\) and line 3 \(Ann Two\) have the same SIS Login ID 'ann'"):
        gradebook.check_roster(roster, "SIS Login ID", ["ann"], declared=True)
    with pytest.raises(ValueError, match="same SIS Login ID"):
        gradebook.canvas_csv([_row("ann", 3)], roster, "Lab 10", "SIS Login ID")


def test_the_cli_refuses_a_colliding_roster_before_grading(tmp_path):
    nbformat.write(notebook(SPEEDUP), tmp_path / "1001.ipynb")
    roster = write_roster(tmp_path / "r.csv", [("Pat P", "2002", "1001", "pat", "A"), ("Quinn Q", "1001", "3003", "quinn", "A")])
    done = run_cli(["grade", "--lab", "10", "--out", tmp_path / "out", "--roster", roster, "--lms", "canvas",
                    "--unsandboxed", tmp_path / "1001.ipynb"], sandboxed=False)
    assert done.returncode == 2 and b"Quinn Q" in done.stderr and b"--roster-column" in done.stderr, done.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()


# ---- folders a sandbox can see ---------------------------------------------------------------------------------

def test_instructor_folders_a_sandbox_mounts_are_refused_and_named(tmp_path):
    nbformat.write(notebook(SPEEDUP), tmp_path / "ann.ipynb")
    tests = tmp_path / "tests"
    tests.mkdir()
    mounted = bubblewrap.mounted_folders()
    assert ROOT / "lab_utils" in mounted and ROOT / "datasets" in mounted and Path("/usr") in mounted
    assert Path(sys.prefix).resolve() in mounted or any(Path(sys.prefix).resolve().is_relative_to(m) for m in mounted)
    cases = [{"out_dir": ROOT / "notebooks" / "graded"}, {"out_dir": Path("/etc/graded")},
             {"out_dir": tmp_path / "out", "tests_dir": ROOT / "datasets" / "hidden_tests"},
             {"out_dir": tmp_path / "out", "tests_dir": ROOT / "lab_utils"},
             {"out_dir": tmp_path / "out", "roster": Path(sys.prefix) / "roster.csv", "lms": "canvas"}]
    for case in cases:
        given = case.get("roster") or case.get("tests_dir") or case["out_dir"]
        with pytest.raises(ValueError, match="which every sandbox mounts, so a submission could read it: put it") as err:
            grade.grade([tmp_path / "ann.ipynb"], "10", say=lambda line: None, **case)
        assert str(Path(given).resolve()) in str(err.value)
    assert not (ROOT / "notebooks" / "graded").exists() and not (ROOT / "datasets" / "hidden_tests").exists()
    # the other way: folders of their own, outside, are accepted
    grade.check_private_folders(tmp_path / "out", tests, tmp_path / "roster.csv")


# ---- regrades -----------------------------------------------------------------------------------------------------

HIDDEN = '''
from lab_utils.exercises import Exercise

def _cases(rng):
    return [rng.uniform(0.05, 0.5), rng.choice([64, 128, 256])]

def _run(fn, case):
    return float(fn(*case))

def _expected(case):
    s, n = case
    return 1 / (s + (1 - s) / n)

def _judge(got, expected, case):
    return (1.0, "right at many devices") if abs(got - expected) < 1e-9 else (0.0, "wrong at many devices")

EXERCISES = [Exercise("10", "predict_speedup", _cases, _run, _expected, _judge, "Amdahl's law at many devices", points=2.0)]
'''


@pytest.fixture(scope="module")
def graded_with_tests(tmp_path_factory):
    """Two students graded probes-only without a sandbox (what a regrade needs is the folder, not the sandbox)."""
    folder = tmp_path_factory.mktemp("sub")
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT), folder / "qa.ipynb")
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT), folder / "qb.ipynb")
    tests = tmp_path_factory.mktemp("hidden")
    (tests / "hidden.py").write_text(HIDDEN)
    out = tmp_path_factory.mktemp("graded")
    grade.grade([folder / "qa.ipynb", folder / "qb.ipynb"], "10", out, tests_dir=tests, execute_notebooks=False,
                isolation=machine.detect_isolation(use_bubblewrap=False), unsandboxed=True, say=lambda line: None)
    return {"folder": folder, "tests": tests, "out": out}


def test_a_regrade_with_other_exercises_is_refused_and_says_which_setting(graded_with_tests, tmp_path):
    g = graded_with_tests
    out = tmp_path / "out"
    shutil.copytree(g["out"], out)
    before = (out / "gradebook.csv").read_bytes()
    assert list(json.loads((out / grade.SETTINGS_FILE).read_text())["tests"]) == ["hidden.py"]
    paths = [g["folder"] / "qa.ipynb", g["folder"] / "qb.ipynb"]
    with pytest.raises(ValueError, match=r"--tests: the folder was graded with hidden\.py .*this run with none"):
        grade.grade(paths, "10", out, regrade="qa", execute_notebooks=False, unsandboxed=True,
                    isolation=machine.detect_isolation(use_bubblewrap=False), say=lambda line: None)
    (out / grade.SETTINGS_FILE).unlink()  # a folder graded before settings were recorded: its columns still tell
    with pytest.raises(ValueError, match=r"the exercises: the folder has .*predict_speedup \(instructor test\)"):
        grade.grade(paths, "10", out, regrade="qa", execute_notebooks=False, unsandboxed=True,
                    isolation=machine.detect_isolation(use_bubblewrap=False), say=lambda line: None)
    assert (out / "gradebook.csv").read_bytes() == before


def test_two_regrades_at_once_on_one_folder_both_land(graded_with_tests, tmp_path):
    """qa regraded to full marks and qb to a partial score at the same time: the gradebook ends with both."""
    g = graded_with_tests
    out = tmp_path / "out"
    shutil.copytree(g["out"], out)
    folder = tmp_path / "new"
    folder.mkdir()
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT), folder / "qa.ipynb")
    nbformat.write(notebook(SPEEDUP, "def fit_serial_fraction(points):\n    return 0.9", PREDICT), folder / "qb.ipynb")
    paths = [folder / "qa.ipynb", folder / "qb.ipynb"]
    errors, said = [], []

    def regrade(student):
        try:
            grade.grade(paths, "10", out, tests_dir=g["tests"], regrade=student, execute_notebooks=False,
                        unsandboxed=True, isolation=machine.detect_isolation(use_bubblewrap=False), say=said.append)
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=regrade, args=(s,)) for s in ("qa", "qb")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    book = _book(out)
    assert book["qa"]["score"] == "5" and book["qb"]["score"] == "4", (book["qa"]["score"], book["qb"]["score"])
    assert "Score: 4 / 5" in (out / "qb.feedback.md").read_text() and "Score: 5 / 5" in (out / "qa.feedback.md").read_text()


def test_a_process_still_in_the_hosts_root_is_never_counted_against_the_file_limit():
    """The watcher counts the sandbox's own tmpfs through its first process's root: a process in the host's root (before
    it enters the sandbox, or a reused pid) would count the whole machine's /tmp and kill an honest submission."""
    import os

    from lab_utils.instructor.grading.sandbox import host

    assert host.inodes_used(os.getpid(), (Path("/tmp"),)) is None
    assert host.parent_of(os.getpid()) == os.getppid() and host.parent_of(2 ** 31 - 1) is None
