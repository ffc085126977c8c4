"""What every figure shares: a new figure (matplotlib imported at the first one), an atomic
save, a warning across the bottom, the time axis's unit, shaded spans."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from devicepipe.io import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["add_warning", "new_figure", "save_figure", "shade_spans", "time_axis"]


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


def shade_spans(ax: Any, spans: np.ndarray, **style: Any) -> None:
    """Shade ``spans`` (``(m, 2)``, start and end in the x axis's data units) over the full
    height of ``ax``, as ``axvspan`` does for one, in one collection (one legend entry, and a
    noisy day's hundreds of spans drawn as one artist rather than a patch each)."""
    from matplotlib.collections import PolyCollection

    boxes = [[(a, 0.0), (a, 1.0), (b, 1.0), (b, 0.0)] for a, b in np.asarray(spans, dtype=float).tolist()]
    ax.add_collection(PolyCollection(boxes, transform=ax.get_xaxis_transform(), lw=0, **style), autolim=False)
