"""Lab 11's hung rendezvous (learner s9h finding 2): what its prose and its prediction lines rely on. Each task dials
its own port: task 0 (the store's server) gives up at the first whole second past the timeout, with "Timed out after
N seconds" naming that second; task 1 (a client of a port nobody listens on) when a dial fails after the timeout: each dial waits up to the
timeout on its own clock, with a back-off its C++ log names between dials (retrying (try=0, ..., delay=Nms))."""
import re
import socket
import subprocess
import sys
import textwrap

import pytest

from lab_utils.launch import free_port

SCRIPT = textwrap.dedent('''
    import os, sys, time
    from datetime import timedelta
    import torch.distributed as dist
    rank, port, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port + rank), RANK=str(rank), WORLD_SIZE="2")
    start = time.time()
    try:
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
        print("joined")
    except Exception as exc:
        print(f"gave up after {time.time() - start:.2f} s: {str(exc).splitlines()[0]}")
''')


def free_pair() -> int:
    """A port whose next port is free too: task 1 dials port + 1, which must have no listener (make test once found
    another test's rendezvous store there, and task 1's dial met it instead of backing off)."""
    for _ in range(50):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise OSError("no two free ports in a row after 50 tries")


@pytest.mark.parametrize("timeout", [2.0, 2.5])
def test_the_listening_task_stops_at_the_next_whole_second_and_the_dialing_one_after_its_back_off(timeout):
    port = free_pair()
    tasks = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(rank), str(port), str(timeout)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for rank in (0, 1)]
    said = [task.communicate(timeout=60) for task in tasks]
    logs, said = [err for _, err in said], [out for out, _ in said]
    waited = [float(re.search(r"gave up after ([\d.]+) s", text).group(1)) for text in said]
    store_s = int(timeout) + 1
    assert f"Timed out after {store_s} seconds" in said[0], said[0]
    assert store_s - 0.2 <= waited[0] <= store_s + 1.5, said[0]      # a busy machine only adds
    delays = [int(ms) / 1000 for ms in re.findall(r"retrying \(try=\d+.*?delay=(\d+)ms", logs[1])]
    assert delays, logs[1]  # c10d's client names each back-off it sleeps
    # after the timeout; before every dial's timeout plus the back-offs between dials (busy: later)
    assert timeout - 0.3 <= waited[1] <= (len(delays) + 1) * timeout + sum(delays) + 1.5, (said[1], delays)
