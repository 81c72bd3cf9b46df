"""A job's files as the notebook shows and cleans them: a log's tail, the files named after a run's jobs, scripts
printed without this machine's paths, the run times batch scripts wrote."""
from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
from pathlib import Path


def log_tail(path, lines: int = 8, folder=None) -> str:
    """The last `lines` of a job's log, without submitit's time stamps, `folder` by its name, this host as <host>."""
    with contextlib.suppress(OSError):
        text = Path(path).read_text(errors="replace").rstrip()
        text = re.sub(r" \(\d{4}-\d\d-\d\d [\d:,]+\)", "", text)
        text = re.sub(r" AT \d{4}-\d\d-\d\dT[\d:]+", "", text)  # slurmstepd's "CANCELLED AT <date>T<time>"
        if folder is not None:
            text = text.replace(str(Path(folder).resolve()), Path(folder).name).replace(str(folder), Path(folder).name)
        text = re.sub(rf"\b{re.escape(socket.gethostname())}\b", "<host>", text)
        return "\n".join(text.splitlines()[-lines:])
    return "(no log yet)"


JOB_FILE = re.compile(r"^(?:[A-Za-z][\w.-]*?-)?(\d+)(?=[-_.]|$)")  # by-hand-171.out, hang-195-0.out, 183_0_log.out


def job_files(folder, since: int) -> list[Path]:
    """The files in `folder` (and its submitit/ folder) named after a job whose id is `since` or later: the logs
    (`%j` in --output), port and where files, submitit's pickles. Scripts, checkpoints and results keep their names."""
    found = []
    for where in (Path(folder), Path(folder) / "submitit"):
        for path in sorted(where.iterdir()) if where.is_dir() else []:
            # submitit links .submission_file_<hash>.sh to the last job's script: named after that job
            name = Path(os.readlink(path)).name if path.is_symlink() else path.name
            match = JOB_FILE.match(name)
            if (path.is_file() or path.is_symlink()) and match and int(match.group(1)) >= since:
                found.append(path)
    return found


def remove_job_files(folder, since: int) -> list[str]:
    """Remove job_files(folder, since): a lab run cleans what its jobs left (their logs piled up run after run);
    the names removed, relative to `folder`."""
    removed = []
    for path in job_files(folder, since):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(str(path.relative_to(folder)))
    return removed


def without_machine_paths(text: str, folder) -> str:
    """A script as the notebook prints it: `folder` by its name, this interpreter as `python`, its folder as .venv/bin."""
    for path in (str(Path(folder).resolve()), str(folder)):
        text = text.replace(path, Path(folder).name)
    text = text.replace(sys.executable, "python").replace(str(Path(sys.executable).parent), ".venv/bin")
    return text.replace(sys.prefix, ".venv")  # display only: the file on disk keeps the paths every node needs


def terminal_lines(said) -> str:
    """What a terminal showed, as plain lines: a pty's control bytes (NUL, CR) and their caret echo (`^@`, `^M`)
    removed, this host as <host>."""
    text = "\n".join(re.sub(r"\^[@A-Z\[\\\]^_?]|[\x00-\x08\x0b-\x1f\x7f]", "", line) for line in said)
    return re.sub(rf"\b{re.escape(socket.gethostname())}\b", "<host>", text)


def script_times(path) -> dict[str, float]:
    """job id -> seconds its batch script ran, from the lines `JOBID START END` (`date +%s.%N`) it appended to `path`."""
    times = {}
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            fields = line.replace(",", ".").split()  # a locale may write the decimal point as a comma
            with contextlib.suppress(ValueError):
                if len(fields) == 3:
                    times[fields[0]] = float(fields[2]) - float(fields[1])
    return times
