"""What the detector takes: one recording ``(time,)``, a batch ``(batch, time)`` or its leads
``(leads, time)``, as a tensor of finite samples, at least two seconds long at a rate that is
one; each refusal one clear :class:`~devicepipe.core.errors.DevicepipeError` naming the call."""

from __future__ import annotations

import torch

from devicepipe.core.device import all_finite
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import hertz

__all__ = ["LEVEL_S", "OFFSET_RATIO", "check_ecg", "check_input", "far_level", "less_level", "level_samples"]

#: The stretch (s) at a recording's start whose mean is its level and whose spread it is set against.
LEVEL_S = 2.0
#: A recording whose level is this many times its spread or more is detected less that level. The
#: filter is blind to any level in exact arithmetic, but in float32 a level a million times the
#: signal's spread (ADC counts, a DC offset) buries it in rounding: no beat was found at 1.5e6.
OFFSET_RATIO = 1e3


def check_input(x: torch.Tensor, sampling_rate: float, where: str, *, leads: bool = False) -> torch.Tensor:
    """``x`` as the detector takes it (detached; integers as float32), or a clear error from
    ``where``; ``leads``: the leads of a recording, ``(leads, time)`` or ``(batch, leads, time)``."""
    if not isinstance(x, torch.Tensor):
        raise DevicepipeError(f"{where}: expected a torch.Tensor, got {type(x).__name__}.")
    if leads and x.ndim not in (2, 3):
        raise DevicepipeError(
            f"{where}: leads='fuse' expects shape (leads, time) or (batch, leads, time), got {tuple(x.shape)}."
        )
    if not leads and x.ndim not in (1, 2):
        hint = "; for several leads of each recording pass leads='fuse'" if x.ndim == 3 else ""
        raise DevicepipeError(f"{where}: expected shape (time,) or (batch, time), got {tuple(x.shape)}{hint}.")
    x = x.detach() if x.dtype.is_floating_point else x.detach().to(torch.float32)  # no autograd; integers as float
    hertz(sampling_rate, where)
    if not all_finite(x):
        # one NaN or inf would spread through the filter and erase every beat: refuse, never answer wrongly
        bad = ~torch.isfinite(x)
        first = int(torch.nonzero(bad.reshape(-1, x.shape[-1]).any(0))[0])
        raise DevicepipeError(
            f"{where}: the recording holds {int(bad.sum()):,} non-finite value(s) (NaN or inf), the first at "
            f"sample {first:,}",
            fix="drop or interpolate them first: read it with {nan='drop'} or {nan='interpolate'}.",
            param="nan",
        )
    if x.shape[-1] < 2 * sampling_rate:
        # (a (time, leads) array, as tables and NumPy lay recordings out: time is the last axis here)
        transposed = x.ndim > 1 and x.shape[-2] >= 2 * sampling_rate
        hint = (
            f"; its shape is {tuple(x.shape)}: time goes last here, so pass it transposed (x.T)" if transposed else ""
        )
        raise DevicepipeError(
            f"{where}: the recording has {x.shape[-1]} samples, under 2 s at {sampling_rate:g} Hz; "
            f"beat detection needs at least two seconds{hint}."
        )
    return less_level(x, far_level(x[..., : level_samples(sampling_rate)]))


def level_samples(sampling_rate: float) -> int:
    """The samples of :data:`LEVEL_S` at ``sampling_rate`` Hz."""
    return max(1, round(LEVEL_S * float(sampling_rate)))


def far_level(head: torch.Tensor) -> torch.Tensor | None:
    """Each row's level where it is :data:`OFFSET_RATIO` times its spread or more (0 where it is
    not), from ``head`` (``(..., m)``: the first :data:`LEVEL_S` of each row), ``(..., 1)`` in the
    samples' dtype; None where no row's is."""
    # a row whose samples cross 0 holds one at least its mean away from it, so its spread is at
    # least its level over the square root of its samples (2 s of them: under OFFSET_RATIO at any
    # rate under 250 kHz): never far. A cheap look first, on the host where the samples are: a
    # tenth of a short call went to the exact test.
    if head.device.type == "cpu" and head.dtype in (torch.float16, torch.float32, torch.float64):
        values = head.numpy()
        if not ((values.min(-1) > 0).any() or (values.max(-1) < 0).any()):
            return None
    elif not bool(((head.amin(-1) > 0) | (head.amax(-1) < 0)).any()):
        return None
    h = head.double()
    level = h.mean(-1, keepdim=True)
    far = level.abs() > OFFSET_RATIO * h.std(-1, keepdim=True, correction=0)
    if not bool(far.any()):
        return None
    return torch.where(far, level, torch.zeros_like(level)).to(head.dtype)


def less_level(x: torch.Tensor, level: torch.Tensor | None) -> torch.Tensor:
    """``x`` less the ``level`` :func:`far_level` found (``x`` itself where None): the same
    samples whether the recording is detected in one call or read in chunks."""
    return x if level is None else x - level


def check_ecg(x: torch.Tensor, sampling_rate: float) -> None:
    """The checks :func:`ecg_peaks` makes on its input (a tensor of shape ``(time,)`` or
    ``(batch, time)``, finite, at least 2 s at ``sampling_rate`` Hz): a clear
    :class:`DevicepipeError` for the first that fails, nothing otherwise."""
    check_input(x, sampling_rate, "ecg_peaks()")
