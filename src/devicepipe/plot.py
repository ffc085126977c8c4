"""Figures from host (NumPy) arrays. Nothing here computes on tensors or shows a window.

Each function returns a :class:`matplotlib.figure.Figure` (no pyplot state is touched);
:func:`save_figure` writes it atomically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from devicepipe.io import atomic_path

__all__ = [
    "plot_beats_excerpt",
    "plot_days",
    "plot_extremes",
    "plot_generated",
    "plot_intervals",
    "plot_latent",
    "plot_training",
    "save_figure",
]


def save_figure(fig: Figure, path: str | os.PathLike[str], *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` (format from the extension), atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=dpi, bbox_inches="tight")
    return path


def plot_beats_excerpt(
    signal: np.ndarray,
    sampling_rate: float,
    peaks: np.ndarray,
    *,
    start_s: float | None = None,
    length_s: float = 10.0,
    reference: np.ndarray | None = None,
    unit: str | None = "mV",
    title: str = "ECG excerpt with detected beats",
) -> Figure:
    """The signal over ``length_s`` seconds with detected R peaks (and reference beats) marked.

    ``signal`` has shape ``(time,)``; ``peaks`` and ``reference`` are sample indices.
    """
    n = signal.shape[0]
    span = int(min(n, round(length_s * sampling_rate)))
    if start_s is None:  # start just before the first detected beat after the first 5 %
        later = peaks[peaks >= 0.05 * n]
        first = int(later[0]) if later.size else 0
        start = max(0, min(n - span, first - int(0.5 * sampling_rate)))
    else:
        start = max(0, min(n - span, int(round(start_s * sampling_rate))))
    stop = start + span
    t = np.arange(start, stop) / sampling_rate
    fig = Figure(figsize=(11, 3.4))
    ax = fig.add_subplot()
    ax.plot(t, signal[start:stop], lw=0.8, color="0.25", label="signal")
    shown = peaks[(peaks >= start) & (peaks < stop)]
    ax.plot(shown / sampling_rate, signal[shown], "v", color="tab:red", ms=7, label=f"detected ({shown.size})")
    if reference is not None:
        ref = reference[(reference >= start) & (reference < stop)]
        ax.plot(
            ref / sampling_rate, signal[ref], "o", mfc="none", color="tab:green", ms=10, label=f"reference ({ref.size})"
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"amplitude ({unit})" if unit else "amplitude")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    return fig


def plot_intervals(
    rr_s: np.ndarray,
    lengths: np.ndarray,
    *,
    keep_range: tuple[int, int] | None = None,
) -> Figure:
    """Histograms of RR intervals (seconds) and beat lengths (samples, peak to next peak).

    ``keep_range`` (samples) shades the lengths the seed's segmentation keeps.
    """
    fig = Figure(figsize=(11, 3.6))
    ax1, ax2 = fig.subplots(1, 2)
    if rr_s.size:
        ax1.hist(rr_s, bins=min(100, max(10, rr_s.size // 20)), color="tab:blue")
        hr = 60.0 / np.median(rr_s)
        ax1.axvline(np.median(rr_s), color="k", ls="--", lw=1, label=f"median {np.median(rr_s):.3f} s ({hr:.0f} bpm)")
        ax1.legend(fontsize=8)
    ax1.set_xlabel("RR interval (s)")
    ax1.set_ylabel("beats")
    ax1.set_title("RR intervals")
    if lengths.size:
        ax2.hist(lengths, bins=min(100, max(10, lengths.size // 20)), color="tab:orange")
    if keep_range is not None:
        lo, hi = keep_range
        ax2.axvspan(lo, hi, color="tab:green", alpha=0.12, label=f"kept by segmentation ({lo}-{hi})")
        ax2.legend(fontsize=8)
    ax2.set_xlabel("beat length (samples)")
    ax2.set_ylabel("beats")
    ax2.set_title("Beat lengths")
    fig.tight_layout()
    return fig


def _project_2d(embeddings: np.ndarray) -> tuple[np.ndarray, tuple[str, str]]:
    """The first two latent dimensions, or the first two principal components when there are more."""
    if embeddings.shape[1] == 1:
        return np.column_stack([embeddings[:, 0], np.zeros(len(embeddings))]), ("z0", "")
    if embeddings.shape[1] == 2:
        return embeddings, ("z0", "z1")
    centred = embeddings - embeddings.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T, ("principal component 1", "principal component 2")


def plot_training(histories: list[dict[str, Any]], *, title: str = "Training") -> Figure:
    """Train and validation loss per epoch (one pair of lines per ensemble member), and, where
    training stopped by itself, the epoch whose weights were kept (a dot on the validation line)."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for i, h in enumerate(histories):
        epochs = np.arange(1, len(h["train"]) + 1)
        suffix = f" (member {i})" if len(histories) > 1 else ""
        ax.plot(epochs, h["train"], color="tab:blue", alpha=0.8, label="train" + suffix if i < 1 else None)
        if h.get("val") and np.isfinite(h["val"]).any():
            ax.plot(
                epochs, h["val"], color="tab:orange", alpha=0.8, ls="--", label="validation" + suffix if i < 1 else None
            )
        best = h.get("best_epoch")
        if best:
            ax.plot(
                [best],
                [h["val"][best - 1]],
                "o",
                color="tab:red",
                label=None
                if i
                else (f"kept: epoch {best}" if len(histories) == 1 else "kept: each member's best epoch"),
            )
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss per row (log scale)")
    ax.set_title(title + (f", {len(histories)} members" if len(histories) > 1 else ""))
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return fig


