"""What grading writes, once, at the end, as fresh files: the gradebook (a row per submission, a column per exercise),
every result in long form (exercises.csv), the class summary (where the class struggled, failed runs, a histogram),
feedback and executed notebooks per student, and an LMS's import file from a roster. Every CSV field that a
spreadsheet would read as a formula is neutralised (OWASP, CSV injection). `read_rows` reads a gradebook back, so that
one submission can be regraded into it. Every learner-controlled string (names, messages, outputs) is written safely:
`clean` text everywhere, inert text (`inert`) in Markdown, and a file name of its own (`file_name`) where the
student's name cannot be one."""
from __future__ import annotations

import collections
import contextlib
import csv
import hashlib
import io
import os
import re
import statistics
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

GRADEBOOK_COLUMNS = ("student", "lab", "score", "max_score", "status", "seconds", "message", "sandbox", "files")
EXERCISE_COLUMNS = ("student", "exercise", "points", "max", "message", "status")
SUMMARY_COLUMNS = ("exercise", "max", "graded", "mean", "full_marks", "zero", "not_written", "blocked", "top_hint",
                   "top_hint_count")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "Section")
LMS = {"canvas": "canvas.csv"}
ROSTER_KEYS = ("Submission", "SIS Login ID", "SIS User ID", "ID")  # the roster's columns that identify a student
ROSTER_DEFAULT_COLUMNS = ("Submission", "SIS Login ID")  # what names the submissions unless --roster-column says
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list of what makes a spreadsheet cell a formula
NOT_GRADED = ("invalid", "lost")  # rows left out of the exercise statistics (listed as failed runs)
FAILED = ("error", "timeout", "kernel_died", "invalid", "lost")
NAME_MAX = 255  # bytes in one file name (Linux)
SUFFIXES = (".feedback.md", ".executed.ipynb")  # what a student's files are called after the name
# in Markdown, every character that can start markup inline (emphasis, code, links, HTML, entities, math, GFM
# strikethrough and tables) is written as a numeric character reference, which CommonMark, GFM and JupyterLab's marked
# all show as that character and nothing else; `_` inside a word, `:` not before `/` and `.` not after `www` stay
MARKUP = frozenset("\\`*[]<>|~&$@")


# ---- learner-controlled text ---------------------------------------------------------------------------------------

def clean(value) -> str:
    """Text every encoder accepts: a lone surrogate (from a learner's string, or a file name that is not UTF-8) becomes
    its escape, \\udcff."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def inert(value) -> str:
    """Learner-controlled text as Markdown that renders as exactly that text, on one line, with no markup, HTML, link
    or math: line breaks as spaces, control characters as escapes, markup characters as character references."""
    text = " ".join(clean(value).split())
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    out = []
    for i, c in enumerate(text):
        before, after = text[i - 1:i], text[i + 1:i + 2]
        risky = (c in MARKUP or (c == "_" and not (before.isalnum() and after.isalnum()))
                 or (c == ":" and after == "/")  # a GFM autolink: https://
                 or (c == "." and text[max(0, i - 3):i].lower() == "www"))  # a GFM autolink: www.
        out.append(f"&#{ord(c)};" if risky else c)
    return "".join(out)


def file_name(student: str) -> str:
    """The name a student's files get: the student's own where it is a safe file name (UTF-8, printable, no / or ~, not
    hidden, short enough for every suffix); otherwise a stable derived one, readable part ~ hash of the name, which no
    kept name can equal (a kept name has no ~)."""
    try:
        size = len(student.encode("utf-8"))
    except UnicodeEncodeError:
        size = NAME_MAX
    if (student.isprintable() and "/" not in student and "~" not in student and not student.startswith((".", "-"))
            and size + max(map(len, SUFFIXES)) <= NAME_MAX and student.strip() == student and student):
        return student
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", clean(student)).strip("_-")[:40]
    return f"{readable}~{hashlib.sha256(student.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


@dataclass
class ExerciseScore:
    name: str
    points: float
    max_points: float
    message: str
    status: str = "scored"  # or "blocked": it cannot run on this machine, and counts neither way

    @property
    def counted(self) -> bool:
        return self.status != "blocked"


@dataclass
class Graded:
    student: str
    lab: str
    status: str
    seconds: float = 0.0
    message: str = ""
    scores: list[ExerciseScore] = field(default_factory=list)
    executed: str | None = None  # the executed notebook handed back (JSON text, outputs cut)
    sandbox: str = ""

    @property
    def score(self) -> float:
        return sum(s.points for s in self.scores if s.counted)

    @property
    def max_score(self) -> float:
        return sum(s.max_points for s in self.scores if s.counted)


# ---- CSV without formulas ------------------------------------------------------------------------------------------

def neutral(value) -> str:
    """A CSV field a spreadsheet shows as text: one that starts like a formula gets a leading ' (and so does one that
    starts with ', so that `plain` gives every value back exactly)."""
    text = clean(value)
    return "'" + text if text[:1] in FORMULA_STARTS + ("'",) else text


