"""Figures from host (NumPy) arrays. Nothing here computes on tensors or shows a window.

Each function returns a :class:`matplotlib.figure.Figure` (no pyplot state is touched);
:func:`save_figure` writes it atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from devicepipe.io import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "add_warning",
    "new_figure",
    "plot_beats_excerpt",
    "plot_days",
    "plot_extremes",
    "plot_generated",
    "plot_heart_rate",
    "plot_quality",
    "plot_intervals",
    "plot_latent",
    "plot_score_distribution",
    "plot_training",
    "save_figure",
    "shade_spans",
    "time_axis",
]


def new_figure(**kwargs: Any) -> Figure:
    """A :class:`matplotlib.figure.Figure` (``kwargs`` as it takes them); matplotlib is imported
    here, at the first figure, so that runs without figures do not load it."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


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
    offset: int = 0,
) -> Figure:
    """The signal over ``length_s`` seconds with detected R peaks (and reference beats) marked.

    ``signal`` has shape ``(time,)`` and holds the recording from sample ``offset`` on (a part
    read on its own); ``peaks`` and ``reference`` are sample indices of the recording;
    ``start_s`` counts from ``offset``.
    """
    peaks = peaks - offset
    reference = None if reference is None else reference - offset
    n = signal.shape[0]
    span = int(min(n, round(length_s * sampling_rate)))
    if start_s is None:  # start just before the first detected beat after the first 5 %
        later = peaks[peaks >= 0.05 * n]
        first = int(later[0]) if later.size else 0
        start = max(0, min(n - span, first - int(0.5 * sampling_rate)))
    else:
        start = max(0, min(n - span, int(round(start_s * sampling_rate))))
    stop = start + span
    t = np.arange(start + offset, stop + offset) / sampling_rate
    fig = new_figure(figsize=(11, 3.4))
    ax = fig.add_subplot()
    ax.plot(t, signal[start:stop], lw=0.8, color="0.25", label="signal")
    shown = peaks[(peaks >= start) & (peaks < stop)]
    ax.plot(
        (shown + offset) / sampling_rate, signal[shown], "v", color="tab:red", ms=7, label=f"detected ({shown.size})"
    )
    if reference is not None:
        ref = reference[(reference >= start) & (reference < stop)]
        ax.plot(
            (ref + offset) / sampling_rate,
            signal[ref],
            "o",
            mfc="none",
            color="tab:green",
            ms=10,
            label=f"reference ({ref.size})",
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"amplitude ({unit})" if unit else "amplitude")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    return fig


def add_warning(fig: Figure, text: str | None) -> Figure:
    """Write ``text`` (when given) in red across the bottom of ``fig``, e.g. that a model has not converged."""
    if text:
        fig.text(0.5, -0.01, text, ha="center", va="top", color="tab:red", fontsize=9, wrap=True)
    return fig


def time_axis(total_s: float) -> tuple[float, str]:
    """Seconds per unit and the unit's name for a time axis ``total_s`` seconds long: seconds up
    to 10 minutes, minutes up to 3 hours, hours beyond (a day's axis in minutes reads 0-1440)."""
    if total_s > 3 * 3600:
        return 3600.0, "h"
    return (60.0, "min") if total_s > 600 else (1.0, "s")


def plot_heart_rate(
    peaks: np.ndarray,
    sampling_rate: float,
    *,
    minutes: tuple[np.ndarray, np.ndarray] | None = None,
    minute_s: float = 60.0,
) -> Figure:
    """Heart rate over the recording: each beat's rate from the RR interval before it (dots) and,
    given ``minutes`` (each minute's index and median rate, as :func:`devicepipe.heart.rate.minute_rates`
    gives them), the median of each minute (line), in beats per minute against time
    (:func:`time_axis`: minutes, or hours for recordings over 3 hours).

    ``peaks`` are sample indices, shape ``(n_peaks,)``, increasing.
    """
    fig = new_figure(figsize=(11, 3.4))
    ax = fig.add_subplot()
    fs = float(sampling_rate)
    scale, unit = time_axis(float(peaks[-1]) / fs if peaks.size else 0.0)
    scale, unit = (60.0, "min") if unit == "s" else (scale, unit)  # (per-minute medians: never seconds)
    if peaks.size >= 2:
        bpm = 60.0 * fs / np.diff(peaks)
        ax.plot(peaks[1:] / fs / scale, bpm, ".", ms=2, color="0.6", label="each beat (60 / RR)")
        if minutes is not None:
            centres = (minutes[0] + 0.5) * minute_s / scale
            ax.plot(centres, minutes[1], "-", color="tab:red", lw=1.5, label="median of each minute")
        lo, hi = np.percentile(bpm, [0.5, 99.5])
        ax.set_ylim(max(0.0, lo - 10), hi + 10)  # a few wild intervals do not flatten the rest
        ax.legend(fontsize=8, loc="upper right")
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("heart rate (bpm)")
    ax.set_title("Heart rate over the recording")
    ax.grid(alpha=0.3)
    return fig


