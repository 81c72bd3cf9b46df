"""The reference of lab 09's flush rule (its exercise): which queued requests join a batch. The batcher and the
worker pool themselves are the notebook's (lab_utils.labs.lab09.lesson)."""
from __future__ import annotations

import queue
import time


def collect(first, requests, max_batch: int, max_wait_s: float) -> list:
    """The flush rule: `first` plus queued requests until max_batch are held or max_wait_s has passed; the batch."""
    batch = [first]
    deadline = time.perf_counter() + max_wait_s
    while len(batch) < max_batch:
        remaining = deadline - time.perf_counter()
        try:  # max_wait_s = 0 (or time up): take only what is already waiting
            batch.append(requests.get(timeout=remaining) if remaining > 0 else requests.get_nowait())
        except queue.Empty:
            break
    return batch
