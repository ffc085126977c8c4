"""Runs of True in a boolean host array: where a rhythm, a flat line or an episode starts and ends."""

from __future__ import annotations

import numpy as np

__all__ = ["true_runs"]


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of True in the 1-D ``mask``, in order."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], np.asarray(mask).astype(np.int8), [0]])))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
