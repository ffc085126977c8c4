"""Run a per-recording pipeline on every recording of a dataset (:func:`run_dataset`)."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from devicepipe import pipelines
from devicepipe.artifacts.summaries import DatasetSummary
from devicepipe.artifacts.write import SUMMARY_SCHEMA, input_files
from devicepipe.batch.engine import Engine, dashboard_of, dask_client, worker_count
from devicepipe.batch.index import (
    INDEX_COLUMNS,
    DatasetResult,
    dataset_summary,
    error_line,
    failed_row,
    index_row,
    reference_of,
    worker_name,
)
from devicepipe.batch.plan import Item, plan_tasks
from devicepipe.core.device import resolve_device, usable_cores
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import requested_threads, using_threads
from devicepipe.io import check_output_dir, write_json, write_parquet
from devicepipe.io.discover import INDEX_NAME, Dataset, find_recordings
from devicepipe.io.write import holds_output
from devicepipe.report import REPORT_NAME, dataset_table, write_report

#: Per-recording pipelines that run on a dataset.
KINDS = tuple(pipelines.DATASET_PIPELINES)


def _task(
    kind: str, items: Sequence[Item], options: dict[str, Any], devices: Sequence[str], threads: int | None
) -> list[dict[str, Any]]:
    """Run ``kind`` on ``items`` (in a Dask worker or in this process); one index row each."""
    worker = worker_name()
    device = devices[int(worker) % len(devices)] if worker.isdigit() else devices[0]
    with using_threads(threads) if threads else contextlib.nullcontext():
        outcomes = _run_kind(kind, items, options, device)
    return [
        index_row(item, worker, False) if outcome is None else failed_row(item, worker, error_line(outcome))
        for item, outcome in zip(items, outcomes, strict=True)
    ]


def _run_kind(kind: str, items: Sequence[Item], options: dict[str, Any], device: str) -> list[BaseException | None]:
    """Run the pipeline on each item: None where it succeeded, else the exception that stopped it."""
    run_group = pipelines.DATASET_PIPELINES[kind]
    try:
        paths, outs, references = zip(*((i.path, i.out, i.reference) for i in items), strict=True)
        within = Path(items[0].out).parents[len(Path(items[0].run).parts) - 1]  # the folder run's directory
        return run_group(list(paths), list(outs), list(references), options, device, within)
    except Exception as exc:  # noqa: BLE001 - not a user's mistake: one at a time, so only its recording fails
        if len(items) == 1:
            return [exc]
        return [out for item in items for out in _run_kind(kind, [item], options, device)]


def run_recordings(
    kind: str,
    items: Sequence[Item],
    options: dict[str, Any],
    engine: Engine,
    *,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
    on_cluster: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``kind`` on ``items`` with ``engine``; the index rows (in any order) and how it ran."""
    local = engine.scheduler is None
    n_workers = worker_count(engine)
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
        for task in plan_tasks(items, 1):
            done = _task(kind, task, options, engine.devices, threads)
            rows += done
            tell(done)
        return rows, how
    with dask_client(engine, n_workers, threads) as client:
        info = client.scheduler_info()
        how = engine.describe(len(info.get("workers", {})) or n_workers, threads, dashboard_of(client))
        if on_cluster:
            on_cluster(how)
        from distributed import as_completed

        tasks = plan_tasks(items, max(1, how["workers"]))
        futures = {
            client.submit(_task, kind, task, options, engine.devices, threads, pure=False): task for task in tasks
        }
        for future in as_completed(futures):
            task = futures[future]
            try:
                done = future.result()
            except Exception as exc:  # noqa: BLE001 - a worker lost (killed, out of memory): its recordings fail
                done = [failed_row(item, "?", error_line(exc)) for item in task]
            rows += done
            tell(done)
    return rows, how


def _finished(out: Path, source: str | None = None) -> dict[str, Any] | None:
    """The ``summary.json`` of a finished run in ``out`` (written last), or None: none there, one
    that does not read as a JSON object (cut short, edited), one listing a file that is not
    there, or one of a recording ``source`` whose files have changed since (their sizes and times
    of change, ``input_files``); such a run is done again."""
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(summary, dict):
        return None
    files = summary.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) and (out / f).is_file() for f in files):
        return None
    then = summary.get("input_files")
    if source is not None and then is not None and then != input_files(source):
        return None  # (the recording was replaced or changed since its run)
    return summary


#: What a dataset directory says it was asked to do, written when its run starts.
SETTINGS_NAME = "settings.json"
#: Options that do not change what a run writes: a resumed run may differ in these.
NOT_COMPARED = frozenset({"count_transfers", "resume", "tensorboard", "threads"})


def _settings_of(kind: str, options: dict[str, Any], reference: str | None) -> dict[str, Any]:
    """The settings a run on many recordings was asked for, as JSON holds them."""

    def plain(value: Any) -> Any:
        if hasattr(value, "__dataclass_fields__"):
            value = asdict(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k not in NOT_COMPARED}
        return json.loads(json.dumps(value, default=str))

    return {"kind": kind, "reference": reference, **plain(_with_defaults(kind, options))}


