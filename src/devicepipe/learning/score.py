"""Embeddings, reconstruction errors and anomaly flags from trained models (one or an ensemble).

Also what is computed from scores and codes: the ROC AUC of scores against labels, and a
grid of latent points spanning the embeddings (decoded into the generated-beat figure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from devicepipe.artifacts.made import ScoredRows
from devicepipe.core.device import full_float32
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.interop import convert
from devicepipe.learning.train import check_finite_rows
from devicepipe.models import as_model, model_rows

__all__ = [
    "AnomalyEvaluation",
    "Scores",
    "anomaly_threshold",
    "embed",
    "evaluate_anomalies",
    "group_scores",
    "class_grid",
    "latent_axes",
    "latent_grid",
    "reconstruct",
    "reconstruction_error",
    "roc_auc",
    "score",
]


def _batches(model: nn.Module, x: torch.Tensor, batch_size: int) -> Any:
    """Slices of ``x`` of ``batch_size`` rows, each on the model's device (rows held in host memory
    are copied a batch at a time)."""
    device = next(model.parameters()).device
    for i in range(0, x.shape[0], batch_size):
        yield x[i : i + batch_size].to(device, non_blocking=True)


@full_float32()
@torch.no_grad()
def embed(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Latent means of ``x`` (shape ``(n, ...)``) -> ``(n, latent)`` on the model's device, in eval mode."""
    was = model.training
    model.eval()
    out = torch.cat([as_model(model).encode(b)[0] for b in _batches(model, x, batch_size)])
    model.train(was)
    return out


@full_float32()
@torch.no_grad()
def reconstruct(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Reconstructions of ``x`` from the latent means (no sampling), same shape as ``x`` rows."""
    was = model.training
    model.eval()
    out = torch.cat([model(b)[0] for b in _batches(model, x, batch_size)])
    model.train(was)
    return out


@full_float32()
@torch.no_grad()
def reconstruction_error(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """Mean squared reconstruction error per row, shape ``(n,)``, on the model's device (computed a
    batch at a time, so no ``(n, width)`` reconstruction is held)."""
    was = model.training
    model.eval()
    errors = []
    for b in _batches(model, x, batch_size):
        recon = model(b)[0]
        errors.append((recon - b.reshape(recon.shape)).square().mean(-1))
    model.train(was)
    return torch.cat(errors)


def anomaly_threshold(train_scores: torch.Tensor, percentile: float = 99.0) -> float:
    """The ``percentile`` of the training rows' scores (linear interpolation)."""
    if not 0 < percentile < 100:
        raise DevicepipeError(f"anomaly_threshold(): percentile must be within (0, 100), got {percentile}.")
    if train_scores.numel() == 0:
        raise DevicepipeError("anomaly_threshold(): no training scores to take a percentile of.")
    return float(torch.quantile(train_scores.double(), percentile / 100.0))


@dataclass(frozen=True)
class Scores:
    """Per-row results: ``embeddings`` ``(n, latent)``, ``scores`` ``(n,)`` (ensemble mean),
    ``spread`` ``(n,)`` (ensemble standard deviation; zeros for one model), ``threshold``, ``flags``,
    and ``effects`` ``(n,)`` where the scorer measures them (how large each row's difference is, as
    a share of a typical row's shape; see ``BeatAnomalyDetector``'s ``min_effect``), else None."""

    embeddings: torch.Tensor
    scores: torch.Tensor
    spread: torch.Tensor
    threshold: float
    flags: torch.Tensor
    effects: torch.Tensor | None = None

    def to_host(self) -> ScoredRows:
        """Host copies of the per-row results (codes, scores, spread, flags and effects)."""

        def host(t: torch.Tensor) -> np.ndarray:
            return t.detach().cpu().numpy()

        effects = None if self.effects is None else host(self.effects)
        return ScoredRows(host(self.embeddings), host(self.scores), host(self.spread), host(self.flags), effects)


def score(
    models: nn.Module | list[nn.Module],
    x: Any,
    *,
    train_rows: torch.Tensor | None = None,
    percentile: float = 99.0,
) -> Scores:
    """Score every row of ``x`` with one model or an ensemble.

    The threshold is the ``percentile`` of the scores of ``train_rows`` (indices or a mask;
    all rows when None); rows scoring above it are flagged. Embeddings are the first
    member's latent means. ``x`` takes what :func:`devicepipe.learning.train.fit` takes (a tensor on the
    models' device, a ``Beats``, a NumPy array, ...).
    """
    members = models if isinstance(models, list) else [models]
    x = model_rows(members[0], x, "score()")
    check_finite_rows(x, "score()")
    errors = torch.stack([reconstruction_error(m, x) for m in members])  # (members, n)
    mean = errors.mean(0)
    spread = errors.std(0, unbiased=False) if len(members) > 1 else torch.zeros_like(mean)
    reference = mean if train_rows is None else mean[train_rows]
    threshold = anomaly_threshold(reference, percentile)
    return Scores(embed(members[0], x), mean, spread, threshold, mean > threshold)