def plain(text: str) -> str:
    """The value `neutral` wrote."""
    return text[1:] if text.startswith("'") else text


def _csv(header, rows) -> str:
    book = io.StringIO()
    writer = csv.writer(book, lineterminator="\n")
    writer.writerow([neutral(h) for h in header])
    writer.writerows([neutral(v) for v in row] for row in rows)
    return book.getvalue()


def write_fresh(path: Path, data: str | bytes) -> None:
    """Write a new file at `path`, replacing whatever is there (a symlink is replaced, never followed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _points(value: float) -> str:
    return f"{value:g}"


# ---- the files -------------------------------------------------------------------------------------------------

def gradebook_csv(rows: list[Graded], labels: list[str]) -> str:
    """One row per submission; after the run's columns, one column per exercise with its points ('blocked': not
    graded on this machine)."""
    lines = []
    for r in rows:
        by_name = {s.name: s for s in r.scores}
        cells = [(_points(by_name[l].points) if by_name[l].counted else "blocked") if l in by_name else "" for l in labels]
        lines.append([r.student, r.lab, _points(r.score), _points(r.max_score), r.status, f"{r.seconds:.1f}",
                      r.message, r.sandbox, _files(r), *cells])
    return _csv(GRADEBOOK_COLUMNS + tuple(labels), lines)


def _files(row: Graded) -> str:
    """The gradebook's files column: the name the student's files have, where it is not the student's own."""
    name = file_name(row.student)
    return "" if name == row.student else name


def exercises_csv(rows: list[Graded]) -> str:
    """Every result in long form: student, exercise, points (blank when blocked), max, message, status."""
    return _csv(EXERCISE_COLUMNS, [[r.student, s.name, _points(s.points) if s.counted else "", _points(s.max_points),
                                    s.message, s.status] for r in rows for s in r.scores])


def hint_of(message: str) -> str:
    """A result's message as a kind of mistake: the judge's words without the exercise's fixed hint, numbers as #."""
    text = message.split(". Hint: ")[0]
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", text)[:300]


def not_written(message: str) -> bool:
    """The result of an exercise the student did not write (its stub, or no definition at all)."""
    return "is still the exercise stub" in message or message.startswith("no cell defines")


def exercise_stats(rows: list[Graded], labels: list[str]) -> list[dict]:
    """Per exercise, over the graded submissions: mean points, share with full marks, share with 0, how many did not
    write it, the most frequent mistake of those who did and its count; hardest first (lowest mean share)."""
    graded = [r for r in rows if r.status not in NOT_GRADED]
    stats = []
    for label in labels:
        results = [s for r in graded for s in r.scores if s.name == label]
        counted = [s for s in results if s.counted]
        unwritten = sum(not_written(s.message) for s in counted)
        top = collections.Counter(hint_of(s.message) for s in counted
                                  if s.points < s.max_points and not not_written(s.message)).most_common(1)
        maximum = counted[0].max_points if counted else (results[0].max_points if results else 0.0)
        mean = statistics.fmean(s.points for s in counted) if counted else None
        stats.append({"exercise": label, "max": maximum, "graded": len(counted), "mean": mean,
                      "full_marks": sum(s.points >= s.max_points for s in counted) / len(counted) if counted else None,
                      "zero": sum(s.points == 0 for s in counted) / len(counted) if counted else None,
                      "not_written": unwritten, "blocked": len(results) - len(counted), "top_hint": top[0][0] if top else "",
                      "top_hint_count": top[0][1] if top else 0})
    return sorted(stats, key=lambda s: (s["mean"] is None, (s["mean"] / s["max"]) if s["mean"] is not None and s["max"] else 1.0))


