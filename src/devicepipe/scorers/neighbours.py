"""Nearest-neighbour kernels on row tensors: distances, the local linear reconstruction, the
resolution pyramid, robust scales and thresholds."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

import torch
from torch.nn import functional as F

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import whole

#: The fewest rows :meth:`BeatAnomalyDetector.fit` learns from.
MIN_ROWS = 10
#: ``contamination="auto"``: how many robust standard deviations of the log scores above their median.
AUTO_K = 3.0
_MAD_TO_SD = 1.4826  # MAD of a normal distribution times this is its standard deviation

#: The share of anomalous training rows the nearest-neighbour scorer allows for when
#: ``contamination`` is not a share (``"auto"``, or a fixed ``threshold``).
KNN_SHARE = 0.01
#: The coarsest resolution of the multiscale scorer, in samples per row (see :func:`row_pyramid`).
MULTISCALE_FLOOR = 16
#: The coarsest resolution of the local scorer, in samples per row: coarser than the multiscale
#: scorer's, for anomalies in the shape of a day or a beat that hourly or sample-to-sample
#: variation hides (benchmarks/one_class.py).
LOCAL_FLOOR = 8
#: The local scorer's ridge, as a share of the trace of the neighbours' Gram matrix (see
#: :func:`local_residual`).
LOCAL_RIDGE = 0.03
#: The most neighbours the local scorer reconstructs a row from: each row solves a system of that size.
LOCAL_MOST = 32
#: Fewer training rows than this is a small set: the summary of a fit says so, and why its scorer.
SMALL_SET = 300


def auto_threshold(train_scores: torch.Tensor, k: float = AUTO_K, *, log: bool = True) -> float:
    """The robust threshold of ``contamination="auto"``: ``exp(median(log s) + k * 1.4826 * MAD(log s))``
    (with ``log=False``, for scores already on a z scale: ``median(s) + k * 1.4826 * MAD(s)``).

    ``train_scores`` has shape ``(n,)`` (positive errors or distances; zeros are floored at the
    smallest positive float64).
    """
    if train_scores.numel() == 0:
        raise DevicepipeError("auto_threshold(): no training scores.")
    values = train_scores.double()
    if log:
        values = values.clamp_min(torch.finfo(torch.float64).tiny).log()
    median = _median(values)
    mad = _median((values - median).abs())
    edge = median + k * _MAD_TO_SD * mad
    return float(torch.exp(edge) if log else edge)


#: Tukey's "far out" fence: this many interquartile ranges above the upper quartile.
FENCE_IQRS = 3.0
#: The least effect of a flagged row (``min_effect``): at the resolution where the row stands out
#: most, what the training rows rebuild of it must miss by at least this share of a typical
#: row's shape (:func:`typical_size`). The robust z-scores measure how rare a difference is,
#: not how large: on simulated recordings with 0.01-0.02 mV of noise the threshold alone flagged
#: 282 beats of ordinary beat-to-beat variation, differing by 6-15 % of a typical beat, and its
#: flags on recordings with ectopic beats differed by 15 % or more (benchmarks/results/clean_flags.json;
#: real recordings and datasets: benchmarks/results/min_effect_real.json, where no flag changed).
MIN_EFFECT = 0.15


def outlier_fence(train_scores: torch.Tensor, *, log: bool = True) -> float:
    """Tukey's far-out fence of the training rows' scores ``(n,)``: ``Q3 + 3 (Q3 - Q1)``, of
    their logs unless ``log=False`` (scores already on a z scale). A score above it is an
    outlier of the scores themselves; the share rule's threshold is raised to it, so that a
    recording with nothing unusual has (almost) nothing flagged, where the share alone always
    flags its share."""
    if train_scores.numel() == 0:
        raise DevicepipeError("outlier_fence(): no training scores.")
    values = train_scores.double()
    if log:
        values = values.clamp_min(torch.finfo(torch.float64).tiny).log()
    q1, q3 = (float(torch.quantile(values, q)) for q in (0.25, 0.75))
    edge = q3 + FENCE_IQRS * (q3 - q1)
    return math.exp(edge) if log else edge


def _nearest(
    x: torch.Tensor,
    reference: torch.Tensor,
    k: int,
    *,
    exclude: torch.Tensor | None,
    skip_equal: bool,
    row_values: int = 0,
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """For blocks of the rows of ``x`` ``(n, w)``: the block ``(b, w)`` on the reference's device,
    and the distances ``(b, k)`` (ascending) and indices ``(b, k)`` of each row's ``k`` nearest rows
    of ``reference`` ``(m, w)`` (``torch.cdist`` then :func:`smallest`; ``k`` already within ``m``). A
    block holds about 32 M distances, or 32 M values at ``row_values`` per row when that is more.
    ``exclude`` and ``skip_equal`` as :func:`knn_distance` has them."""
    m = reference.shape[0]
    step = max(1, 2**25 // max(m, row_values, 1))
    for i in range(0, x.shape[0], step):
        block = x[i : i + step].to(reference.device)
        d = torch.cdist(block, reference)
        if exclude is not None:
            own = exclude[i : i + step].to(reference.device)
            rows = torch.nonzero(own >= 0).flatten()
            d[rows, own[rows]] = float("inf")
        if skip_equal and k < m:
            values, index = smallest(d, k + 1)
            itself = (block == reference[index[:, 0]]).all(1)[:, None]
            values = torch.where(itself, values[:, 1:], values[:, :k])
            index = torch.where(itself, index[:, 1:], index[:, :k])
        else:
            values, index = smallest(d, k)
        yield block, values, index


def smallest(d: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` smallest values of each row of ``d`` ``(b, m)`` (no NaN) and their columns, both
    ``(b, k)``, ordered by value and, among equal values, by column: the same columns however
    the values tie. (``topk`` breaks ties as it goes, differently for another ``k``: a training
    row scored again, which asks for one neighbour more to leave itself out, then got another
    neighbour from a tie than it had in training.)"""
    m = d.shape[1]
    values, index = d.topk(min(k + 1, m), dim=1, largest=False)  # (one more: is the k-th tied past the cut?)
    if k < m:
        cut = torch.nonzero(values[:, k] == values[:, k - 1]).flatten() if k else index.new_zeros(0)
        values, index = values[:, :k], index[:, :k]
        if cut.numel():  # equal values straddle the k-th: the first columns of them are taken
            rows, last = d[cut], values[cut, -1:]
            below, equal = rows < last, rows == last
            chosen = below | (equal & (equal.cumsum(1) <= k - below.sum(1, keepdim=True)))
            index[cut] = torch.nonzero(chosen)[:, 1].reshape(-1, k)  # (in column order: sorted below)
            values[cut] = rows.gather(1, index[cut])
    # rows with equal values inside (or in column order, above): by value, then column
    tied = torch.nonzero((values[:, 1:] <= values[:, :-1]).any(1)).flatten()
    if tied.numel():
        cols, order = index[tied].sort(1)
        vals, order = values[tied].gather(1, order).sort(dim=1, stable=True)
        values[tied], index[tied] = vals, cols.gather(1, order)
    return values, index


