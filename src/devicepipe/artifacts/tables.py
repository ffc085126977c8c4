"""The tables and model files of a learning run, written from what it made (:class:`Made`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from devicepipe.artifacts.made import Histories, Made
from devicepipe.artifacts.names import MODEL_NAME
from devicepipe.heart.rate import minute_rates
from devicepipe.io import write_csv, write_parquet


def _rows(m: Made) -> dict[str, Any]:
    """The ``leading`` columns, latent codes ``z0..``, score, flag and spread."""
    rows = m.scored
    table = dict(m.leading or {})
    for j in range(rows.emb.shape[1]):
        table[f"z{j}"] = rows.emb[:, j]
    table.update(score=rows.scores, flag=rows.flags, spread=rows.spread)
    return table


def embeddings(m: Made) -> Path:
    """One row per row trained on: the leading columns, latent codes, score, flag and spread."""
    return write_parquet(_rows(m), m.out / "embeddings.parquet")


def scores_table(m: Made) -> Path:
    """One row per row scored: as ``embeddings.parquet``, with each row's tail probability."""
    table = _rows(m)
    table["tail_probability"] = m.scored.tail
    return write_parquet(table, m.out / "scores.parquet")


def history(m: Made) -> Path:
    assert m.histories is not None  # (a learning run's)
    return write_history(m.histories, m.out / "history.csv")


def write_history(histories: Histories, path: Path) -> Path:
    """``history.csv``: per epoch, each model's train and validation loss and seconds."""
    cols: dict[str, Any] = {"epoch": np.arange(1, len(histories[0]["train"]) + 1)}
    for i, h in enumerate(histories):
        suffix = "" if len(histories) == 1 else f"_{i}"
        cols[f"train_loss{suffix}"] = np.asarray(h["train"])
        cols[f"val_loss{suffix}"] = np.asarray(h["val"])
        cols[f"seconds{suffix}"] = np.asarray(h["seconds"])
    return write_csv(cols, path)


def model(m: Made) -> Path:
    """The fitted model, with the geometry of its rows (see :meth:`BeatAnomalyDetector.save`)."""
    return m.detector.save(m.out / MODEL_NAME, geometry=None if m.geometry is None else dict(m.geometry))


def recordings(m: Made) -> Path:
    """One row per recording a population model was trained on."""
    columns = ("path", "beats", "poor_left_out", "rate_hz", "flagged", "median_score")
    assert m.recordings is not None  # (a population model's run)
    return write_parquet({k: [u[k] for u in m.recordings] for k in columns}, m.out / "recordings.parquet")


def minute_table(m: Made) -> Path | None:
    """Each minute of the recording that holds a beat: its start (s from the recording's start),
    its beats, and their median, lowest and highest heart rate (bpm; 60 / the RR interval before
    each beat, uncleaned)."""
    peaks = m.all_peaks
    if peaks is None or m.rec is None or m.rec.sampling_rate is None or peaks.size < 2:
        return None
    rates = minute_rates(peaks, m.rec.sampling_rate)
    columns = {
        "minute_start_s": rates.minute * 60.0,
        "beats": rates.beats,
        "median_bpm": rates.median_bpm,
        "min_bpm": rates.min_bpm,
        "max_bpm": rates.max_bpm,
    }
    return write_csv(columns, m.out / "heart_rate.csv")


def left_by_training(name: str) -> Any:
    """The file ``name`` that training left in the run directory (its checkpoint), where there is one."""

    def find(m: Made) -> Path | None:
        path = m.out / name
        return path if path.exists() else None

    return find