def _share(value) -> str:
    return "" if value is None else f"{100 * value:.0f} %"


def summary_csv(stats: list[dict]) -> str:
    return _csv(SUMMARY_COLUMNS, [[s["exercise"], _points(s["max"]), s["graded"],
                                   "" if s["mean"] is None else f"{s['mean']:.3g}",
                                   "" if s["full_marks"] is None else f"{s['full_marks']:.3f}",
                                   "" if s["zero"] is None else f"{s['zero']:.3f}", s["not_written"], s["blocked"],
                                   s["top_hint"],
                                   s["top_hint_count"]] for s in stats])


def summary_md(rows: list[Graded], stats: list[dict], lab: str, histogram: str | None) -> str:
    """The class at a glance, in Markdown: where the class struggled first, then the runs that failed, then totals."""
    graded = [r for r in rows if r.status not in NOT_GRADED]
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Lab {lab}: the class at a glance", "",
             f"{len(rows)} submission(s), {len(graded)} graded ({len(rows) - len(graded)} not: invalid or lost, listed "
             f"below and left out of the table); written {when}.", "",
             "## Where the class struggled", "", "Hardest first. Mean points, share with full marks, share with 0, how "
             "many did not write it (the stub, or no definition), and the most frequent mistake of those who did "
             "(numbers shown as #) with how many made it.", "",
             "| exercise | mean / max | full marks | 0 points | not written | most frequent mistake | count |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in stats:
        mean = "blocked" if s["mean"] is None else f"{s['mean']:.2f} / {s['max']:g}"
        lines.append(f"| {inert(s['exercise'])} | {mean} | {_share(s['full_marks'])} | {_share(s['zero'])} | "
                     f"{s['not_written']} | {inert(s['top_hint']) or '—'} | {s['top_hint_count'] or ''} |")
    blocked = [s for s in stats if s["blocked"]]
    if blocked:
        lines += ["", "Blocked (not graded on this machine, counted neither way): "
                  + ", ".join(f"{inert(s['exercise'])} ({s['blocked']})" for s in blocked)]
    failed = [r for r in rows if r.status in FAILED]
    lines += ["", "## Runs that failed", ""]
    lines += [f"- **{inert(r.student)}**: {r.status}" + (f" — {inert(r.message)}" if r.message else "") for r in failed] \
        or ["None: every notebook ran to its end."]
    totals = [r.score for r in graded]
    lines += ["", "## Total scores", ""]
    if totals:
        top = max(r.max_score for r in graded)
        lines.append(f"Mean {statistics.fmean(totals):.2f}, median {statistics.median(totals):g} of {top:g} points "
                     f"({len(totals)} graded submissions).")
    if histogram:
        lines += ["", f"![total scores]({histogram})"]
    return "\n".join(lines) + "\n"


def histogram_png(rows: list[Graded], lab: str) -> bytes | None:
    """A histogram of the graded submissions' total scores, as PNG bytes (None when nothing was graded)."""
    graded = [r for r in rows if r.status not in NOT_GRADED]
    if not graded:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    top = max(r.max_score for r in graded) or 1.0
    figure = Figure(figsize=(6, 3.2))
    axes = figure.subplots()
    bins = [i * top / 10 for i in range(11)]
    axes.hist([min(r.score, top) for r in graded], bins=bins, edgecolor="black")
    axes.set(xlabel=f"total score (of {top:g})", ylabel="submissions", title=f"Lab {lab}: {len(graded)} graded")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def feedback(row: Graded) -> str:
    """What the student reads: per exercise, points and a message."""
    lines = [f"# Lab {row.lab}: {row.student}", "", f"Score: {row.score:g} / {row.max_score:g}",
             f"Run: {row.status}" + (f" ({row.message})" if row.message else ""), ""]
    lines += [f"- **{s.name}**: " + (f"{s.points:g} / {s.max_points:g}" if s.counted else "blocked") + f" — {s.message}"
              for s in row.scores]
    return "\n".join(lines) + "\n"


