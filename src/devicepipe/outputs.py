"""Writing a run: its tables, history, figures and ``summary.json``, each file atomically.

The pipelines hand host copies of their results to these writers and never write files
themselves. ``beats.parquet`` (one row per R peak found) is written by :func:`write_beats_table`
for every ECG run; ``summary.json`` by :func:`write_summary`, always last, so that a run
directory without it is an interrupted run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.ecg import POOR_QUALITY, BeatQuality, Beats, poor_stretches, stretch_medians
from devicepipe.heart import hrv, hrv_stored
from devicepipe.io import Recording, write_beat_annotations, write_csv, write_json, write_parquet
from devicepipe.io.spill import Stored
from devicepipe.learn import ENSEMBLE_NAME
from devicepipe.plot import (
    plot_beats_excerpt,
    plot_days,
    plot_extremes,
    plot_generated,
    plot_heart_rate,
    plot_intervals,
    plot_latent,
    plot_quality,
    plot_score_distribution,
    plot_training,
    save_figure,
)
from devicepipe.train import CHECKPOINT_NAME
from devicepipe.windows import Windows

#: Rows of a beat table built and written at a time.
TABLE_PART = 16_384

__all__ = [
    "SUMMARY_SCHEMA",
    "beats_figures",
    "quality_figure",
    "ecg_figures",
    "input_summary",
    "score_figures",
    "series_figures",
    "series_score_figures",
    "train_figures",
    "heart_rate_summary",
    "write_beat_files",
    "write_history",
    "write_score_table",
    "write_scores",
    "write_summary",
]

Histories = list[dict[str, list[float]]]


def input_summary(source: Any, rec: Recording, device: torch.device, *, channel_key: str = "channel") -> dict[str, Any]:
    """The ``summary.json`` fields that say what was read, where it ran, and how long it is."""
    return {
        "input": str(source) if isinstance(source, (str, Path)) else type(source).__name__,
        channel_key: rec.channels[0],
        "device": str(device),
        "sampling_rate_hz": rec.sampling_rate,
        "n_samples": rec.n_samples,
        "non_finite_values": {"count": rec.n_nan, "policy": rec.nan_policy},
    }


def write_beat_files(
    out: Path,
    record: str,
    peaks: np.ndarray,
    kept: np.ndarray,
    sampling_rate: float,
    *,
    scores: np.ndarray | None = None,
    flags: np.ndarray | None = None,
    quality: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Path]:
    """Every R peak found, in three forms: ``beats.parquet`` (the sampling rate in its metadata),
    ``beats.csv``, and the WFDB annotation file ``<record>.qrs`` (see
    :func:`devicepipe.io.write_beat_annotations`; none when no beat was found).

    Columns: each peak's sample, time (s), the RR interval before it (s, NaN for the first),
    whether segmentation kept it, with ``quality`` its correlation with the typical beat and the
    median of that over its stretch (``quality``, ``stretch_quality``; NaN where not kept; see
    :func:`devicepipe.ecg.beat_quality`), and, for a learning run, its score (NaN where not
    kept) and flag. Every array has shape ``(n_peaks,)``.
    """

    def parts() -> Iterator[dict[str, Any]]:
        """The table :data:`TABLE_PART` rows at a time (a week's beats hold no full-length temporaries)."""
        for s in range(0, max(1, peaks.size), TABLE_PART):
            e = min(peaks.size, s + TABLE_PART)
            own = peaks[s:e]
            before = peaks[s - 1 : e] if s > 0 else np.concatenate([[np.nan], peaks[:e]])
            columns: dict[str, Any] = {
                "peak": own,
                "time_s": own / sampling_rate,
                "rr_s": np.diff(before.astype(np.float64)) / sampling_rate,
                "kept": kept[s:e],
            }
            if quality is not None:
                columns.update(quality=quality[0][s:e], stretch_quality=quality[1][s:e])
            if scores is not None and flags is not None:
                columns.update(score=scores[s:e], flagged=flags[s:e])
            yield columns

    files = {
        "beats.parquet": write_parquet(parts(), out / "beats.parquet", sampling_rate=sampling_rate),
        "beats.csv": write_csv(parts(), out / "beats.csv"),
    }
    qrs = write_beat_annotations(out, record, peaks, sampling_rate, scores=scores, flags=flags)
    if qrs is not None:
        files[qrs.name] = qrs
    return files


def heart_rate_summary(peaks: torch.Tensor | Stored, sampling_rate: float) -> dict[str, Any] | None:
    """``summary.json``'s heart rate and time-domain HRV (cleaned NN intervals; see
    :mod:`devicepipe.heart`) of R peaks in memory or held on disk (read a part at a time), or
    None with fewer than three beats."""
    if len(peaks) < 3:
        return None
    measures = hrv(peaks, sampling_rate) if isinstance(peaks, torch.Tensor) else hrv_stored(peaks, sampling_rate)
    return {"nn_cleaning": "0.3-2 s, within 20 % of the neighbours' median", **measures.to_dict()}


def write_history(histories: Histories, path: Path) -> Path:
    """``history.csv``: per epoch, each model's train and validation loss and seconds."""
    cols: dict[str, Any] = {"epoch": np.arange(1, len(histories[0]["train"]) + 1)}
    for i, h in enumerate(histories):
        suffix = "" if len(histories) == 1 else f"_{i}"
        cols[f"train_loss{suffix}"] = np.asarray(h["train"])
        cols[f"val_loss{suffix}"] = np.asarray(h["val"])
        cols[f"seconds{suffix}"] = np.asarray(h["seconds"])
    return write_csv(cols, path)


def write_scores(
    out: Path, leading: dict[str, Any], host: dict[str, np.ndarray], histories: Histories
) -> dict[str, Path]:
    """``embeddings.parquet`` (the ``leading`` columns, latent codes ``z0..``, score, flag, spread)
    and ``history.csv``; lists the run's checkpoint or ensemble file too."""
    emb = dict(leading)
    for j in range(host["emb"].shape[1]):
        emb[f"z{j}"] = host["emb"][:, j]
    emb.update(score=host["scores"], flag=host["flags"], spread=host["spread"])
    files = {"embeddings.parquet": write_parquet(emb, out / "embeddings.parquet")}
    files["history.csv"] = write_history(histories, out / "history.csv")
    for name in (CHECKPOINT_NAME, ENSEMBLE_NAME):
        if (out / name).exists():
            files[name] = out / name
    return files


def write_score_table(out: Path, leading: dict[str, Any], host: dict[str, np.ndarray]) -> dict[str, Path]:
    """``scores.parquet`` of a ``score`` run: the ``leading`` columns, latent means ``z0..``, score,
    flag, spread and tail probability, one row per beat scored."""
    table = dict(leading)
    for j in range(host["emb"].shape[1]):
        table[f"z{j}"] = host["emb"][:, j]
    table.update(score=host["scores"], flag=host["flags"], spread=host["spread"], tail_probability=host["tail"])
    return {"scores.parquet": write_parquet(table, out / "scores.parquet")}


#: The version of ``summary.json``'s layout (its ``schema`` key), raised when a key that a reader may
#: rely on is renamed, removed or changes type (tests/contract pins the layout of every pipeline's).
SUMMARY_SCHEMA = 1


def write_summary(out: Path, summary: dict[str, Any], files: dict[str, Path]) -> Path:
    """``summary.json``, listing every file of the run, with its :data:`SUMMARY_SCHEMA`; call it last."""
    summary["schema"] = SUMMARY_SCHEMA
    summary["files"] = sorted(p.name for p in files.values())
    return write_json(summary, out / "summary.json")


def _excerpt(rec: Recording, signal: np.ndarray, peaks: np.ndarray, reference: np.ndarray | None = None) -> Any:
    """Ten seconds of ``signal`` (``rec``'s samples, which start at ``rec.start_sample`` of the
    recording) with the beats marked."""
    return plot_beats_excerpt(
        signal,
        rec.sampling_rate,
        peaks,
        reference=reference,
        unit=rec.units[0],
        title=f"{rec.source} ({rec.channels[0]}): detected beats",
        offset=rec.start_sample,
        start_s=0.0 if rec.start_sample else None,
    )


def _learning_figures(
    host: dict[str, np.ndarray],
    histories: Histories,
    threshold: float,
    training_title: str,
    latent_title: str,
    warning: str | None,
) -> dict[str, Any]:
    """``training.png`` (loss curves) and ``latent.png`` (codes coloured by score, flagged rows
    ringed, reference labels marked where ``host`` has ``truth``) of a learning run."""
    return {
        "training.png": plot_training(histories, title=training_title, warning=warning),
        "latent.png": plot_latent(
            host["emb"],
            scores=host["scores"],
            threshold=threshold,
            flags=host["flags"],
            truth=host.get("truth"),
            title=latent_title,
            warning=warning,
        ),
    }


def beats_figures(
    out: Path,
    rec: Recording,
    signal: np.ndarray,
    peaks: np.ndarray,
    beats: Beats,
    reference: np.ndarray | None,
) -> dict[str, Path]:
    """``excerpt.png`` (signal with detected and reference beats: ``rec`` may hold only a part of
    the recording, from ``rec.start_sample``), ``heart_rate.png`` and ``intervals.png`` (RR intervals)."""
    return {
        "excerpt.png": save_figure(_excerpt(rec, signal, peaks, reference), out / "excerpt.png"),
        "heart_rate.png": save_figure(plot_heart_rate(peaks, rec.sampling_rate), out / "heart_rate.png"),
        "intervals.png": save_figure(
            plot_intervals(np.diff(peaks), rec.sampling_rate, keep_range=beats.length_range),
            out / "intervals.png",
        ),
    }


def quality_figure(out: Path, quality: BeatQuality, kept_peaks: torch.Tensor, n_samples: int, fs: float) -> Path:
    """``quality.png``: each beat's and each stretch's signal quality over the recording, the
    unusable stretches shaded (``kept_peaks``: the R peaks of the rated beats)."""
    medians = stretch_medians(quality, kept_peaks, n_samples, fs).cpu().numpy()
    poor = poor_stretches(quality, kept_peaks, n_samples, fs).cpu().numpy() / fs
    times = kept_peaks.cpu().numpy() / fs
    fig = plot_quality(times, quality.beat.cpu().numpy(), medians, quality.window_s, poor, threshold=POOR_QUALITY)
    return save_figure(fig, out / "quality.png")


def _extreme_beats(
    host: dict[str, np.ndarray], fs: float, threshold: float, beat_rate: float, whose: str, warning: str | None = None
) -> Any:
    """The five highest- and lowest-scoring beats (``host["extreme_idx"]``) with ``whose``
    reconstructions, each titled by its time and reference label (where ``host`` has ``truth``)."""
    truth = host.get("truth")

    def name(i: int) -> str:
        label = "" if truth is None else f", reference {truth[i] or 'none'}"
        return f"t={host['peaks'][i] / fs:.1f} s{label}"

    return plot_extremes(
        host["extreme_rows"],
        host["extreme_recon"],
        host["scores"][host["extreme_idx"]],
        sampling_rate=beat_rate,
        names=[name(i) for i in host["extreme_idx"]],
        title=f"Most and least anomalous beats with {whose} reconstructions",
        ylabel="standardised amplitude",
        threshold=threshold,
        warning=warning,
    )


def ecg_figures(
    out: Path,
    rec: Recording,
    signal: np.ndarray,
    host: dict[str, np.ndarray],
    histories: Histories,
    threshold: float,
    beat_rate: float,
    warning: str | None = None,
) -> dict[str, Path]:
    """The ``ecg`` run's figures: training, latent, extremes, excerpt, generated (PNG and PDF).

    ``beat_rate`` is the sampling rate of the (resampled) beat rows in Hz; ``host["truth"]``,
    when present, holds each beat's reference label; ``warning`` is written on the figures.
    """
    fs = rec.sampling_rate
    n = host["peaks"].size
    figs = {
        **_learning_figures(
            host,
            histories,
            threshold,
            f"VAE training on {n:,} beats",
            f"Latent means of {n:,} beats, coloured by anomaly score",
            warning,
        ),
        "extremes.png": _extreme_beats(host, fs, threshold, beat_rate, "their", warning),
        "excerpt.png": _excerpt(rec, signal, host["all_peaks"]),
        "heart_rate.png": plot_heart_rate(host["all_peaks"], fs),
    }
    gen = plot_generated(
        host["generated"],
        host["grid"],
        centre=host["centre"],
        sampling_rate=beat_rate,
        title="Beats generated across the latent space (left to right: the direction in which the beats' codes "
        "spread most;\ntop to bottom: the next) with the typical beat in grey; panel titles: latent point",
        warning=warning,
    )
    files = {"generated.pdf": save_figure(gen, out / "generated.pdf")}
    figs["generated.png"] = gen
    for name, fig in figs.items():
        files[name] = save_figure(fig, out / name)
    return files


def score_figures(
    out: Path,
    rec: Recording,
    signal: np.ndarray,
    host: dict[str, np.ndarray],
    threshold: float,
    beat_rate: float,
) -> dict[str, Path]:
    """The ``score`` run's figures: ``scores.png`` (this recording's scores against the model's
    training scores), ``latent.png``, ``extremes.png``, ``excerpt.png`` and ``heart_rate.png``.

    ``beat_rate`` is the sampling rate of the resampled beat rows in Hz."""
    fs = rec.sampling_rate
    n = host["peaks"].size
    truth = host.get("truth")
    figs = {
        "scores.png": plot_score_distribution(host["train_scores"], host["scores"], threshold),
        "latent.png": plot_latent(
            host["emb"],
            scores=host["scores"],
            threshold=threshold,
            flags=host["flags"],
            truth=truth,
            title=f"Latent means of {n:,} beats under the model, coloured by anomaly score",
        ),
        "extremes.png": _extreme_beats(host, fs, threshold, beat_rate, "the model's"),
        "excerpt.png": _excerpt(rec, signal, host["all_peaks"]),
        "heart_rate.png": plot_heart_rate(host["all_peaks"], fs),
    }
    return {name: save_figure(fig, out / name) for name, fig in figs.items()}


def train_figures(
    out: Path,
    host: dict[str, np.ndarray],
    histories: Histories,
    threshold: float,
    n_recordings: int,
    warning: str | None = None,
) -> dict[str, Path]:
    """The ``train`` run's figures: ``training.png``, ``latent.png`` and ``scores.png`` (the
    training beats' scores, the threshold marked)."""
    n = host["scores"].size
    figs = _learning_figures(
        host,
        histories,
        threshold,
        f"VAE training on {n:,} beats of {n_recordings:,} recordings",
        f"Latent means of {n:,} beats of {n_recordings:,} recordings, coloured by anomaly score",
        warning,
    )
    figs["scores.png"] = plot_score_distribution(
        host["train_scores"],
        host["scores"],
        threshold,
        title="Scores of the training beats (the threshold is taken from the training split)",
        names=("training split", "every beat, validation included"),
    )
    return {name: save_figure(fig, out / name) for name, fig in figs.items()}


def series_figures(
    out: Path,
    wins: Windows,
    host: dict[str, np.ndarray],
    histories: Histories,
    threshold: float,
    unit_name: str,
    pointwise: bool,
    flagged: np.ndarray,
    warning: str | None = None,
) -> dict[str, Path]:
    """The ``series`` run's figures: training, latent, extremes and days (the ``flagged`` windows,
    indices from the highest score down, drawn)."""
    kind = "per-sample autoencoder" if pointwise else "autoencoder"
    figs = {
        **_learning_figures(
            host,
            histories,
            threshold,
            f"{kind} training on {wins.values.shape[0]:,} windows",
            "Window codes, coloured by anomaly score",
            warning,
        ),
        **_window_figures(wins, host, threshold, unit_name, flagged, warning),
    }
    return {name: save_figure(fig, out / name) for name, fig in figs.items()}


def series_score_figures(
    out: Path, wins: Windows, host: dict[str, np.ndarray], threshold: float, unit_name: str, flagged: np.ndarray
) -> dict[str, Path]:
    """The figures of a load series scored by a ``series`` model: ``scores.png`` (the windows'
    scores against the model's training windows'), ``latent.png``, ``extremes.png`` and ``days.png``."""
    figs = {
        "scores.png": plot_score_distribution(
            host["train_scores"],
            host["scores"],
            threshold,
            title="Scores of this series' windows against the model's training windows",
            what="windows",
            names=("training", "this series"),
        ),
        "latent.png": plot_latent(
            host["emb"],
            scores=host["scores"],
            threshold=threshold,
            flags=host["flags"],
            title=f"Codes of {wins.values.shape[0]:,} windows under the model, coloured by anomaly score",
        ),
        **_window_figures(wins, host, threshold, unit_name, flagged),
    }
    return {name: save_figure(fig, out / name) for name, fig in figs.items()}


def _window_figures(
    wins: Windows,
    host: dict[str, np.ndarray],
    threshold: float,
    unit_name: str,
    flagged: np.ndarray,
    warning: str | None = None,
) -> dict[str, Any]:
    """``extremes.png`` (the most and least anomalous windows with their reconstructions) and
    ``days.png`` (the ``flagged`` windows against a typical one) of a load series."""
    names = [str(s)[:10] for s in wins.starts]
    unit = "MW" if "MW" in unit_name.upper() else "value"
    hours = np.arange(host["days"].shape[1]) * wins.step_s / 3600
    return {
        "extremes.png": plot_extremes(
            host["days"],
            host["recon"],
            host["scores"],
            names=names,
            title="Most and least anomalous windows with reconstructions",
            x=hours,
            xlabel="hours from the window's start",
            ylabel=f"load ({unit})" if unit == "MW" else unit_name,
            threshold=threshold,
            warning=warning,
        ),
        "days.png": plot_days(host["days"], flagged, names, unit=unit, hours=hours, scores=host["scores"]),
    }
