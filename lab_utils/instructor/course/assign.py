"""Student copies: notebooks/ made from solutions/ with each solution region stubbed and every output removed, and
the lesson modules exported from the cells tagged `lesson` (`python -m lab_utils assign`)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..labs import ROOT, solution_notebooks

if TYPE_CHECKING:
    import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: write your solution here, then run the self-check below.")'
# a %%writefile cell that writes a shell script gets a shell stub: the line fails the script, as STUB fails Python
SHELL_STUB = 'echo "Exercise: write your lines here, then run the self-check below." >&2; exit 1'
LESSONS = ROOT / "lab_utils" / "labs"  # the lab packages: labNN/lesson.py generated for a lab with cells tagged `lesson`


def is_shell_script(source: str) -> bool:
    """True for a cell that writes a shell script: `%%writefile ...` then a `#!` line naming a shell."""
    lines = source.splitlines()
    return (len(lines) > 1 and lines[0].startswith("%%writefile") and lines[1].startswith("#!")
            and lines[1].rstrip().endswith(("sh", "bash")))


def strip_solutions(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region of a code cell by an indented stub (a shell line in a shell script)."""
    out, inside, indent = [], False, ""
    stub = SHELL_STUB if is_shell_script(source) else STUB
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"{where}, line {number}: '{BEGIN}' inside another solution region; close it with '{END}' first")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f"{indent}{stub}")
        elif marker == END:
            if not inside:
                raise ValueError(f"{where}, line {number}: '{END}' without a matching '{BEGIN}'")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: '{BEGIN}' is never closed; add '{END}' after the solution")
    return "\n".join(out)


def student_version(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """A copy of a solution notebook with solutions stubbed and every output removed."""
    import nbformat

    nb = nbformat.from_dict(nb)
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source, f"{name}, cell {index}")
            cell.outputs = []
            cell.execution_count = None
        elif BEGIN in cell.source:
            raise ValueError(f"{name}, cell {index}: solution markers belong in code cells, not {cell.cell_type} cells")
    return nb


def assign(solutions_dir=None, notebooks_dir=None, *, check: bool = False, lessons_dir=None) -> list[str]:
    """Write notebooks/ from solutions/ and the lesson modules lab_utils/labs/labNN/lesson.py from the solutions' cells
    tagged `lesson` (or, with check, list the files that differ); returns the problems. With a solutions_dir of its
    own, lesson modules are written only where lessons_dir says."""
    import nbformat

    from .export import export_lessons

    sources = solution_notebooks(solutions_dir)
    target = Path(notebooks_dir) if notebooks_dir else ROOT / "notebooks"
    problems = []
    if not sources:
        return [f"no solution notebooks (NN_name.ipynb) found in {solutions_dir or ROOT / 'solutions'}"]
    for src in sources:
        text = nbformat.writes(student_version(nbformat.read(src, as_version=4), src.name)) + "\n"
        dest = target / src.name
        if check:
            if not dest.exists():
                problems.append(f"{dest} is missing")
            elif dest.read_text() != text:
                problems.append(f"{dest} differs from what {src} generates")
        else:
            target.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    extra = {p.name for p in target.glob("*.ipynb")} - {s.name for s in sources} if target.exists() else set()
    problems += [f"{target / name} has no source in solutions/" for name in sorted(extra)]
    if lessons_dir is None and solutions_dir is None:
        lessons_dir = LESSONS
    if lessons_dir is not None:
        problems += export_lessons(sources, Path(lessons_dir), check=check, root=ROOT)
    return problems