def knn_distance(
    x: torch.Tensor,
    reference: torch.Tensor,
    k: int,
    *,
    exclude: torch.Tensor | None = None,
    skip_equal: bool = False,
) -> torch.Tensor:
    """Mean Euclidean distance from each row of ``x`` ``(n, w)`` to its ``k`` nearest rows of
    ``reference`` ``(m, w)``, on the reference's device, in blocks of about 32 M distances
    (``torch.cdist`` then ``topk``). Returns ``(n,)``.

    ``exclude`` ``(n,)``: for each row of ``x``, a row of ``reference`` to leave out (itself,
    for a training row's own score), or -1. ``skip_equal``: a row of ``x`` equal, bit for bit,
    to its nearest reference row leaves that one row out, as its own score did when it trained
    (so scoring the training rows again gives their training scores)."""
    _check_neighbours("knn_distance()", k)
    return knn_and_local(x, reference, k, 0, exclude=exclude, skip_equal=skip_equal)[0]


def local_residual(
    x: torch.Tensor,
    reference: torch.Tensor,
    k: int,
    *,
    skip: int = 0,
    exclude: torch.Tensor | None = None,
    skip_equal: bool = False,
    ridge: float = LOCAL_RIDGE,
) -> torch.Tensor:
    """Distance from each row of ``x`` ``(n, w)`` to the nearest affine combination of its ``k``
    nearest rows of ``reference`` ``(m, w)``: the reconstruction error of locally linear
    embedding (Roweis and Saul, 2000). Returns ``(n,)``, in the units of the rows.

    ``skip``: rebuild the row from its nearest rows after the first ``skip`` (the ``skip + 1``-th
    to the ``skip + k``-th), so that a group of up to ``skip + 1`` near-identical rows (anomalies
    among the reference rows, or one unusual row and its few copies) cannot rebuild each other.
    Where the reference has too few rows, ``k`` comes first and ``skip`` is cut to what is left.

    With ``D`` the ``(k, w)`` differences of the neighbours from the row and ``G = D D^T``, the
    weights solve ``(G + ridge * trace(G) * I) v = 1``, scaled to sum to one; the score is
    ``|v^T D|``. The ridge pulls the weights toward equal (``k = 1``: the distance to the nearest
    row). A row between normal rows scores low even where no single normal row is near it, and
    a row off the shape the normal rows vary along scores high even when it is near some.

    Computed on the reference's device in blocks of about 32 M values; ``exclude`` and
    ``skip_equal`` as :func:`knn_distance` has them."""
    _check_neighbours("local_residual()", k)
    if not (isinstance(ridge, numbers.Real) and math.isfinite(ridge) and ridge >= 0):
        raise DevicepipeError(f"local_residual(): ridge must be a finite number >= 0, got {ridge!r}.")
    return knn_and_local(x, reference, 0, k, skip=skip, exclude=exclude, skip_equal=skip_equal, ridge=ridge)[1]


