"""Many recordings: a folder, a glob or a list file, each recording run as one recording is, on Dask.

:func:`find_recordings` turns what the user named into a :class:`Dataset` (the recordings, the
folder their run directories mirror). :func:`run_dataset` runs a per-recording pipeline
(``"beats"``: :func:`~devicepipe.pipeline.run_beats_many`, ``"ecg"``:
:func:`~devicepipe.pipeline.run_ecg`) over it and writes the dataset directory::

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
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from devicepipe.device import resolve_device, usable_cores
from devicepipe.errors import DevicepipeError
from devicepipe.io import check_output_dir, write_json, write_parquet
from devicepipe.io.read import recording_files
from devicepipe.prestart import LIST_SUFFIXES, WORKER_PRELOAD, is_dataset
from devicepipe.report import REPORT_NAME, dataset_table, write_report
from devicepipe.threads import requested_threads, using_threads

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

#: File suffixes taken as recordings in a folder or a glob (a WFDB record by its ``.hea``).
RECORDING_SUFFIXES = (".hea", ".csv", ".tsv", ".parquet", ".pq", ".npy", ".edf", ".bdf")
#: Files that sit beside recordings and are not recordings: ``simulate``'s ground truth.
SIDECAR_ENDINGS = (".truth.csv",)
#: The per-recording table of a dataset directory.
INDEX_NAME = "index.parquet"
#: Input bytes of one task at most (recordings larger than this get a task of their own).
TASK_BYTES = 64 * 2**20
#: Tasks per worker to aim for: each task takes a worker's share of the input left (see the
#: module's docstring), so that an uneven mix of recordings still keeps every worker busy.
TASKS_PER_WORKER = 4
#: The smallest task holds 1/TAIL_TASKS of a run's input: what the last worker to finish can be
#: left holding while the others wait.
TAIL_TASKS = 64
#: Local workers per usable core at most (more only compete for the cores and the memory:
#: every worker process holds its own torch).
WORKERS_PER_CORE = 4
#: Dask settings of a local cluster started here, each unless the user's Dask configuration sets
#: it (see :func:`_local_cluster_config`): the workers' statistical profiler (a stack sample every
#: 10 ms) off, and the event loops' latency tick (every 20 ms) and resource monitors (every 500 ms
#: and 100 ms) slowed.
#: A batch of recordings needs none of them that often; each wakes a process's event loop, which
#: then takes the interpreter's lock from the thread running the recordings. On the 2-core
#: machine they made a folder run on two workers 7 % longer (BENCHMARKS.md).
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}
#: Per-recording pipelines that run on a dataset.
KINDS = ("beats", "ecg", "score")

INDEX_COLUMNS = pa.schema(
    [
        ("path", pa.string()),  # the recording, as given or found
        ("run", pa.string()),  # its run directory, relative to the dataset directory
        ("status", pa.string()),  # "ok" or "failed"
        ("error", pa.string()),  # the one line that says why (failed only)
        ("resumed", pa.bool_()),  # complete before this run started (its outputs were kept)
        ("sampling_rate_hz", pa.float64()),
        ("duration_s", pa.float64()),
        ("beats", pa.int64()),  # R peaks found
        ("kept", pa.int64()),  # beats kept by segmentation
        ("flagged", pa.int64()),  # beats flagged as anomalous (ecg only)
        ("tp", pa.int64()),  # with a reference: matches, false and missed detections in its scoring window
        ("fp", pa.int64()),
        ("fn", pa.int64()),
        ("warnings", pa.string()),  # what the beats say about the settings, joined by "; "
        ("seconds", pa.float64()),  # the run's own stages, added up
        ("device", pa.string()),
        ("worker", pa.string()),  # which Dask worker ran it ("local" without Dask)
    ]
)


@dataclass(frozen=True)
class Dataset:
    """Recordings to run, and the folder their run directories are named relative to."""

    paths: tuple[Path, ...]
    root: Path
    spec: str  # what the user named: a folder, a glob or a list file

    def run_names(self) -> list[str]:
        """Each recording's run directory, relative to the dataset directory: its path under
        :attr:`root` without the suffix (with the suffix, ``_csv``, where two would collide)."""
        plain = [_relative(p, self.root).with_suffix("").as_posix() for p in self.paths]
        counts: dict[str, int] = {}
        for name in plain:
            counts[name] = counts.get(name, 0) + 1
        names = [
            name if counts[name] == 1 else f"{name}_{p.suffix.lstrip('.').lower()}"
            for name, p in zip(plain, self.paths, strict=True)
        ]
        seen: set[str] = set()
        for i, name in enumerate(names):  # still equal (same names in unrelated folders): number them
            names[i] = name if name not in seen else f"{name}_{i}"
            seen.add(names[i])
        return names


def _relative(path: Path, root: Path) -> Path:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return Path(path.name)


def _is_recording(path: Path) -> bool:
    name = path.name.lower()
    return (
        path.is_file()
        and not name.startswith(".")
        and path.suffix.lower() in RECORDING_SUFFIXES
        and not name.endswith(SIDECAR_ENDINGS)
    )


def _wfdb_header(path: Path) -> Path:
    """A WFDB record's ``.dat`` named in a glob stands for its ``.hea`` (one record, one entry)."""
    if path.suffix.lower() == ".dat" and path.with_suffix(".hea").is_file():
        return path.with_suffix(".hea")
    return path


