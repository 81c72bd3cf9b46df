"""What a probe runs of a submission: the learner's definition of one exercise, as the kernel had it when the
notebook's self-check (`check(name)`) ran.

The probe replays, in the sandbox, the part of the kernel's history that made that definition. Every code cell is read
as IPython reads it, with IPython's own input transformers: leading empty lines dropped, the common indentation and
`>>> `/`... ` prompts removed, magics (on any line), `!` commands and `?` help turned into `get_ipython()` calls; the
body of `%%time` and `%%capture` runs as code. The graded definition is the one the name's last self-check saw (a `def`
after that check, a fix not checked again, wins; a value bound to the name after it, `throughput = 64 / 0.05`, does
not); with no self-check, the last `def`. The probe runs it with every top-level statement before its self-check that
binds a name it uses, directly or through what it uses: imports (`np` from the import cell, also inside `if`, `try`,
`with` and loops), star imports, helper functions and classes (also those defined after the exercise's cell) and
module-level values (`LOSS = nn.CrossEntropyLoss()`), each the last binding before the self-check, then every later
statement before it that completed that object (`LOSS.label_smoothing = 0.0`, `SETTINGS['skip'] = True`, `n += 1`,
`SORT.update(...)` on a value), and every `%%writefile` of a Python module by a literal name (the probe's folder is
on `sys.path`, as the kernel's is), in
notebook order. Statements that bind nothing it uses (a training run, a print) are the rest of the notebook and are
left out. A notebook without a self-check for the name is read to its end.

A submission's notebook and code are untrusted: the grader never reads them in its own process. `read_in_child` and
`clean_in_child` run `main` in a child process with memory, CPU and time limits, and get plain data back; it reads in
a thread with a large stack and recursion limit, so a deeply nested expression the kernel compiled (a sum of hundreds
of terms) is read too.
"""
from __future__ import annotations

import ast
import json
import re
import resource
import subprocess
import symtable
import sys
import textwrap
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAX_NOTEBOOK_BYTES = 64 * 2**20
MAX_CODE_CHARS = 2**20  # all code cells together; the course's largest solution has 40,000 characters
CHILD_MEMORY_BYTES = 3 * 2**30
CHILD_CPU_S = 120
CHILD_TIMEOUT_S = 180.0
MAX_OUTPUT_CHARS = 20_000  # per output, in the executed notebook handed back
DEEP_STACK_BYTES = 512 * 2**20  # the reader's thread: room for DEEP_RECURSION frames, within CHILD_MEMORY_BYTES
DEEP_RECURSION = 30_000  # the kernel compiles at most ~3,000 levels of nesting; printing one takes a few frames each
BINDING = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
           ast.AnnAssign, ast.AugAssign)
# `try: import x / except ImportError: x = None`, `with contextlib.suppress(ImportError): import x`: blocks bind too
BLOCKS = (ast.If, ast.Try, ast.With, ast.For, ast.While, *([ast.TryStar] if hasattr(ast, "TryStar") else []))
DEFINING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
BODY_MAGICS = ("time", "capture")  # cell magics that run their body as code in the kernel's namespace
TITLE = re.compile(r"^#\s+Lab\s+(\d{1,2})\b")


# ---- reading code as IPython reads it ------------------------------------------------------------------------------

def as_python(source: str) -> str:
    """A cell's source as IPython runs it: leading empty lines dropped, the common indentation and `>>> `/`... `
    prompts removed, IPython syntax (magics on any line, `!` commands, `?` help) turned into plain Python calls —
    IPython's own input transformers, where IPython is installed."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # no IPython: no kernel could have run the notebook's magics either
        return textwrap.dedent(source)
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # IPython could not read it either: the kernel would have failed on it
        return source


def _cell_magic(node) -> tuple[str, str, str] | None:
    """(magic, its line, its body) when the statement is `get_ipython().run_cell_magic(...)` with literal arguments."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run_cell_magic"
            and len(call.args) == 3):
        return None
    texts = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return (texts[0], texts[1], texts[2]) if len(texts) == 3 else None


