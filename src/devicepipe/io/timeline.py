"""The time axis of a recording: ordering by a time column, duplicate timestamps, gaps, NaN values.

:func:`order_by_time` sorts rows by their timestamps, resolves duplicates by a policy and
returns a :class:`TimeReport` of what the column looked like; :func:`apply_nan_policy` fails
on NaN values, drops them or interpolates them on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import torch

from devicepipe.core.device import all_finite
from devicepipe.core.errors import ReadError
from devicepipe.signal.resample import interpolate_nans

__all__ = [
    "DUPLICATE_POLICIES",
    "NAN_POLICIES",
    "DuplicatePolicy",
    "NanPolicy",
    "TimeReport",
    "apply_nan_policy",
    "order_by_time",
]

NanPolicy = Literal["error", "drop", "interpolate"]
DuplicatePolicy = Literal["keep", "first", "mean", "error"]
#: The accepted values of ``nan=`` and ``duplicates=`` (the CLI's choices are made from these).
NAN_POLICIES: tuple[str, ...] = get_args(NanPolicy)
DUPLICATE_POLICIES: tuple[str, ...] = get_args(DuplicatePolicy)


@dataclass(frozen=True)
class TimeReport:
    """What a time column looked like before it was sorted.

    Times are ``numpy.datetime64[ns]``; ``step_s`` is the median interval in seconds.
    """

    n_rows: int
    start: np.datetime64
    end: np.datetime64
    step_s: float
    was_sorted: bool
    n_duplicates: int  # rows whose timestamp equals the previous row's, after sorting
    duplicates: tuple[np.datetime64, ...]  # the first few duplicated timestamps
    n_gaps: int  # intervals longer than 1.5 steps
    gaps: tuple[tuple[np.datetime64, np.datetime64, int], ...]  # (before, after, missing steps)
    missing_steps: int  # samples the gaps would hold on the regular grid
    duplicates_policy: str = "keep"
    # where the times first went back (data row from 0, from, to), where sorting them brought rows
    # closer than half a step: two stretches that share times (a clock set back), now interleaved
    overlap: tuple[int, np.datetime64, np.datetime64] | None = None

    def longest_gap(self) -> tuple[float, str] | None:
        """The longest gap among those reported: its seconds, and the time before it in words."""
        if not self.gaps:
            return None
        before, after, _ = max(self.gaps, key=lambda gap: gap[1] - gap[0])
        return float((after - before) / np.timedelta64(1, "ns")) / 1e9, _when(before)

    def overlap_text(self) -> str:
        """Where the times first went back into times they had held, in words ("" where they did not)."""
        if self.overlap is None:
            return ""
        row, before, after = self.overlap
        return f"at data row {row + 1:,} (from {_when(before)} to {_when(after)})"

    @property
    def regular(self) -> bool:
        """True when the series is sorted, without duplicates and without gaps."""
        return self.was_sorted and self.n_duplicates == 0 and self.n_gaps == 0

    def summary(self) -> str:
        """One line describing the irregularities (or their absence)."""
        parts = [f"{self.n_rows:,} rows from {_when(self.start)} to {_when(self.end)}, step {self.step_s:g} s"]
        if not self.was_sorted:
            parts.append("was not sorted (sorted now)")
        if self.n_duplicates:
            parts.append(f"{self.n_duplicates} duplicate timestamp(s) ({self.duplicates_policy})")
        if self.n_gaps:
            parts.append(f"{self.n_gaps} gap(s) missing {self.missing_steps} step(s) in all")
        if self.regular:
            parts.append("regular")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (times as ISO strings)."""
        return {
            "n_rows": self.n_rows,
            "start": _when(self.start, "T"),
            "end": _when(self.end, "T"),
            "step_s": self.step_s,
            "was_sorted": self.was_sorted,
            "n_duplicates": self.n_duplicates,
            "duplicates": [_when(t, "T") for t in self.duplicates],
            "duplicates_policy": self.duplicates_policy,
            "n_gaps": self.n_gaps,
            "gaps": [[_when(a, "T"), _when(b, "T"), n] for a, b, n in self.gaps],
            "missing_steps": self.missing_steps,
        }


def _when(t: np.datetime64, sep: str = " ") -> str:
    """A time as ISO 8601 text to the precision it has: ``2024-01-01 00:00:00`` (``sep`` between
    date and time; ``"T"`` for JSON), with fractions of a second only where there are some."""
    unit: Any = next(u for u in ("s", "ms", "us", "ns") if t.astype(f"datetime64[{u}]") == t)  # (numpy's literals)
    return str(np.datetime_as_string(t, unit=unit)).replace("T", sep)