# ---- a roster, and an LMS's import file --------------------------------------------------------------------------

def read_roster(path) -> list[dict]:
    """The students of a class: a CSV with Student, ID, SIS User ID and Section (a Canvas gradebook export has them),
    and optionally Submission or SIS Login ID (what names the submission files: see `roster_column`). Each row keeps
    its line in the file (`_line`), to be named in errors."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in CANVAS_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"--roster {path}: it has no column {missing} (needed: {', '.join(CANVAS_COLUMNS)}; "
                             "a Canvas gradebook export has them)")
        rows = []
        for row in reader:
            rows.append({k: (v or "").strip() for k, v in row.items() if k} | {"_line": str(reader.line_num)})
    return [r for r in rows if r["Student"] and "Points Possible" not in r["Student"]]


def roster_column(roster: list[dict], column: str | None = None) -> str:
    """The one roster column whose values name the submission files (the file name without .ipynb): `column` when
    given, else Submission, else SIS Login ID (the login Canvas's submission downloads are named by)."""
    columns = {k for r in roster for k in r if k != "_line"}
    if column is not None:
        if column not in columns:
            raise ValueError(f"--roster-column {column!r}: the roster has no such column (it has: "
                             f"{', '.join(sorted(columns))})")
        return column
    for default in ROSTER_DEFAULT_COLUMNS:
        if default in columns:
            return default
    raise ValueError("--roster: it has no Submission or SIS Login ID column, so nothing says which file is whose: "
                     "pass --roster-column with the column that holds the submission names (e.g. 'SIS User ID')")


def _who(student: dict) -> str:
    return f"line {student['_line']} ({student['Student']})"


def check_roster(roster: list[dict], column: str, submissions, declared: bool) -> list[str]:
    """Refuse a roster that could credit one submission to two students, or (with the default column) a submission
    whose name is another row's ID of another kind; returns what the instructor should know."""
    by_value = collections.defaultdict(list)
    for student in roster:
        if student.get(column):
            by_value[student[column]].append(student)
    twice = {v: rows for v, rows in by_value.items() if len(rows) > 1}
    if twice:
        raise ValueError("--roster: " + "; ".join(f"{' and '.join(map(_who, rows))} have the same {column} {v!r}"
                                                 for v, rows in sorted(twice.items()))
                         + ": one submission would be credited to each of them; correct the roster")
    if declared:
        return []
    clashes = []
    for name in sorted(map(clean, submissions)):
        others = [(s, k) for s in roster for k in ROSTER_KEYS if k != column and s.get(k) == name
                  and s.get(column) != name]
        if others:
            mine = by_value.get(name)
            clashes.append(f"{name}.ipynb is " + (f"{_who(mine[0])}'s {column}" if mine else f"no row's {column}")
                           + " but " + ", ".join(f"{_who(s)}'s {k}" for s, k in others))
    if clashes:
        raise ValueError("--roster: submissions match rows by more than one column: " + "; ".join(clashes)
                         + ". Say which column names the submissions with --roster-column (e.g. 'SIS User ID')")
    return []


def canvas_csv(rows: list[Graded], roster: list[dict], assignment: str,
               column: str = "SIS Login ID") -> tuple[str, list[str]]:
    """Canvas's gradebook import: Student, ID, SIS User ID, Section, then the assignment's column (the total score;
    blank where a student handed nothing in, which Canvas leaves unchanged); and what did not match. A submission
    belongs to the roster row whose `column` is its name, and to no other."""
    by_student = {clean(r.student): r for r in rows}
    check_roster(roster, column, list(by_student), declared=True)  # no value twice: each row its own submission
    matched, lines = set(), []
    for student in roster:
        row = by_student.get(student.get(column) or "\0")
        if row is not None:
            matched.add(clean(row.student))
        score = "" if row is None or row.status == "lost" else _points(row.score)
        lines.append([student["Student"], student["ID"], student["SIS User ID"], student["Section"], score])
    notes = []
    unmatched = [name for name in by_student if name not in matched]
    if unmatched:
        notes.append(f"canvas.csv: not on the roster (no {column} of that name), left out: {', '.join(unmatched)}")
    absent = [s["Student"] for s in roster if (s.get(column) or "\0") not in by_student]
    if absent:
        notes.append(f"canvas.csv: no submission from {len(absent)} roster student(s) (blank: Canvas keeps what it "
                     f"had): {', '.join(absent[:10])}{' ...' if len(absent) > 10 else ''}")
    return _csv(CANVAS_COLUMNS + (assignment,), lines), notes


def write_outputs(rows: list[Graded], out_dir: Path, labels: list[str], lab: str, *, fresh: list[Graded] | None = None,
                  roster: list[dict] | None = None, lms: str | None = None, assignment: str | None = None,
                  roster_column: str = "SIS Login ID") -> list[str]:
    """Every output file, each created fresh; feedback and executed notebooks for `fresh` rows only (default: all).
    Returns lines for the instructor (what did not match the roster)."""
    out_dir = Path(out_dir)
    write_fresh(out_dir / "gradebook.csv", gradebook_csv(rows, labels))
    write_fresh(out_dir / "exercises.csv", exercises_csv(rows))
    stats = exercise_stats(rows, labels)
    png = histogram_png(rows, lab)
    if png is not None:
        write_fresh(out_dir / "class-summary.png", png)
    write_fresh(out_dir / "class-summary.csv", summary_csv(stats))
    write_fresh(out_dir / "class-summary.md", summary_md(rows, stats, lab, "class-summary.png" if png else None))
    notes: list[str] = []
    if roster is not None and lms == "canvas":
        text, notes = canvas_csv(rows, roster, assignment or f"Lab {lab}", roster_column)
        write_fresh(out_dir / LMS[lms], text)
    for row in rows if fresh is None else fresh:
        name = file_name(row.student)
        try:  # one student's files failing to write costs that student's files, never a classmate's
            write_fresh(out_dir / f"{name}.feedback.md", feedback(row))
            executed = out_dir / f"{name}.executed.ipynb"
            if row.executed is not None:
                write_fresh(executed, row.executed)
            elif fresh is not None:  # regraded without a run: an earlier run's notebook would not match its feedback
                with contextlib.suppress(FileNotFoundError):
                    executed.unlink()
        except OSError as exc:
            notes.append(f"{clean(row.student)}: its feedback could not be written ({clean(exc)})")
    return notes


# ---- reading a gradebook back (regrading one submission) ---------------------------------------------------------

def _read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return [{plain(k): plain(v or "") for k, v in row.items()} for row in csv.DictReader(handle)]


def read_rows(out_dir: Path) -> list[Graded]:
    """The rows an earlier grading wrote into `out_dir` (gradebook.csv and exercises.csv)."""
    book, long = Path(out_dir) / "gradebook.csv", Path(out_dir) / "exercises.csv"
    if not (book.is_file() and long.is_file()):
        raise ValueError(f"--regrade: {out_dir} holds no earlier grading (gradebook.csv and exercises.csv): grade the "
                         "class into it first")
    scores = collections.defaultdict(list)
    for r in _read_csv(long):
        scores[r["student"]].append(ExerciseScore(r["exercise"], float(r["points"] or 0), float(r["max"]), r["message"],
                                                  r["status"] or "scored"))
    return [Graded(r["student"], r["lab"], r["status"], float(r["seconds"] or 0), r["message"], scores[r["student"]],
                   None, r["sandbox"]) for r in _read_csv(book)]


def exercise_maxima(rows: list[Graded]) -> dict[str, float]:
    """The exercises a gradebook's rows were scored on, with their maxima."""
    return {s.name: s.max_points for r in rows for s in r.scores}


def merge(earlier: list[Graded], fresh: list[Graded]) -> list[Graded]:
    """The earlier rows with each fresh one in its student's place (appended when new)."""
    by_student = {clean(r.student): r for r in fresh}  # the gradebook holds names as `clean` wrote them
    merged = [by_student.pop(clean(r.student), r) for r in earlier]
    return merged + list(by_student.values())