def _parse(source: str) -> list:
    """The cell's top-level statements as the kernel ran them, or [] when it is not valid Python (nor IPython): the
    kernel bound nothing. The body of `%%time` and `%%capture` is code run in the notebook's namespace."""
    statements, pending = [], [source]
    while pending:
        try:
            body = ast.parse(as_python(pending.pop())).body
        except (SyntaxError, ValueError, RecursionError):  # out of memory is not "binds nothing": the child fails
            continue
        magic = _cell_magic(body[0]) if len(body) == 1 else None
        if magic is not None and magic[0] in BODY_MAGICS:
            pending.append(magic[2])
        else:
            statements += body
    return statements


def _writes_file(node) -> bool:
    """True for a `%%writefile` cell that writes a Python module by a literal name: the module is part of what the
    kernel had (`import rates`). A batch script, a data file, or a name the kernel expanded from its variables
    (`%%writefile {path}`) is no code the function can import, and is not replayed."""
    magic = _cell_magic(node)
    if magic is None or magic[0] != "writefile":
        return False
    target = magic[1].split()[-1] if magic[1].split() else ""
    return target.endswith(".py") and not any(ch in target for ch in "{}$")


def _names_in(target) -> set[str]:
    """Names a binding target rebinds (`a`, `a, *b`), not those an attribute or item target reads (`D[k] = v`)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names_in(t) for t in target.elts))
    if isinstance(target, ast.Starred):
        return _names_in(target.value)
    return set()


def _root(expression) -> str | None:
    """`LOSS` of `LOSS.label_smoothing`, `SETTINGS['x']` or `SORT.update`: the name whose object is reached."""
    while isinstance(expression, (ast.Attribute, ast.Subscript)):
        expression = expression.value
    return expression.id if isinstance(expression, ast.Name) else None


def _inner(node) -> list:
    """The statements a block (a top-level `if`, `try`, `with` or loop) holds at any depth, not those in the body of a
    function or class it defines."""
    found, stack = [], list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, ast.expr):
            continue
        if isinstance(child, ast.stmt):
            found.append(child)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
        stack.extend(ast.iter_child_nodes(child))
    return found


def _targets(node) -> set[str]:
    """Names a top-level statement (re)binds (a star import: none that can be named here)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, ast.Assign):
        return set().union(*(_names_in(t) for t in node.targets))
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return _names_in(node.target)
    if isinstance(node, BLOCKS):
        names = set().union(*(_names_in(n.target) for n in [node] if isinstance(n, (ast.For, ast.AsyncFor))))
        names |= {n for item in getattr(node, "items", []) if item.optional_vars for n in _names_in(item.optional_vars)}
        for inner in _inner(node):
            if isinstance(inner, DEFINING + (ast.Import, ast.ImportFrom)):
                names |= _targets(inner)
        return names
    return set()


def _mutates(node, values: set[str]) -> set[str]:
    """Names whose object a top-level statement changes without rebinding it: `LOSS.label_smoothing = 0.0`,
    `SETTINGS['skip'] = True`, `total += 1`, `del D[k]`; and, for names bound to values (`values`, not modules or
    functions, whose calls are mostly not changes), a method call `SORT.update(...)`."""
    names: set[str] = set()
    for inner in [node, *(_inner(node) if isinstance(node, BLOCKS) else [])]:
        if isinstance(inner, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = inner.targets if isinstance(inner, (ast.Assign, ast.Delete)) else [inner.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, (ast.Attribute, ast.Subscript)) and _root(part):
                        names.add(str(_root(part)))
            if isinstance(inner, ast.AugAssign) and isinstance(inner.target, ast.Name):
                names.add(inner.target.id)
        elif isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call) \
                and isinstance(inner.value.func, ast.Attribute) and _root(inner.value.func) in values:
            names.add(str(_root(inner.value.func)))
    return names


def _star(node) -> bool:
    return isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)


def _globals_of(table: symtable.SymbolTable) -> set[str]:
    names = {s.get_name() for s in table.get_symbols() if s.is_global()}
    for child in table.get_children():
        names |= _globals_of(child)
    return names


