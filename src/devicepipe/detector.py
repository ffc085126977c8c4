"""An anomaly detector with the conventions of scikit-learn and PyOD, and the model file that outlives a run.

:class:`BeatAnomalyDetector` trains a convolutional VAE (or the MLP autoencoder, or a vmap
ensemble of either) on rows that are normal, for their embeddings, and scores new rows by their
how well the nearest training rows rebuild them (``scorer="local"``, the default), or by their
distance to those rows (``"multiscale"`` and ``"knn"``), or by the model's
reconstruction error (``"reconstruction"``), or both (``"combined"``). It follows PyOD's
conventions, which scikit-learn's outlier detectors share in shape:

- ``fit(X)`` sets ``decision_scores_`` (every training row's score), ``threshold_`` and
  ``labels_`` (0 normal, 1 anomalous);
- ``decision_function(X)``: the anomaly score, higher is more anomalous (PyOD);
- ``score_samples(X)``: its negation, higher is more normal (scikit-learn's sign);
- ``predict(X)``: 0 or 1 by ``threshold_``; ``fit_predict(X)``;
- ``tail_probability(X)``: the score calibrated against the training rows, the share of
  training scores at or above each score (small is unusual);
- ``get_params``/``set_params`` as scikit-learn's ``BaseEstimator`` has them, so
  ``sklearn.base.clone`` works (scikit-learn itself is not needed).

scikit-learn's ``check_estimator`` (1.9.1) runs 47 checks on it (``device="cpu", epochs=2``,
with the ``knn`` and the ``reconstruction`` scorer alike): 41 pass, ``check_array_api_input`` is
skipped (it needs array-api-compat), and five fail, for these reasons:
``check_outliers_fit_predict`` and ``check_outliers_train`` (twice) want ``predict`` to
answer -1/1, where PyOD's 0/1 is kept (1 = anomaly, the label users of anomaly scores count);
``check_estimators_unfitted`` wants scikit-learn's own ``NotFittedError`` class (a
:class:`DevicepipeError` saying "not fitted yet" is raised; scikit-learn is not a
dependency); ``check_dtype_object`` wants NumPy's wording for a dict inside an object array.

``X`` is anything :func:`devicepipe.to_torch` takes (a NumPy array, a DataFrame, a tensor, a
:class:`devicepipe.ecg.Beats`), shape ``(n_rows, n_columns)``. Rows are resampled to the
model's width when it needs one (the VAE takes a power of two: 140 columns become 128) and
scaled by a scaler fitted on the training rows (``scaling``). Results come back as the input
came: a tensor on the detector's device for a tensor, NumPy arrays otherwise.

The threshold is taken from the training rows' scores (for the reconstruction error, the split
that trained the model, not the rows held out for early stopping; a distance leaves its own
row out, so every row counts), by one of three rules: ``threshold=`` a number given;
``contamination=c``, the ``1 - c`` quantile of the training scores; ``contamination="auto"``,
a robust rule: ``exp(median(log s) + 3 * 1.4826 * MAD(log s))`` over the training scores
``s`` (the 99.87th percentile if the log scores were normal; errors are skewed, their logs
much less so), which does not assume a share of anomalies.

:meth:`BeatAnomalyDetector.save` writes one file of tensors and plain data (weights, scaler,
threshold, the sorted training scores, settings, versions, the input geometry);
:func:`load_model` reads it back with ``torch.load(weights_only=True)``, onto any device.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from devicepipe.device import resolve_device
from devicepipe.errors import DevicepipeError
from devicepipe.interop import to_torch
from devicepipe.io.write import write_torch
from devicepipe.learn import (
    DEFAULT_SCORER,
    DISTANCE_SCORERS,
    ENSEMBLE_NAME,
    PYRAMID_SCORERS,
    SCORERS,
    LearnSettings,
    train_models,
)
from devicepipe.models import LightVAE, LightVAEConfig, MLPAutoencoder, MLPAutoencoderConfig
from devicepipe.scale import MinMaxScaler, StandardScaler
from devicepipe.score import Scores, embed, reconstruction_error
from devicepipe.signal.resample import resample_rows
from devicepipe.threads import ThreadChoice, choose_threads, using_threads
from devicepipe.train import CHECKPOINT_NAME, split_indices

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "MODEL_NAME",
    "SCORERS",
    "BeatAnomalyDetector",
    "knn_and_local",
    "knn_distance",
    "local_neighbours",
    "local_residual",
    "neighbours_for",
    "row_pyramid",
    "auto_threshold",
    "load_model",
    "nearest_power_of_two",
]

#: File name of the model a run writes (what ``devicepipe score --model RUN_DIR`` reads).
MODEL_NAME = "model.pt"
#: What a model file says it is; files of another format are refused with one line.
MODEL_FORMAT = "devicepipe-model"
#: Bumped when the file changes in a way an older reader cannot follow. Format 2: the local
#: scorer's rule changed (see :data:`LOCAL_FROM`); a format-1 file of a local scorer is refused.
MODEL_FORMAT_VERSION = 2
#: The first model format whose ``scorer="local"`` is today's (format 1 had another rule and calibration).
LOCAL_FROM = 2

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

_MODELS = {"vae": (LightVAE, LightVAEConfig), "mlp": (MLPAutoencoder, MLPAutoencoderConfig)}
_SCALERS = {"standard": StandardScaler, "minmax": MinMaxScaler}


def nearest_power_of_two(n: int) -> int:
    """The power of two nearest to ``n`` on a log scale (at least 8): 140 -> 128, 256 -> 256, 200 -> 256."""
    if n < 1:
        raise DevicepipeError(f"nearest_power_of_two(): n must be positive, got {n}.")
    return max(8, 2 ** round(math.log2(n)))


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
    return knn_and_local(x, reference, 0, k, skip=skip, exclude=exclude, skip_equal=skip_equal, ridge=ridge)[1]


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


def row_pyramid(rows: torch.Tensor, floor: int = MULTISCALE_FLOOR) -> list[torch.Tensor]:
    """``rows`` ``(n, w)`` at their own resolution and averaged down by halves (each sample the
    mean of two, ``adaptive_avg_pool1d``) while at least ``floor`` samples remain: a list of
    ``(n, w)``, ``(n, w // 2)``, ... ``(n, >= floor)``."""
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


def _robust_log_scale(values: torch.Tensor) -> tuple[float, float]:
    """The median and 1.4826 x MAD of ``log(values)`` (the MAD floored so that a constant score divides)."""
    logs = values.double().clamp_min(torch.finfo(torch.float64).tiny).log()
    median = _median(logs)
    mad = _median((logs - median).abs()) * _MAD_TO_SD
    return float(median), max(float(mad), 1e-12)


def _robust_z(values: torch.Tensor, median: float, scale: float) -> torch.Tensor:
    logs = values.double().clamp_min(torch.finfo(torch.float64).tiny).log()
    return ((logs - median) / scale).to(values.dtype)


def _quantile(x: torch.Tensor, q: float) -> float:
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


def _table_rows(X: Any, caller: str) -> torch.Tensor:
    """Rows from anything tabular: a NumPy array (object arrays of numbers too), a pandas or
    Polars DataFrame (every column a feature), a list of lists, or what :func:`to_torch` takes."""
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # a DataFrame: its columns are the features
        try:
            X = X.to_numpy()
        except Exception as exc:  # noqa: BLE001 - a table that is not numbers
            raise DevicepipeError(f"{caller}: the DataFrame's columns must be numbers ({exc}).") from None
    if isinstance(X, (list, tuple)):
        X = np.asarray(X)
    if isinstance(X, np.ndarray) and X.dtype.kind == "c":
        raise DevicepipeError(f"{caller}: Complex data not supported; X must hold real numbers.")
    if isinstance(X, np.ndarray) and X.dtype.kind in "OUS":
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError):
            raise DevicepipeError(f"{caller}: X must hold numbers, got values of dtype {X.dtype}.") from None
    try:
        return to_torch(X)
    except DevicepipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything that is not an array of rows
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DevicepipeError(f"{caller}: X must be a 2-D array of rows, got {type(X).__name__} ({first}).") from None