def find_recordings(spec: str | os.PathLike[str], *, exclude: str | os.PathLike[str] | None = None) -> Dataset:
    """The recordings ``spec`` names, in a stable order.

    - a folder: every recording file under it, at any depth (:data:`RECORDING_SUFFIXES`; WFDB
      records by their ``.hea``; hidden files and ``simulate``'s ``*.truth.csv`` left out);
    - a glob (``'data/**/*.hea'``, quoted so the shell leaves it): the recording files it
      matches (a ``.dat`` counts as its record);
    - a list file: one path per line, relative to the list file's folder, ``#`` comments and
      blank lines ignored; every path is kept (a missing one fails on its own row).

    ``exclude``: a folder whose contents are never taken (the output directory, when it lies
    inside the input folder). A clear :class:`DevicepipeError` when nothing is found.
    """
    text = str(spec)
    path = Path(spec)
    skip = None if exclude is None else Path(exclude).resolve()

    def outside(p: Path) -> bool:
        return skip is None or not p.resolve().is_relative_to(skip)

    if path.is_dir():
        root = path
        paths = sorted(p for p in path.rglob("*") if _is_recording(p) and outside(p))
        where = f"folder {path}"
    elif path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
        root = path.parent
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"cannot read the list of recordings {path} ({exc})"
            raise DevicepipeError(f"{problem}; give a UTF-8 text file.") from None
        entries = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
        paths = [p if p.is_absolute() else root / p for p in map(Path, entries)]
        where = f"list {path}"
    elif glob.has_magic(text):
        found = {_wfdb_header(Path(p)) for p in glob.glob(text, recursive=True)}
        paths = sorted(p for p in found if _is_recording(p) and outside(p))
        root = Path(os.path.commonpath([p.parent for p in paths])) if paths else Path(".")
        where = f"pattern {text!r}"
    else:
        raise DevicepipeError(f"{spec} is neither a folder, a list file ({', '.join(LIST_SUFFIXES)}) nor a pattern.")
    if not paths:
        raise DevicepipeError(
            f"no recordings found in {where}; recordings are files ending in {', '.join(RECORDING_SUFFIXES)}."
        )
    return Dataset(tuple(paths), root, text)


# ----------------------------------------------------------------------------- one task: a few recordings


@dataclass(frozen=True)
class _Item:
    path: str
    out: str
    run: str
    reference: str | None


def _error_line(exc: BaseException) -> str:
    """An exception as one line: a user mistake's own message, anything else with its type."""
    if isinstance(exc, DevicepipeError):
        message = exc.cli_message
    else:
        message = f"{type(exc).__name__}: {exc}"
    return " ".join(message.split()) or type(exc).__name__


