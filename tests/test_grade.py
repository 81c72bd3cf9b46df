"""The grader: broken, noisy and hostile submissions, graded together with --jobs 3.

Scores come from probes that run only the learner's definition on inputs drawn per run, judged in the grader; each
submission runs in its own sandbox. Every stub scores 0, every correct classmate keeps full marks, the gradebook is a
regular file with one row per submission, nothing is left running.
"""
import contextlib
import csv
import errno
import hashlib
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lab_utils import exercises
from lab_utils.exercises import to_plain
from lab_utils.hardware import usable_cpu_count
from lab_utils.instructor.grading import grade, gradebook, submission_reader
from lab_utils.instructor.grading.sandbox import bubblewrap, cgroups, host, jail, machine
from lab_utils.instructor.grading.sandbox.isolation import Limits

# the hostile suite grades 25 notebooks in one module fixture, 3 at a time: about 130 s on a quiet 2-core machine (three
# of them wait out the 60 s whole-run limit), more under load
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # the hostile suite: make test-fast leaves it out

from lab10_answers import PREDICT, SERIAL, SPEEDUP

ROOT = Path(__file__).resolve().parent.parent
# a unix socket of the instructor's, outside /tmp (in the course's build folder; where that is not writable, as an
# unprivileged grader, in the grader's temporary folder)
SOCKET = ROOT / "build" / "grader-test.sock" if os.access(ROOT, os.W_OK) else \
    Path(tempfile.mkdtemp(prefix="grader-socket-")) / "grader-test.sock"
STUBS = '''
def speedup_and_efficiency(row, baseline):
    raise NotImplementedError("Exercise")

def fit_serial_fraction(points):
    raise NotImplementedError("Exercise")

def predict_speedup(serial_fraction, devices):
    raise NotImplementedError("Exercise")
'''
DISK_MIB = 128  # the suite's disk limit per sandbox (a parameter of grade(): the default is 1 GiB)
MARKER = "lab_grader_test_marker_3141"  # a process left behind carries it on its command line
SECRET = "instructor_secret_2718"
ENV_SECRET = "grader_environment_secret_1618"  # in the grader's environment while it grades
HONEST_IMPORTS = "import numpy as np"
HONEST = '''
ONE = np.float64(1.0)  # a module-level value the functions use, as the notebook's cells gave it

def speedup_and_efficiency(row, baseline):
    speedup = row.samples_per_s / baseline.samples_per_s
    ratio = (row.world_size * (row.threads or 1)) / (baseline.world_size * (baseline.threads or 1))
    return float(speedup * ONE), float(speedup / ratio)

def fit_serial_fraction(points):
    a = np.array([1 - 1 / n for n, _ in points])
    b = np.array([1 / s - 1 / n for n, s in points])
    return float(a @ b / (a @ a))

def predict_speedup(serial_fraction, devices):
    return float(ONE / (serial_fraction + (1.0 - serial_fraction) / devices))
'''


def notebook(*cells) -> nbformat.NotebookNode:
    params = new_code_cell("seed = 0\nresults_dir = None")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# a lab 10 submission"), params] + [new_code_cell(textwrap.dedent(c)) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