def order_by_time(
    values: torch.Tensor, times: np.ndarray, policy: DuplicatePolicy, source: str
) -> tuple[torch.Tensor, np.ndarray, TimeReport]:
    """Sort ``values`` (``(channels, time)``) by ``times`` (datetime64[ns]) and resolve duplicates.

    Returns the sorted values and times (duplicates resolved by ``policy``: ``"keep"``,
    ``"first"``, ``"mean"`` or ``"error"``) and the report of the column as it came.
    """
    ints = times.view(np.int64)
    back = np.flatnonzero(np.diff(ints) < 0)
    was_sorted = not back.size
    first_back = None if was_sorted else (int(back[0]) + 1, times[back[0]], times[back[0] + 1])
    if not was_sorted:
        order = np.argsort(ints, kind="stable")
        times, ints = times[order], ints[order]
        values = values[:, torch.from_numpy(order).to(values.device)]
    diffs = np.diff(ints)
    dup_mask = diffs == 0
    n_dup = int(dup_mask.sum())
    positive = diffs[diffs > 0]
    step = float(np.median(positive)) if positive.size else 0.0
    overlap = first_back if first_back is not None and bool((diffs < 0.5 * step).any()) else None
    gap_idx = np.flatnonzero(diffs > 1.5 * step) if step > 0 else np.array([], dtype=np.int64)
    missing = np.rint(diffs[gap_idx] / step).astype(np.int64) - 1 if step > 0 else np.array([], dtype=np.int64)
    report = TimeReport(
        n_rows=int(times.size),
        start=times[0],
        end=times[-1],
        step_s=step / 1e9,
        was_sorted=was_sorted,
        n_duplicates=n_dup,
        duplicates=tuple(times[1:][dup_mask][:10]),
        n_gaps=int(gap_idx.size),
        gaps=tuple((times[i], times[i + 1], int(m)) for i, m in zip(gap_idx[:50], missing[:50], strict=True)),
        missing_steps=int(missing.sum()),
        duplicates_policy=policy,
        overlap=overlap,
    )
    if n_dup and policy == "error":
        raise ReadError(
            f"read_series(): {source} has {n_dup} duplicate timestamp(s), first {times[1:][dup_mask][0]}",
            fix="pass {duplicates=first} (the first row of each time) or {duplicates=mean} (their mean).",
        )
    if n_dup and policy in ("first", "mean"):
        starts = np.concatenate([[True], ~dup_mask])
        group = torch.from_numpy(np.cumsum(starts) - 1).to(values.device)
        n_groups = int(starts.sum())
        if policy == "first":
            values = values[:, torch.from_numpy(np.flatnonzero(starts)).to(values.device)]
        else:
            sums = torch.zeros(values.shape[0], n_groups, dtype=values.dtype, device=values.device)
            sums.index_add_(1, group, values)
            counts = torch.bincount(group, minlength=n_groups).to(values.dtype)
            values = sums / counts
        times = times[starts]
    return values, times, report


def apply_nan_policy(
    x: torch.Tensor,
    timestamps: torch.Tensor | None,
    policy: NanPolicy,
    source: str,
    names: Sequence[str] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """Handle non-finite values (NaN, +-inf, and numbers beyond float32 that became inf) in ``x``
    of shape ``(channels, time)`` on its device (``names``: the channels', for messages).

    Returns ``(x, timestamps, n_bad)``: unchanged when every value is finite; else an error
    naming the count and the first position (``"error"``), the time points holding any
    non-finite value dropped (``"drop"``), or those values filled by linear interpolation along
    the time column, or the sample index (``"interpolate"``). A channel with no finite value
    among others is an error whatever the policy, naming the channels to read instead (dropping
    its time points would leave none, and there is nothing to interpolate from).
    """
    if not x.dtype.is_floating_point:
        return x, timestamps, 0
    if all_finite(x):
        return x, timestamps, 0
    mask = ~torch.isfinite(x)
    n_bad = int(mask.sum())
    n_inf = int(torch.isinf(x).sum())
    kinds = f"{n_bad - n_inf:,} NaN or empty, {n_inf:,} infinite or beyond float32's range"
    what = f"{n_bad:,} non-finite value(s) ({kinds})"
    if n_bad == x.numel():
        raise ReadError(f"read_series(): {source} holds no finite value ({what}); check the file and the column.")
    empty = mask.all(-1)
    if bool(empty.any()):
        labels = list(names) if names is not None and len(names) == x.shape[0] else [str(i) for i in range(x.shape[0])]
        others = [label for label, gone in zip(labels, empty.tolist(), strict=True) if not gone]
        raise ReadError(
            f"read_series(): channel {labels[int(torch.nonzero(empty)[0])]!r} of {source} holds no finite value "
            "(a lead not recorded)",
            fix=f"leave it out: read {{column={others[0]!r}}}" + (" or the others" if len(others) > 1 else "") + ".",
            param="column",
        )
    any_bad = mask.any(0)
    if policy == "error":
        first = int(torch.nonzero(any_bad)[0])
        problem = f"read_series(): {source} has {what}, the first at sample {first:,}"
        raise ReadError(problem, fix="pass {nan='drop'} or {nan='interpolate'}.", param="nan")
    if policy == "drop":
        keep = ~any_bad
        return x[:, keep], None if timestamps is None else timestamps[keep], n_bad
    x = x.masked_fill(mask, float("nan"))  # interpolation fills NaN; inf is filled the same way
    positions = None if timestamps is None else timestamps - timestamps[0]
    return interpolate_nans(x, positions), timestamps, n_bad