def _row(item: _Item, worker: str, resumed: bool, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The index row of a complete run directory, from its ``summary.json`` (``summary``: that
    file as already read)."""
    if summary is None:
        summary = json.loads((Path(item.out) / "summary.json").read_text(encoding="utf-8"))
    counts = summary.get("counts", {})
    accuracy = summary.get("accuracy") or {}
    rate, n = summary.get("sampling_rate_hz"), summary.get("n_samples")
    return {
        "path": item.path,
        "run": item.run,
        "status": "ok",
        "error": None,
        "resumed": resumed,
        "sampling_rate_hz": rate,
        "duration_s": None if not rate or n is None else n / rate,
        "beats": counts.get("beats_found"),
        "kept": counts.get("beats_kept"),
        "flagged": counts.get("flagged"),
        "tp": accuracy.get("tp"),
        "fp": accuracy.get("fp"),
        "fn": accuracy.get("fn"),
        "warnings": "; ".join(summary.get("warnings") or []) or None,
        "seconds": float(sum(summary.get("seconds", {}).values())),
        "device": summary.get("device"),
        "worker": worker,
    }


def _failed(item: _Item, worker: str, message: str) -> dict[str, Any]:
    row = dict.fromkeys(INDEX_COLUMNS.names)
    row.update(path=item.path, run=item.run, status="failed", error=message, resumed=False, worker=worker)
    return row


def _worker_name() -> str:
    with contextlib.suppress(ImportError, ValueError):
        from distributed import get_worker

        return str(get_worker().name)
    return "local"


def _task(
    kind: str, items: Sequence[_Item], options: dict[str, Any], devices: Sequence[str], threads: int | None
) -> list[dict[str, Any]]:
    """Run ``kind`` on ``items`` (in a Dask worker or in this process); one index row each."""
    worker = _worker_name()
    device = devices[int(worker) % len(devices)] if worker.isdigit() else devices[0]
    with using_threads(threads) if threads else contextlib.nullcontext():
        outcomes = _run_kind(kind, items, options, device)
    return [
        _row(item, worker, False) if outcome is None else _failed(item, worker, _error_line(outcome))
        for item, outcome in zip(items, outcomes, strict=True)
    ]


def _run_kind(kind: str, items: Sequence[_Item], options: dict[str, Any], device: str) -> list[BaseException | None]:
    """Run the pipeline on each item: None where it succeeded, else the exception that stopped it."""
    from devicepipe import pipeline  # the pipelines import this module's users, not the reverse

    if kind == "beats":
        opts = pipeline.BeatsOptions(**options)
        try:
            results = pipeline.run_beats_many(
                [i.path for i in items], [i.out for i in items], options=opts,
                references=[i.reference for i in items], device=device,
            )  # fmt: skip
            return [r if isinstance(r, BaseException) else None for r in results]
        except Exception as exc:  # noqa: BLE001 - not a user's mistake: one at a time, so only its recording fails
            if len(items) == 1:
                return [exc]
            return [out for item in items for out in _run_kind(kind, [item], options, device)]
    run = pipeline.run_score if kind == "score" else pipeline.run_ecg
    outcomes: list[BaseException | None] = []
    for item in items:
        try:
            run(item.path, item.out, device=device, reference=item.reference, **options)
            outcomes.append(None)
        except Exception as exc:  # noqa: BLE001 - a bad recording never stops the batch
            outcomes.append(exc)
    return outcomes


def _input_bytes(path: Path) -> int:
    """The size of the files of the recording ``path`` names; 0 for what cannot be looked at (a
    missing file, a name too long for the file system): it fails on its own row when run."""
    try:
        return sum(f.stat().st_size for f in recording_files(path) if f.is_file())
    except OSError:
        return 0


def _plan(items: Sequence[_Item], workers: int) -> list[list[_Item]]:
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
    tasks: list[list[_Item]] = []
    current: list[_Item] = []
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


# ----------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class Engine:
    """Where the recordings run: ``workers=0`` in this process, else on Dask (a local cluster of
    ``workers`` processes, or the cluster at ``scheduler``); ``devices``: one per worker, in turn."""

    workers: int | None = None  # None: one per usable core (local cluster)
    scheduler: str | None = None
    devices: tuple[str, ...] = ("auto",)

    def describe(self, n_workers: int, threads: int | None, dashboard: str | None) -> dict[str, Any]:
        kind = "loop" if self.workers == 0 else ("dask (scheduler)" if self.scheduler else "dask (local cluster)")
        return {
            "kind": kind,
            "workers": n_workers,
            "threads_per_worker": threads,
            "scheduler": self.scheduler,
            "dashboard": dashboard,
            "devices": list(self.devices),
        }


@dataclass
class DatasetResult:
    """What :func:`run_dataset` wrote: the dataset directory, its index rows and summary."""

    out: Path
    rows: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def n_ok(self) -> int:
        return sum(r["status"] == "ok" for r in self.rows)

    @property
    def n_failed(self) -> int:
        return sum(r["status"] == "failed" for r in self.rows)

    @property
    def n_resumed(self) -> int:
        return sum(bool(r["resumed"]) for r in self.rows)


@contextlib.contextmanager
def _client(engine: Engine, n_workers: int, threads: int | None) -> Iterator[Any]:
    """A Dask client: of the cluster at ``engine.scheduler``, or of a local cluster started here."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise DevicepipeError(
            "Dask distributed is not installed; pip install 'dask[distributed]', or run without it (workers=0).",
            cli="Dask distributed is not installed; pip install 'dask[distributed]', or pass --workers 0.",
        ) from None
    if engine.scheduler:
        try:
            client = Client(engine.scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address ('host' with no port)
            raise DevicepipeError(
                f"cannot reach the Dask scheduler at {engine.scheduler} ({exc}); check the address and that it runs."
            ) from None
        with client:
            yield client
        return
    dashboard = ":0" if importlib.util.find_spec("bokeh") is not None else None  # the dashboard needs bokeh
    env = {"OMP_NUM_THREADS": str(threads or 1), "MKL_NUM_THREADS": str(threads or 1)}
    with dask.config.set({"distributed.worker.multiprocessing-method": _start_method(), **_local_cluster_config()}):
        try:
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=dashboard,
                silence_logs=logging.ERROR,
                env=env,
            )
        except Exception as exc:  # noqa: BLE001 - Dask's reason (a bad setting in the Dask configuration, ...), as one line
            detail = " ".join(str(exc).split()) or type(exc).__name__
            detail = detail if len(detail) <= 160 else f"{detail[:157]}..."
            problem = (
                f"the local Dask cluster did not start ({detail}); "
                "check the Dask configuration (DASK_* variables, ~/.config/dask)"
            )
            raise DevicepipeError(
                f"{problem}, or run without Dask (workers=0).", cli=f"{problem}, or pass --workers 0."
            ) from None
        with cluster, Client(cluster) as client:
            yield client


