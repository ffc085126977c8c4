"""Load-series windows: a time-indexed series put on a regular grid and cut into fixed windows (days).

:func:`make_windows` places each sample on a grid of the series' step, fills short gaps by
linear interpolation along the series (on the device), drops windows missing too much, and
says which windows were filled and which dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from devicepipe.errors import DevicepipeError
from devicepipe.signal.resample import interpolate_nans

__all__ = ["Windows", "make_windows"]


@dataclass(frozen=True)
class Windows:
    """Fixed windows of a time-indexed series on a regular grid.

    Attributes
    ----------
    values : Tensor of shape ``(n_windows, per_window)`` on the series' device.
    starts : ``numpy.datetime64[ns]`` array of shape ``(n_windows,)``: each window's start.
    filled : int array of shape ``(n_windows,)``: missing slots filled by interpolation.
    dropped : ``numpy.datetime64[ns]`` array: starts of windows left out (too many slots missing).
    step_s : seconds between consecutive slots.
    """

    values: torch.Tensor
    starts: np.ndarray
    filled: np.ndarray
    dropped: np.ndarray
    step_s: float

    @property
    def per_window(self) -> int:
        return int(self.values.shape[1])


def make_windows(
    values: torch.Tensor, timestamps: torch.Tensor, *, window_s: float, step_s: float, max_missing: int = 2
) -> Windows:
    """Put a sorted, duplicate-free series on a regular grid of ``step_s`` and cut windows of ``window_s``.

    Parameters
    ----------
    values : Tensor of shape ``(time,)``.
    timestamps : int64 Tensor of shape ``(time,)``, nanoseconds since the Unix epoch, sorted,
        without duplicates, on ``values``' device.
    window_s, step_s : seconds; a window holds a whole number (at least 2) of steps.
    max_missing : slots a window may miss and still be kept (filled).

    Windows start at multiples of ``window_s`` since the Unix epoch (midnight for days). A
    window missing up to ``max_missing`` slots is filled by linear interpolation along the
    series (and counted); one missing more is dropped (and listed); a window with no sample
    at all is neither. Works on ``values``' device.
    """
    if not step_s > 0:
        raise DevicepipeError(
            "the series has no time step: its timestamps are all the same (after averaging duplicates, "
            f"{values.shape[-1]} time point(s)); check the time column."
        )
    per = int(round(window_s / step_s))
    if per < 2 or abs(per * step_s - window_s) > 1e-6 * window_s:
        raise DevicepipeError(f"the window ({window_s:g} s) must hold a whole number (>= 2) of {step_s:g}-s steps.")
    step_ns, win_ns = int(round(step_s * 1e9)), int(round(window_s * 1e9))
    if torch.any(timestamps % step_ns != timestamps[0] % step_ns):
        raise DevicepipeError(f"timestamps are not on a regular {step_s:g}-s grid; resample the series first.")
    first = torch.div(timestamps[0], win_ns, rounding_mode="floor")
    slot = torch.div(timestamps - first * win_ns, step_ns, rounding_mode="floor")  # position on the full grid
    n_windows = int(slot[-1]) // per + 1
    grid = torch.full((n_windows * per,), float("nan"), dtype=values.dtype, device=values.device)
    grid[slot] = values
    missing = torch.isnan(grid).view(n_windows, per).sum(1)
    present = missing < per
    keep = present & (missing <= max_missing)
    grid = interpolate_nans(grid)  # holes in dropped windows are filled too; they are not used
    starts = (first * win_ns + torch.arange(n_windows, device=values.device) * win_ns).cpu().numpy()
    starts = starts.view("datetime64[ns]")
    keep_h, present_h = keep.cpu().numpy(), present.cpu().numpy()
    return Windows(
        values=grid.view(n_windows, per)[keep],
        starts=starts[keep_h],
        filled=missing[keep].cpu().numpy(),
        dropped=starts[present_h & ~keep_h],
        step_s=step_s,
    )
