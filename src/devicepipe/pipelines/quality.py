"""Signal quality in a run's summary and columns (see :mod:`devicepipe.ecg.quality`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Spill, Stored
from devicepipe.ecg import (
    POOR_QUALITY,
    QUALITY_WINDOW_S,
    BeatQuality,
    beat_correlation,
    poor_stretches,
    poor_stretches_stored,
    stretch_quality_stored,
    template_rows,
    typical_beat,
)
from devicepipe.io.chunks import npy_rows
from devicepipe.pipelines import context
from devicepipe.signal.blocks import lower_median_of_parts


def quality_stored(held: Spill, matrix_file: Path, fs: float, rows: int = 4096) -> None:
    """:func:`~devicepipe.ecg.beat_quality` of the beat matrix in ``matrix_file``, ``rows`` rows at
    a time, into ``held``: each cut beat's ``quality`` and ``stretch`` (the R peaks of the cut
    beats are gathered first, ``kept_peaks``), and the beat table's columns of them over every R
    peak, NaN where none was cut (``quality_column``, ``stretch_column``)."""
    peaks, kept = Stored(held, "peaks"), Stored(held, "kept")
    held.append("kept_peaks", torch.zeros(0, dtype=torch.int64))
    for s in range(0, len(peaks), context.BEAT_PART):
        held.append("kept_peaks", torch.from_numpy(peaks[s : s + context.BEAT_PART][kept[s : s + context.BEAT_PART]]))
    n, width, read = npy_rows(matrix_file)
    template = typical_beat(read([(i, i + 1) for i in template_rows(n).tolist()])) if n else torch.zeros(width)
    held.append("quality", torch.zeros(0))
    for i in range(0, n, rows):
        held.append("quality", beat_correlation(read([(i, min(n, i + rows))]), template))
    held.append("stretch", torch.zeros(0))
    stretch_quality_stored(Stored(held, "quality"), Stored(held, "kept_peaks"), fs, held, name="stretch")
    done = 0
    for s in range(0, len(peaks), context.BEAT_PART):
        mask = kept[s : s + context.BEAT_PART]
        count = int(np.count_nonzero(mask))
        for name in ("quality", "stretch"):
            column = np.full(mask.size, np.nan, np.float32)
            column[mask] = held.read(name, done, done + count).numpy()
            held.append(f"{name}_column", torch.from_numpy(column))
        done += count


def stored_quality(held: Spill) -> tuple[BeatQuality, torch.Tensor]:
    """The cut beats' quality and R peaks held in ``held`` (by :func:`quality_stored`), in memory."""
    return BeatQuality(held.read("quality"), held.read("stretch"), QUALITY_WINDOW_S), held.read("kept_peaks")


def excerpt_start(peaks: np.ndarray | Stored, n_samples: int, fs: float) -> int:
    """Where the excerpt figure starts: half a second before the first beat after the first 5 %
    (``peaks`` sorted, in memory or on disk)."""
    i = int(peaks.searchsorted(0.05 * n_samples))
    first = int(peaks[i]) if i < len(peaks) else 0
    return max(0, min(n_samples - int(round(10 * fs)), first - int(0.5 * fs)))


def quality_table_columns(quality: BeatQuality, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``beats.parquet``'s quality columns: every R peak's beat and stretch quality, NaN where not kept."""
    beat, stretch = np.full(kept.size, np.nan, np.float32), np.full(kept.size, np.nan, np.float32)
    beat[kept], stretch[kept] = quality.beat.cpu().numpy(), quality.stretch.cpu().numpy()
    return beat, stretch


def check_min_quality(min_quality: float | None) -> None:
    if min_quality is not None and not -1.0 <= min_quality <= 1.0:
        raise DevicepipeError(
            f"{{param}} must be a correlation between -1 and 1, got {min_quality}",
            fix="say {min_quality=0.5}.",
            param="min_quality",
            value=min_quality,
        )


#: The unusable stretches ``summary.json`` lists at most (all are in ``quality.png``'s shading).
LISTED_STRETCHES = 1000


def quality_summary(
    quality: BeatQuality, kept_peaks: torch.Tensor, n_samples: int, fs: float, min_quality: float | None = None
) -> dict[str, Any]:
    """``summary.json``'s signal quality: how many cut beats lie in stretches of poor signal
    (``beats_poor``), how many in good signal are unlike the typical beat (``beats_unlike_typical``:
    ectopic beats among them, which are not noise), and the unusable stretches of the recording
    (``kept_peaks``: the R peaks of the rated beats)."""
    mark = POOR_QUALITY if min_quality is None else min_quality
    rated = int(quality.beat.numel())
    poor = poor_stretches(quality, kept_peaks, n_samples, fs, mark).cpu().numpy()
    good = quality.in_good_signal(mark)
    poor_beats = int((~good).sum()) if rated else 0
    unlike = int((good & (quality.beat < mark)).sum()) if rated else 0
    median = float(quality.beat.median()) if rated else None
    return _quality_fields(quality.window_s, mark, rated, (poor_beats, unlike), median, poor, n_samples, fs)


def quality_summary_stored(held: Spill, n_samples: int, fs: float) -> dict[str, Any]:
    """:func:`quality_summary` of the quality held on disk by :func:`quality_stored`."""
    rated = held.size("quality")
    poor_beats = unlike = 0
    for s in range(0, rated, context.BEAT_PART):
        beat, stretch = (held.read(name, s, s + context.BEAT_PART) for name in ("quality", "stretch"))
        part = BeatQuality(beat, stretch, QUALITY_WINDOW_S)
        good = part.in_good_signal(POOR_QUALITY)
        poor_beats += int(torch.count_nonzero(~good))
        unlike += int(torch.count_nonzero(good & (part.beat < POOR_QUALITY)))
    median = float(lower_median_of_parts(lambda: held.parts("quality", context.BEAT_PART))) if rated else None
    poor = poor_stretches_stored(Stored(held, "stretch"), Stored(held, "kept_peaks"), n_samples, fs).numpy()
    return _quality_fields(QUALITY_WINDOW_S, POOR_QUALITY, rated, (poor_beats, unlike), median, poor, n_samples, fs)


def _quality_fields(
    window_s: float,
    mark: float,
    rated: int,
    counts: tuple[int, int],
    median: float | None,
    poor: np.ndarray,
    n_samples: int,
    fs: float,
) -> dict[str, Any]:
    return {
        "measure": "correlation with the recording's typical beat; stretch: its median over the stretch",
        "window_s": window_s,
        "poor_below": mark,
        "beats_rated": rated,
        "beats_poor": counts[0],
        "beats_unlike_typical": counts[1],
        "median": median,
        "unusable_s": float((poor[:, 1] - poor[:, 0]).sum() / fs),
        "unusable_share": float((poor[:, 1] - poor[:, 0]).sum() / max(1, n_samples)),
        "unusable_stretches_s": [[round(a / fs, 3), round(b / fs, 3)] for a, b in poor[:LISTED_STRETCHES].tolist()],
    }
