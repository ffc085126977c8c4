"""Many recordings: a folder, a glob or a list file, each recording run as one recording is, on Dask.

:func:`~devicepipe.io.discover.find_recordings` turns what the user named into a :class:`Dataset` (the recordings, the
folder their run directories mirror). :func:`run_dataset` runs a per-recording pipeline
(``"beats"``: :func:`~devicepipe.pipelines.run_beats_many`, ``"ecg"``:
:func:`~devicepipe.pipelines.run_ecg`) over it and writes the dataset directory::

    OUT/<recording's path under the root, without suffix>/   one run directory per recording
    OUT/index.parquet                                        one row per recording (INDEX_COLUMNS)
    OUT/summary.json                                         written last

The engine is Dask distributed: by default a local cluster of worker processes started in
this process (``workers=N``, the cores divided among them for torch's threads, or
``DEVICEPIPE_THREADS`` each where it is set); with
``scheduler=ADDRESS`` a running Dask cluster (its workers must see the same paths); with
``workers=0`` a plain loop in this process, no Dask at all. A recording that fails never
stops the others: its row holds the error's one line. Every row is made from the run's own
``summary.json``, so a run that ``resume`` finds complete (its ``summary.json`` exists) gives
the row an uninterrupted run would.

Recordings are handed to workers in tasks: short ones several to a task, so that equal-length
recordings at one rate are detected in one batched ``(batch, time)`` call. Tasks shrink as the
input runs out (guided self-scheduling): each takes a worker's share (1/:data:`TASKS_PER_WORKER`)
of the input bytes left, at most :data:`TASK_BYTES` and at least 1/:data:`TAIL_TASKS` of the
whole, so the workers finish close together.

Where each part lives: finding the recordings in :mod:`devicepipe.io.discover` (below the
pipelines, which read a population from a folder too); tasks in :mod:`.plan`; the cluster in
:mod:`.engine`; the index and the dataset's summary in :mod:`.index`; the run in :mod:`.run`.
"""

from __future__ import annotations

from devicepipe.batch.engine import LOCAL_CLUSTER_CONFIG, WORKERS_PER_CORE, Engine
from devicepipe.batch.index import INDEX_COLUMNS, DatasetResult
from devicepipe.batch.plan import TAIL_TASKS, TASK_BYTES, TASKS_PER_WORKER
from devicepipe.batch.run import KINDS, run_dataset, run_recordings
from devicepipe.core.datasets import LIST_SUFFIXES, is_dataset
from devicepipe.io.discover import INDEX_NAME, RECORDING_SUFFIXES, Dataset, find_recordings

__all__ = [
    "INDEX_COLUMNS",
    "INDEX_NAME",
    "KINDS",
    "LOCAL_CLUSTER_CONFIG",
    "LIST_SUFFIXES",
    "RECORDING_SUFFIXES",
    "TASKS_PER_WORKER",
    "TASK_BYTES",
    "TAIL_TASKS",
    "WORKERS_PER_CORE",
    "Dataset",
    "DatasetResult",
    "Engine",
    "find_recordings",
    "is_dataset",
    "run_dataset",
    "run_recordings",
]