def _uses(node) -> set[str]:
    """Global names a statement reads when it runs (a function: when it is called; locals are not counted)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return set()
    source = ast.unparse(node)
    try:
        table = symtable.symtable(source, "<cell>", "exec")
    except SyntaxError:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    for child in table.get_children():
        names |= _globals_of(child)
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        names.add(node.target.id)
    return names


def _calls_check(node, name: str) -> bool:
    """True when the statement calls `check(name)` (or `something.check(name)`) anywhere in it."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == name:
            func = call.func
            if (isinstance(func, ast.Name) and func.id == "check") or (isinstance(func, ast.Attribute) and func.attr == "check"):
                return True
    return False


def _is_function(node, name: str) -> bool:
    """True when the statement defines `name` as a function by its syntax (`def`, `class`, `name = lambda ...`)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return isinstance(node.value, ast.Lambda) and name in _targets(node)
    return isinstance(node, BLOCKS) and any(_is_function(n, name) for n in _inner(node))


_PARSING = threading.Lock()  # CPython 3.11's parser is not thread-safe ("AST constructor recursion depth mismatch")


def definition(cells: list[str], name: str) -> str | None:
    """Source that defines `name` as the learner wrote it, with what it uses (module docstring), or None."""
    with _PARSING:
        return definitions(cells, [name])[name]


def definitions(cells: list[str], names) -> dict[str, str | None]:
    """`definition` for several names, every cell parsed once."""
    statements = [node for body in (_parse(c) for c in cells) for node in body]
    return {name: _definition(statements, name) for name in names}


def _graded_definition(statements: list, name: str) -> int | None:
    """Which statement defines the graded `name`: the one its last self-check saw, unless a `def` of it follows that
    check (a fix the learner did not check again); a value bound to the name after the check (`throughput = 64 /
    0.05`) is not it. Without a self-check, the last `def` of it (else the last binding)."""
    defining = [k for k, node in enumerate(statements) if isinstance(node, DEFINING + BLOCKS) and name in _targets(node)]
    if not defining:
        return None
    checks = [k for k, node in enumerate(statements) if _calls_check(node, name)]
    last_check = checks[-1] if checks else -1
    later = [k for k in defining if k > last_check and _is_function(statements[k], name)]
    seen = [k for k in defining if k < last_check]
    return later[-1] if later else seen[-1] if seen else defining[-1]


def _definition(statements: list, name: str) -> str | None:
    home = _graded_definition(statements, name)
    if home is None:
        return None
    end = next((k for k, node in enumerate(statements) if k > home and _calls_check(node, name)),
               len(statements))  # its self-check: the kernel's state when it ran is what is graded
    before = statements[:end]
    binders: dict[str, list[int]] = {}
    for k, node in enumerate(before):
        if k != home and isinstance(node, BINDING + BLOCKS):
            for target in _targets(node):
                binders.setdefault(target, []).append(k)
    values = {t for node in before if isinstance(node, (ast.Assign, ast.AnnAssign) + BLOCKS) for t in _targets(node)}
    changers: dict[str, list[int]] = {}
    for k, node in enumerate(before):
        for target in _mutates(node, values):
            changers.setdefault(target, []).append(k)
    chosen = {home} | {k for k, node in enumerate(before) if _star(node) or _writes_file(node)}
    wanted, seen = set(_uses(statements[home])), set[str]()
    while wanted - seen:
        fresh = sorted(wanted - seen)
        seen |= wanted
        for want in fresh:
            bound = binders.get(want, [])
            start = bound[-1] if bound else -1  # the last binding, and every statement after it that changed it
            for k in [b for b in bound + changers.get(want, []) if b >= start]:
                if k not in chosen:
                    chosen.add(k)
                    wanted = wanted | _uses(statements[k])
    return "\n\n".join(ast.unparse(statements[k]) for k in sorted(chosen))


# ---- reading a submitted notebook (in the child) ------------------------------------------------------------------

class Unreadable(ValueError):
    """Not a notebook the grader can read."""


def _text(source) -> str:
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise Unreadable("a cell's source is neither text nor a list of lines")


def load_notebook(raw: bytes) -> dict:
    """A version 4 notebook as plain data (older versions converted with nbformat); raises Unreadable."""
    try:
        nb = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Unreadable(f"not a readable notebook: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", []), list):
        raise Unreadable("not a readable notebook: no list of cells")
    if nb.get("nbformat") != 4:
        import nbformat

        try:
            nb = json.loads(nbformat.writes(nbformat.reads(raw.decode(), as_version=4)))
        except Exception as exc:
            raise Unreadable(f"not a readable notebook: {type(exc).__name__}: {str(exc)[:200]}") from None
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise Unreadable("not a readable notebook: a cell of no known type")
        cell["source"] = _text(cell.get("source", ""))
        if not isinstance(cell.setdefault("metadata", {}), dict):
            raise Unreadable("not a readable notebook: a cell's metadata is not a mapping")
        tags = cell["metadata"].get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise Unreadable("not a readable notebook: a cell's tags are not a list of names")
    return nb


def _declared_parameters(source: str) -> list[str]:
    return sorted(set(re.findall(r"^([A-Za-z_]\w*)\s*=", source, flags=re.M)))


def title_lab(nb: dict) -> str | None:
    """The lab number its title names ('# Lab 02 — ...'), or None."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown" and cell["source"].lstrip().startswith("#"):
            found = TITLE.match(cell["source"].lstrip())
            return found.group(1).zfill(2) if found else None
    return None