HIDDEN_TEST = f'''
from lab_utils.exercises import Exercise

# {SECRET}: an instructor test the students must not read
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


# honest habits that each once cost points although the notebook's self-check printed PASS: a helper defined after the
# exercise's cell (before the self-check), a star import, IPython syntax (a cell magic around the definition, `?` help,
# a line magic, a shell command) and display() inside the function
HONEST_HABITS = notebook("import statistics\nfrom statistics import *\nfrom lab_utils.exercises import check",
                         "%%time\n" + SPEEDUP, '''
    statistics.median?
    %matplotlib inline
    !true

    def fit_serial_fraction(points):
        a = [1 - 1 / n for n, _ in points]
        b = [1 / s - 1 / n for n, s in points]
        return fmean([x * y for x, y in zip(a, b)]) / fmean([x * x for x in a])
    ''', '''
    def predict_speedup(serial_fraction, devices):
        display(f"{devices} devices")
        return _amdahl(serial_fraction, devices)
    ''', '''
    def _amdahl(s, n):
        return 1.0 / (s + (1.0 - s) / n)
    ''', *(f"print(check({name}))" for name in ("speedup_and_efficiency", "fit_serial_fraction", "predict_speedup")))
# one self-check per cell: three in one cell outlasted the test's 10 s cell limit on a loaded machine
FORMULA_NAMES = ('=HYPERLINK("evil")', "+1+1", "@SUM(1)", "-2+3", "\ttabbed")


def refused_submissions(folder: Path) -> dict:
    """Wrong input, refused with a reason before anything runs: {name: what the reason says}."""
    refused = {}
    for name in FORMULA_NAMES:  # names a spreadsheet would read as formulas (in unreadable files: nothing runs)
        (folder / f"{name}.ipynb").write_text("{not json")
        refused[name] = "not a readable notebook"
    (folder / "linked.ipynb").symlink_to(folder / "correct.ipynb")
    refused["linked"] = "symbolic link"
    shutil.copy(ROOT / "notebooks" / "02_data_parallel.ipynb", folder / "lab02_notebook.ipynb")
    refused["lab02_notebook"] = "this is a lab 02 notebook"
    nbformat.write(notebook("def scatter(batch, n):\n    return []", "def gather(parts):\n    return []"),
                   folder / "lab02_untitled.ipynb")
    refused["lab02_untitled"] = "none of lab 10's exercises"
    bomb = notebook(SPEEDUP)
    bomb.cells.append(new_code_cell("x = 1\n" * (submission_reader.MAX_CODE_CHARS // 6 + 1)))
    nbformat.write(bomb, folder / "parse_bomb.ipynb")
    refused["parse_bomb"] = "the grader reads at most"
    return refused


ROSTER = [("Ann Correct", "101", "S101", "correct", "A"), ("Pat Partial", "102", "S102", "partial", "A"),
          ("Stu Stub", "103", "S103", "stub", "A"), ("Hon Habits", "104", "S104", "honest_habits", "B"),
          ("Lin Link", "105", "S105", "linked", "B"), ("Kil Kernel", "106", "S106", "kills_its_kernel", "B"),
          ("Eve Formula", "107", "S107", FORMULA_NAMES[0], "B"), ("Al Also", "108", "S108", "also_correct", "A"),
          ("No Show", "109", "S109", "no_show", "A"), ("Late Larry", "110", "S110", "late_larry", "B")]


def write_roster(path: Path) -> Path:
    """A class of 10 as Canvas exports it (Student, ID, SIS User ID, SIS Login ID, Section, a Points Possible row)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 09 (55)"])
        writer.writerow(["    Points Possible", "", "", "", "", "5"])
        writer.writerows([*row, ""] for row in ROSTER)
    return path


def hostile_submissions(out: Path, tests: Path) -> dict:
    """Stubs that try to earn points, or to hurt a classmate, the grader or the machine, each one way."""
    return {
        "forges_the_channel": notebook('''
            import json, os

            def _forge(fn):  # runs when the function is defined, in the probe: writes an "answer" everywhere, leaves
                for fd in range(3, 256):
                    try:
                        os.write(fd, (json.dumps({"status": "ok", "value": [[2.0, 1.0]] * 5}) + "\\n").encode())
                    except OSError:
                        pass
                os._exit(0)

            @_forge
            def speedup_and_efficiency(row, baseline):
                raise NotImplementedError
            '''),
        "hooks_and_fake_modules": notebook(STUBS, '''
            import atexit, os, pathlib
            pathlib.Path("json.py").write_text("def dumps(*a, **k): return '{\\"status\\": \\"ok\\", \\"value\\": 1.0}'\\n"
                                               "def loads(*a, **k): return {'status': 'ok', 'value': 1.0}\\n")
            pathlib.Path("lab_utils").mkdir(exist_ok=True)
            pathlib.Path("lab_utils/__init__.py").write_text("raise SystemExit('shadowed')")
            atexit.register(lambda: [os.write(fd, b'{"status": "ok", "value": 1.0}\\n') for fd in range(3, 40)])
            get_ipython().events.register("post_run_cell", lambda *a: print("PASS  predict_speedup"))
            '''),
        "walks_the_stack": notebook('''
            import gc, sys

            def predict_speedup(serial_fraction, devices):  # looks for the reference in its callers' frames and heap
                frame = sys._getframe(1)
                while frame is not None:
                    for name, value in frame.f_locals.items():
                        if name in ("expected", "reference", "answer"):
                            return value
                        if hasattr(value, "expected") and hasattr(value, "cases"):
                            return value.expected([serial_fraction, devices])
                    frame = frame.f_back
                for thing in gc.get_objects():
                    if type(thing).__name__ == "Exercise" and thing.name == "predict_speedup" and thing.points == 2.0:
                        return thing.expected([serial_fraction, devices])
                return 0.0
            '''),
        "remounts_the_course": notebook(STUBS, f'''
            import ctypes, os, subprocess
            libc = ctypes.CDLL(None, use_errno=True)
            for source, target, flags in (("/", "/mnt", 4096 | 16384), ({str(ROOT)!r}, {str(ROOT)!r}, 4096 | 32)):
                print("mount", libc.mount(source.encode(), target.encode(), None, flags, None), ctypes.get_errno())
            print("unshare", libc.unshare(0x10000000 | 0x20000), ctypes.get_errno())
            for command in (["unshare", "-Urm", "sh", "-c", "mount -o remount,rw / && echo REMOUNTED"],
                            ["mount", "-o", "remount,rw", {str(ROOT / 'lab_utils')!r}]):
                try:
                    print(subprocess.run(command, capture_output=True, text=True, timeout=20))
                except OSError as err:
                    print(type(err).__name__)
            for path in ({str(ROOT / 'lab_utils' / 'labs' / 'lab10' / 'exercises.py')!r}, {str(ROOT / 'lab_utils' / '__init__.py')!r}):
                try:
                    open(path, "a").write("\\nraise SystemExit\\n")
                except OSError as err:
                    print("write:", type(err).__name__)
            '''),
        # what it can see (mounts, environment, folders) and reach (a unix socket of the instructor's): a cell each
        "looks_around": notebook(STUBS, '''
            import os
            print(open("/proc/self/mountinfo").read())
            print(dict(os.environ))
            print(os.listdir("/"), os.listdir("/tmp"))
            ''', f'''
            import socket
            try:
                client = socket.socket(socket.AF_UNIX)
                client.connect({str(SOCKET)!r})
                client.sendall(b"hello from a submission")
                print("socket: connected")
            except OSError as err:
                print("socket:", type(err).__name__)
            '''),
        "answers_nan_and_deep": notebook('''
            def speedup_and_efficiency(row, baseline):
                return float("nan"), float("nan")

            def fit_serial_fraction(points):
                deep = []
                for _ in range(100_000):
                    deep = [deep]
                return deep

            def predict_speedup(serial_fraction, devices):
                return float("inf")
            '''),
        "forges_a_deep_answer": notebook(SPEEDUP, '''
            import os

            def _forge(fn):  # writes a deeply nested "answer" to every descriptor, then dies
                for fd in range(3, 64):
                    try:
                        os.write(fd, b'{"status": "ok", "value": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\\n")
                    except OSError:
                        pass
                os._exit(0)

            @_forge
            def predict_speedup(serial_fraction, devices):
                raise NotImplementedError
            '''),
        "fork_bomb": notebook(STUBS, '''
            import os, time
            end = time.time() + 8
            while time.time() < end:
                try:
                    if os.fork() == 0:
                        while time.time() < end:
                            try:
                                os.fork()
                            except OSError:
                                time.sleep(0.05)
                        os._exit(0)
                except OSError:
                    time.sleep(0.05)
            '''),
        "reads_the_tests": notebook(STUBS, f'''
            import os
            for root in ({str(tests)!r}, {str(out)!r}):
                try:
                    print(root, os.listdir(root))
                    print(open(os.path.join(root, "hidden.py")).read())
                except OSError as err:
                    print(type(err).__name__)
            try:
                open({str(tests / 'hidden.py')!r}, "a").write("\\nEXERCISES = []\\n")
            except OSError as err:
                print("append:", type(err).__name__)
            '''),
        "writes_the_outputs": notebook(STUBS, f'''
            import os
            os.makedirs({str(out)!r}, exist_ok=True)
            with open({str(out / 'gradebook.csv')!r}, "w") as book:
                book.write("student,lab,score,max_score,status\\nwrites_the_outputs,10,100,5,completed\\n")
            for name in ("correct.feedback.md", "correct.executed.ipynb"):
                try:
                    os.remove(os.path.join({str(out)!r}, name))
                    os.symlink("/dev/null", os.path.join({str(out)!r}, name))
                except OSError as err:
                    print(type(err).__name__)
            '''),
        "kills_everyone": notebook(STUBS, '''
            import os, signal
            for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
                if pid != os.getpid():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            os.kill(-1, signal.SIGKILL)
            '''),
        "escapes_the_sweep": notebook(STUBS, f'''
            import subprocess
            subprocess.Popen(["sh", "-c", "exec -a {MARKER} sleep 300"], start_new_session=True)
            subprocess.Popen(["sh", "-c", "(setsid sh -c 'exec -a {MARKER} sleep 301' &)"])
            '''),
        "plants_a_fifo": notebook(STUBS, '''
            import os
            for name in ("executed.ipynb", "submission.ipynb"):
                try:
                    os.remove(name)
                except OSError:
                    pass
                os.mkfifo(name)
            '''),
        "floods_every_output": notebook(STUBS, '''
            from IPython.display import HTML, display
            display(HTML("<b>x</b>" * 300_000))
            "y" * 2_000_000
            '''),
        "forges_through_proc": notebook('''
            import json, os, signal

            def _forge(fn):  # in the probe: a record into every descriptor of every other process it can open
                record = (json.dumps({"status": "ok", "value": [[2.0, 1.0]] * 7}) + "\\n").encode()
                others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
                for pid in others:
                    try:
                        fds = os.listdir(f"/proc/{pid}/fd")
                    except OSError:
                        continue
                    for fd in fds:
                        try:
                            with open(f"/proc/{pid}/fd/{fd}", "wb", buffering=0) as channel:
                                channel.write(record)
                        except OSError:
                            pass
                for pid in others:  # then kills the probe (and everyone else) so that only the forged record is left
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
                os._exit(0)

            @_forge
            def speedup_and_efficiency(row, baseline):
                raise NotImplementedError
            '''),
        "fills_the_disk": notebook(STUBS, f'''
            import os
            chunk, keep, written = b"x" * 2**20, [], 0

            def fill(path, mib, unlink=False):
                global written
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
                keep.append(fd)  # held open to the end
                if unlink:
                    os.unlink(path)
                for _ in range(mib):
                    try:
                        written += os.write(fd, chunk)
                    except OSError:
                        return

            fill("deleted_but_open", {DISK_MIB // 2}, unlink=True)
            os.mkdir("locked")
            fill("locked/kept", {DISK_MIB // 2})
            os.chmod("locked", 0)
            for place in ("/dev/shm", "/tmp", "/var/tmp", os.environ["HOME"]):
                fill(os.path.join(place, "more"), {DISK_MIB // 2})
            print("WROTE_MIB", written / 2**20)
            '''),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    isolation = machine.detect_isolation()
    if not isolation.bubblewrap:
        pytest.skip("the hostile-submission suite needs the sandbox: " + isolation.describe())
    SOCKET.parent.mkdir(exist_ok=True)
    SOCKET.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(SOCKET))
    listener.listen(8)
    listener.settimeout(0.1)
    os.environ["LAB_GRADER_TEST_SECRET"] = ENV_SECRET
    folder = tmp_path_factory.mktemp("submissions")
    tests = tmp_path_factory.mktemp("instructor_tests")
    (tests / "hidden.py").write_text(HIDDEN_TEST)
    out = tmp_path_factory.mktemp("graded")
    # symlinks and a FIFO left in the output folder (by anyone, before the run): replaced, never followed
    victim = tmp_path_factory.mktemp("victim") / "important.txt"
    victim.write_text("keep me")
    (out / "gradebook.csv").symlink_to(victim)
    os.mkfifo(out / "correct.executed.ipynb")
    submissions = {
        "correct": notebook(SPEEDUP, SERIAL, PREDICT),
        "also_correct": notebook(SERIAL, SPEEDUP, PREDICT, "print('x' * 100)"),
        "honest_names": notebook(HONEST_IMPORTS, HONEST),
        "stub": notebook(STUBS),
        "loops_forever": notebook("while True:\n    pass", SPEEDUP, SERIAL, PREDICT),
        "calls_sys_exit": notebook(SPEEDUP, "import sys\nsys.exit(1)", SERIAL, PREDICT),
        "kills_its_kernel": notebook(SPEEDUP, SERIAL, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", PREDICT),
        "partial": notebook(SPEEDUP, '''
            def fit_serial_fraction(points):
                raise NotImplementedError

            def predict_speedup(serial_fraction, devices):
                return 1.0 / (serial_fraction + (1.0 - serial_fraction) / devices) if devices < 50 else devices
            '''),
        "honest_habits": HONEST_HABITS,
        **hostile_submissions(out, tests),
    }
    paths = []
    for name, nb in submissions.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
        paths.append(folder / f"{name}.ipynb")
    (folder / "not_a_notebook.ipynb").write_text("{this is not json")
    no_params = notebook(SPEEDUP)
    del no_params.cells[1].metadata["tags"]
    nbformat.write(no_params, folder / "no_parameters.ipynb")
    paths += [folder / "not_a_notebook.ipynb", folder / "no_parameters.ipynb"]
    refused = refused_submissions(folder)
    paths += [folder / f"{name}.ipynb" for name in refused]
    roster = write_roster(tmp_path_factory.mktemp("roster") / "roster.csv")
    course = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ROOT / "lab_utils").rglob("*.py")}
    lines = []
    start = time.monotonic()
    grader_tmp = tmp_path_factory.mktemp("grader_tmp")  # the grader's own temporary folders: empty afterwards
    grader_tmp.chmod(0o755)
    uids = []  # the uids this class's sandboxes ran as (other grading tests may run beside this one, under others)

    def recorded_free_uid():
        uids.append(free_uid())
        return uids[-1]

    free_uid = jail.free_uid
    made_cgroups = []  # every cgroup this class's sandboxes made: each must be gone afterwards

    def recorded_make(name, isolation, limits, made):
        made_cgroups.append(made)
        return make_cgroups(name, isolation, limits, made)

    make_cgroups = cgroups.make
    try:
        tempfile.tempdir = str(grader_tmp)
        jail.free_uid = recorded_free_uid
        cgroups.make = recorded_make
        rows = grade.grade(paths, "10", out, tests_dir=tests, timeout=60, cell_timeout=10, jobs=3, say=lines.append,
                           limits=Limits(disk_bytes=DISK_MIB * 2**20, file_bytes=DISK_MIB * 2**20),
                           roster=roster, lms="canvas")
    finally:
        jail.free_uid = free_uid
        cgroups.make = make_cgroups
        tempfile.tempdir = None
        del os.environ["LAB_GRADER_TEST_SECRET"]
    connections = []
    with contextlib.suppress(OSError):
        while True:
            connections.append(listener.accept())
    listener.close()
    SOCKET.unlink(missing_ok=True)
    return {"rows": {r.student: r for r in rows}, "out": out, "tests": tests, "victim": victim, "order": list(submissions),
            "course": course, "said": lines, "seconds": time.monotonic() - start, "connections": connections,
            "folder": folder, "refused": refused, "grader_tmp": grader_tmp, "uids": uids,
            "cgroups": [path for made in made_cgroups for path in made]}


def points(graded, name):
    return {s.name: s.points for s in graded["rows"][name].scores}


FULL = {"speedup_and_efficiency": 1, "fit_serial_fraction": 1, "predict_speedup": 1, "predict_speedup (instructor test)": 2}


def test_correct_classmates_get_every_point_including_the_hidden_test(graded):
    for name in ("correct", "also_correct", "honest_names"):
        row = graded["rows"][name]
        assert row.status == "completed" and points(graded, name) == FULL, row.scores


@pytest.mark.parametrize("name", ["stub", "forges_the_channel", "hooks_and_fake_modules", "walks_the_stack",
                                  "reads_the_tests", "writes_the_outputs", "kills_everyone", "escapes_the_sweep",
                                  "plants_a_fifo", "floods_every_output", "remounts_the_course", "looks_around",
                                  "answers_nan_and_deep",
                                  "fork_bomb", "forges_through_proc", "fills_the_disk"])
def test_every_stub_scores_zero_whatever_it_tries(graded, name):
    row = graded["rows"][name]
    assert row.score == 0, [(s.name, s.points, s.message) for s in row.scores]
    assert row.max_score == 5


def test_a_forged_or_doubled_answer_is_refused(graded):
    forged = graded["rows"]["forges_the_channel"].scores[0]
    assert forged.points == 0 and ("could not be used" in forged.message or "form" in forged.message or "Hint" in forged.message)


def test_the_gradebook_is_a_fresh_regular_file_with_one_row_per_submission(graded):
    out = graded["out"]
    book_path = out / "gradebook.csv"
    assert book_path.is_file() and not book_path.is_symlink()
    assert graded["victim"].read_text() == "keep me"
    with book_path.open() as handle:
        book = list(csv.DictReader(handle))
    assert [gradebook.plain(r["student"]) for r in book] == \
        graded["order"] + ["not_a_notebook", "no_parameters"] + list(graded["refused"])
    assert all(r["status"] in grade.STATUSES for r in book)
    assert next(r for r in book if r["student"] == "writes_the_outputs")["score"] == "0"
    for name in ("correct.feedback.md", "correct.executed.ipynb"):
        assert (out / name).is_file() and not (out / name).is_symlink() and (out / name).stat().st_size > 0


def test_hidden_tests_stay_hidden_and_untouched(graded):
    out = graded["out"]
    assert "EXERCISES = []" not in (graded["tests"] / "hidden.py").read_text()
    for path in out.iterdir():
        assert SECRET not in path.read_text(errors="replace"), path.name
    executed = (out / "reads_the_tests.executed.ipynb").read_text()
    assert "FileNotFoundError" in executed or "[]" in executed


def test_nothing_is_left_running(graded):
    alive = subprocess.run(["pgrep", "-f", MARKER], capture_output=True, text=True).stdout.split()
    assert alive == []
    if os.geteuid() == 0:  # as root each sandbox ran as a dedicated uid: none of this class's may own a process
        assert len(graded["uids"]) >= len(graded["order"]) and set(graded["uids"]) <= set(host.SANDBOX_UIDS)
        uids = set(graded["uids"])
        leftovers = [p for p in Path("/proc").glob("[0-9]*/status")
                     if any(line.startswith("Uid:") and int(line.split()[1]) in uids for line in _read(p).splitlines())]
        assert leftovers == []
    assert [path for path in graded["cgroups"] if path.exists()] == []  # no sandbox leaves its cgroups behind


def test_a_cgroup_its_last_process_is_leaving_is_removed_once_it_can_be():
    class Busy:
        """A cgroup whose rmdir says EBUSY `times` times (a process still exiting), then succeeds."""

        def __init__(self, times):
            self.times, self.tries = times, 0

        def rmdir(self):
            self.tries += 1
            if self.tries <= self.times:
                raise OSError(errno.EBUSY, "Device or resource busy")

    leaving, stuck = Busy(3), Busy(10**6)
    assert cgroups.remove([leaving], wait_s=5) == [] and leaving.tries == 4
    assert cgroups.remove([stuck], wait_s=0.1) == [stuck]  # one that never empties: given up on, and named


def _read(path):
    try:
        return path.read_text()
    except OSError:
        return ""


def test_the_sandbox_shows_nothing_of_the_instructors_layout_and_no_privilege(graded):
    executed = printed_by(graded["out"] / "looks_around.executed.ipynb")
    assert "/proc" in executed and "HOME" in executed  # it ran and printed
    for hidden in (str(graded["out"]), str(graded["tests"]), str(graded["folder"]), "also_correct", "honest_names",
                   str(ROOT / "solutions"), str(ROOT / "tests"), ENV_SECRET, "LAB_GRADER_TEST_SECRET"):
        assert hidden not in executed, hidden
    remounts = printed_by(graded["out"] / "remounts_the_course.executed.ipynb")
    assert "stdout='REMOUNTED" not in remounts and "mount -1" in remounts and "write: OSError" in remounts.replace("PermissionError", "OSError")


def test_a_socket_outside_the_sandbox_is_unreachable(graded):
    assert graded["connections"] == []
    printed = printed_by(graded["out"] / "looks_around.executed.ipynb")
    assert "socket: connected" not in printed
    assert "socket: FileNotFoundError" in printed or "socket: PermissionError" in printed, printed[-500:]


def printed_by(path) -> str:
    """Everything the executed notebook's cells printed (not their source)."""
    nb = nbformat.read(path, 4)
    return "\n".join(o.get("text", "") + str(o.get("data", "")) + " ".join(o.get("traceback", []))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_nan_inf_and_deep_answers_cost_only_their_exercise(graded):
    row = graded["rows"]["answers_nan_and_deep"]
    assert row.score == 0 and len(row.scores) == 4
    deep = next(s for s in graded["rows"]["forges_a_deep_answer"].scores if s.name == "speedup_and_efficiency")
    assert deep.points == 1  # the same submission's honest answer still counts


def test_a_fork_bomb_leaves_its_classmates_whole(graded):
    assert graded["rows"]["fork_bomb"].score == 0
    for name in ("correct", "also_correct", "honest_names"):
        assert points(graded, name) == FULL


def test_the_course_is_unchanged(graded):
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in graded["course"]} == graded["course"]


def test_an_infinite_loop_is_interrupted_and_the_answers_still_count(graded):
    row = graded["rows"]["loops_forever"]
    assert row.status == "timeout" and points(graded, "loops_forever") == FULL


def test_a_failing_or_dying_notebook_keeps_its_answers(graded):
    assert graded["rows"]["calls_sys_exit"].status == "error" and points(graded, "calls_sys_exit") == FULL
    assert graded["rows"]["kills_its_kernel"].status == "kernel_died" and points(graded, "kills_its_kernel") == FULL


def test_partial_answers_get_partial_and_fractional_credit(graded):
    got = points(graded, "partial")
    assert got == {"speedup_and_efficiency": 1, "fit_serial_fraction": 0, "predict_speedup": 1,
                   "predict_speedup (instructor test)": 0}
    assert "stub" in next(s.message for s in graded["rows"]["partial"].scores if s.name == "fit_serial_fraction")


def test_every_output_type_is_cut_to_the_limit(graded):
    executed = nbformat.read(graded["out"] / "floods_every_output.executed.ipynb", 4)
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            for value in list(output.get("data", {}).values()) + [output.get("text", "")]:
                assert len(str(value)) < grade.MAX_OUTPUT_CHARS + 200


def test_invalid_files_are_named_with_a_reason(graded):
    assert graded["rows"]["not_a_notebook"].status == "invalid"
    assert "not a readable notebook" in graded["rows"]["not_a_notebook"].message
    assert "no cell tagged 'parameters'" in graded["rows"]["no_parameters"].message


def test_the_grader_says_what_the_sandbox_promises(graded):
    assert graded["said"] and graded["said"][0].startswith("sandbox:")


def test_honest_habits_keep_the_full_marks_their_self_check_shows(graded):
    """A helper defined after the exercise's cell, a star import, IPython syntax and display() in the function: the
    notebook's own self-check prints PASS, and the grade agrees."""
    assert points(graded, "honest_habits") == FULL, graded["rows"]["honest_habits"].scores
    printed = printed_by(graded["out"] / "honest_habits.executed.ipynb")
    for name in ("speedup_and_efficiency", "fit_serial_fraction", "predict_speedup"):
        assert f"PASS  {name}" in printed


def test_the_disk_limit_counts_everything_a_submission_writes_and_nothing_is_left(graded):
    """Deleted-but-open files, a folder of mode 000, /dev/shm, /tmp, /var/tmp and its home: one limit over all of it,
    kept by the kernel; nothing of it on the machine's disk afterwards, even as an unprivileged grader."""
    printed = printed_by(graded["out"] / "fills_the_disk.executed.ipynb")
    wrote = float(printed.split("WROTE_MIB")[1].split()[0])
    assert DISK_MIB / 2 <= wrote <= DISK_MIB, wrote  # it tried 3 x the limit
    assert list(graded["grader_tmp"].iterdir()) == []


def test_the_answer_channel_is_out_of_reach_through_proc(graded):
    """A record written into every descriptor of every other process, then everyone killed: no answer came back."""
    forged = next(s for s in graded["rows"]["forges_through_proc"].scores if s.name == "speedup_and_efficiency")
    assert forged.points == 0 and "no answer came back" in forged.message, forged.message


def test_wrong_input_is_refused_with_a_reason(graded):
    for name, reason in graded["refused"].items():
        row = graded["rows"][name]
        assert row.status == "invalid" and reason in row.message and row.score == 0, (name, row.message)
        assert all(s.message == row.message for s in row.scores)


def test_no_csv_field_starts_like_a_formula(graded):
    for name in ("gradebook.csv", "exercises.csv", "class-summary.csv", "canvas.csv"):
        with (graded["out"] / name).open(newline="") as handle:
            for row in csv.reader(handle):
                assert not [v for v in row if v[:1] in gradebook.FORMULA_STARTS], (name, row)
    with (graded["out"] / "gradebook.csv").open(newline="") as handle:
        students = [r["student"] for r in csv.DictReader(handle)]
    for name in FORMULA_NAMES:
        assert "'" + name in students


def test_the_class_at_a_glance(graded):
    out, labels = graded["out"], list(FULL)
    with (out / "gradebook.csv").open(newline="") as handle:
        book = {gradebook.plain(r["student"]): r for r in csv.DictReader(handle)}
    assert [book["partial"][l] for l in labels] == ["1", "0", "1", "0"]
    with (out / "exercises.csv").open(newline="") as handle:
        long = list(csv.DictReader(handle))
    assert list(long[0]) == list(gradebook.EXERCISE_COLUMNS) and len(long) == len(book) * len(labels)
    summary = (out / "class-summary.md").read_text()
    assert summary.index("## Where the class struggled") < summary.index("## Runs that failed") < \
        summary.index("## Total scores")
    assert "**kills_its_kernel**: kernel_died" in summary and "**correct**" not in summary.split("## Total")[0]
    with (out / "class-summary.csv").open(newline="") as handle:
        stats = list(csv.DictReader(handle))
    assert sorted(s["exercise"] for s in stats) == sorted(labels)
    fractions = [float(s["mean"]) / float(s["max"]) for s in stats]
    assert fractions == sorted(fractions)  # hardest first
    assert all(int(s["not_written"]) >= 10 and "stub" not in s["top_hint"] for s in stats)  # most hostile ones are stubs
    partial = next(s for s in stats if s["exercise"] == "predict_speedup (instructor test)")
    assert partial["top_hint"] == "wrong at many devices" and int(partial["top_hint_count"]) >= 1
    assert (out / "class-summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_canvas_import_from_a_roster_of_ten(graded):
    with (graded["out"] / "canvas.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Student", "ID", "SIS User ID", "Section", "Lab 10"]
    assert [r[:4] for r in rows[1:]] == [[name, id_, sis, section] for name, id_, sis, _, section in ROSTER]
    got = {r[0]: r[4] for r in rows[1:]}
    assert got["Ann Correct"] == got["Hon Habits"] == "5" and got["Pat Partial"] == "2" and got["Stu Stub"] == "0"
    assert got["Lin Link"] == got["Eve Formula"] == "0"  # refused: 0, as in the gradebook
    assert got["No Show"] == got["Late Larry"] == ""  # no submission: blank, so Canvas keeps what it has
    assert any("not on the roster" in line and "fork_bomb" in line for line in graded["said"])
    assert any("no submission from 2 roster student(s)" in line for line in graded["said"])


def test_one_student_is_regraded_into_the_folder_and_every_other_row_is_kept(graded, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(graded["out"], out)
    before = (out / "gradebook.csv").read_text().splitlines()
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT), tmp_path / "partial.ipynb")
    nbformat.write(notebook(STUBS), tmp_path / "stub.ipynb")
    rows = grade.grade([tmp_path / "stub.ipynb", tmp_path / "partial.ipynb"], "10", out, tests_dir=graded["tests"],
                       regrade="partial", execute_notebooks=False, say=lambda line: None)
    assert [(r.student, r.score) for r in rows] == [("partial", 5)]
    after = (out / "gradebook.csv").read_text().splitlines()
    changed = [(b, a) for b, a in zip(before, after) if b != a]
    assert len(after) == len(before) and len(changed) == 1 and changed[0][1].startswith("partial,10,5,5,")
    assert "Score: 5 / 5" in (out / "partial.feedback.md").read_text()
    assert (out / "stub.feedback.md").read_text() == (graded["out"] / "stub.feedback.md").read_text()
    with pytest.raises(ValueError, match="no earlier grading"):
        grade.grade([tmp_path / "partial.ipynb"], "10", tmp_path / "empty", regrade="partial", say=lambda line: None)


# ---- pieces of the grader, without running notebooks ------------------------------------------------------------------

def test_a_probe_runs_only_the_definition_not_the_rest_of_the_cell():
    cells = ["import os\nx = os.system('echo hi')", "import numpy as np\nK = 3\n\ndef helper(v):\n    return v * K\n",
             "print('side effect')\nwith open('f', 'w'):\n    pass\n\ndef shard(n, rank, world_size):\n    return helper(n)\n"]
    source = submission_reader.definition(cells, "shard")
    assert "def shard" in source and "def helper" in source and "K = 3" in source  # the notebook's K, used by helper
    assert "print" not in source and "open(" not in source and "os.system" not in source
    assert "import os" not in source and "numpy" not in source  # imports the definition does not use stay out
    assert submission_reader.definition(cells, "missing") is None
    assert submission_reader.definition(["def f(:"], "f") is None


def test_a_probe_gets_the_notebooks_imports_and_module_level_values_it_uses():
    cells = ["import numpy as np\nimport torch", "LOSS = torch.nn.CrossEntropyLoss()\nmodel = train_for_an_hour()",
             "def helper(x):\n    model = 1\n    return np.median(x)",
             "def f(x, y):\n    return LOSS(x, y) + helper(x)"]
    source = submission_reader.definition(cells, "f")
    assert "import numpy as np" in source and "import torch" in source and "LOSS = torch" in source
    assert "train_for_an_hour" not in source  # helper's local `model` is not the notebook's
    namespace = {}
    exec(compile(source, "<probe>", "exec"), namespace)
    import torch
    assert float(namespace["f"](torch.zeros(2, 3), torch.tensor([0, 1]))) > 0


def test_a_stub_is_recognised_before_any_set_up_runs_and_a_started_answer_is_not_a_stub():
    from lab_utils.exercises.core import only_raises_not_implemented
    from lab_utils.instructor.grading.probe import answer

    stub = 'def f(x):\n    """Doc."""\n    raise NotImplementedError("Exercise: write your solution here")\n'
    assert only_raises_not_implemented(stub, "f") and only_raises_not_implemented("def f():\n    raise NotImplementedError", "f")
    for started in ('def f(x):\n    y = x\n    raise NotImplementedError\n',
                    'def f(x):\n    if x:\n        raise NotImplementedError\n    return 1\n',
                    stub + 'def f(x):\n    return x\n', 'def g(x):\n    raise NotImplementedError\n', 'def f(:',
                    'import functools\n@functools.cache\n' + stub):
        assert not only_raises_not_implemented(started, "f"), started
    # a set-up that would fail (or start TensorFlow) never runs for a stub
    reply = answer({"name": "f", "definition": stub, "setup": "raise SystemExit('the set-up ran')", "inputs": 1,
                    "run": {"module": "lab_utils.exercises.core", "qualname": "to_plain"}})
    assert reply == {"status": "missing", "error": "f is still the exercise stub (raises NotImplementedError)"}


def test_a_stub_the_reader_recognises_starts_no_probe_and_reads_as_the_probe_would(tmp_path):
    """The reader (in its limited child) marks each definition that is still the stub: the job asks no probe for it,
    and its record says what the probe says for a stub. A decorated stub and a written answer are still probed."""
    from lab_utils.instructor.grading.probe import answer

    speedup_stub = STUBS.split("def fit_serial_fraction")[0]
    decorated = "import functools\n\n@functools.cache\ndef fit_serial_fraction(points):\n    raise NotImplementedError"
    nbformat.write(notebook(speedup_stub, decorated, PREDICT), tmp_path / "ann.ipynb")
    chosen = grade.exercises_for("10")
    _, job, _ = grade.prepare_submission(tmp_path / "ann.ipynb", "10", chosen, random.Random(0), timeout=60,
                                         cell_timeout=10)
    requests = {r["name"]: r for r in job["requests"]}
    in_a_probe = answer({"name": "speedup_and_efficiency", "definition": speedup_stub})
    assert in_a_probe["status"] == "missing"
    assert requests["speedup_and_efficiency"] == {"name": "speedup_and_efficiency", "missing": in_a_probe["error"]}
    assert "is still the exercise stub" in requests["speedup_and_efficiency"]["missing"]
    assert "definition" in requests["fit_serial_fraction"] and "definition" in requests["predict_speedup"]


def test_references_are_thread_safe_and_deterministic():
    """Correct answers scored concurrently, 4 times each in each of two threads (their references computed afresh
    twice, in both threads at once), always get full marks."""
    names = ["train_step", "reduce_gradients", "scatter", "fit_serial_fraction"]
    from test_exercises import fit_serial_fraction, reduce_gradients, scatter, train_step

    fns = dict(zip(names, [train_step, reduce_gradients, scatter, fit_serial_fraction]))
    answers = []
    for name in names:
        exercise = exercises.get(name)
        for seed in range(3):
            inputs = exercise.cases(random.Random(seed))
            answers.append((exercise, to_plain(exercise.run(fns[name], inputs)), inputs))
    failures = []

    def score_all():
        for i in range(4):
            if i % 2 == 0:  # the grader computes a reference once per inputs: now and then, afresh in both threads
                exercises.core._REFERENCES.clear()
            for exercise, got, inputs in answers:
                fraction = grade.score(grade.Item(exercise), {"status": "ok", "value": got}, inputs).points
                if fraction != exercise.points:
                    failures.append(exercise.name)

    threads = [threading.Thread(target=score_all) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_nan_grade_counts_as_zero_with_a_message():
    weird = exercises.Exercise("10", "weird", lambda rng: 0, lambda fn, i: 0, lambda i: 0,
                               lambda got, expected, i: (float("nan"), "?"), "a hint")
    scored = grade.score(grade.Item(weird), {"status": "ok", "value": 0}, 0)
    assert scored.points == 0 and "counted as 0" in scored.message


def test_without_a_sandbox_the_grader_says_what_it_cannot_promise(monkeypatch):
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)
    isolation = machine.detect_isolation()
    assert isolation.bubblewrap is None
    text = isolation.describe()
    assert "NOT complete" in text and "bubblewrap is not installed" in text and "apt-get install bubblewrap" in text


def test_a_bubblewrap_that_fails_is_no_sandbox(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(machine.shutil, "which", lambda name: str(fake))
    isolation = machine.detect_isolation()
    assert not isolation.complete and "cannot make a sandbox here" in isolation.describe()


def test_without_a_sandbox_grading_is_refused_unless_the_risk_is_accepted_and_then_correct(tmp_path):
    """No bubblewrap (or a failing one): never silent zeros. Refused by default; with --unsandboxed, the correct
    submission gets full marks, the stub 0, and every row says it was not sandboxed."""
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT), tmp_path / "correct.ipynb")
    nbformat.write(notebook(HONEST_IMPORTS, HONEST), tmp_path / "honest_names.ipynb")
    nbformat.write(notebook(STUBS), tmp_path / "stub.ipynb")
    paths = [tmp_path / f"{n}.ipynb" for n in ("correct", "honest_names", "stub")]
    none = machine.detect_isolation(use_bubblewrap=False)
    with pytest.raises(grade.SandboxUnavailable, match="--unsandboxed"):
        grade.grade(paths, "10", tmp_path / "out", isolation=none, say=lambda s: None)
    said = []
    rows = {r.student: r for r in grade.grade(paths, "10", tmp_path / "out", isolation=none, unsandboxed=True,
                                               jobs=2, execute_notebooks=False, say=said.append)}
    assert rows["correct"].score == rows["honest_names"].score == 3 and rows["stub"].score == 0
    with (tmp_path / "out" / "gradebook.csv").open() as handle:
        book = list(csv.DictReader(handle))
    assert all(r["sandbox"].startswith("NOT sandboxed") for r in book)
    assert any("NOT complete" in line for line in said)


def test_the_seccomp_filter_refuses_escapes_and_allows_threads_forks_and_spawn():
    from lab_utils.instructor.grading.sandbox import seccomp

    if not seccomp.supported():
        pytest.skip("no seccomp filter for this processor")
    code = textwrap.dedent('''
        import ctypes, multiprocessing as mp, os, threading
        libc = ctypes.CDLL(None, use_errno=True)
        refused = [libc.unshare(0x10000000) == -1, libc.mount(b"none", b"/mnt", b"tmpfs", 0, None) == -1,
                   libc.ptrace(16, 1, 0, 0) == -1]
        t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()
        p = mp.get_context("spawn").Process(target=print, args=("spawned",)); p.start(); p.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        print(refused, os.waitpid(pid, 0)[1] >> 8)
        ''')
    done = subprocess.run([sys.executable, "-c", code], preexec_fn=seccomp.installer(), capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split("\n")[-2] == "[True, True, True] 7" and "thread" in done.stdout and "spawned" in done.stdout


def test_a_course_cloned_under_tmp_stays_readable_and_read_only_while_the_rest_of_tmp_is_emptied(tmp_path,
                                                                                                   monkeypatch):
    isolation = machine.detect_isolation()
    if not isolation.bubblewrap:
        pytest.skip("no sandbox can be made here: " + isolation.describe())
    course, neighbour, scratch = tmp_path / "course", tmp_path / "classmate.ipynb", tmp_path / "scratch"
    (course / "lab_utils").mkdir(parents=True), (course / "solutions").mkdir(), scratch.mkdir()
    (course / "lab_utils" / "lab.txt").write_text("course file")
    (course / "solutions" / "answers.txt").write_text("answers")
    tmp_path.chmod(0o755)
    neighbour.write_text("secret")
    monkeypatch.setattr(bubblewrap, "COURSE", course)
    script = (f"import pathlib; c = pathlib.Path({str(course)!r}); print(c.joinpath('lab_utils/lab.txt').read_text()); "
              f"print(pathlib.Path({str(neighbour)!r}).exists(), c.joinpath('solutions').exists())\n"
              "try:\n    c.joinpath('lab_utils/new.txt').write_text('x'); print('written')\nexcept OSError: print('read-only')")
    with jail.Sandbox(isolation, scratch) as box:
        done = box.popen([sys.executable, "-c", script], workdir="run", stdout=subprocess.PIPE, text=True)
        out, _ = done.communicate(timeout=60)
    assert out.split() == ["course", "file", "False", "False", "read-only"]


def test_reading_what_a_submission_left_refuses_links_fifos_and_huge_files(tmp_path):
    regular, link, fifo, big = tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"
    regular.write_bytes(b"data")
    link.symlink_to(regular)
    os.mkfifo(fifo)
    big.write_bytes(b"x" * 100)
    assert grade.read_regular(regular, 10) == b"data"
    assert grade.read_regular(link, 10) is None and grade.read_regular(fifo, 10) is None
    assert grade.read_regular(big, 10) is None


def test_duplicate_names_unknown_labs_and_an_output_folder_holding_the_course_are_refused(tmp_path):
    a, b = tmp_path / "x" / "ann.ipynb", tmp_path / "y" / "ann.ipynb"
    with pytest.raises(ValueError, match="same student"):
        grade.grade([a, b], "10", tmp_path / "out")
    with pytest.raises(ValueError, match="no graded exercises"):
        grade.grade([a], "42", tmp_path / "out")
    with pytest.raises(ValueError, match="contains the course"):
        grade.grade([a], "10", ROOT.parent)


def test_the_whole_run_limit_stops_a_notebook_and_everything_it_started(tmp_path):
    nbformat.write(notebook(SPEEDUP, f"""
        import subprocess, time
        subprocess.Popen(["sh", "-c", "exec -a {MARKER}-timeout sleep 300"], start_new_session=True)
        time.sleep(300)
        """), tmp_path / "slow.ipynb")
    start = time.monotonic()
    row = grade.grade([tmp_path / "slow.ipynb"], "10", tmp_path / "out", timeout=20, cell_timeout=300, unsandboxed=True,
                      say=lambda s: None)[0]
    assert row.status == "timeout" and "longer than 20 s" in row.message
    assert time.monotonic() - start < 20 + 60  # the run was cut at 20 s; the probes took the rest
    assert points({"rows": {"slow": row}}, "slow")["speedup_and_efficiency"] == 1
    assert subprocess.run(["pgrep", "-f", f"{MARKER}-timeout"], capture_output=True, text=True).stdout.split() == []


# ---- limits and the class at a glance, each graded on its own, small ------------------------------------------------

BURNER = '''
import os, time

def _burn(fn):  # in the probe: 64 busy processes, each in a session of its own, for 8 s; then it waits
    end = time.time() + 8
    for _ in range(64):
        if os.fork() == 0:
            os.setsid()
            while time.time() < end:
                pass
            os._exit(0)
    time.sleep(8)
    return fn

@_burn
def speedup_and_efficiency(row, baseline):
    raise NotImplementedError
'''

# a correct classmate whose every probe needs about 0.3 s of CPU (a module-level value its functions use)
BUSY_CLASSMATE = HONEST.replace("ONE = np.float64(1.0)", "ONE = np.float64(1.0 + 0 * sum(i * i for i in range(3_000_000)))")


def test_a_cpu_burner_gets_only_its_share_and_a_classmate_beside_it_keeps_full_marks(tmp_path):
    """Graded two at a time with a probe limit of 3 s: the burner is stopped once it has used its share, and the
    correct classmate, whose limit counts its own CPU, keeps every point. As an unprivileged user (no CPU cgroup) the
    grader says it grades one at a time instead."""
    nbformat.write(notebook(BURNER), tmp_path / "burner.ipynb")
    nbformat.write(notebook(HONEST_IMPORTS, BUSY_CLASSMATE), tmp_path / "classmate.ipynb")
    said = []
    isolation = machine.detect_isolation()
    rows = {r.student: r for r in grade.grade([tmp_path / "burner.ipynb", tmp_path / "classmate.ipynb"], "10",
                                               tmp_path / "out", jobs=2, execute_notebooks=False, probe_timeout=3,
                                               unsandboxed=True, isolation=isolation, say=said.append)}
    assert rows["classmate"].score == 3, rows["classmate"].scores
    burned = rows["burner"].scores[0]
    assert burned.points == 0
    if isolation.cpu:
        share = usable_cpu_count() / 2
        # a machine busy enough that the burner could not use its share within the wall limit stops it on the wall
        # limit instead, saying how few CPU-seconds it got: stopped either way, and never the classmate
        starved = "ran longer than" in burned.message and "CPU-seconds" in burned.message
        assert starved or ("CPU-seconds" in burned.message and f"share of {share:g} CPU" in burned.message), \
            burned.message
    else:
        assert any(line.startswith("grading one submission at a time") for line in said), said


SLEEPER_MARKER = "lab_grader_probe_sleeper_5772"
# one probe process answers a submission's exercises, each in a fresh child: what one leaves running is gone before
# the next starts, and one stopped at its limit costs only its own exercise
LEAVES_A_SLEEPER = f'''
import os, subprocess, sys

def speedup_and_efficiency(row, baseline):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{SLEEPER_MARKER}"], start_new_session=True)
    speedup = row.samples_per_s / baseline.samples_per_s
    return speedup, speedup / ((row.world_size * (row.threads or 1)) / (baseline.world_size * (baseline.threads or 1)))

def _sleeper_alive():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as handle:
                if b"{SLEEPER_MARKER}" in handle.read():
                    return True
        except OSError:
            pass
    return False

def fit_serial_fraction(points):
    if _sleeper_alive():
        return -1.0
    a = [1 - 1 / n for n, _ in points]
    b = [1 / s - 1 / n for n, s in points]
    return sum(x * y for x, y in zip(a, b)) / sum(x * x for x in a)

def predict_speedup(serial_fraction, devices):
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / devices)
'''
LOOPS_IN_ONE = LEAVES_A_SLEEPER.replace("    if _sleeper_alive():\n        return -1.0\n", "    while True:\n        pass\n")


def test_each_probe_starts_clean_and_one_stopped_at_its_limit_costs_only_its_exercise(tmp_path):
    nbformat.write(notebook(LEAVES_A_SLEEPER), tmp_path / "leaves.ipynb")
    nbformat.write(notebook(LOOPS_IN_ONE), tmp_path / "loops.ipynb")
    rows = {r.student: r for r in grade.grade([tmp_path / "leaves.ipynb", tmp_path / "loops.ipynb"], "10",
                                               tmp_path / "out", jobs=2, execute_notebooks=False, probe_timeout=3,
                                               unsandboxed=True, isolation=machine.detect_isolation(),
                                               say=lambda s: None)}
    assert [s.points for s in rows["leaves"].scores] == [1, 1, 1], rows["leaves"].scores  # the sleeper was gone
    loops = rows["loops"].scores
    assert [s.points for s in loops] == [1, 0, 1], loops  # the answer after the stopped one still counts
    assert "CPU-seconds" in loops[1].message or "ran longer than" in loops[1].message, loops[1].message
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and SLEEPER_MARKER in _read(Path(f"/proc/{p}/cmdline"))]
    assert leftovers == []


def test_a_probe_process_imports_torch_once_only_where_the_set_up_does():
    from lab_utils.instructor.grading.probe import preloads

    assert preloads([{"setup": "import torch\nimport torch.distributed as dist"}, {"setup": "import statistics"}]) \
        == ["torch"]
    assert preloads([{"setup": "import numpy as np"}, {"name": "x", "missing": "stub"}]) == ["numpy"]
    assert preloads([{"setup": "from torch import nn"}, {"setup": "not python ("}]) == ["torch"]
    assert preloads([{"setup": "import statistics\nimport time"}, {"setup": ""}]) == []


def test_an_exercise_that_cannot_run_here_is_blocked_not_zero(tmp_path, monkeypatch):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "needs.py").write_text(textwrap.dedent('''
        from lab_utils.exercises import Exercise

        def _run(fn, case):
            return float(fn(*case))

        EXERCISES = [Exercise("10", "predict_speedup", lambda rng: [0.1, 4], _run, lambda case: 0.0,
                              lambda got, expected, case: (1.0, "ok"), "a GPU check", points=2.0, requires=("gpu",))]
        '''))
    monkeypatch.setitem(grade._MACHINE, "gpu", "it needs a GPU, and this machine has none (a test says so)")
    nbformat.write(notebook(SPEEDUP, SERIAL, PREDICT), tmp_path / "ann.ipynb")
    said = []
    row = grade.grade([tmp_path / "ann.ipynb"], "10", tmp_path / "out", tests_dir=tests, execute_notebooks=False,
                      unsandboxed=True, say=said.append)[0]
    blocked = row.scores[-1]
    assert blocked.status == "blocked" and "needs a GPU" in blocked.message
    assert (row.score, row.max_score) == (3, 3)  # counted neither way
    assert any("blocked on this machine" in line for line in said)
    with (tmp_path / "out" / "gradebook.csv").open(newline="") as handle:
        assert next(csv.DictReader(handle))["predict_speedup (instructor test)"] == "blocked"
    assert "blocked" in (tmp_path / "out" / "ann.feedback.md").read_text()
    assert "Blocked (not graded on this machine" in (tmp_path / "out" / "class-summary.md").read_text()


def test_untrusted_code_is_parsed_only_in_a_limited_child(tmp_path, monkeypatch):
    """The grader's own process never parses a submission's code (its parser is disabled here, and grading still
    reads every definition); a child that runs out of its memory gives a clear row, not a crash."""
    import ast

    nbformat.write(notebook(SPEEDUP), tmp_path / "ann.ipynb")
    nbformat.write(notebook(SPEEDUP, "x = 1\n" * 120_000), tmp_path / "big.ipynb")

    def refuse(*args, **kwargs):
        raise AssertionError("the grader parsed a submission in its own process")

    monkeypatch.setattr(ast, "parse", refuse)
    chosen = grade.exercises_for("10")
    row, job, _ = grade.prepare_submission(tmp_path / "ann.ipynb", "10", chosen, random.Random(0), timeout=60, cell_timeout=10)
    assert row is None and "def speedup_and_efficiency" in job["requests"][0]["definition"]
    monkeypatch.setattr(submission_reader, "CHILD_MEMORY_BYTES", 150 * 2**20)
    row, job, _ = grade.prepare_submission(tmp_path / "big.ipynb", "10", chosen, random.Random(0), timeout=60, cell_timeout=10)
    assert row.status == "invalid" and "within its limits (150 MiB of memory" in row.message


def test_the_definition_is_what_the_kernel_had_at_the_self_check():
    cells = ["from statistics import *\nimport numpy as np", "%%time\ndef f(x):\n    display(x)\n    return g(x) + median([1])",
             "x?\n%matplotlib inline\n!ls\ndef g(x):\n    return K * x", "K = 2", "print(check(f))", "K = 3",
             "def g(x):\n    return 0"]
    source = submission_reader.definition(cells, "f")
    assert "from statistics import *" in source and "def g" in source and "K = 2" in source
    assert "K = 3" not in source and "return 0" not in source and "numpy" not in source and "matplotlib" not in source
    from lab_utils.instructor.grading.probe import KERNEL_NAMES

    namespace = dict(KERNEL_NAMES)
    exec(compile(source, "<probe>", "exec"), namespace)
    assert namespace["f"](5) == 11
    stub_then_fixed = ["def f(x):\n    raise NotImplementedError", "check(f)", "def f(x):\n    return h(x)",
                       "def h(x):\n    return x", "check(f)"]
    assert "return h(x)" in submission_reader.definition(stub_then_fixed, "f") and "def h" in submission_reader.definition(stub_then_fixed, "f")


def test_a_folder_a_submission_locked_is_still_removed(tmp_path):
    locked = tmp_path / "scratch" / "a" / "locked"
    locked.mkdir(parents=True)
    (locked / "f").write_bytes(b"x" * 1000)
    locked.chmod(0)
    (tmp_path / "scratch" / "a").chmod(0o500)
    host.remove_tree(tmp_path / "scratch")
    assert not (tmp_path / "scratch").exists()


def test_csv_fields_that_start_like_formulas_are_neutralised_and_read_back():
    for value in ('=HYPERLINK("x")', "+1+1", "-2+3", "@SUM(1)", "\tx", "\rx", "'quoted", "plain", "", "3.5"):
        written = gradebook.neutral(value)
        assert written[:1] not in gradebook.FORMULA_STARTS and gradebook.plain(written) == value
    assert gradebook.neutral("3.5") == "3.5" and gradebook.neutral("=1") == "'=1"


# ---- honest lab 01 notebooks, each run as IPython runs cells, graded as the kernel had them at their self-check ----

TRAIN_STEP = '''import torch.nn.functional as F

def train_step(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()
'''
THROUGHPUT = '''import statistics

def throughput(batch_size, step_times, warmup):
    return batch_size / statistics.median(step_times[warmup:])
'''
TOP_OP = '''def top_self_cpu_op(prof):
    return max(prof.key_averages(), key=lambda event: event.self_cpu_time_total).key
'''
EFFICIENCY = '''def efficiency(one_thread_s, many_threads_s, threads):
    return one_thread_s / many_threads_s / threads
'''


def lab01(*cells) -> nbformat.NotebookNode:
    """A lab 01 notebook of these cells, exactly as given (no dedent: the layout is what is tested)."""
    params = new_code_cell("seed = 0")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# Lab 01 — an honest submission"), params,
                             new_code_cell("from lab_utils.exercises import check")] + [new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


# a sum of 600 terms: it nests 600 deep, past what printing it back (ast.unparse) manages at Python's default
# recursion limit (about 350), within what the kernel compiles (IPython compiles an AST: about 900 here, not 1,000)
DEEP_TERMS = 600
HONEST_LAB01 = {
    "rebound_and_mutated": lab01(
        "from torch.nn import CrossEntropyLoss\nLOSS = CrossEntropyLoss(label_smoothing=0.3)",
        "LOSS.label_smoothing = 0.0  # no smoothing after all",
        "def train_step(model, x, y, optimizer):\n    optimizer.zero_grad()\n    loss = LOSS(model(x), y)\n"
        "    loss.backward()\n    optimizer.step()\n    return loss.detach()",
        "check(train_step)", THROUGHPUT, "check(throughput)",
        "batch_size = 64\nthroughput = batch_size / 0.05\nprint(f'{throughput:.0f} samples/s')",
        "SORT = {}", "SORT.update(key=lambda event: event.self_cpu_time_total)",
        "def top_self_cpu_op(prof):\n    return max(prof.key_averages(), **SORT).key", "check(top_self_cpu_op)",
        EFFICIENCY, "check(efficiency)", "efficiency = efficiency(0.030, 0.020, 2)\nprint(f'{efficiency:.0%}')"),
    "ipython_layout": lab01(
        textwrap.indent(TRAIN_STEP, "    "), "check(train_step)",
        ">>> import statistics\n>>> def throughput(batch_size, step_times, warmup):\n"
        "...     return batch_size / statistics.median(step_times[warmup:])\n", "check(throughput)",
        "\n%%time\n" + TOP_OP, "check(top_self_cpu_op)", textwrap.indent(EFFICIENCY, "    "), "check(efficiency)"),
    "blocks_files_deep": lab01(
        TRAIN_STEP.replace("    optimizer.zero_grad()\n", "    optimizer.zero_grad()\n    scale = 1" + " + 0" * (DEEP_TERMS - 1) + "\n")
        .replace("loss = F", "loss = scale * F"), "check(train_step)",
        "%%writefile rates.py\ndef samples_per_s(batch_size, seconds):\n    return batch_size / seconds\n",
        "import contextlib\nimport rates\n\nwith contextlib.suppress(ImportError):\n    from statistics import median",
        "def throughput(batch_size, step_times, warmup):\n    return rates.samples_per_s(batch_size, median(step_times[warmup:]))",
        "check(throughput)",
        "SETTINGS = {'by': 'cpu_time_total'}", "SETTINGS['by'] = 'self_cpu_time_total'",
        "def top_self_cpu_op(prof):\n    return max(prof.key_averages(), key=lambda event: getattr(event, SETTINGS['by'])).key",
        "check(top_self_cpu_op)",
        "def efficiency(one_thread_s, many_threads_s, threads):\n    return rates.samples_per_s(one_thread_s, many_threads_s)"
        " / threads", "check(efficiency)"),
}
# each way IPython runs a cell that once cost the point its self-check shows: (notebook, exercise)
HONEST_CASES = {"a_later_value_reuses_the_name": ("rebound_and_mutated", "throughput"),
                "an_attribute_set_after_the_assignment": ("rebound_and_mutated", "train_step"),
                "a_method_call_completes_the_object": ("rebound_and_mutated", "top_self_cpu_op"),
                "a_cell_indented_by_four_spaces": ("ipython_layout", "train_step"),
                "a_function_pasted_with_prompts": ("ipython_layout", "throughput"),
                "an_empty_line_then_a_cell_magic": ("ipython_layout", "top_self_cpu_op"),
                "an_import_in_a_with_block_and_a_written_module": ("blocks_files_deep", "throughput"),
                "an_item_set_after_the_assignment": ("blocks_files_deep", "top_self_cpu_op"),
                "a_long_sum": ("blocks_files_deep", "train_step"),
                "a_later_value_reuses_the_fourth_exercises_name": ("rebound_and_mutated", "efficiency"),
                "an_indented_cell_in_the_fourth_exercise": ("ipython_layout", "efficiency"),
                "a_helper_from_a_written_module_in_the_fourth_exercise": ("blocks_files_deep", "efficiency")}


def _who_can_read(root: Path) -> list[tuple[str, int, bool]]:
    """Everything under `root`: (path, mode, whether another uid could read it by its modes: every folder above it
    searchable by others, and it readable by others)."""
    found, stack = [], [(root, True)]
    while stack:
        folder, reachable = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            found.append((entry.path, mode, reachable and bool(mode & 0o004)))
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), reachable and bool(mode & 0o001)))
    return found


def _readable_as_nobody(paths: list[str]) -> list[str]:
    """Which of `paths` the unprivileged uid can open (root only; asked of the kernel, as that uid)."""
    code = ("import os, sys\nfor p in sys.argv[1:]:\n    try:\n        os.listdir(p) if os.path.isdir(p) else "
            "open(p, 'rb').close()\n        print(p)\n    except OSError:\n        pass")
    done = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable, "-I",
                           "-c", code, *paths], capture_output=True, text=True, timeout=60)
    return done.stdout.split("\n")[:-1]


@pytest.fixture(scope="module")
def honest_lab01(tmp_path_factory):
    """The honest lab 01 notebooks, run whole (the kernel's own PASS lines) and graded; what the grader's temporary
    folder held, and who could read it, looked at as each probe process started."""
    from lab_utils.instructor.grading import sandboxed_run

    folder = tmp_path_factory.mktemp("honest_lab01")
    paths = []
    for name, nb in HONEST_LAB01.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
        paths.append(folder / f"{name}.ipynb")
    grader_tmp = tmp_path_factory.mktemp("honest_grader_tmp")
    grader_tmp.chmod(0o1777)  # like /tmp
    seen: dict[str, tuple[int, bool]] = {}
    as_nobody: set[str] = set()
    real_probe = sandboxed_run.probe_batch

    def looking_probe(*args, **kwargs):
        now = _who_can_read(grader_tmp)
        seen.update({path: (mode, other) for path, mode, other in now})
        if os.geteuid() == 0:
            as_nobody.update(_readable_as_nobody([path for path, _, _ in now]))
        return real_probe(*args, **kwargs)

    isolation = machine.detect_isolation()
    out = tmp_path_factory.mktemp("honest_graded")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sandboxed_run, "probe_batch", looking_probe)
        patch.setattr(tempfile, "tempdir", str(grader_tmp))
        rows = grade.grade(paths, "01", out, timeout=120, cell_timeout=60, jobs=3, say=lambda s: None,
                           isolation=isolation, unsandboxed=not isolation.complete)
    return {"rows": {r.student: r for r in rows}, "out": out, "seen": seen, "as_nobody": as_nobody,
            "grader_tmp": grader_tmp}


@pytest.mark.parametrize("case", sorted(HONEST_CASES))
def test_an_honest_notebook_is_graded_as_the_kernel_had_it_at_its_self_check(honest_lab01, case):
    """The notebook's own self-check prints PASS in the kernel (the executed copy shows it), and the grade agrees."""
    notebook_name, exercise = HONEST_CASES[case]
    row = honest_lab01["rows"][notebook_name]
    scores = {s.name: (s.points, s.max_points, s.message) for s in row.scores}
    assert scores[exercise][0] == scores[exercise][1] == 1, scores[exercise]
    assert f"PASS  {exercise}" in printed_by(honest_lab01["out"] / f"{notebook_name}.executed.ipynb")
    assert row.score == row.max_score == 4, scores  # lab 01's four exercises, each solved


def test_submissions_are_readable_by_the_grader_alone_while_they_are_graded(honest_lab01):
    """While it grades, the grader's temporary folder holds its top folder (0711: searchable, not listable), the
    submissions' copies (0600, in a 0700 folder) and each sandbox's folder (0700): nothing in it another uid can open
    — by the modes, and, as root, asked of the kernel as uid 65534."""
    top = honest_lab01["grader_tmp"]
    seen = {p: v for p, v in honest_lab01["seen"].items()  # the grader's (not a library's cache, torchinductor_USER)
            if Path(p).relative_to(top).parts[0].startswith("lab-grader-")}
    copies = [p for p in seen if Path(p).name.startswith("submission-") and p.endswith(".ipynb")]
    assert len(copies) == len(HONEST_LAB01), sorted(seen)
    for path in copies:
        assert stat.S_IMODE(seen[path][0]) == 0o600, (path, oct(seen[path][0]))
    own = [p for p in seen if len(Path(p).relative_to(top).parts) <= 2]  # its folder, the copies' and the sandboxes'
    assert {stat.S_IMODE(seen[p][0]) for p in own} <= {0o700, 0o711}, {p: oct(seen[p][0]) for p in own}
    assert [(p, oct(mode)) for p, (mode, other) in seen.items() if other] == []
    assert honest_lab01["as_nobody"] & set(seen) == set()
    assert [p for p in top.iterdir() if p.name.startswith("lab-grader-")] == []


def test_a_slurm_jobs_files_are_the_graders_alone(tmp_path):
    """A job file holds a submission: written 0600 whatever the umask, also over an earlier one."""
    from lab_utils.instructor.grading.grade_slurm import write_json

    previous = os.umask(0o022)
    try:
        for value in (1, 2):
            write_json(tmp_path / "job-0.json", {"notebook": value})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "job-0.json").stat().st_mode) == 0o600
    assert (tmp_path / "job-0.json").read_text() == '{"notebook": 2}' and sorted(tmp_path.iterdir()) == [tmp_path / "job-0.json"]


def test_a_submissions_openmp_threads_sleep_when_idle_unless_the_instructor_chose_otherwise(tmp_path, monkeypatch):
    box = jail.Sandbox(machine.detect_isolation(), tmp_path)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert box.child_environment(tmp_path)["OMP_WAIT_POLICY"] == "PASSIVE"  # several graded at once: no spinning
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert box.child_environment(tmp_path)["OMP_WAIT_POLICY"] == "ACTIVE"