def _local_cluster_config() -> dict[str, Any]:
    """:data:`LOCAL_CLUSTER_CONFIG`, less what the user's Dask configuration sets: in a Dask
    configuration file or a ``DASK_*`` environment variable, or in this process to a value other
    than the one Dask ships. The cluster's nannies hand it on to their workers."""
    import dask

    shipped = dask.config.merge(*dask.config.defaults)
    users = dask.config.collect()  # the files and the environment alone
    unset = object()
    return {
        k: v
        for k, v in LOCAL_CLUSTER_CONFIG.items()
        if dask.config.get(k, unset, config=users) is unset and dask.config.get(k) == dask.config.get(k, config=shipped)
    }


def _start_method() -> str:
    """How the local cluster starts its workers: from a fork server that has imported torch and
    the pipelines once (each spawned worker would import them again: seconds per worker, which
    a folder of short recordings notices), where the platform has one."""
    import multiprocessing

    import dask
    from distributed.utils import get_mp_context

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        context = get_mp_context()  # Dask's own preload list first, then ours in its place
    context.set_forkserver_preload(list(WORKER_PRELOAD))  # no change where the command started it early
    return "forkserver"


def _n_workers(engine: Engine) -> int:
    if engine.workers is None:
        return max(1, len(engine.devices) if engine.devices != ("auto",) else usable_cores())
    if engine.workers < 0:
        problem = f"must be 0 or more, got {engine.workers}"
        raise DevicepipeError(f"workers {problem}.", cli=f"--workers {problem}.")
    cores = usable_cores()
    most = max(WORKERS_PER_CORE * cores, len(engine.devices))
    if engine.scheduler is None and engine.workers > most:
        problem = (
            f"{engine.workers} is more local workers than this machine's {cores} core(s) can run "
            f"(each is a process with its own torch); give at most {most}"
        )
        raise DevicepipeError(
            f"workers={problem}, or scheduler= a larger Dask cluster.",
            cli=f"--workers {problem}, or --scheduler ADDRESS for a larger Dask cluster.",
        )
    return engine.workers


