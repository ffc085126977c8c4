"""Event strips: a few seconds of the ECG around the first event of each kind, each beat lettered
with its class, as a Holter report shows its strips."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from devicepipe.plots.base import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_event_strips"]

#: Colour of each class's letter.
CLASS_COLOURS = {"N": "0.35", "S": "tab:blue", "V": "tab:red", "F": "tab:purple", "Q": "tab:orange"}


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def plot_event_strips(
    signal: np.ndarray,
    sampling_rate: float,
    peaks: np.ndarray,
    labels: np.ndarray,
    events: Sequence[tuple[str, int, int, int]],
    *,
    length_s: float = 8.0,
    offset: int = 0,
    unit: str | None = "mV",
    missed: np.ndarray | None = None,
) -> Figure | None:
    """One strip of ``length_s`` seconds per event, centred on it.

    ``signal``: ``(time,)``, the recording from sample ``offset`` on; ``peaks`` ``(n,)`` R-peak
    samples of the recording and ``labels`` ``(n,)`` their classes; ``events``: ``(title, first
    beat, last beat, count)`` each (beat indices into ``peaks``; ``count`` of that kind found).
    ``missed``: samples of a reference's beats that no beat found matched, each drawn as a hollow
    marker with "missed" (they have no class). None when there is no event.
    """
    missed = np.asarray([] if missed is None else missed, dtype=np.int64)
    if not events:
        return None
    fig = new_figure(figsize=(11, 1.9 * len(events) + 0.4))
    axes = fig.subplots(len(events), 1, squeeze=False)[:, 0]
    span = int(round(length_s * sampling_rate))
    for ax, (title, first, last, count) in zip(axes, events, strict=True):
        middle = (int(peaks[first]) + int(peaks[last])) // 2 - offset
        start = max(0, min(signal.shape[0] - span, middle - span // 2))
        stop = min(signal.shape[0], start + span)
        t = np.arange(start + offset, stop + offset) / sampling_rate
        ax.plot(t, signal[start:stop], lw=0.8, color="0.2")
        shown = np.flatnonzero((peaks - offset >= start) & (peaks - offset < stop))
        top = float(np.max(signal[start:stop])) if stop > start else 0.0
        for i in shown:
            colour = CLASS_COLOURS.get(str(labels[i]), "0.35")
            ax.text(peaks[i] / sampling_rate, top, str(labels[i]), color=colour, ha="center", va="bottom",
                    fontsize=9, fontweight="bold" if labels[i] != "N" else "normal")  # fmt: skip
        for sample in missed[(missed - offset >= start) & (missed - offset < stop)]:
            at = sample / sampling_rate
            ax.plot([at], [top], marker="v", markersize=8, markerfacecolor="none", markeredgecolor="k", ls="none")
            ax.text(at, top, "missed", color="k", ha="center", va="top", fontsize=7)
        ax.axvspan(peaks[first] / sampling_rate - 0.15, peaks[last] / sampling_rate + 0.15, color="tab:red", alpha=0.08)
        ax.set_title(f"{title} at {_clock(peaks[first] / sampling_rate)} (first of {count})", fontsize=10, loc="left")
        ax.set_ylabel(unit or "")
        ax.margins(x=0, y=0.25)
    axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    return fig
