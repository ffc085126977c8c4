"""Figures of a recording and its beats: an excerpt with the beats marked, the heart rate, the
signal quality and the RR intervals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from devicepipe.plots.base import new_figure, shade_spans, time_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_beats_excerpt", "plot_heart_rate", "plot_intervals", "plot_quality"]


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
