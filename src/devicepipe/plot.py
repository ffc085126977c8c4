"""Figures from host (NumPy) arrays. Nothing here computes on tensors or shows a window.

Each function returns a :class:`matplotlib.figure.Figure` (no pyplot state is touched);
:func:`save_figure` writes it atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from devicepipe.io import atomic_path

__all__ = ["save_figure", "plot_beats_excerpt", "plot_intervals"]


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