def plot_quality(
    beat_times_s: np.ndarray,
    beat_quality: np.ndarray,
    stretch_medians: np.ndarray,
    window_s: float,
    poor_s: np.ndarray,
    *,
    threshold: float,
) -> Figure:
    """Signal quality over the recording: each beat's correlation with the typical beat (dots),
    each stretch's median (steps), the unusable stretches shaded, and the threshold (dashed).

    ``beat_times_s``/``beat_quality``: ``(n,)`` each; ``stretch_medians``: ``(k,)`` (NaN: no
    beat) for stretches of ``window_s`` seconds from 0; ``poor_s``: ``(m, 2)`` start and end
    seconds of the unusable parts. The time axis in the unit of :func:`time_axis`.
    """
    fig = new_figure(figsize=(11, 3.4))
    ax = fig.add_subplot()
    total_s = max(float(stretch_medians.size * window_s), float(beat_times_s.max()) if beat_times_s.size else 0.0)
    scale, unit = time_axis(total_s)
    if len(poor_s):
        shade_spans(ax, np.asarray(poor_s) / scale, color="tab:red", alpha=0.15, label="unusable")
    ax.plot(beat_times_s / scale, beat_quality, ".", ms=2, color="0.7", alpha=0.6, label="each beat", zorder=2)
    edges = np.arange(stretch_medians.size + 1) * window_s / scale
    stretch = f"median of each {window_s:g} s"
    # (a stepped line: a day's 8,640 steps drawn as one StepPatch took 0.6 s to find its limits)
    steps = np.append(stretch_medians, stretch_medians[-1:]) if stretch_medians.size else np.full(1, np.nan)
    ax.plot(edges, steps, drawstyle="steps-post", color="tab:blue", lw=1.5, label=stretch, zorder=3)
    ax.axhline(threshold, ls="--", color="tab:red", lw=1, label=f"poor below {threshold:g}")
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlim(0, total_s / scale if total_s else 1)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("correlation with the typical beat")
    share = float(np.sum(poor_s[:, 1] - poor_s[:, 0])) / total_s if total_s and poor_s.size else 0.0
    verdict = f"{100 * share:.1f} % of the recording unusable" if share else "every stretch usable"
    ax.set_title(f"Signal quality: {verdict}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    return fig


def shade_spans(ax: Any, spans: np.ndarray, **style: Any) -> None:
    """Shade ``spans`` (``(m, 2)``, start and end in the x axis's data units) over the full
    height of ``ax``, as ``axvspan`` does for one, in one collection (one legend entry, and a
    noisy day's hundreds of spans drawn as one artist rather than a patch each)."""
    from matplotlib.collections import PolyCollection

    boxes = [[(a, 0.0), (a, 1.0), (b, 1.0), (b, 0.0)] for a, b in np.asarray(spans, dtype=float).tolist()]
    ax.add_collection(PolyCollection(boxes, transform=ax.get_xaxis_transform(), lw=0, **style), autolim=False)


def _sample_bins(samples: np.ndarray, most: int = 100) -> np.ndarray:
    """Histogram edges for integer sample counts: whole samples per bin, at most ``most`` bins,
    edges halfway between integers (no bin narrower than one sample, so no empty comb teeth)."""
    lo, hi = int(np.min(samples)), int(np.max(samples))
    step = max(1, int(np.ceil((hi - lo + 1) / most)))
    return np.arange(lo, hi + step + 1, step) - 0.5


def plot_intervals(
    rr_samples: np.ndarray,
    sampling_rate: float,
    *,
    keep_range: tuple[int, int] | None = None,
) -> Figure:
    """Histograms of the intervals between consecutive R peaks, in seconds and in samples.

    ``rr_samples`` are whole samples (peak to next peak); bins are whole samples wide.
    ``keep_range`` (samples) shades the beat lengths the seed's segmentation keeps.
    """
    fig = new_figure(figsize=(11, 3.6))
    ax1, ax2 = fig.subplots(1, 2)
    fs = float(sampling_rate)
    if rr_samples.size:
        edges = _sample_bins(rr_samples)
        rr_s = rr_samples / fs
        counts = np.histogram(rr_samples, bins=edges)[0]  # (bars as one outline: a patch each is slow)
        ax1.stairs(counts, edges / fs, fill=True, color="tab:blue")
        hr = 60.0 / np.median(rr_s)
        ax1.axvline(np.median(rr_s), color="k", ls="--", lw=1, label=f"median {np.median(rr_s):.3f} s ({hr:.0f} bpm)")
        ax1.legend(fontsize=8)
        ax2.stairs(counts, edges, fill=True, color="tab:orange")
    ax1.set_xlabel("RR interval (s)")
    ax1.set_ylabel("beats")
    ax1.set_title("RR intervals")
    if keep_range is not None:
        lo, hi = keep_range
        ax2.axvspan(lo, hi, color="tab:green", alpha=0.12, label=f"kept by segmentation ({lo}-{hi})")
        ax2.legend(fontsize=8)
    ax2.set_xlabel(f"beat length (samples at {fs:g} Hz)")
    ax2.set_ylabel("beats")
    ax2.set_title("Beat lengths (peak to next peak)")
    fig.tight_layout()
    return fig


def _project_2d(embeddings: np.ndarray) -> tuple[np.ndarray, tuple[str, str]]:
    """The first two latent dimensions, or the first two principal components when there are more.

    An axis whose spread (standard deviation) is under a tenth of the other's says so in its
    label, since the plot's own scaling hides it.
    """
    if embeddings.shape[1] == 1:
        return np.column_stack([embeddings[:, 0], np.zeros(len(embeddings))]), ("z0", "")
    if embeddings.shape[1] == 2:
        xy, names = embeddings, ["z0", "z1"]
    else:
        centred = embeddings - embeddings.mean(0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy, names = centred @ vt[:2].T, ["principal component 1", "principal component 2"]
    spread = xy.std(0) if len(xy) else np.ones(2)
    for j in range(2):
        if spread[j] == 0 and spread[1 - j] > 0:
            names[j] += " (no spread: every point has the same value)"
        elif spread[j] < 0.1 * spread[1 - j]:
            names[j] += f" (spread {spread[j]:.2g}, {spread[1 - j] / spread[j]:.0f}x less than along {names[1 - j]})"
    return xy, (names[0], names[1])


def plot_training(histories: list[dict[str, Any]], *, title: str = "Training", warning: str | None = None) -> Figure:
    """Train and validation loss per epoch (one pair of lines per ensemble member), and the epoch
    whose weights were kept (a dot on the validation line, or the training line without one): the
    best one where training stopped by itself, the last of a run of exact epochs.
    ``warning`` (e.g. not converged) is written under the plot."""
    fig = new_figure(figsize=(7, 4))
    ax = fig.add_subplot()
    members = len(histories)
    each = f" (each of {members} members)" if members > 1 else ""
    for i, h in enumerate(histories):
        epochs = np.arange(1, len(h["train"]) + 1)
        dots = "." if len(epochs) < 10 else None  # (one or two epochs: points, not an invisible line)
        train = np.asarray([np.nan if v is None else v for v in h["train"]], dtype=float)
        ax.plot(epochs, train, color="tab:blue", alpha=0.8, marker=dots, label="train" + each if i < 1 else None)
        val = np.asarray([np.nan if v is None else v for v in h.get("val", [])], dtype=float)
        if val.size and np.isfinite(val).any():
            ax.plot(
                epochs, val, color="tab:orange", alpha=0.8, ls="--", marker=dots,
                label="validation" + each if i < 1 else None,
            )  # fmt: skip
        if h.get("initial") is not None and np.isfinite(h["initial"]):  # the untrained model's loss, at epoch 0
            ax.plot([0], [h["initial"]], "s", color="tab:gray", label=None if i else "untrained")
        if h.get("diverged"):  # the epoch whose loss became NaN or infinite: no point to draw
            ax.axvline(len(epochs), color="tab:red", ls=":", label=None if i else f"loss NaN or infinite{each}")
        best = len(h["train"]) if h.get("best_epoch") is None else h["best_epoch"]  # exact epochs keep the last
        line = h["val"] if best and h.get("val") and np.isfinite(h["val"][best - 1]) else h["train"]
        if best and len(line) >= best:
            kept = f"kept: epoch {best}" if members == 1 else "kept: each member's kept epoch"
            ax.plot([best], [line[best - 1]], "o", color="tab:red", label=None if i else kept)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss per row (log scale)")
    ax.set_title(title + (f", {members} members" if members > 1 else ""))
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return add_warning(fig, warning)


def plot_latent(
    embeddings: np.ndarray,
    *,
    scores: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    threshold: float | None = None,
    flags: np.ndarray | None = None,
    truth: np.ndarray | None = None,
    normal: str = "N",
    colours: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = None,
    title: str = "Latent space",
    warning: str | None = None,
) -> Figure:
    """Scatter of the latent means, coloured by label when given, else by anomaly score.

    ``labels`` (str, per row; e.g. each beat's class) are drawn commonest first, so that a rare
    label lies on top, each in ``colours[label]`` where given and named ``names[label]`` in the
    legend. ``flags`` (bool, per row) rings the flagged rows (in red, in black over labels);
    ``truth`` (str, per row: reference
    labels, ``""`` for none) marks every row whose label is not ``normal`` with a black cross per
    label, so a reader sees whether the flags fall on the known abnormal beats.
    """
    xy, (xl, yl) = _project_2d(embeddings)
    fig = new_figure(figsize=(7.5, 6))
    ax = fig.add_subplot()
    if labels is not None:
        values, counts = np.unique(labels, return_counts=True)
        for k, value in enumerate(values[np.argsort(-counts, kind="stable")]):
            sel = labels == value
            word = value if names is None or value not in names else f"{value} {names[value]}"
            colour = None if colours is None else colours.get(str(value))
            size = 6 if k == 0 else 16  # the commonest small, the rarer ones larger, on top
            ax.scatter(xy[sel, 0], xy[sel, 1], s=size, alpha=0.6 if k == 0 else 0.9, color=colour,
                       label=f"{word} ({int(sel.sum()):,})")  # fmt: skip
    else:
        color = scores if scores is not None else np.zeros(len(xy))
        order = np.argsort(color)  # most anomalous drawn last, on top
        vmax = np.percentile(color, 99.5) if color.size else 1
        points = ax.scatter(xy[order, 0], xy[order, 1], c=color[order], s=6, cmap="viridis", vmax=vmax)
        above = color.size and float(color.max()) > vmax  # the few highest share the top colour: say how high
        bar = fig.colorbar(points, ax=ax, extend="max" if above else "neither")
        label = "anomaly score" + (f" (threshold {threshold:.3g})" if threshold is not None else "")
        bar.set_label(label + (f"; the arrow: {vmax:.3g} to {float(color.max()):.3g}" if above else ""))
    if flags is not None and flags.any():
        ax.scatter(
            xy[flags, 0],
            xy[flags, 1],
            s=40,
            facecolors="none",
            edgecolors="tab:red" if labels is None else "k",
            lw=1,
            label=f"flagged ({int(flags.sum()):,})",
        )
    if truth is not None:
        for marker, value in zip("x+1", sorted(set(truth.tolist()) - {normal, ""}), strict=False):
            sel = truth == value
            ax.scatter(
                xy[sel, 0],
                xy[sel, 1],
                s=22,
                marker=marker,
                color="k",
                lw=1,
                label=f"reference {value} ({int(sel.sum()):,})",
            )
    if ax.get_legend_handles_labels()[0]:
        ax.legend(markerscale=1.5, fontsize=8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return add_warning(fig, warning)


#: Generated beats whose mean change across the grid is under this share of their amplitude range
#: hardly differ (a figure says so, rather than showing 25 copies of one beat without a word).
HARDLY = 0.02


def plot_generated(
    decoded: np.ndarray,
    latents: np.ndarray,
    *,
    centre: np.ndarray | None = None,
    centre_name: str = "typical (the codes' mean)",
    columns: Sequence[str] | None = None,
    hardly: str = "the model's codes carry little beyond the typical beat, so it generates that beat wherever "
    "the codes of these beats lie",
    hardly_across: str | None = None,
    sampling_rate: float | None = None,
    title: str = "Beats generated from a grid of latent points",
    warning: str | None = None,
    columns_row: int = 0,
) -> Figure:
    """A grid of decoded samples (the notebook's 5 x 5 "fake heartbeats"), each labelled by its
    latent point, drawn in one panel (25 panels took most of an ECG run's figure time).

    ``decoded`` ``(k, width)``; ``latents`` ``(k, latent)``, in the grid's row-major order;
    ``centre`` (a typical code's decoding, ``(width,)``, named ``centre_name``) is drawn in grey
    in every cell, so that how each generated beat differs from the typical one shows even where
    the differences are small. ``columns``: words for the cells of row ``columns_row`` (what their
    codes are), in bold before their latent points (over the top row: above them). Every cell
    shares one amplitude scale; ``sampling_rate`` gives the cells' length. Where
    the beats hardly differ across the grid, the title adds ``hardly``; where they hardly differ
    from left to right only, ``hardly_across`` (when given).
    """
    n = int(np.ceil(np.sqrt(len(decoded))))
    fig = new_figure(figsize=(2.3 * n, 1.9 * n + 0.6))
    ax = fig.add_subplot()
    values = decoded if centre is None else np.concatenate([decoded, centre[None]])
    low, high = float(np.min(values)), float(np.max(values))
    height = (high - low) * 1.25 or 1.0
    t = np.linspace(0.0, 0.9, decoded.shape[1])
    for k in range(len(decoded)):
        row, col = divmod(k, n)
        y0 = -row * height - high
        if centre is not None:
            ax.plot(col + t, y0 + centre, lw=1.6, color="0.75", label=centre_name if k == 0 else None)
        ax.plot(col + t, y0 + decoded[k], lw=1, color="tab:blue", label="generated" if k == 0 else None)
        point = "(" + ", ".join(f"{v:.2g}" for v in latents[k][:2]) + ")"
        word = columns[col] if columns is not None and row == columns_row else ""
        if word and row > 0:  # (no room above a row below the first: the word leads its point)
            point, colour, weight = f"{word}: {point}", "k", "bold"
        else:
            colour, weight = "0.3", "normal"
        ax.text(col + 0.45, y0 + high + 0.05 * height, point, ha="center", va="bottom", fontsize=7, color=colour,
                weight=weight)  # fmt: skip
        if word and row == 0:
            ax.text(col + 0.45, y0 + high + 0.2 * height, word, ha="center", va="bottom", fontsize=8, weight="bold")
    top = 0.4 if columns is not None and columns_row == 0 else 0.2
    ax.set_xlim(-0.05, n)
    ax.set_ylim(-(n - 1) * height - high + low - 0.05 * height, top * height)
    ax.set_xticks([])
    ax.set_yticks([])
    length = f"{decoded.shape[1] / sampling_rate:.2g} s" if sampling_rate else f"{decoded.shape[1]} samples"
    ax.set_xlabel(f"each cell: one generated beat ({length}); cells share one amplitude scale", fontsize=8)
    if centre is not None:
        ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 1.0 + 0.35 / n))
    if len(decoded) == n * n and n > 1:
        grid = decoded.reshape(n, n, -1)
        across = np.abs(grid[:, -1] - grid[:, 0]).mean()  # left to right
        down = np.abs(grid[-1] - grid[0]).mean()  # top to bottom
        if max(across, down) < HARDLY * (high - low):
            title += f"\n(the beats hardly differ: {hardly})"
        elif hardly_across is not None and across < HARDLY * (high - low):
            title += f"\n(left and right hardly differ: {hardly_across})"
        elif down < 0.1 * across:
            title += "\n(the rows hardly differ: the model varies its beats along one direction only)"
    fig.suptitle(title)
    fig.tight_layout()
    return add_warning(fig, warning)


def _verdict(above: bool, flagged: bool | None) -> str:
    """A panel's word on a row: flagged, or above the threshold but too small a difference to flag."""
    if flagged is None:
        return " (flagged)" if above else ""
    return " (flagged)" if flagged else (" (above; too small to flag)" if above else "")


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
    ylabel: str | None = None,
    threshold: float | None = None,
    warning: str | None = None,
    flags: np.ndarray | None = None,
) -> Figure:
    """The ``k`` highest- and ``k`` lowest-scoring rows with their reconstructions.

    Each panel's title gives the row's name (``names``: time, reference label ...), its score and,
    with ``threshold``, whether it is flagged: by ``flags`` ``(n,)`` where given (a row above the
    threshold whose difference is too small to flag says so), else by its score.
    """
    order = np.argsort(scores)
    picks = [("most anomalous", order[::-1][:k]), ("least anomalous", order[:k])]
    fig = new_figure(figsize=(2.8 * k, 5.4))
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
            verdict = "" if threshold is None else _verdict(scores[i] > threshold, None if flags is None else flags[i])
            ax.set_title(f"{label}\n{name}, score {scores[i]:.3g}{verdict}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel or ("time (s)" if sampling_rate else "sample"), fontsize=8)
    if ylabel:
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel, fontsize=8)
    if threshold is not None:
        title += f"; flagged: score above {threshold:.3g}" + ("" if flags is None else " and a large enough difference")
    fig.suptitle(title)
    fig.tight_layout()
    return add_warning(fig, warning)


