"""Figures of a load series: its days (or windows), the flagged ones marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from devicepipe.plots.base import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_days"]


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