def run_recordings(
    kind: str,
    items: Sequence[_Item],
    options: dict[str, Any],
    engine: Engine,
    *,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
    on_cluster: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``kind`` on ``items`` with ``engine``; the index rows (in any order) and how it ran."""
    local = engine.scheduler is None
    n_workers = _n_workers(engine)
    if local and n_workers:  # no more worker processes than recordings to give them
        n_workers = min(n_workers, max(1, len(items)))
    asked = requested_threads()  # DEVICEPIPE_THREADS: each worker's (or the loop's) count
    threads = (asked[0] if asked else max(1, usable_cores() // max(1, n_workers))) if local else None
    tell = on_rows or (lambda _rows: None)
    rows: list[dict[str, Any]] = []
    if n_workers == 0 and local:
        how = engine.describe(0, threads, None)
        if on_cluster:
            on_cluster(how)
        for task in _plan(items, 1):
            done = _task(kind, task, options, engine.devices, threads)
            rows += done
            tell(done)
        return rows, how
    with _client(engine, n_workers, threads) as client:
        info = client.scheduler_info()
        how = engine.describe(len(info.get("workers", {})) or n_workers, threads, client.dashboard_link or None)
        if on_cluster:
            on_cluster(how)
        from distributed import as_completed

        tasks = _plan(items, max(1, how["workers"]))
        futures = {
            client.submit(_task, kind, task, options, engine.devices, threads, pure=False): task for task in tasks
        }
        for future in as_completed(futures):
            task = futures[future]
            try:
                done = future.result()
            except Exception as exc:  # noqa: BLE001 - a worker lost (killed, out of memory): its recordings fail
                done = [_failed(item, "?", _error_line(exc)) for item in task]
            rows += done
            tell(done)
    return rows, how


def _finished(out: Path) -> dict[str, Any] | None:
    """The ``summary.json`` of a finished run in ``out`` (written last), or None: none there, or
    one that does not read as a JSON object (cut short, edited), whose run is done again."""
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def run_dataset(
    spec: str | os.PathLike[str] | Dataset,
    out: str | os.PathLike[str],
    *,
    kind: str = "beats",
    options: dict[str, Any] | None = None,
    engine: Engine | None = None,
    reference: str | None = None,
    resume: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
    on_cluster: Callable[[dict[str, Any]], None] | None = None,
) -> DatasetResult:
    """Run the per-recording pipeline ``kind`` (one of :data:`KINDS`) on every recording of
    ``spec`` (see :func:`find_recordings`) and write the dataset directory ``out``.

    ``options``: the pipeline's keyword settings (for ``"beats"``, the fields of
    :class:`~devicepipe.pipeline.BeatsOptions`; for ``"ecg"``, :func:`~devicepipe.pipeline.run_ecg`'s).
    ``reference``: an annotation extension (``"atr"``): each WFDB record is scored against its
    own ``RECORD.atr`` where there is one. ``resume``: recordings whose run directory is complete
    are not run again (their rows come from their ``summary.json``). ``on_start(total, to_run)``,
    ``on_rows(rows)`` and ``on_cluster(engine)`` report progress.

    Returns the :class:`DatasetResult`; failures are in its rows, not raised. A setting that is
    wrong whatever the recording (:func:`~devicepipe.pipeline.check_settings`) raises
    :class:`DevicepipeError` before any recording is read.
    """
    if kind not in KINDS:
        raise DevicepipeError(f"run_dataset(): kind={kind!r} is not one of {list(KINDS)}.")
    out = check_output_dir(out)
    from devicepipe.pipeline import check_settings  # (the pipelines import this module's users)

    check_settings(options or {})  # once, not as each recording's failure (or not at all, in a batch)
    dataset = spec if isinstance(spec, Dataset) else find_recordings(spec, exclude=out)
    engine = engine or Engine()
    for device in engine.devices:  # a device that is not there: said now, not once per recording
        try:
            resolve_device(device)
        except DevicepipeError as exc:
            if len(engine.devices) == 1:
                raise
            problem = str(exc).split(";")[0]
            raise DevicepipeError(
                f"{problem}; list devices that exist in devices=.",
                cli=f"{problem}; list devices that exist in --devices.",
            ) from None
    started = time.perf_counter()
    items = [
        _Item(str(p), str(out / name), name, _reference_of(p, reference))
        for p, name in zip(dataset.paths, dataset.run_names(), strict=True)
    ]
    finished = [_finished(Path(item.out)) if resume else None for item in items]
    todo = [item for item, summary in zip(items, finished, strict=True) if summary is None]
    if on_start:
        on_start(len(items), len(todo))
    rows = [_row(item, "", True, summary) for item, summary in zip(items, finished, strict=True) if summary is not None]
    if rows and on_rows:
        on_rows(rows)
    fresh, how = run_recordings(kind, todo, options or {}, engine, on_rows=on_rows, on_cluster=on_cluster)
    order = {item.path: i for i, item in enumerate(items)}
    rows = sorted(rows + fresh, key=lambda r: order[r["path"]])
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(pa.Table.from_pylist(rows, schema=INDEX_COLUMNS), out / INDEX_NAME)
    result = DatasetResult(out, rows)
    result.summary = _summary(dataset, kind, options or {}, how, rows, time.perf_counter() - started, reference)
    result.summary["files"].append(REPORT_NAME)
    page = {
        **result.summary,
        "subtitle": f"devicepipe {kind} on every recording of {dataset.spec}",
        "warnings": [f"{result.n_failed:,} of {len(rows):,} recordings failed; they are listed first below."]
        if result.n_failed
        else [],
    }
    write_report(out, "dataset", page, {}, extra_html=dataset_table(rows))
    write_json(result.summary, out / "summary.json")
    return result


def _reference_of(path: Path, extension: str | None) -> str | None:
    """``RECORD.<extension>`` beside a WFDB record, where there is one."""
    if extension is None or path.suffix.lower() != ".hea":
        return None
    candidate = path.with_suffix(f".{extension}")
    return str(candidate) if candidate.is_file() else None


def _summary(
    dataset: Dataset,
    kind: str,
    options: dict[str, Any],
    how: dict[str, Any],
    rows: list[dict[str, Any]],
    seconds: float,
    reference: str | None,
) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == "ok"]
    failed = [r for r in rows if r["status"] == "failed"]

    def total(key: str) -> int | None:
        values = [r[key] for r in ok if r[key] is not None]
        return int(sum(values)) if values else None

    tp, fp, fn = total("tp"), total("fp"), total("fn")
    accuracy = None
    if tp is not None:
        se = tp / (tp + fn) if tp + fn else 0.0
        ppv = tp / (tp + fp) if tp + fp else 0.0
        accuracy = {
            "reference": reference,
            "records_scored": sum(r["tp"] is not None for r in ok),
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "sensitivity": se,
            "ppv": ppv,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0,
        }
    return {
        "input": dataset.spec,
        "kind": kind,
        "recordings": len(rows),
        "ok": len(ok),
        "failed": len(failed),
        "resumed": sum(bool(r["resumed"]) for r in rows),
        "beats": total("beats"),
        "flagged": total("flagged"),
        "duration_s": float(sum(r["duration_s"] or 0.0 for r in ok)),
        "accuracy": accuracy,
        "seconds": {"wall": seconds, "recordings": float(sum(r["seconds"] or 0.0 for r in ok))},
        "engine": how,
        "settings": {k: (asdict(v) if hasattr(v, "__dataclass_fields__") else v) for k, v in options.items()},
        "failures": [{"path": r["path"], "error": r["error"]} for r in failed[:50]],
        "files": [INDEX_NAME],
    }