def _with_defaults(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the pipeline's defaults for those not given (so that a setting left out
    and the same one given as its default compare equal)."""
    if kind == "beats":
        return asdict(pipelines.BeatsOptions(**options))
    runs: dict[str, Callable[..., Any]] = {"ecg": pipelines.run_ecg, "score": pipelines.run_score}
    run = runs.get(kind)
    if run is None:
        return dict(options)
    per_run = ("device", "reference", "progress", "epoch_progress")
    defaults = {
        name: p.default
        for name, p in inspect.signature(run).parameters.items()
        if p.kind is p.KEYWORD_ONLY and p.default is not p.empty and name not in per_run
    }
    return {**defaults, **options}


def _check_same_settings(out: Path, asked: dict[str, Any]) -> None:
    """Refuse to resume the runs in ``out`` with settings other than theirs (one line naming the first)."""
    try:
        before = json.loads((out / SETTINGS_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return  # (a directory of an older run, or none: each run's own summary is all there is)
    flat_before, flat_now = _flat(before), _flat(asked)
    for key in sorted(set(flat_before) | set(flat_now)):
        if flat_before.get(key) != flat_now.get(key):
            raise DevicepipeError(
                f"the runs in {out} were made with {key} {flat_before.get(key)!r}, not {flat_now.get(key)!r}",
                fix="resume them with the same settings, or run again without {resume=True}, or choose another {out}.",
                param="resume",
            )


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        out.update(_flat(value, f"{name}.") if isinstance(value, dict) else {name: value})
    return out


def _write_settings(out: Path, asked: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(asked, out / SETTINGS_NAME)


def _check_devices(engine: Engine) -> None:
    """A device of ``engine`` that is not there: said now, not once per recording."""
    for device in engine.devices:
        try:
            resolve_device(device)
        except DevicepipeError as exc:
            if len(engine.devices) == 1:
                raise
            raise DevicepipeError(exc.problem, fix="list devices that exist in {devices=}.", param="devices") from None


@holds_output
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
    :class:`~devicepipe.pipelines.BeatsOptions`; for ``"ecg"``, :func:`~devicepipe.pipelines.run_ecg`'s).
    ``reference``: an annotation extension (``"atr"``): each WFDB record is scored against its
    own ``RECORD.atr`` where there is one. ``resume``: recordings whose run directory is complete
    are not run again (their rows come from their ``summary.json``). ``on_start(total, to_run)``,
    ``on_rows(rows)`` and ``on_cluster(engine)`` report progress.

    Returns the :class:`DatasetResult`; failures are in its rows, not raised. A setting that is
    wrong whatever the recording (:func:`~devicepipe.pipelines.check_settings`) raises
    :class:`DevicepipeError` before any recording is read.
    """
    if kind not in KINDS:
        raise DevicepipeError(f"run_dataset(): kind={kind!r} is not one of {list(KINDS)}.")
    out = check_output_dir(out)
    pipelines.check_settings(options or {})  # once, not as each recording's failure (or not at all, in a batch)
    dataset = spec if isinstance(spec, Dataset) else find_recordings(spec, exclude=out)
    engine = engine or Engine()
    _check_devices(engine)
    started = time.perf_counter()
    items = [
        Item(str(p), str(out / name), name, reference_of(p, reference))
        for p, name in zip(dataset.paths, dataset.run_names(), strict=True)
    ]
    asked = _settings_of(kind, options or {}, reference)
    if resume:
        _check_same_settings(out, asked)
    finished = [_finished(Path(item.out), item.path) if resume else None for item in items]
    if resume and any(f is not None for f in finished) and not (out / SETTINGS_NAME).is_file():
        raise DevicepipeError(
            f"the runs in {out} have no {SETTINGS_NAME} (the run that made them was stopped, by kill -9 or a crash, "
            "before writing it), so the settings they were made with cannot be checked",
            fix="run again without {resume=True}, or choose another {out}.",
            param="resume",
        )
    told = on_cluster

    def cluster_up(how: dict[str, Any]) -> None:  # the workers are up, no recording has started: a run
        _write_settings(out, asked)  # stopped part-way (kill -9 included) says what it was asked
        if told:
            told(how)

    todo = [item for item, summary in zip(items, finished, strict=True) if summary is None]
    if on_start:
        on_start(len(items), len(todo))
    rows = [
        index_row(item, "", True, summary) for item, summary in zip(items, finished, strict=True) if summary is not None
    ]
    if rows and on_rows:
        on_rows(rows)
    fresh, how = run_recordings(kind, todo, options or {}, engine, on_rows=on_rows, on_cluster=cluster_up)
    order = {item.path: i for i, item in enumerate(items)}
    rows = sorted(rows + fresh, key=lambda r: order[r["path"]])
    _write_settings(out, asked)
    write_parquet(pa.Table.from_pylist(rows, schema=INDEX_COLUMNS), out / INDEX_NAME)
    result = DatasetResult(out, rows)
    found = dataset_summary(dataset, kind, options or {}, how, rows, time.perf_counter() - started, reference)
    files = [*found["files"], REPORT_NAME]
    result.summary = DatasetSummary.from_dict({"schema": SUMMARY_SCHEMA, **found, "files": files})
    failed = f"{result.n_failed:,} of {len(rows):,} recordings failed; they are listed first below."
    subtitle = f"devicepipe {kind} on every recording of {dataset.spec}"
    warnings = [failed] if result.n_failed else []
    write_report(
        out, "dataset", result.summary, {}, extra_html=dataset_table(rows), subtitle=subtitle, warnings=warnings
    )
    write_json(result.summary.to_dict(), out / "summary.json")
    return result
