"""A dataset's table of recordings (``index.parquet``, :data:`INDEX_COLUMNS`): one row per run,
made from its ``summary.json``; and the dataset's own summary."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from devicepipe.artifacts.summaries import Accuracy, Counts, DatasetSummary, HolterSummary, RunSummary
from devicepipe.artifacts.summaries import held as _held
from devicepipe.batch.plan import Item
from devicepipe.core.errors import DevicepipeError
from devicepipe.io.discover import INDEX_NAME, Dataset

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
        ("v_beats", pa.int64()),  # beats of each ectopic class (none for a run without classes)
        ("s_beats", pa.int64()),
        ("v_burden_pct", pa.float64()),  # percent of the beats
        ("s_burden_pct", pa.float64()),
        ("couplets", pa.int64()),  # Holter events
        ("runs", pa.int64()),
        ("pauses", pa.int64()),
        ("af_share", pa.float64()),  # share of the recording in irregularly irregular rhythm
        ("warnings", pa.string()),  # what the beats say about the settings, joined by "; "
        ("seconds", pa.float64()),  # the run's own stages, added up
        ("device", pa.string()),
        ("worker", pa.string()),  # which Dask worker ran it ("local" without Dask)
    ]
)


def error_line(exc: BaseException) -> str:
    """An exception as one line: a user mistake's own message, anything else with its type."""
    if isinstance(exc, DevicepipeError):
        message = exc.cli_message
    else:
        message = f"{type(exc).__name__}: {exc}"
    return " ".join(message.split()) or type(exc).__name__


def _holter_columns(h: HolterSummary | None) -> dict[str, Any]:
    """The index's Holter columns of a run (None each for a run without classes)."""
    if not h:
        return dict.fromkeys(("v_beats", "s_beats", "v_burden_pct", "s_burden_pct", "couplets", "runs", "pauses",
                              "af_share"))  # fmt: skip
    return {
        "v_beats": h.counts["V"],
        "s_beats": h.counts["S"],
        "v_burden_pct": h.burden_pct["V"],
        "s_burden_pct": h.burden_pct["S"],
        "couplets": h.events.get("couplet", 0),
        "runs": h.events.get("run", 0),
        "pauses": h.events.get("pause", 0),
        "af_share": h.af_share,
    }


def index_row(item: Item, worker: str, resumed: bool, summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The index row of a complete run directory, from its ``summary.json`` (``summary``: that
    file as already read)."""
    if summary is None:
        summary = json.loads((Path(item.out) / "summary.json").read_text(encoding="utf-8"))
    s = RunSummary.from_dict(summary)
    counts, accuracy = s.counts or Counts(), s.accuracy or Accuracy()
    rate, n = _held(s.sampling_rate_hz), _held(s.n_samples)
    return {
        "path": item.path,
        "run": item.run,
        "status": "ok",
        "error": None,
        "resumed": resumed,
        "sampling_rate_hz": rate,
        "duration_s": None if not rate or n is None else n / rate,
        "beats": _held(counts.beats_found),
        "kept": _held(counts.beats_kept),
        "flagged": _held(counts.flagged),
        "tp": _held(accuracy.tp),
        "fp": _held(accuracy.fp),
        "fn": _held(accuracy.fn),
        **_holter_columns(s.holter),
        "warnings": "; ".join(s.warnings or []) or None,
        "seconds": float(sum((s.seconds or {}).values())),
        "device": _held(s.device),
        "worker": worker,
    }


def failed_row(item: Item, worker: str, message: str) -> dict[str, Any]:
    row = dict.fromkeys(INDEX_COLUMNS.names)
    row.update(path=item.path, run=item.run, status="failed", error=message, resumed=False, worker=worker)
    return row


def worker_name() -> str:
    with contextlib.suppress(ImportError, ValueError):
        from distributed import get_worker

        return str(get_worker().name)
    return "local"


@dataclass
class DatasetResult:
    """What :func:`run_dataset` wrote: the dataset directory, its index rows and summary."""

    out: Path
    rows: list[dict[str, Any]]
    summary: DatasetSummary = field(default_factory=DatasetSummary)

    @property
    def n_ok(self) -> int:
        return sum(r["status"] == "ok" for r in self.rows)

    @property
    def n_failed(self) -> int:
        return sum(r["status"] == "failed" for r in self.rows)

    @property
    def n_resumed(self) -> int:
        return sum(bool(r["resumed"]) for r in self.rows)


def reference_of(path: Path, extension: str | None) -> str | None:
    """``RECORD.<extension>`` beside a WFDB record, where there is one."""
    if extension is None or path.suffix.lower() != ".hea":
        return None
    candidate = path.with_suffix(f".{extension}")
    return str(candidate) if candidate.is_file() else None


def dataset_summary(
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
    if tp is not None and fp is not None and fn is not None:
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