def plot_days(
    days: np.ndarray,
    flagged: np.ndarray,
    dates: list[str],
    *,
    unit: str = "MW",
    hours: np.ndarray | None = None,
    scores: np.ndarray | None = None,
    directions: np.ndarray | None = None,
    max_lines: int = 8,
) -> Figure:
    """Anomalous days (one line each, the highest scores first) against the typical day (median, 10-90 % band).

    At most ``max_lines`` days are drawn, each in its own colour of a qualitative palette (no two
    alike), labelled with the date, its weekday, given ``directions`` (``(n,)``, ``"low"`` or
    ``"high"`` against like days) its direction, and given ``scores``, its score.
    """
    hours = np.arange(days.shape[1]) * 24.0 / days.shape[1] if hours is None else hours
    fig = new_figure(figsize=(10, 5))
    ax = fig.add_subplot()
    lo, med, hi = np.percentile(days, [10, 50, 90], axis=0)
    ax.fill_between(hours, lo, hi, color="0.85", label="10-90 % of all days")
    ax.plot(hours, med, color="k", lw=2.5, label="typical day (median)")
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    for j, i in enumerate(flagged[:max_lines]):
        label = dates[i]
        weekday = np.datetime64(dates[i][:10], "D") if len(dates[i]) >= 10 and dates[i][4] == "-" else None
        if weekday is not None:
            label += " " + ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[(weekday.astype(int) - 4) % 7]
        if directions is not None:
            label += f", {directions[i]}"
        if scores is not None:
            label += f", score {scores[i]:.3g}"
        ax.plot(hours, days[i], lw=1.4, color=palette(j % 10), label=label)
    ax.set_xlabel("hour of day")
    ax.set_ylabel(f"load ({unit})")
    shown = min(len(flagged), max_lines)
    ax.set_title(f"Anomalous days ({len(flagged)} flagged, the {shown} highest scores shown) against a typical day")
    ax.set_xlim(hours[0], hours[-1])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    return fig


