"""A long launch in parts: each part a launch of its own with its own timeout, a line of progress per part, so that a
timeout costs one part, and says which parameter sets it."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .errors import RankError
from .jobs import launch


@dataclass
class Parts:
    """What a launch in parts returned: per part, the ranks' values (None: it did not finish), and what stopped each
    part that did not."""

    values: list = field(default_factory=list)
    failures: dict = field(default_factory=dict)  # part index -> one line: why it did not finish

    @property
    def finished(self) -> list[int]:
        """The indices of the parts that finished."""
        return [i for i, v in enumerate(self.values) if v is not None]

    def why(self) -> str | None:
        """Why some parts did not finish, in one line; None when every part did."""
        if not self.failures:
            return None
        by_line: dict = {}  # the same reason once, with every part it stopped
        for i, line in self.failures.items():
            by_line.setdefault(line, []).append(i + 1)
        return "; ".join(f"part{'s' if len(parts) > 1 else ''} {', '.join(map(str, parts))} of {len(self.values)}: "
                         f"{line}" for line, parts in by_line.items())


def launch_parts(worker, world_size: int, parts, *, timeout: float, timeout_name: str = "timeout_s",
                 runs_of_part=len, what: str = "runs", stop_on_error: bool = True, **launch_kwargs) -> Parts:
    """launch(worker, world_size, args=(part,)) for each part in turn, each with `timeout` s; after each part one line:
    runs done / total. A part that times out is left out and the next one runs (its message names the parameter
    `timeout_name`); a rank's error stops the remaining parts (the same code would fail again) unless not
    `stop_on_error`. `runs_of_part(part)`: how many runs a part holds."""
    parts = list(parts)
    total, done, result = sum(runs_of_part(p) for p in parts), 0, Parts()
    started = time.perf_counter()
    for i, part in enumerate(parts):
        begun = time.perf_counter()
        try:
            result.values.append(launch(worker, world_size, args=(part,), timeout=timeout, **launch_kwargs))
        except TimeoutError:
            result.values.append(None)
            result.failures[i] = (f"did not finish within {timeout:g} s, the parameter `{timeout_name}` (a slow or busy "
                                  f"machine: set {timeout_name} = {2 * timeout:g} or more in the parameters cell and "
                                  "run again); its runs are left out")
            print(f"part {i + 1}/{len(parts)}: TIMED OUT after {time.perf_counter() - begun:.0f} s "
                f"({timeout_name} = {timeout:g} s); {done} of {total} {what} done", flush=True)
            continue
        except RankError as error:
            result.values.append(None)
            result.failures[i] = f"rank {error.rank} failed: {error.message}"
            print(f"part {i + 1}/{len(parts)}: {error}", flush=True)  # the rank's message, hint and traceback
            if stop_on_error:
                result.values += [None] * (len(parts) - i - 1)
                result.failures.update({j: "not run: an earlier part failed" for j in range(i + 1, len(parts))})
                break
            continue
        done += runs_of_part(part)
        print(f"part {i + 1}/{len(parts)}: {runs_of_part(part)} {what} in {time.perf_counter() - begun:.1f} s; "
            f"{done} of {total} {what} done ({time.perf_counter() - started:.0f} s so far)", flush=True)
    return result