def read_submission(raw: bytes, names: list[str], known: list[str]) -> dict:
    """What the grader needs of one submission, as plain data: the notebook to run (every code cell allowed to fail),
    the parameters it declares, each exercise's definition (and which are still the stub: no probe runs for those), the lab its title names and which of the course's
    exercise names it defines; or {"invalid": why}."""
    try:
        nb = load_notebook(raw)
    except Unreadable as exc:
        return {"invalid": str(exc)}
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    parameters = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
    if not parameters:
        return {"invalid": "the notebook has no cell tagged 'parameters': submit the lab's notebook, not another file"}
    size = sum(len(c["source"]) for c in code)
    if size > MAX_CODE_CHARS:
        return {"invalid": f"its code cells hold {size:,} characters; the grader reads at most {MAX_CODE_CHARS:,} "
                           "(the course's largest notebook has about 40,000)"}
    sources = [c["source"] for c in code]
    statements = [node for body in (_parse(s) for s in sources) for node in body]
    defined = {t for node in statements if isinstance(node, DEFINING) for t in _targets(node)}
    for cell in code:  # every cell may fail without stopping the run
        cell["metadata"]["tags"] = [t for t in cell["metadata"].get("tags", []) if t != "raises-exception"] + ["raises-exception"]
    from ...exercises.core import only_raises_not_implemented

    found = {name: _definition(statements, name) for name in names}
    return {"notebook": json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
            "declared": _declared_parameters(parameters[0]["source"]), "definitions": found,
            "stubs": [name for name, source in found.items() if source and only_raises_not_implemented(source, name)],
            "title_lab": title_lab(nb), "defines": sorted(defined & set(known))}


def _cut(text, limit: int = MAX_OUTPUT_CHARS) -> str:
    text = "".join(text) if isinstance(text, list) else str(text)
    return text if len(text) <= limit else text[:limit] + "\n[... output cut by the grader ...]\n"