def plot_score_distribution(
    train_scores: np.ndarray,
    scores: np.ndarray,
    threshold: float,
    *,
    title: str = "Scores of this recording against the model's training beats",
    what: str = "beats",
    names: tuple[str, str] = ("training", "this recording"),
) -> Figure:
    """Histograms of ``scores`` ``(n,)`` and of the model's ``train_scores`` ``(m,)`` on a shared
    axis (each as a share of its rows, so different counts compare), logarithmic for positive
    scores (errors, distances) and linear where some are not (the combined scorer's z-scores),
    with the threshold marked and the share of each above it in the legend."""
    fig = new_figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    both = np.concatenate([train_scores, scores])
    positive = both[both > 0]
    log = positive.size == both.size and threshold > 0
    lo = float(positive.min()) if positive.size and log else (float(both.min()) if both.size else 1e-6)
    hi = max(float(both.max()), threshold) if both.size else 1.0
    bins: Any = np.geomspace(lo, hi * 1.01, 60) if log and hi > lo else 60
    for values, label, colour in ((train_scores, names[0], "0.55"), (scores, names[1], "tab:blue")):
        if values.size == 0:
            continue
        above = float(np.mean(values > threshold))
        weights = np.full(values.size, 1.0 / values.size)
        ax.hist(
            np.clip(values, lo, None),
            bins=bins,
            weights=weights,
            histtype="stepfilled" if label == names[0] else "step",
            color=colour,
            alpha=0.5 if label == names[0] else 1.0,
            linewidth=1.6,
            label=f"{label}: {values.size:,} {what}, {100 * above:.2f} % above the threshold",
        )
    ax.axvline(threshold, color="tab:red", linestyle="--", linewidth=1.2, label=f"threshold {threshold:.4g}")
    if log:
        ax.set_xscale("log")
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
    ax.set_xlabel("anomaly score, log scale" if log else "anomaly score")
    ax.set_ylabel(f"share of {what}")
    ax.set_title(title)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    return fig