def group_scores(scores: Scores, group: int, percentile: float = 99.0) -> Scores:
    """Scores of consecutive groups of ``group`` rows (e.g. the samples of a window).

    Each group's score, spread and embedding are the means over its rows; the threshold is
    the ``percentile`` of the group scores (every group), and groups above it are flagged.
    ``scores`` holds ``n * group`` rows; the result holds ``n``.
    """
    per_group = scores.scores.view(-1, group).mean(1)
    threshold = anomaly_threshold(per_group, percentile)
    embeddings = scores.embeddings.view(-1, group, scores.embeddings.shape[1]).mean(1)
    spread = scores.spread.view(-1, group).mean(1)
    return Scores(embeddings, per_group, spread, threshold, per_group > threshold)


def latent_axes(embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean of the embeddings and their two principal directions (where the codes spread most).

    ``embeddings`` has shape ``(rows, latent)`` with ``latent >= 2``; returns the mean
    ``(latent,)`` and unit directions ``(2, latent)``, each signed so that its largest component
    is positive (the same directions on every device).
    """
    e = embeddings.double()
    mean = e.mean(0)
    _, _, vh = torch.linalg.svd(e - mean, full_matrices=False)
    axes = vh[:2]
    sign = torch.sign(axes.gather(1, axes.abs().argmax(1, keepdim=True)))
    return mean.to(embeddings.dtype), (axes * sign).to(embeddings.dtype)


#: The share of codes left outside the generated grid at each end of a direction: small enough
#: that a family of 1 % of the beats (ectopic beats on one side) lies inside, large enough that a
#: few stray codes do not stretch the grid.
GRID_TAIL = 0.002


def latent_grid(embeddings: torch.Tensor, n: int) -> torch.Tensor:
    """``n * n`` latent points on a grid along the two directions in which the embeddings spread most.

    ``embeddings`` has shape ``(rows, latent)``; returns ``(n * n, latent)`` on its device,
    centred on their mean and spanning the range of their projections on the first principal
    direction (across a row) and the second (down the columns, top row highest) between the
    :data:`GRID_TAIL` and ``1 - GRID_TAIL`` quantiles, the other directions held at the mean.
    Where a model leaves a latent dimension unused, the grid still shows how the beats vary, and
    a family of beats as rare as 1 % (ectopic beats) is inside it. With one latent dimension,
    ``n * n`` evenly spaced points.
    """
    latent = embeddings.shape[1]
    tails = torch.tensor([GRID_TAIL, 1 - GRID_TAIL], device=embeddings.device)
    if latent == 1:
        lo, hi = torch.quantile(embeddings[:, 0].float(), tails)
        return torch.linspace(float(lo), float(hi), n * n, device=embeddings.device)[:, None]
    mean, axes = latent_axes(embeddings)
    proj = ((embeddings - mean) @ axes.T).float()  # (rows, 2)
    lo, hi = torch.quantile(proj, tails[0], dim=0), torch.quantile(proj, tails[1], dim=0)
    across = torch.linspace(float(lo[0]), float(hi[0]), n, device=embeddings.device)
    down = torch.linspace(float(lo[1]), float(hi[1]), n, device=embeddings.device).flip(0)
    gy, gx = torch.meshgrid(down, across, indexing="ij")
    return mean + gx.reshape(-1, 1).to(mean.dtype) * axes[0] + gy.reshape(-1, 1).to(mean.dtype) * axes[1]


#: The fewest rows of a class whose mean code the generated grid may run to.
MIN_CLASS_ROWS = 3


def class_grid(
    embeddings: torch.Tensor, normal: torch.Tensor, others: dict[str, torch.Tensor], n: int
) -> tuple[torch.Tensor, str] | None:
    """``n * n`` latent points from the normal rows' mean code towards another class's, the
    direction a model has learned to tell that class's shape by.

    ``embeddings`` ``(rows, latent)`` with ``latent >= 2``; ``normal`` and each of ``others``
    (class name -> mask) are boolean ``(rows,)`` masks. Of the classes with at least
    :data:`MIN_CLASS_ROWS` rows, the one whose mean code lies farthest from the normal rows'
    (in units of the normal codes' spread along the line between them) is taken. Across a row:
    evenly from the normal mean (first column) to that class's mean (last column), the middle
    row (``n`` odd) through both; down the columns (top row highest): the direction, square to
    the first, in which the normal codes spread most, as far either way as the farther of their
    :data:`GRID_TAIL` quantiles. Returns the points and the class's
    name, or None when there are too few normal rows, no such class, or no distance between them.
    """
    if embeddings.shape[1] < 2 or int(normal.sum()) < MIN_CLASS_ROWS:
        return None
    e = embeddings.double()
    base, codes = e[normal].mean(0), e[normal]
    best: tuple[float, str, torch.Tensor] | None = None
    for name, mask in others.items():
        if int(mask.sum()) < MIN_CLASS_ROWS:
            continue
        step = e[mask].mean(0) - base
        length = float(torch.linalg.vector_norm(step))
        spread = float(((codes - base) @ (step / length)).std()) if length > 0 else 0.0
        far = length / spread if spread > 0 else (float("inf") if length > 0 else 0.0)
        if far > 0 and (best is None or far > best[0]):
            best = (far, name, step)
    if best is None:
        return None
    _, name, step = best
    across = step / torch.linalg.vector_norm(step)
    rest = (codes - base) - ((codes - base) @ across)[:, None] * across  # the normal codes, square to it
    _, _, vh = torch.linalg.svd(rest, full_matrices=False)
    down = vh[0] * torch.sign(vh[0][vh[0].abs().argmax()])
    along = (rest @ down).float()
    tails = torch.tensor([GRID_TAIL, 1 - GRID_TAIL], device=e.device)
    reach = float(torch.quantile(along, tails).abs().max())
    t = torch.linspace(0.0, 1.0, n, device=e.device, dtype=e.dtype)
    s = torch.linspace(-reach, reach, n, device=e.device, dtype=e.dtype).flip(0)
    gy, gx = torch.meshgrid(s, t, indexing="ij")
    points = base + gx.reshape(-1, 1) * step + gy.reshape(-1, 1) * down
    return points.to(embeddings.dtype), name


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC of ``scores`` for binary ``labels`` (1 = positive), ties counted half (Mann-Whitney U).

    ``labels`` and ``scores`` are host arrays of shape ``(n,)``.
    """
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise DevicepipeError("roc_auc(): needs both positive and negative labels.")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # average ranks over ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass(frozen=True)
class AnomalyEvaluation:
    """How well scores separate anomalies (label 1) from normal rows (label 0).

    ``roc_auc``: area under the ROC curve (ties counted half); ``average_precision``: the
    area under the precision-recall curve as scikit-learn's ``average_precision_score``
    computes it (a step sum over thresholds, no interpolation); ``best_f1`` and
    ``best_threshold``: the highest F1 of any rule ``score >= t`` and its ``t``.
    """

    roc_auc: float
    average_precision: float
    best_f1: float
    best_threshold: float
    n_anomalies: int
    n_normal: int

    def to_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def evaluate_anomalies(labels: Any, scores: Any) -> AnomalyEvaluation:
    """ROC AUC, average precision, and the best F1 and its threshold, of ``scores`` for binary ``labels``.

    ``labels`` (1 or True = anomaly) and ``scores`` (higher = more anomalous) have shape
    ``(n,)``: tensors (computed on their device) or anything :func:`devicepipe.to_torch` takes.
    Rows with equal scores fall on the same side of every threshold.
    """
    y = labels if isinstance(labels, torch.Tensor) else convert(np.asarray(labels)).tensor
    s = scores if isinstance(scores, torch.Tensor) else convert(np.asarray(scores)).tensor
    y = y.to(s.device).reshape(-1)
    s = s.reshape(-1).double()
    if y.shape != s.shape:
        raise DevicepipeError(f"evaluate_anomalies(): {y.numel()} labels but {s.numel()} scores.")
    if not bool(torch.isfinite(s).all()):
        raise DevicepipeError("evaluate_anomalies(): the scores hold NaN or infinite values.")
    values = torch.unique(y)
    if not bool(((values == 0) | (values == 1)).all()):
        raise DevicepipeError("evaluate_anomalies(): labels must be 0/1 or booleans (1 = anomaly).")
    y = y.bool()
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise DevicepipeError("evaluate_anomalies(): needs both anomalies (1) and normal rows (0) among the labels.")
    order = torch.argsort(s, descending=True, stable=True)
    s_sorted, y_sorted = s[order], y[order].double()
    last_of_value = torch.ones_like(s_sorted, dtype=torch.bool)
    last_of_value[:-1] = s_sorted[1:] != s_sorted[:-1]  # the last row of each run of equal scores
    tp = torch.cumsum(y_sorted, 0)[last_of_value]
    fp = torch.cumsum(1.0 - y_sorted, 0)[last_of_value]
    thresholds = s_sorted[last_of_value]
    tpr = torch.cat([tp.new_zeros(1), tp / n_pos])
    fpr = torch.cat([fp.new_zeros(1), fp / n_neg])
    auc = float(torch.trapezoid(tpr, fpr))
    precision = tp / (tp + fp)
    recall_steps = torch.diff(torch.cat([tp.new_zeros(1), tp])) / n_pos
    ap = float((recall_steps * precision).sum())
    f1 = 2 * tp / (tp + fp + n_pos)
    best = int(torch.argmax(f1))
    return AnomalyEvaluation(auc, ap, float(f1[best]), float(thresholds[best]), n_pos, n_neg)
