"""Lab 03's plumbing that is not the lesson: catching torch.multiprocessing.spawn's failure
and reading what a child said from the captured stderr (section 1), and writing the torchrun script around the
notebook's worker (section 7)."""
from __future__ import annotations

import contextlib
import inspect
import re
from pathlib import Path

from ...launch import captured_stderr

_CHILD = re.compile(r"AttributeError: Can't get attribute '\w+' on <module '__main__'[^>]*>")
_EXIT = re.compile(r"terminated with exit code -?[0-9]+")


def spawn_lines(err: BaseException | None, stderr: str) -> list[str]:
    """What the parent raised (the exit code only: which rank dies first changes from run to run) and what a child
    said; the two children write at once and the first to die gets the other stopped, so a line can arrive cut."""
    said = []
    if err is not None:
        code = _EXIT.search(str(err))
        said.append(f"torch.multiprocessing.spawn: {type(err).__name__}: a process "
                    f"{code.group(0) if code else str(err)[:60]}")
    child = _CHILD.search(stderr)
    last = (stderr.strip().splitlines() or ["nothing"])[-1][:60]
    said.append(f"a child said: {child.group(0)}" if child else
                f"a child said (cut or mixed with the other's line; its last): {last!r}")
    return said


@contextlib.contextmanager
def spawn_failure():
    """Run the block with the children's stderr captured (it goes to the console, not the notebook) and its error
    caught; print what the parent raised and what a child said."""
    err = None
    with captured_stderr() as children:
        try:
            yield
        except Exception as raised:  # noqa: BLE001 - the lesson is this failure
            err = raised
    print("\n".join(spawn_lines(err, children.text)))


_HEAD = '''import contextlib, json, os, sys
from datetime import timedelta
from types import SimpleNamespace
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from lab_utils import data, ddp, hardware, measure, spec, tensors
from lab_utils.train import evaluate
from lab_utils.launch import hold_process_groups


'''

_MAIN = '''

if __name__ == '__main__':
    hold_process_groups()  # a rank can hang at random in torch's exit teardown (pytorch/pytorch#75097)
    cfg = SimpleNamespace(**json.loads(sys.argv[1]))  # DDPConfig's fields, read as attributes
    # torchrun's agent sets RANK and WORLD_SIZE (and the rendezvous address) for each rank it starts
    out = {worker}(int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), cfg)
    if out['accuracy']:
        print(json.dumps({{'rank': int(os.environ['RANK']), 'accuracy': out['accuracy']}}), flush=True)
    os._exit(0)  # so leave without tearing the group down; where ranks exit cleanly, drop it and hold_process_groups()
'''


def torchrun_script(worker, path: Path | str) -> Path:
    """Write `worker`'s source as a script torchrun can start: the imports it uses, the function, and a __main__ that
    reads the rank and world size from the environment and the DDPConfig's fields (JSON) from argv[1]."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_HEAD + inspect.getsource(worker) + _MAIN.format(worker=worker.__name__))
    return path
