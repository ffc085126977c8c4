"""Timing that a GPU cannot fool: warm-up, synchronisation, repeats, the spread, the threads.

Each repeat synchronises the device before starting the clock and after the call returns
(CUDA events bracket the call on a GPU), so queued kernels are counted. The first calls are
warm-up (allocator, caches, kernel selection) and are not reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from devicepipe.core.device import synchronize

__all__ = ["Timing", "measure"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median, min and max over ``repeats`` timed calls."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    warmup: int
    threads: int
    device: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(
    fn: Callable[[], Any],
    *,
    device: torch.device | str = "cpu",
    warmup: int = 1,
    repeats: int = 5,
    threads: int | None = None,
    check: Callable[[Any], None] | None = None,
) -> Timing:
    """Time ``fn()`` on ``device``.

    Parameters
    ----------
    fn : the work; its result is passed to ``check`` (once, after the last repeat) so a fast
        wrong answer cannot win.
    device : synchronised around every call (CUDA events time the call on a GPU).
    warmup, repeats : untimed and timed calls.
    threads : torch intra-op threads for the measurement (restored afterwards); None keeps
        the current setting. Recorded either way.
    """
    if repeats < 1:
        raise ValueError(f"measure(): repeats must be at least 1, got {repeats}.")
    dev = torch.device(device)
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        result = None
        for _ in range(warmup):
            result = fn()
        synchronize(dev)
        times = []
        for _ in range(repeats):
            if dev.type == "cuda":
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                synchronize(dev)
                start.record()
                result = fn()
                stop.record()
                synchronize(dev)
                times.append(start.elapsed_time(stop) / 1000.0)
            else:
                synchronize(dev)
                started = time.perf_counter()
                result = fn()
                synchronize(dev)
                times.append(time.perf_counter() - started)
        if check is not None:
            check(result)
        used = torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)
    return Timing(statistics.median(times), min(times), max(times), repeats, warmup, used, str(dev))
