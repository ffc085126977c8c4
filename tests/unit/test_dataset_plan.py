"""How a dataset's recordings are cut into tasks for the workers (guided self-scheduling)."""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pytest

from devicepipe.batch import plan
from devicepipe.batch.plan import TAIL_TASKS, TASKS_PER_WORKER, Item, plan_tasks


def files(root: Path, sizes: list[int]) -> list[Item]:
    """One file per size (its bytes stand for its work), as the items of a run."""
    root.mkdir(parents=True, exist_ok=True)
    items = []
    for i, size in enumerate(sizes):
        path = root / f"rec{i:04d}.npy"
        path.write_bytes(b"\0" * size)
        items.append(Item(str(path), str(root / "out" / path.stem), path.stem, None))
    return items


def nbytes(task: list[Item]) -> int:
    return sum(Path(i.path).stat().st_size for i in task)


def makespan(tasks: list[list[Item]], workers: int) -> float:
    """When the last of ``workers`` finishes, each taking the next task as it becomes free and
    spending one unit of time per byte (Dask hands tasks out in the order submitted)."""
    free = [0.0] * workers
    for task in tasks:
        heapq.heappush(free, heapq.heappop(free) + nbytes(task))
    return max(free)


def test_every_item_once_in_order_and_the_first_task_is_a_workers_share(tmp_path):
    items = files(tmp_path, [1000] * 1000)  # equal recordings: counts can be worked out by hand
    for workers in (1, 2, 4):
        tasks = plan_tasks(items, workers)
        assert [i for t in tasks for i in t] == items
        share = workers * TASKS_PER_WORKER
        first = -(-1000 // share)  # 1/share of all the input, rounded up to whole recordings
        assert len(tasks[0]) == first and len(tasks[1]) == -(-(1000 - first) // share)  # then of what is left
        smallest = -(-1000 // TAIL_TASKS)  # 1/TAIL_TASKS of the input, rounded up to whole recordings
        assert all(len(t) >= smallest for t in tasks[:-1]) and len(tasks[-1]) <= smallest
        assert [len(t) for t in tasks] == sorted((len(t) for t in tasks), reverse=True)


def test_no_task_is_larger_than_task_bytes_unless_one_recording_is(tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "TASK_BYTES", 5000)
    sizes = [700, 1200, 9000, 300, 300, 4000, 4000, 100, 6000, 200] * 3
    tasks = plan_tasks(files(tmp_path, sizes), 2)
    assert [len(t) for t in tasks if nbytes(t) > 5000] and all(len(t) == 1 for t in tasks if nbytes(t) > 5000)
    assert sum(len(t) for t in tasks) == len(sizes)


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_the_workers_finish_within_one_small_task_of_each_other(tmp_path, workers):
    # recordings of mixed lengths, 10 s to 30 min (log-uniform), in a random order
    rng = np.random.default_rng(workers)
    sizes = [int(s) for s in np.exp(rng.uniform(np.log(5_000), np.log(900_000), size=300))]
    tasks = plan_tasks(files(tmp_path, sizes), workers)
    total = sum(sizes)
    # each worker is busy until the last tasks, which hold at most 1/TAIL_TASKS of the input
    # (or one recording, where one is larger than that)
    assert makespan(tasks, workers) <= total / workers + max(total / TAIL_TASKS, max(sizes))
    assert makespan(tasks, workers) / (total / workers) < 1.05
