"""Hand recordings to workers in tasks: short ones several to a task, tasks that shrink as the
input runs out (guided self-scheduling), so that the workers finish close together."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from devicepipe.io.read import recording_files

#: Input bytes of one task at most (recordings larger than this get a task of their own).
TASK_BYTES = 64 * 2**20
#: Tasks per worker to aim for: each task takes a worker's share of the input left (see the
#: module's docstring), so that an uneven mix of recordings still keeps every worker busy.
TASKS_PER_WORKER = 4
#: The smallest task holds 1/TAIL_TASKS of a run's input: what the last worker to finish can be
#: left holding while the others wait.
TAIL_TASKS = 64


@dataclass(frozen=True)
class Item:
    path: str
    out: str
    run: str
    reference: str | None


def _input_bytes(path: Path) -> int:
    """The size of the files of the recording ``path`` names; 0 for what cannot be looked at (a
    missing file, a name too long for the file system): it fails on its own row when run."""
    try:
        return sum(f.stat().st_size for f in recording_files(path) if f.is_file())
    except OSError:
        return 0


def plan_tasks(items: Sequence[Item], workers: int) -> list[list[Item]]:
    """Consecutive items in tasks that shrink as the input runs out (guided self-scheduling).

    Each task takes about 1/(``workers`` x :data:`TASKS_PER_WORKER`) of the input bytes not yet
    handed out, but no less than 1/:data:`TAIL_TASKS` of all the input, and no more than
    :data:`TASK_BYTES` (a larger recording gets a task of its own). The first tasks are large
    (many equal-length recordings to batch, little per-task overhead); the last, which decide
    how long one worker waits for the others at the end, are small.
    """
    if not items:
        return []
    sizes = [_input_bytes(Path(item.path)) for item in items]
    share = max(1, workers) * TASKS_PER_WORKER
    left = sum(sizes)  # input bytes not yet handed out
    smallest = left / TAIL_TASKS
    tasks: list[list[Item]] = []
    current: list[Item] = []
    size = 0
    for item, nbytes in zip(items, sizes, strict=True):
        if current and size + nbytes > TASK_BYTES:
            tasks.append(current)
            left -= size
            current, size = [], 0
        current.append(item)
        size += nbytes
        if size >= min(TASK_BYTES, max(smallest, left / share)):
            tasks.append(current)
            left -= size
            current, size = [], 0
    if current:
        tasks.append(current)
    return tasks
