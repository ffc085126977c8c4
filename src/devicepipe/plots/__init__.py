"""Figures from host (NumPy) arrays. Nothing here computes on tensors or shows a window.

Each function returns a :class:`matplotlib.figure.Figure` (no pyplot state is touched);
:func:`save_figure` writes it atomically. Layered inside: the figures of a recording
(``recording``), of learning (``learning``), of a load series (``series``) and the event strips
(``events``) over what they share (``base``).
"""

from devicepipe.plots.base import add_warning, new_figure, save_figure, shade_spans, time_axis
from devicepipe.plots.learning import (
    plot_extremes,
    plot_generated,
    plot_latent,
    plot_score_distribution,
    plot_training,
)
from devicepipe.plots.recording import plot_beats_excerpt, plot_heart_rate, plot_intervals, plot_quality
from devicepipe.plots.series import plot_days

__all__ = [
    "add_warning",
    "new_figure",
    "plot_beats_excerpt",
    "plot_days",
    "plot_extremes",
    "plot_generated",
    "plot_heart_rate",
    "plot_intervals",
    "plot_latent",
    "plot_quality",
    "plot_score_distribution",
    "plot_training",
    "save_figure",
    "shade_spans",
    "time_axis",
]