def _host_kind(x: Any) -> bool:
    """Whether results for ``x`` go back as NumPy (anything but a tensor or a Beats of tensors)."""
    rows = getattr(x, "matrix", x)
    return not isinstance(rows, torch.Tensor)


@dataclass(frozen=True)
class _Geometry:
    """What rows a fitted detector takes: the input width, and the model width it is resampled to."""

    n_columns: int
    width: int


class BeatAnomalyDetector:
    """Unsupervised anomaly detector on rows (beats, windows): an autoencoder trained on normal rows.

    Parameters
    ----------
    model : ``"vae"`` (the convolutional VAE of the ECG pipeline) or ``"mlp"`` (the load
        series' MLP autoencoder).
    ensemble : members trained at once with ``torch.func.vmap``; the score is their mean.
    contamination : the share of training rows above the threshold (``0 < c <= 0.5``), or
        ``"auto"`` for the robust rule of :func:`auto_threshold`. Ignored when ``threshold``
        is given.
    threshold : a fixed threshold on the score.
    device : ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    width : samples per row the model takes; None: the VAE the power of two nearest the
        input's columns, the MLP the input's columns.
    latent, hidden : the code size; the MLP's hidden units.
    scaling : ``"standard"`` (one mean and deviation over every value of the training rows),
        ``"minmax"`` (to [0, 1] by the training minimum and maximum), ``"none"`` (rows used as
        given), ``"auto"``: standard for the VAE, minmax for the MLP (its output is a sigmoid).
    epochs : exactly this many epochs; None: until the validation loss stops improving
        (``patience`` epochs, ``min_improvement`` relative), at most ``max_epochs``.
    batch_size, lr, weight_decay, val_fraction, seed, bf16, threads : as
        :class:`devicepipe.learn.LearnSettings` has them.
    scorer : what a row's score is. ``"knn"``: the mean Euclidean distance from the (scaled,
        resampled) row to its ``neighbours`` nearest training rows (a training row's own score
        leaves itself out); ``"multiscale"``: that distance at the row's own resolution and
        averaged down by halves to :data:`MULTISCALE_FLOOR` samples (:func:`row_pyramid`), each
        as a robust z-score of its log against the training rows' own distances at that
        resolution (``(log d - median) / (1.4826 MAD)``), the largest of them; ``"local"`` (the
        default): as ``multiscale`` down to :data:`LOCAL_FLOOR` samples, with the row's local
        linear reconstruction error (:func:`local_residual`) in place of the distance, from its
        :func:`local_neighbours` nearest training rows past its ``neighbours - 1`` nearest (a
        group of up to ``neighbours`` similar anomalous training rows cannot rebuild each
        other); ``"reconstruction"``: the
        mean squared reconstruction error (averaged over the members); ``"combined"``: the mean
        of the knn and reconstruction robust z-scores. On the one-class tasks of
        ``benchmarks/one_class.py`` (BENCHMARKS.md), ``local`` reaches the best simple baseline
        (less 0.01) on every task, and the others do not.
    neighbours : k of the nearest-neighbour scores (``local``: rows are rebuilt past their
        ``k - 1`` nearest), or ``"auto"``: :func:`neighbours_for` the reference rows and the share
        ``contamination`` (:data:`KNN_SHARE` when it is not a share).
    reference_rows : the most training rows kept for the nearest-neighbour scores (every row
        given to ``fit``, validation rows included, or a seeded sample of that many); they are
        saved with the model.
    """

    def __init__(
        self,
        model: str = "vae",
        *,
        ensemble: int = 1,
        contamination: float | str = 0.01,
        threshold: float | None = None,
        device: str = "auto",
        width: int | None = None,
        latent: int = 2,
        hidden: int = 32,
        scaling: str = "auto",
        epochs: int | None = None,
        max_epochs: int = 200,
        patience: int = 20,
        min_improvement: float = 1e-3,
        batch_size: int = 256,
        lr: float = 3e-3,
        weight_decay: float = 0.0,
        val_fraction: float = 0.1,
        seed: int = 0,
        bf16: bool = False,
        threads: int | None = None,
        scorer: str = DEFAULT_SCORER,
        neighbours: int | str = "auto",
        reference_rows: int = 20_000,
    ) -> None:
        self.model = model
        self.ensemble = ensemble
        self.contamination = contamination
        self.threshold = threshold
        self.device = device
        self.width = width
        self.latent = latent
        self.hidden = hidden
        self.scaling = scaling
        self.epochs = epochs
        self.max_epochs = max_epochs
        self.patience = patience
        self.min_improvement = min_improvement
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.val_fraction = val_fraction
        self.seed = seed
        self.bf16 = bf16
        self.threads = threads
        self.scorer = scorer
        self.neighbours = neighbours
        self.reference_rows = reference_rows

    # ------------------------------------------------------------------ scikit-learn's parameter protocol

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters by name (``deep`` is accepted for scikit-learn; nothing nests)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> BeatAnomalyDetector:
        """Set constructor parameters by name; an unknown name is an error."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise DevicepipeError(
                    f"BeatAnomalyDetector has no parameter {name!r}; it has {', '.join(sorted(valid))}."
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = type(self)()
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if v != getattr(defaults, k)]
        return f"BeatAnomalyDetector({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:  # used by scikit-learn only, which is imported then
        from sklearn.utils import Tags, TargetTags  # noqa: PLC0415

        tags = Tags(estimator_type="outlier_detector", target_tags=TargetTags(required=False))
        tags.non_deterministic = self.device != "cpu"
        return tags

    # ------------------------------------------------------------------ settings

    def _settings(self) -> LearnSettings:
        if self.model not in _MODELS:
            raise DevicepipeError(f"BeatAnomalyDetector: model={self.model!r} is not one of {sorted(_MODELS)}.")
        if self.scorer not in SCORERS:
            raise DevicepipeError(f"BeatAnomalyDetector: scorer={self.scorer!r} is not one of {list(SCORERS)}.")
        auto = self.neighbours == "auto"
        whole = isinstance(self.neighbours, int) and not isinstance(self.neighbours, bool)
        if not (auto or (whole and self.neighbours >= 1)) or self.reference_rows < 2:
            raise DevicepipeError(
                f"BeatAnomalyDetector: neighbours must be 'auto' or at least 1 (got {self.neighbours!r}), "
                "and reference_rows at least 2."
            )
        if self.scaling not in (*_SCALERS, "none", "auto"):
            raise DevicepipeError(
                f"BeatAnomalyDetector: scaling={self.scaling!r} is not 'standard', 'minmax', 'none' or 'auto'."
            )
        if self.threshold is not None and not (
            isinstance(self.threshold, (int, float)) and math.isfinite(self.threshold)
        ):
            raise DevicepipeError(
                f"BeatAnomalyDetector: threshold must be a finite number or None, got {self.threshold!r}."
            )
        contamination = self.contamination
        if contamination != "auto" and not (
            isinstance(contamination, (int, float)) and not isinstance(contamination, bool) and 0 < contamination <= 0.5
        ):
            raise DevicepipeError(
                f"BeatAnomalyDetector: contamination must be within (0, 0.5] or 'auto', got {contamination!r}."
            )
        percentile = 99.0 if contamination == "auto" else 100.0 * (1.0 - float(contamination))
        return LearnSettings(
            epochs=self.epochs,
            max_epochs=self.max_epochs,
            patience=self.patience,
            min_improvement=self.min_improvement,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=self.weight_decay,
            val_fraction=self.val_fraction,
            seed=self.seed,
            latent=self.latent,
            ensemble=self.ensemble,
            percentile=max(50.0, min(percentile, 99.999)),
            bf16=self.bf16,
            threads=self.threads,
        )

    @property
    def _scaling(self) -> str:
        if self.scaling != "auto":
            return self.scaling
        return "standard" if self.model == "vae" else "minmax"

    def _make_model(self, width: int, device: torch.device) -> Callable[[int], nn.Module]:
        def make(seed: int) -> nn.Module:
            torch.manual_seed(seed)
            if self.model == "vae":
                return LightVAE(LightVAEConfig(width=width, latent=self.latent)).to(device)
            config = MLPAutoencoderConfig(
                input=width, hidden=self.hidden, latent=self.latent, sigmoid_output=self._scaling == "minmax"
            )
            return MLPAutoencoder(config).to(device)

        return make

    # ------------------------------------------------------------------ rows in

    def _rows(self, X: Any, device: torch.device, caller: str) -> torch.Tensor:
        """``X`` as a float tensor ``(n, columns)`` on ``device``; one line for what cannot be scored."""
        rows = getattr(X, "matrix", X)
        if not isinstance(rows, torch.Tensor):
            rows = _table_rows(rows, caller)
        if rows.is_complex():
            raise DevicepipeError(f"{caller}: Complex data not supported; X must hold real numbers.")
        if rows.ndim != 2:
            raise DevicepipeError(
                f"{caller}: X must have shape (n_rows, n_columns), got {tuple(rows.shape)}. Reshape your data: "
                "X.reshape(1, -1) for one row, X.reshape(-1, 1) for one column."
            )
        if rows.shape[1] == 0 or rows.shape[0] == 0:
            raise DevicepipeError(
                f"{caller}: X has {rows.shape[1]} feature(s) (shape={tuple(rows.shape)}) while a minimum of 1 is "
                "required, and at least one row."
            )
        if rows.dtype == torch.bool:
            raise DevicepipeError(f"{caller}: X must hold numbers, got booleans.")
        rows = rows.detach().to(device).float()
        if not bool(torch.isfinite(rows).all()):
            bad = ~torch.isfinite(rows)
            first = int(torch.nonzero(bad.any(1))[0])
            raise DevicepipeError(
                f"{caller}: X holds {int(bad.sum()):,} NaN or infinite value(s), the first in row {first:,}; "
                "drop or interpolate them first."
            )
        return rows

    def _prepare(self, X: Any, caller: str) -> torch.Tensor:
        """Rows of ``X`` on the fitted device, checked against the fitted width, resampled and scaled."""
        self._check_fitted(caller)
        rows = self._rows(X, self.device_, caller)
        if rows.shape[1] != self.n_features_in_:
            raise DevicepipeError(
                f"{caller}: X has {rows.shape[1]} features, but BeatAnomalyDetector is expecting "
                f"{self.n_features_in_} features as input (the columns it was fitted on); resample the rows first: "
                f"devicepipe.resample_rows(X, {self.n_features_in_})."
            )
        rows = resample_rows(rows, self.width_)
        if self.scaler_ is not None:
            rows = self.scaler_.transform(rows.reshape(-1)).reshape(rows.shape)
        return rows.float()

    def _check_fitted(self, caller: str) -> None:
        if not hasattr(self, "models_"):
            raise DevicepipeError(f"{caller}: this detector is not fitted yet; call fit(X) first, or load_model(path).")

    # ------------------------------------------------------------------ fit

    def fit(
        self,
        X: Any,
        y: Any = None,
        *,
        checkpoint_dir: str | Path | None = None,
        resume: bool = False,
        callback: Callable[[int, float, float], None] | None = None,
        tensorboard: str | Path | None = None,
        extra_state: dict[str, Any] | None = None,
        on_start: Callable[[ThreadChoice], None] | None = None,
        stream: bool = False,
    ) -> BeatAnomalyDetector:
        """Train on the rows of ``X`` (all taken as normal; ``y`` is ignored) and set the threshold.

        ``checkpoint_dir``: write ``checkpoint.pt`` there after every epoch (one model) or
        ``ensemble.pt`` at the end; ``resume`` continues its checkpoint exactly.
        ``callback(epoch, train loss, val loss)`` after every epoch; ``on_start(threads)`` once
        the thread count is chosen, before the first epoch; ``extra_state`` is stored in the
        checkpoint beside the weights. ``stream``: keep the rows in host memory and copy one
        batch at a time to the device (rows that do not fit on it; the result is the same). Sets ``models_``,
        ``scaler_``, ``decision_scores_`` ``(n,)``, ``threshold_``, ``labels_``, ``histories_``,
        ``threads_``, ``details_`` (embeddings, scores, spread and flags of the training rows,
        on the device) and ``train_scores_`` (the training split's sorted scores).
        """
        settings = self._settings()
        if resume and checkpoint_dir is None:
            raise DevicepipeError("fit(): resume=True needs checkpoint_dir=, the directory of the checkpoint.")
        settings = LearnSettings(
            **{**settings.to_dict(), "resume": resume, "tensorboard": tensorboard and str(tensorboard)}
        )
        device = resolve_device(self.device)
        rows = self._rows(X, torch.device("cpu") if stream else device, "fit()")
        n_columns = rows.shape[1]
        width = self.width or (nearest_power_of_two(n_columns) if self.model == "vae" else n_columns)
        if self.model == "vae":
            LightVAEConfig(width=width, latent=self.latent)  # a clear error for a width it cannot take
        rows = resample_rows(rows, width)
        scaler = None
        if self._scaling != "none":
            scaler = _SCALERS[self._scaling]().fit(rows.reshape(-1))
            rows = scaler.transform(rows.reshape(-1)).reshape(rows.shape)
        data = rows.float()
        if data.shape[0] < MIN_ROWS:
            raise DevicepipeError(
                f"fit(): {data.shape[0]} sample(s) (rows) are too few to learn from; give at least {MIN_ROWS}."
            )
        make = self._make_model(width, device)
        probe = data[: settings.batch_size].to(device)
        threads = choose_threads(make(settings.seed), probe, threads=settings.threads, copies=settings.ensemble)
        extra = {"scaler": None if scaler is None else scaler.state_dict(), **(extra_state or {})}
        if on_start is not None:
            on_start(threads)
        out = None if checkpoint_dir is None else Path(checkpoint_dir)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        with using_threads(threads.threads):
            models, histories = train_models(make, data, settings, out, extra, callback, stream=stream)
            details = _details(models, data)
        train_rows, held_out = split_indices(data.shape[0], settings.val_fraction, settings.seed, device)
        self.reference_, self.calibration_, self.neighbours_ = None, {}, None
        every = torch.arange(data.shape[0], device=device)  # validation rows are normal rows too
        if self.scorer != "reconstruction":
            self.reference_, positions = self._reference(data, every)
            self.neighbours_ = self._k(self.reference_.shape[0])
            with using_threads(threads.threads):
                scores = self._nn_scores(details.scores, data, exclude=positions, train_rows=train_rows)
            details = _Details(details.embeddings, scores, details.spread)
        # a row's distance leaves itself out, so every row's is a fair training score; the
        # reconstruction error is fair only on the rows that did not steer training
        train_rows = every if self.scorer in DISTANCE_SCORERS else train_rows
        train_scores = details.scores[train_rows]
        self.device_ = device
        self.models_ = models
        self.scaler_ = scaler
        self.n_features_in_ = n_columns
        self.width_ = width
        self.histories_ = histories
        self.threads_: ThreadChoice = threads
        self.train_scores_ = train_scores.sort().values
        self.threshold_ = self._threshold_of(train_scores)
        self.details_ = Scores(
            details.embeddings, details.scores, details.spread, self.threshold_, details.scores > self.threshold_
        )
        self.decision_scores_ = details.scores.detach().cpu().numpy()
        self.labels_ = (self.decision_scores_ > self.threshold_).astype(np.int64)
        self.geometry_: dict[str, Any] = {}
        self.fit_rows_ = {"rows": int(data.shape[0]), "held_out": int(held_out.numel())}
        return self

    def _k(self, n_reference: int) -> int:
        """The nearest-neighbour scorer's k for ``n_reference`` rows."""
        return int(self.neighbours) if self.neighbours != "auto" else neighbours_for(n_reference, self._share)

    @property
    def _share(self) -> float:
        """The share of anomalous training rows ``neighbours="auto"`` allows for."""
        fixed = self.threshold is not None or self.contamination == "auto"
        return KNN_SHARE if fixed else float(self.contamination)

    def _reference(self, data: torch.Tensor, train_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows ``train_rows`` of ``data`` kept for nearest-neighbour scores (at most
        ``reference_rows``, a seeded sample), on the device, and each data row's position among
        them (-1: not kept)."""
        kept = train_rows
        if kept.numel() > self.reference_rows:
            gen = torch.Generator().manual_seed(int(self.seed) + 7)  # on the CPU: the same rows on every device
            pick = torch.randperm(kept.numel(), generator=gen)[: self.reference_rows].to(train_rows.device)
            kept = kept[pick.sort().values]
        positions = torch.full((data.shape[0],), -1, dtype=torch.int64, device=train_rows.device)
        positions[kept] = torch.arange(kept.numel(), device=train_rows.device)
        reference = data[kept.to(data.device)].to(train_rows.device)
        return reference, positions

    def _nn_scores(
        self,
        recon: torch.Tensor,
        data: torch.Tensor,
        *,
        exclude: torch.Tensor | None = None,
        train_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The scores ``(n,)`` of the scorers that use the nearest training rows, for the scaled
        rows ``data`` whose reconstruction errors are ``recon``. In ``fit`` (``exclude``: each row's
        own reference row), the calibrations are fitted first: on every row for ``multiscale``,
        on ``train_rows`` for ``combined``."""
        if self.scorer in PYRAMID_SCORERS:
            z = []
            levels = zip(row_pyramid(data, self._floor), row_pyramid(self.reference_, self._floor), strict=True)
            for rows, reference in levels:
                for name, d in self._distances(rows, reference, exclude).items():
                    if exclude is not None:
                        self.calibration_[name] = _robust_log_scale(d)
                    z.append(_robust_z(d, *self.calibration_[name]))
            return torch.stack(z).amax(0)
        neighbours = knn_distance(data, self.reference_, self.neighbours_, exclude=exclude, skip_equal=exclude is None)
        return self._combined(recon, neighbours, train_rows if exclude is not None else None)

    def _distances(
        self, rows: torch.Tensor, reference: torch.Tensor, exclude: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """The distances ``(n,)`` of the pyramid scorers at one resolution, by calibration name
        (``exclude``: in ``fit``, each row's own reference row)."""
        width = reference.shape[1]
        if self.scorer == "local":
            local = local_residual(
                rows,
                reference,
                local_neighbours(self.reference_.shape[0]),
                skip=self.neighbours_ - 1,
                exclude=exclude,
                skip_equal=exclude is None,
            )
            return {f"local{width}": local}
        return {
            f"knn{width}": knn_distance(rows, reference, self.neighbours_, exclude=exclude, skip_equal=exclude is None)
        }

    @property
    def _floor(self) -> int:
        """The coarsest resolution of the pyramid scorer, in samples per row."""
        return LOCAL_FLOOR if self.scorer == "local" else MULTISCALE_FLOOR

    def _combined(
        self, recon: torch.Tensor, neighbours: torch.Tensor, train_rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The scorer's score from the reconstruction errors and nearest-neighbour distances ``(n,)``;
        with ``train_rows``, the calibration is fitted on those rows first."""
        if self.scorer == "knn":
            return neighbours
        if train_rows is not None:
            self.calibration_ = {
                name: _robust_log_scale(values[train_rows]) for name, values in (("recon", recon), ("knn", neighbours))
            }
        z = [_robust_z(values, *self.calibration_[name]) for name, values in (("recon", recon), ("knn", neighbours))]
        return (z[0] + z[1]) / 2

    def _threshold_of(self, train_scores: torch.Tensor) -> float:
        """The threshold by the detector's rule, from the training split's scores ``(n,)``."""
        if self.threshold is not None:
            return float(self.threshold)
        if self.contamination == "auto":
            return auto_threshold(train_scores, log=self.scorer not in ("combined", *PYRAMID_SCORERS))
        return _quantile(train_scores.double(), 1.0 - float(self.contamination))

    @property
    def threshold_rule(self) -> str:
        """The threshold's rule in words (for summaries and reports)."""
        if self.threshold is not None:
            return f"fixed at {float(self.threshold):g}"
        if self.contamination == "auto":
            return (
                f"robust: exp(median + {AUTO_K:g} x 1.4826 x MAD) of the log scores of the training rows "
                "(the 99.87th percentile if they were normal)"
            )
        q = 100.0 * (1.0 - float(self.contamination))
        return f"the {q:g}th percentile of the training rows' scores (contamination {float(self.contamination):g})"

    # ------------------------------------------------------------------ scoring

    def score_details(self, X: Any) -> Scores:
        """Embeddings ``(n, latent)``, scores ``(n,)``, ensemble spread ``(n,)`` and flags of the rows of ``X``,
        as tensors on the detector's device, with ``threshold_``."""
        data = self._prepare(X, "score_details()")
        with using_threads(self.threads_.threads):
            d = _details(self.models_, data)
            scores = d.scores if self.scorer == "reconstruction" else self._nn_scores(d.scores, data)
        return Scores(d.embeddings, scores, d.spread, self.threshold_, scores > self.threshold_)

    def score_meaning(self, rows: str = "a row", units: str = "scaled values") -> str:
        """What a score of this fitted detector is, in words, for ``rows`` (e.g. "a beat
        standardised by its recording's beats") whose values are in ``units``."""
        self._check_fitted("score_meaning()")
        recon = f"the mean squared reconstruction error of {rows} (units: squared {units})"
        if self.scorer == "reconstruction":
            return f"a score is {recon}"
        m = self.reference_.shape[0]
        if self.scorer in PYRAMID_SCORERS:
            widths = ", ".join(str(level.shape[1]) for level in row_pyramid(self.reference_[:1], self._floor))
            skip = self.neighbours_ - 1
            past = f" past the {skip} nearest" if skip else ""
            distance = (
                f"the distance from it to the nearest weighted mean of its {local_neighbours(m)} nearest{past} of "
                f"{m:,} training rows at that resolution (the weights solved as locally linear embedding solves them)"
                if self.scorer == "local"
                else f"its mean Euclidean distance to its {self.neighbours_} nearest of {m:,} training rows at that "
                "resolution"
            )
            return (
                f"a score is the largest, over {rows} at {widths} samples (averaged down by halves), of {distance}, "
                "each as a robust z-score against the training rows' own values there (units: robust standard "
                "deviations of the log distance)"
            )
        knn = (
            f"the mean Euclidean distance from {rows} to its {self.neighbours_} nearest of {m:,} training rows "
            f"(units: {units})"
        )
        if self.scorer == "knn":
            return f"a score is {knn}"
        return f"a score is the mean of two robust z-scores against the training rows: of {recon}, and of {knn}"

    def scorer_summary(self, reason: str | None = None) -> dict[str, Any]:
        """Which scorer scored the rows, with what, and why (``reason``: the caller's, first): for a
        run's ``summary.json``."""
        self._check_fitted("scorer_summary()")
        rows = self.fit_rows_["rows"]
        held = self.fit_rows_["held_out"]
        out: dict[str, Any] = {"scorer": self.scorer, "training_rows": rows, "held_out_for_stopping": held}
        why = [] if reason is None else [reason]
        if self.scorer != "reconstruction":
            out |= {"neighbours": self.neighbours_, "reference_rows": int(self.reference_.shape[0])}
            if self.scorer == "local":
                out["local_neighbours"] = local_neighbours(self.reference_.shape[0])
                out["local_past_nearest"] = self.neighbours_ - 1
            if self.neighbours == "auto":
                m = self.reference_.shape[0]
                why.append(
                    f"k = floor({self._share:g} x {m:,} reference rows) + 1 = {self.neighbours_}: "
                    "a group of similar anomalous training rows up to that share cannot vouch for itself"
                )
        if self.scorer in DISTANCE_SCORERS:
            why.append(
                "distances to the training rows ranked anomalies better than the reconstruction error on every "
                "one-class task measured (benchmarks/one_class.py), and need no model to have learned normal"
            )
        if self.scorer in PYRAMID_SCORERS:
            why.append(
                "at several resolutions: some anomalies differ in fine detail, others in a coarse shape that "
                "noise hides at full resolution; each resolution is calibrated on the training rows' own distances"
            )
        if self.scorer == "local":
            why.append(
                "by the local linear reconstruction error: a row off the shapes the normal rows vary along scores "
                "high even when some normal rows are near it, and a row between normal rows scores low even where "
                "none is near it; it is rebuilt from the rows past its k - 1 nearest, so that a few copies of one "
                "unusual row cannot rebuild each other"
            )
        if rows < SMALL_SET:
            tail = (
                "the scores use every row (each leaves itself out)"
                if self.scorer in DISTANCE_SCORERS
                else "reconstruction errors of a model trained on so few rows are a weak score; scorer='knn' is the "
                "better choice here"
            )
            why.append(
                f"{rows} training rows is a small set (under {SMALL_SET}): {held} of them were held out to stop "
                f"training, and {tail}"
            )
        out["why"] = why
        return out

    def _scores(self, X: Any, caller: str) -> torch.Tensor:
        data = self._prepare(X, caller)
        with using_threads(self.threads_.threads):
            recon = torch.stack([reconstruction_error(m, data) for m in self.models_]).mean(0)
            return recon if self.scorer == "reconstruction" else self._nn_scores(recon, data)

    def _out(self, X: Any, values: torch.Tensor) -> Any:
        return values.detach().cpu().numpy() if _host_kind(X) else values

    def decision_function(self, X: Any) -> Any:
        """Anomaly score of each row of ``X`` by the detector's ``scorer`` (see :meth:`score_meaning`):
        shape ``(n,)``, higher is more anomalous."""
        return self._out(X, self._scores(X, "decision_function()"))

    def score_samples(self, X: Any) -> Any:
        """The negated anomaly score, ``(n,)``: higher is more normal (scikit-learn's sign)."""
        return self._out(X, -self._scores(X, "score_samples()"))

    def predict(self, X: Any) -> Any:
        """1 for rows scoring above ``threshold_`` (anomalous), 0 for the others: ``(n,)`` int64."""
        return self._out(X, (self._scores(X, "predict()") > self.threshold_).long())

    def fit_predict(self, X: Any, y: Any = None) -> Any:
        """``fit(X)`` then the labels of its rows (``labels_``, as ``X`` came)."""
        self.fit(X)
        return self._out(X, self.details_.flags.long())

    def tail_probability(self, X: Any) -> Any:
        """For each row of ``X``, ``(1 + #training scores >= its score) / (1 + #training scores)``:
        shape ``(n,)``, in ``(0, 1]``; small is unusual next to the training rows."""
        return self._out(X, self.tail_of(self._scores(X, "tail_probability()")))

    def tail_of(self, scores: torch.Tensor) -> torch.Tensor:
        """:meth:`tail_probability` of scores already computed (a tensor ``(n,)``), float64."""
        ref = self.train_scores_.to(scores.device, scores.dtype)
        below = torch.searchsorted(ref, scores, right=False)  # training scores strictly below
        return (1.0 + (ref.numel() - below)).double() / (1.0 + ref.numel())

    def to(self, device: str | torch.device) -> BeatAnomalyDetector:
        """Move the fitted detector to ``device`` (in place) and return it."""
        self._check_fitted("to()")
        dev = resolve_device(device)
        self.models_ = [m.to(dev) for m in self.models_]
        if self.scaler_ is not None:
            self.scaler_.to(dev)
        self.train_scores_ = self.train_scores_.to(dev)
        if self.reference_ is not None:
            self.reference_ = self.reference_.to(dev)
        self.device_ = dev
        return self

    # ------------------------------------------------------------------ the file

    def save(self, path: str | Path, *, geometry: dict[str, Any] | None = None) -> Path:
        """Write the fitted detector to ``path`` (atomically): tensors and plain data only.

        ``geometry`` says what rows the model takes when they are cut from recordings (a
        pipeline's segmentation, window and scaling); it is kept as ``geometry_``.
        """
        import devicepipe  # noqa: PLC0415 - the version, read at the time of writing

        self._check_fitted("save()")
        if geometry is not None:
            self.geometry_ = dict(geometry)
        first = self.models_[0]
        return write_torch(
            {
                "format": MODEL_FORMAT,
                "format_version": MODEL_FORMAT_VERSION,
                "devicepipe": devicepipe.__version__,
                "torch": str(torch.__version__),
                "estimator": type(self).__name__,
                "params": self.get_params(),
                "model_kind": type(first).__name__,
                "config": first.config_dict(),
                "members": [{k: v.detach().cpu() for k, v in m.state_dict().items()} for m in self.models_],
                "scaler": None if self.scaler_ is None else self.scaler_.state_dict(),
                "n_features_in": self.n_features_in_,
                "width": self.width_,
                "threshold": self.threshold_,
                "threshold_rule": self.threshold_rule,
                "train_scores": self.train_scores_.detach().cpu(),
                "reference": None if self.reference_ is None else self.reference_.detach().cpu(),
                "neighbours": self.neighbours_,
                "fit_rows": self.fit_rows_,
                "calibration": self.calibration_,
                "histories": self.histories_,
                "trained_on": str(self.device_),
                "geometry": self.geometry_,
            },
            path,
        )


@dataclass(frozen=True)
class _Details:
    embeddings: torch.Tensor
    scores: torch.Tensor
    spread: torch.Tensor


def _details(models: list[nn.Module], data: torch.Tensor) -> _Details:
    errors = torch.stack([reconstruction_error(m, data) for m in models])  # (members, n)
    mean = errors.mean(0)
    spread = errors.std(0, unbiased=False) if len(models) > 1 else torch.zeros_like(mean)
    return _Details(embed(models[0], data), mean, spread)


def _model_file(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        candidate = p / MODEL_NAME
        if candidate.exists():
            return candidate
        others = [n for n in (CHECKPOINT_NAME, ENSEMBLE_NAME) if (p / n).exists()]
        why = (
            f"it holds {others[0]}, written by an older devicepipe that saved no {MODEL_NAME}; rerun that run"
            if others
            else "is it the directory of an 'ecg' or 'train' run?"
        )
        raise DevicepipeError(f"no model in {p}: {MODEL_NAME} not found ({why}).")
    if not p.exists():
        raise DevicepipeError(f"model {p} does not exist; give a run directory or its {MODEL_NAME}.")
    return p


def load_model(path: str | Path, device: str | torch.device = "auto") -> BeatAnomalyDetector:
    """A fitted :class:`BeatAnomalyDetector` from a model file or a run directory holding ``model.pt``.

    Read with ``weights_only=True`` (a file from elsewhere cannot run code) and placed on
    ``device`` (a model trained on a GPU scores on a CPU and the reverse). The result has
    ``models_``, ``scaler_``, ``threshold_``, ``train_scores_``, ``get_params()`` (the
    settings it was trained with), ``geometry_`` (what rows it takes) and ``path_`` (``path``
    as given). A training
    checkpoint, a foreign or damaged file, or one of a newer format is refused with one line.
    """
    file = _model_file(path)
    dev = resolve_device(device)
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        why = next((ln for ln in lines if "Unsupported global" in ln), lines[0])
        raise DevicepipeError(
            f"cannot read model {file}: it is damaged or truncated, or holds more than tensors and plain data "
            f"({why[:200]})."
        ) from None
    if not isinstance(state, dict) or state.get("format") != MODEL_FORMAT:
        if isinstance(state, dict) and ("optimizer" in state or "members" in state and "format" not in state):
            raise DevicepipeError(
                f"{file} is a training checkpoint, not a model file; give its run directory's {MODEL_NAME}."
            )
        raise DevicepipeError(f"{file} is not a devicepipe model file (no '{MODEL_FORMAT}' marker).")
    version = state.get("format_version")
    if not isinstance(version, int) or version > MODEL_FORMAT_VERSION:
        raise DevicepipeError(
            f"{file} is model format {version} (written by devicepipe {state.get('devicepipe')}); this devicepipe "
            f"reads format {MODEL_FORMAT_VERSION} and older: upgrade devicepipe to load it."
        )
    if version < LOCAL_FROM and state.get("params", {}).get("scorer") == "local":
        raise DevicepipeError(
            f"{file} is a model of the local scorer written by devicepipe {state.get('devicepipe')}, whose rule "
            "has changed since: train it again (devicepipe train, or the run that wrote it)."
        )
    kinds = {"LightVAE": "vae", "MLPAutoencoder": "mlp"}
    kind = kinds.get(state.get("model_kind"))
    if kind is None or state.get("estimator") != BeatAnomalyDetector.__name__:
        raise DevicepipeError(f"{file} holds a {state.get('model_kind')} model, which this devicepipe cannot score.")
    params = dict(state["params"])
    params["device"] = str(device) if not isinstance(device, torch.device) else str(device)
    known = set(BeatAnomalyDetector._param_names())
    det = BeatAnomalyDetector(**{k: v for k, v in params.items() if k in known})
    model_cls, config_cls = _MODELS[kind]
    try:
        models = []
        for weights in state["members"]:
            m = model_cls(config_cls(**state["config"]))
            m.load_state_dict(weights)
            models.append(m.to(dev).eval())
    except (RuntimeError, TypeError, KeyError) as exc:
        raise DevicepipeError(f"{file}: its weights do not fit its model ({str(exc).splitlines()[0][:160]}).") from None
    scaler = None
    if state.get("scaler") is not None:
        scaler = _SCALERS["standard" if state["scaler"]["kind"] == "StandardScaler" else "minmax"]()
        scaler.load_state_dict(state["scaler"]).to(dev)
    det.device_ = dev
    det.models_ = models
    det.scaler_ = scaler
    det.n_features_in_ = int(state["n_features_in"])
    det.width_ = int(state["width"])
    det.histories_ = state.get("histories", [])
    probe = torch.zeros(det.batch_size, det.width_, device=dev)
    det.threads_ = choose_threads(models[0], probe, threads=det.threads, copies=len(models))
    det.train_scores_ = state["train_scores"].to(dev)
    det.reference_ = None if state.get("reference") is None else state["reference"].to(dev)
    det.calibration_ = {k: tuple(v) for k, v in (state.get("calibration") or {}).items()}
    neighbours = state.get("neighbours", params.get("neighbours"))
    if det.reference_ is None:
        det.neighbours_ = None
    else:
        det.neighbours_ = det._k(det.reference_.shape[0]) if neighbours in (None, "auto") else int(neighbours)
    rows = int(det.train_scores_.numel())
    det.fit_rows_ = dict(state.get("fit_rows") or {"rows": rows, "held_out": 0})
    if det.scorer != "reconstruction" and det.reference_ is None:
        raise DevicepipeError(f"{file}: its scorer {det.scorer!r} needs the training rows, which the file lacks.")
    det.threshold_ = float(state["threshold"])
    det.geometry_ = dict(state.get("geometry") or {})
    det.versions_ = {"devicepipe": state.get("devicepipe"), "torch": state.get("torch")}
    det.trained_on_ = state.get("trained_on")
    det.path_ = str(path)  # where it was read from, as named: a run directory or the file
    return det