def plot_latent(
    embeddings: np.ndarray,
    *,
    scores: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    threshold: float | None = None,
    title: str = "Latent space",
) -> Figure:
    """Scatter of the latent means, coloured by label when given, else by anomaly score."""
    xy, (xl, yl) = _project_2d(embeddings)
    fig = Figure(figsize=(7, 6))
    ax = fig.add_subplot()
    if labels is not None:
        for value in sorted(set(labels.tolist())):
            sel = labels == value
            ax.scatter(xy[sel, 0], xy[sel, 1], s=6, alpha=0.6, label=f"{value} ({int(sel.sum())})")
        ax.legend(title="label", markerscale=3)
    else:
        color = scores if scores is not None else np.zeros(len(xy))
        order = np.argsort(color)  # most anomalous drawn last, on top
        vmax = np.percentile(color, 99.5) if color.size else 1
        points = ax.scatter(xy[order, 0], xy[order, 1], c=color[order], s=6, cmap="viridis", vmax=vmax)
        bar = fig.colorbar(points, ax=ax)
        bar.set_label("reconstruction error" + (f" (threshold {threshold:.3g})" if threshold is not None else ""))
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig


def plot_generated(
    decoded: np.ndarray,
    latents: np.ndarray,
    *,
    sampling_rate: float | None = None,
    title: str = "Beats generated from a grid of latent points",
) -> Figure:
    """A grid of decoded samples (the notebook's 5 x 5 "fake heartbeats"), each titled by its latent point."""
    n = int(np.ceil(np.sqrt(len(decoded))))
    fig = Figure(figsize=(2.3 * n, 1.9 * n))
    axes = fig.subplots(n, n, sharex=True, sharey=True, squeeze=False)
    t = np.arange(decoded.shape[1]) / sampling_rate if sampling_rate else np.arange(decoded.shape[1])
    for k, ax in enumerate(axes.flat):
        if k >= len(decoded):
            ax.axis("off")
            continue
        ax.plot(t, decoded[k], lw=1, color="tab:blue")
        ax.set_title("(" + ", ".join(f"{v:.2g}" for v in latents[k][:2]) + ")", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)" if sampling_rate else "sample", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("scaled", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_extremes(
    rows: np.ndarray,
    recon: np.ndarray,
    scores: np.ndarray,
    *,
    k: int = 5,
    sampling_rate: float | None = None,
    names: list[str] | None = None,
    title: str = "Most and least anomalous segments",
    x: np.ndarray | None = None,
    xlabel: str | None = None,
) -> Figure:
    """The ``k`` highest- and ``k`` lowest-scoring rows with their reconstructions."""
    order = np.argsort(scores)
    picks = [("most anomalous", order[::-1][:k]), ("least anomalous", order[:k])]
    fig = Figure(figsize=(2.8 * k, 5.2))
    axes = fig.subplots(2, k, sharex=True, squeeze=False)
    if x is not None:
        t = x
    else:
        t = np.arange(rows.shape[1]) / sampling_rate if sampling_rate else np.arange(rows.shape[1])
    for r, (label, idx) in enumerate(picks):
        for c in range(k):
            ax = axes[r, c]
            if c >= len(idx):
                ax.axis("off")
                continue
            i = idx[c]
            ax.plot(t, rows[i], color="0.2", lw=1, label="data")
            ax.plot(t, recon[i], color="tab:red", lw=1, ls="--", label="reconstruction")
            name = names[i] if names is not None else f"#{i}"
            ax.set_title(f"{label}\n{name}, score {scores[i]:.3g}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel or ("time (s)" if sampling_rate else "sample"), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_days(
    days: np.ndarray,
    flagged: np.ndarray,
    dates: list[str],
    *,
    unit: str = "MW",
    hours: np.ndarray | None = None,
    max_lines: int = 12,
) -> Figure:
    """Anomalous days (one line each, the highest scores first) against the typical day (median, 10-90 % band)."""
    hours = np.arange(days.shape[1]) * 24.0 / days.shape[1] if hours is None else hours
    fig = Figure(figsize=(10, 5))
    ax = fig.add_subplot()
    lo, med, hi = np.percentile(days, [10, 50, 90], axis=0)
    ax.fill_between(hours, lo, hi, color="0.85", label="10-90 % of all days")
    ax.plot(hours, med, color="k", lw=2.5, label="typical day (median)")
    cmap = __import__("matplotlib").colormaps["tab20"]
    for j, i in enumerate(flagged[:max_lines]):
        ax.plot(hours, days[i], lw=1.2, color=cmap(j % 20), label=dates[i])
    ax.set_xlabel("hour of day")
    ax.set_ylabel(f"load ({unit})")
    shown = min(len(flagged), max_lines)
    ax.set_title(f"Anomalous days ({len(flagged)} flagged, {shown} shown) against a typical day")
    ax.set_xlim(hours[0], hours[-1])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    return fig
