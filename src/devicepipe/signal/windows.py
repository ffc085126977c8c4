"""Load-series windows: a time-indexed series put on a regular grid and cut into fixed windows (days).

:func:`make_windows` places each sample on a grid of the series' step, fills short gaps by
linear interpolation along the series (on the device), drops windows missing too much, and
says which windows were filled and which dropped. :func:`departures` says how each window
departs from like windows (low, as an outage or a holiday; high, as a demand extreme), and
:func:`windows_holding` which window holds each of a list of times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.signal.resample import interpolate_nans

__all__ = [
    "DIRECTION_WORDS",
    "LIKE_EACH_SIDE",
    "Departures",
    "Windows",
    "departures",
    "flat_windows",
    "make_windows",
    "windows_holding",
]

#: Like windows a window is compared with: up to this many on either side (see :func:`departures`).
LIKE_EACH_SIDE = 4
_WEEK_NS = 7 * 86_400 * 10**9
#: What a window's direction (:attr:`Departures.direction`) says of it.
DIRECTION_WORDS = {"low": "low (outage-like)", "high": "high (demand extremes)"}


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


@dataclass(frozen=True)
class Departures:
    """How each window departs from like windows (see :func:`departures`).

    Attributes
    ----------
    direction : str array of shape ``(n_windows,)``: ``"low"`` where the window's largest
        departure is below the like windows, ``"high"`` where above.
    share : float array of shape ``(n_windows,)``: that departure as a signed share of the like
        windows' median at its step (-0.6: 60 % under); NaN where that median is 0.
    step : int array of shape ``(n_windows,)``: the step (slot) of the window where it is.
    like : int array of shape ``(n_windows,)``: like windows compared (0: none was in the
        series, and the series' median window stood in).
    usual : array of shape ``(n_windows, per_window)``: the like windows' median, step by step.
    """

    direction: np.ndarray
    share: np.ndarray
    step: np.ndarray
    like: np.ndarray
    usual: np.ndarray


def departures(values: np.ndarray, starts: np.ndarray, window_s: float) -> Departures:
    """How each window departs from like windows, step by step: the windows at the same place
    in the week (for a window of a week or a whole fraction of one, such as a day: the same
    weekday) or else the neighbouring windows, up to :data:`LIKE_EACH_SIDE` on either side;
    their median at each step is the usual value. The largest departure (in the series' units)
    gives the direction: an outage, a holiday or a stuck meter is low, a demand extreme high.

    Parameters
    ----------
    values : array of shape ``(n_windows, per_window)``, host values in the series' units.
    starts : ``datetime64[ns]`` array of shape ``(n_windows,)``, sorted (:attr:`Windows.starts`).
    window_s : the windows' length in seconds.
    """
    n = values.shape[0]
    win_ns = int(round(window_s * 1e9))
    period = _WEEK_NS if win_ns <= _WEEK_NS and _WEEK_NS % win_ns == 0 else win_ns
    at = starts.astype("datetime64[ns]").view(np.int64)
    offsets = np.array([k * period for k in range(-LIKE_EACH_SIDE, LIKE_EACH_SIDE + 1) if k], dtype=np.int64)
    wanted = at[:, None] + offsets[None, :]  # (n_windows, 2 * LIKE_EACH_SIDE)
    pos = np.searchsorted(at, wanted).clip(max=n - 1)
    found = at[pos] == wanted
    like = np.where(found[..., None], values[pos], np.nan)  # (n_windows, 2 * LIKE_EACH_SIDE, per_window)
    count = found.sum(axis=1)
    like[count == 0, 0] = np.median(values, axis=0)  # no like window: the series' median window
    usual = np.nanmedian(like, axis=1)
    diff = values - usual
    step = np.abs(diff).argmax(axis=1)
    rows = np.arange(n)
    largest, base = diff[rows, step], np.abs(usual[rows, step])
    share = np.divide(largest, base, out=np.full(n, np.nan), where=base > 0)
    return Departures(np.where(largest < 0, "low", "high"), share, step, count, usual)


def flat_windows(values: np.ndarray) -> np.ndarray:
    """Which windows hold one value throughout (a stuck meter, or a constant fill): bool array of
    shape ``(n_windows,)`` from ``values`` of shape ``(n_windows, per_window)``. A model of
    normal windows may rank such a window below its threshold (its shape is a flat line, near
    the night's load), but no load stays exactly constant for a window."""
    return np.asarray(values.max(axis=1) == values.min(axis=1))


def windows_holding(starts: np.ndarray, window_s: float, times: np.ndarray) -> np.ndarray:
    """Which window holds each of ``times``: int64 array of shape ``times.shape``, the window's
    position in ``starts`` (``datetime64[ns]``, sorted), -1 where none does (a time outside the
    series, or in a window left out)."""
    at = starts.astype("datetime64[ns]").view(np.int64)
    t = times.astype("datetime64[ns]").view(np.int64)
    pos = np.searchsorted(at, t, side="right") - 1
    inside = (pos >= 0) & (t < at[pos.clip(min=0)] + int(round(window_s * 1e9)))
    return np.where(inside, pos, -1).astype(np.int64)