def _check_neighbours(where: str, k: int) -> None:
    """A clear error unless ``k`` is a whole number of neighbours, 1 or more (0 had given an empty
    tensor of scores: none for any row)."""
    whole(k, where, "k", "neighbours")


def knn_and_local(
    x: torch.Tensor,
    reference: torch.Tensor,
    k: int,
    k_local: int,
    *,
    skip: int = 0,
    exclude: torch.Tensor | None = None,
    skip_equal: bool = False,
    ridge: float = LOCAL_RIDGE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`knn_distance` with ``k`` and :func:`local_residual` with ``k_local`` (and ``skip``),
    from one search for each row's nearest rows: two tensors ``(n,)`` (an empty one for a ``k`` of 0)."""
    if x.ndim != 2 or reference.ndim != 2 or x.shape[1] != reference.shape[1] or reference.shape[0] == 0:
        raise DevicepipeError(
            f"nearest rows: x {tuple(x.shape)} and reference {tuple(reference.shape)} must be (n, w) and (m, w) "
            "with the same w and m >= 1; resample the rows to one width first (devicepipe.resample_rows)."
        )
    m, width = reference.shape
    one_out = 1 if exclude is not None or skip_equal else 0
    k, k_local = (max(1, min(n, m - one_out)) if n else 0 for n in (k, k_local))
    skip = max(0, min(int(skip), m - one_out - k_local)) if k_local else 0
    means, errors = [], []
    for block, values, index in _nearest(
        x, reference, max(k, skip + k_local), exclude=exclude, skip_equal=skip_equal, row_values=k_local * width
    ):
        if k:
            means.append(values[:, :k].mean(1))
        if k_local:
            errors.append(_local_error(block, reference[index[:, skip : skip + k_local]], ridge))
    empty = torch.empty(0, dtype=x.dtype, device=reference.device)
    return (torch.cat(means) if means else empty), (torch.cat(errors) if errors else empty)


def _local_error(block: torch.Tensor, neighbours: torch.Tensor, ridge: float) -> torch.Tensor:
    """:func:`local_residual` of the rows ``block`` ``(b, w)`` from their ``neighbours`` ``(b, k, w)``."""
    diff = neighbours - block[:, None, :]  # (b, k, w)
    gram = diff @ diff.transpose(1, 2)
    trace = gram.diagonal(dim1=1, dim2=2).sum(1).clamp_min(1e-30)
    eye = torch.eye(gram.shape[1], dtype=gram.dtype, device=gram.device)
    weights = torch.linalg.solve(gram + (ridge * trace)[:, None, None] * eye, torch.ones_like(gram[:, :, :1]))
    weights = weights / weights.sum(1, keepdim=True)  # (b, k, 1)
    return (weights.transpose(1, 2) @ diff)[:, 0].norm(dim=1)


def typical_size(rows: torch.Tensor) -> float:
    """The size of a typical row's shape: the median over the rows ``(m, w)`` of the Euclidean
    norm of each row less its own mean, in the rows' units (floored above zero)."""
    sizes = (rows.double() - rows.double().mean(1, keepdim=True)).norm(dim=1)
    return max(float(_median(sizes)), torch.finfo(torch.float32).tiny)


def row_pyramid(rows: torch.Tensor, floor: int = MULTISCALE_FLOOR) -> list[torch.Tensor]:
    """``rows`` ``(n, w)`` at their own resolution and averaged down by halves (each sample the
    mean of two, ``adaptive_avg_pool1d``) while at least ``floor`` samples remain: a list of
    ``(n, w)``, ``(n, w // 2)``, ... ``(n, >= floor)``."""
    if rows.ndim != 2:
        raise DevicepipeError(f"row_pyramid(): rows must have shape (n, w), got {tuple(rows.shape)}.")
    whole(floor, "row_pyramid()", "floor", "samples")
    levels = [rows]
    while levels[-1].shape[1] >= 2 * floor:
        levels.append(F.adaptive_avg_pool1d(levels[-1][:, None], levels[-1].shape[1] // 2)[:, 0])
    return levels


def neighbours_for(n_reference: int, share: float) -> int:
    """The ``k`` of the nearest-neighbour scorer with ``neighbours="auto"``: ``floor(share * n) + 1``
    for ``n`` reference rows of which at most ``share`` may be anomalous.

    A group of similar anomalies among the training rows is each other's nearest neighbours;
    with ``k`` above the group's size, each of them also reaches normal rows and scores high.
    Small sets get ``k = 1`` (the distance to the nearest row), which ranks best there."""
    return int(math.floor(share * n_reference)) + 1


def local_neighbours(n_reference: int) -> int:
    """How many nearest rows the local scorer reconstructs a row from, for ``n_reference`` rows:
    the square root of ``n``, at most :data:`LOCAL_MOST` (each row solves a system of that size).
    They are taken past the row's ``k - 1`` nearest (``k`` of :func:`neighbours_for`), so that a
    group of up to ``k`` similar anomalies among the training rows cannot rebuild each other."""
    return max(1, min(round(math.sqrt(n_reference)), LOCAL_MOST))


def robust_log_scale(values: torch.Tensor) -> tuple[float, float]:
    """The median and 1.4826 x MAD of ``log(values)`` (the MAD floored so that a constant score divides)."""
    logs = values.double().clamp_min(torch.finfo(torch.float64).tiny).log()
    median = _median(logs)
    mad = _median((logs - median).abs()) * _MAD_TO_SD
    return float(median), max(float(mad), 1e-12)


def robust_z(values: torch.Tensor, median: float, scale: float) -> torch.Tensor:
    logs = values.double().clamp_min(torch.finfo(torch.float64).tiny).log()
    return ((logs - median) / scale).to(values.dtype)


def quantile(x: torch.Tensor, q: float) -> float:
    """The ``q`` quantile of ``x`` ``(n,)`` with linear interpolation (``torch.quantile``'s and NumPy's
    default), of any length."""
    ordered = x.sort().values
    pos = q * (ordered.numel() - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, ordered.numel() - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def _median(x: torch.Tensor) -> torch.Tensor:
    """The median of ``x`` ``(n,)``, the mean of the middle two for an even ``n`` (as NumPy's; torch's
    ``median`` takes the lower one), of any length (``torch.quantile`` stops at 2**24 values)."""
    ordered = x.sort().values
    n = ordered.numel()
    return (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