def clean_executed(raw: bytes) -> dict:
    """The executed notebook with every output cut to the limit (images too large are dropped), and what its outputs
    say: {"notebook", "errors", "interrupted", "first_error"}; or {"invalid": why}."""
    try:
        nb = load_notebook(raw)
    except Unreadable as exc:
        return {"invalid": str(exc)}
    errors = interrupted = 0
    first = ""
    for number, cell in enumerate(nb["cells"], 1):
        if cell["cell_type"] != "code":
            continue
        kept = []
        outputs = cell.get("outputs", [])
        for output in outputs if isinstance(outputs, list) else []:
            if not isinstance(output, dict):
                continue
            kind = output.get("output_type")
            if kind == "stream":
                output["text"] = _cut(output.get("text", ""))
            elif kind == "error":
                errors += 1
                interrupted += output.get("ename") == "KeyboardInterrupt"
                first = first or f"cell {number}: {str(output.get('ename', ''))[:80]}: {str(output.get('evalue', ''))[:160]}"
                output["ename"] = _cut(output.get("ename", ""), 200)
                output["evalue"] = _cut(output.get("evalue", ""), 2000)
                trace = output.get("traceback", [])
                output["traceback"] = [_cut(line, 2000) for line in (trace if isinstance(trace, list) else [])[:50]]
            elif kind in ("display_data", "execute_result"):
                data = output.get("data", {})
                if not isinstance(data, dict):
                    output["data"] = data = {}
                for mime in list(data):
                    if mime.startswith("text/") or mime.endswith("json"):
                        data[mime] = _cut(data[mime] if isinstance(data[mime], (str, list)) else json.dumps(data[mime]))
                    elif len(str(data[mime])) > 4 * MAX_OUTPUT_CHARS:
                        del data[mime]
            kept.append(output)
        cell["outputs"] = kept
    return {"notebook": json.dumps(nb, indent=1, ensure_ascii=False) + "\n", "errors": errors,
            "interrupted": interrupted, "first_error": first}


# ---- the child, and the grader's side of it ------------------------------------------------------------------------

def deep(function, *args):
    """`function(*args)` in a thread with a large stack and recursion limit, so that the deeply nested expressions
    honest code holds (a 1,000-term sum: the kernel compiles it) parse and print here too. In the child only: the
    recursion limit is the process's."""
    result: dict = {}

    def run():
        try:
            result["value"] = function(*args)
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc

    previous = threading.stack_size(DEEP_STACK_BYTES)
    sys.setrecursionlimit(DEEP_RECURSION)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous)
    if "error" in result:
        raise result["error"]
    return result["value"]


def main() -> None:
    """In the child: one request on stdin (a JSON line, then the notebook's bytes), one JSON answer on stdout."""
    request = json.loads(sys.stdin.buffer.readline())
    raw = sys.stdin.buffer.read(MAX_NOTEBOOK_BYTES + 1)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        answer = {"invalid": f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB"}
    elif request["op"] == "read":
        answer = deep(read_submission, raw, request["names"], request["known"])
    else:
        answer = deep(clean_executed, raw)
    sys.stdout.write(json.dumps(answer))


CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from lab_utils.instructor.grading.submission_reader import main; main()"


def _limit_child():
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_S, CHILD_CPU_S))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def in_child(request: dict, raw: bytes, timeout: float = CHILD_TIMEOUT_S) -> dict:
    """Run `main` on a notebook's bytes in a child with memory, CPU and time limits: its answer, or {"invalid": why}."""
    limits = f"{CHILD_MEMORY_BYTES // 2**20} MiB of memory, {CHILD_CPU_S} s of CPU"
    try:
        done = subprocess.run([sys.executable, "-I", "-c", CHILD, str(ROOT)], input=json.dumps(request).encode() + b"\n" + raw,
                              capture_output=True, timeout=timeout, preexec_fn=_limit_child)
    except subprocess.TimeoutExpired:
        return {"invalid": f"the grader could not read it within {timeout:g} s"}
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"invalid": f"the grader could not read it within its limits ({limits}): {last[:200]}"}
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return {"invalid": "the grader could not read it (no answer from its reader)"}
    return answer if isinstance(answer, dict) else {"invalid": "the grader could not read it"}


def read_in_child(raw: bytes, names: list[str], known: list[str]) -> dict:
    """`read_submission` in a limited child."""
    return in_child({"op": "read", "names": list(names), "known": list(known)}, raw)


def clean_in_child(raw: bytes) -> dict:
    """`clean_executed` in a limited child."""
    return in_child({"op": "clean"}, raw)
