"""What the detector takes: one recording ``(time,)``, a batch ``(batch, time)`` or its leads
``(leads, time)``, as a tensor of finite samples, at least two seconds long at a rate that is
one; each refusal one clear :class:`~devicepipe.core.errors.DevicepipeError` naming the call."""

from __future__ import annotations

import torch

from devicepipe.core.device import all_finite
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import hertz

__all__ = ["check_ecg", "check_input"]


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
    return x


def check_ecg(x: torch.Tensor, sampling_rate: float) -> None:
    """The checks :func:`ecg_peaks` makes on its input (a tensor of shape ``(time,)`` or
    ``(batch, time)``, finite, at least 2 s at ``sampling_rate`` Hz): a clear
    :class:`DevicepipeError` for the first that fails, nothing otherwise."""
    check_input(x, sampling_rate, "ecg_peaks()")
