"""Resampling on the device: rows to a new length, and holes (NaN) filled by linear interpolation."""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from devicepipe.core.errors import DevicepipeError

__all__ = ["interpolate_nans", "resample_rows"]


def resample_rows(matrix: torch.Tensor, width: int) -> torch.Tensor:
    """Linearly resample each row of ``matrix`` (shape ``(n, w)``) to ``(n, width)``.

    The identity (the same tensor) when ``w == width``. Sample centres are aligned
    (``align_corners=False``), so a row keeps its span in time whatever its length.
    """
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 1:
        raise DevicepipeError(f"resample_rows(): width must be a positive number of samples, got {width!r}.")
    if matrix.ndim != 2:  # (one row had been an IndexError: pass it as matrix[None])
        raise DevicepipeError(f"resample_rows(): matrix must have shape (n, w), got {tuple(matrix.shape)}.")
    if matrix.shape[1] == width:
        return matrix
    return F.interpolate(matrix[:, None, :], size=width, mode="linear", align_corners=False)[:, 0]


def interpolate_nans(x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` with every NaN replaced by linear interpolation between its valid neighbours.

    Parameters
    ----------
    x : floating Tensor of shape ``(..., time)``; each row is filled on its own.
    positions : Tensor of shape ``(time,)``, where each sample lies (e.g. nanoseconds of a
        time column), for interpolation across uneven spacing; default: ``0, 1, 2, ...``.

    Returns
    -------
    A new tensor of the shape of ``x`` (``x`` itself when it holds no NaN). NaNs before the
    first or after the last valid sample of a row take that sample's value. Raises
    :class:`DevicepipeError` for a row that holds only NaN.
    """
    mask = torch.isnan(x)
    if not bool(mask.any()):
        return x
    rows = x.reshape(-1, x.shape[-1])
    holes_by_row = mask.reshape(rows.shape)
    n = rows.shape[-1]
    where = (
        torch.arange(n, device=x.device, dtype=torch.float64)
        if positions is None
        else positions.to(device=x.device, dtype=torch.float64)
    )
    out = rows.clone()
    for r in torch.nonzero(holes_by_row.any(-1)).squeeze(1).tolist():
        bad = holes_by_row[r]
        valid = torch.nonzero(~bad).squeeze(1)
        if valid.numel() == 0:
            raise DevicepipeError(f"interpolate_nans(): row {r} holds only NaN values; nothing to interpolate from.")
        holes = torch.nonzero(bad).squeeze(1)
        after = torch.searchsorted(valid, holes)  # valid samples before each hole
        # clamping makes holes before the first / after the last valid sample take the nearest value
        left = (after - 1).clamp(min=0)
        right = after.clamp(max=valid.numel() - 1)
        lp, rp = where[valid[left]], where[valid[right]]
        span = torch.where(rp > lp, rp - lp, torch.ones_like(rp))
        w = ((where[holes] - lp) / span).to(x.dtype)
        out[r, holes] = rows[r, valid[left]] * (1 - w) + rows[r, valid[right]] * w
    return out.reshape(x.shape)
