"""The estimator (:class:`BeatAnomalyDetector`): fit, score, predict, with scikit-learn's and PyOD's
conventions (see :mod:`devicepipe.anomaly`)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from devicepipe.anomaly.describe import score_meaning, scorer_summary, threshold_rule
from devicepipe.anomaly.model_format import SCALERS, write_model
from devicepipe.anomaly.rows import Details, host_kind, reconstruction_details, table_rows
from devicepipe.artifacts.names import CHECKPOINT_NAME
from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import ThreadChoice, choose_threads, using_threads
from devicepipe.learning.learn import LearnSettings, train_models
from devicepipe.learning.score import Scores, reconstruction_error
from devicepipe.learning.train import load_checkpoint, split_indices
from devicepipe.models.kinds import MODEL_KINDS, Sizes
from devicepipe.scorers import DEFAULT_SCORER, SCORER_KINDS, Fitting, Reference, Scorer
from devicepipe.scorers.neighbours import (
    KNN_SHARE,
    MIN_EFFECT,
    MIN_ROWS,
    auto_threshold,
    neighbours_for,
    outlier_fence,
    quantile,
)
from devicepipe.signal.resample import resample_rows

#: The most rows a model trains on where the scores do not use it (see ``max_model_rows``):
#: every beat of a 30-minute recording at up to 83 bpm, so that its maps are drawn as before.
MAX_MODEL_ROWS = 2_500
#: The VAE's KL weight where the scores use its reconstruction error: the seed notebook's.
KL_WEIGHT_FOR_SCORES = 0.1
#: The VAE's KL weight where it only maps and generates the beats: codes that carry their shapes.
KL_WEIGHT_FOR_MAPS = 0.01


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
    kl_weight : the VAE's weight of its KL term, or ``"auto"``: :data:`KL_WEIGHT_FOR_SCORES`
        (the notebook's 0.1) where the scorer uses the model's reconstruction error, else
        :data:`KL_WEIGHT_FOR_MAPS`. At 0.1 the codes of a recording's standardised beats
        collapse onto the prior's mean (the model then rebuilds every beat as the typical one,
        and its error is a distance from it, which flags rare shapes well); at 0.01 they spread
        and carry each beat's shape, so the latent map and the generated beats show what the
        model learned (``benchmarks/model_effect.py``).
    scaling : ``"standard"`` (one mean and deviation over every value of the training rows),
        ``"minmax"`` (to [0, 1] by the training minimum and maximum), ``"none"`` (rows used as
        given), ``"auto"``: standard for the VAE, minmax for the MLP (its output is a sigmoid).
    epochs : exactly this many epochs; None: until the validation loss stops improving
        (``patience`` epochs, ``min_improvement`` relative), at most ``max_epochs``.
    batch_size, lr, weight_decay, val_fraction, seed, bf16, threads : as
        :class:`devicepipe.learning.learn.LearnSettings` has them.
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
    max_model_rows : where the scores do not use the model, the most rows it trains on: an evenly
        spaced sample of that many (None: every row). Its codes and figures need the shapes, not
        every beat: a day's 100,000 beats would take it forty times as long for the same maps.
        The scores, thresholds and flags still come from every row, and every row is mapped.
    min_effect : ``local`` and ``multiscale``: a row is flagged only where, at the resolution where it
        stands out most, what the training rows rebuild of it misses by at least this share of a
        typical row's shape (:data:`MIN_EFFECT`; 0: the threshold alone). A score says how rare a
        difference is, this how large: on a quiet recording, ordinary variation is rare but small.
    reference_rows : the most training rows kept for the nearest-neighbour scores (every row
        given to ``fit``, validation rows included, or a seeded sample of that many); they are
        saved with the model.
    """

    # fitted state that is not plain to infer (set by ``fit``, or by ``load_model``)
    reference_: torch.Tensor | None  # the training rows the neighbour scorers compare with
    calibration_: dict[str, Any]  # each resolution's scale of the neighbour scores
    neighbours_: int | None
    versions_: dict[str, Any]  # a loaded model's devicepipe and torch versions
    trained_on_: str | None  # the device a loaded model was trained on
    path_: str  # where a loaded model was read from

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
        kl_weight: float | str = "auto",
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
        max_model_rows: int | None = MAX_MODEL_ROWS,
        min_effect: float = MIN_EFFECT,
    ) -> None:
        self.model = model
        self.ensemble = ensemble
        self.contamination = contamination
        self.threshold = threshold
        self.device = device
        self.width = width
        self.latent = latent
        self.hidden = hidden
        self.kl_weight = kl_weight
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
        self.max_model_rows = max_model_rows
        self.min_effect = min_effect

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

    @classmethod
    def from_settings(
        cls,
        settings: LearnSettings,
        *,
        device: str | torch.device = "auto",
        scorer: str = DEFAULT_SCORER,
        **model: Any,
    ) -> BeatAnomalyDetector:
        """The estimator of a learning run's settings (the command line's, a pipeline's): each
        setting becomes the parameter of the same meaning (``percentile`` the ``contamination``
        above it), ``scorer`` the scorer where the settings name none, ``model`` the model's own
        choices (``model``, ``width``, ``scaling``, ``hidden``, ...). :meth:`learn_settings` gives
        the settings back, so the mapping both ways is written here only."""
        return cls(
            scorer=settings.scorer or scorer,
            neighbours="auto" if settings.neighbours is None else settings.neighbours,
            contamination=(100.0 - settings.percentile) / 100.0,
            min_effect=settings.min_effect,
            device=str(device),
            epochs=settings.epochs,
            max_epochs=settings.max_epochs,
            patience=settings.patience,
            min_improvement=settings.min_improvement,
            batch_size=settings.batch_size,
            lr=settings.lr,
            weight_decay=settings.weight_decay,
            val_fraction=settings.val_fraction,
            seed=settings.seed,
            latent=settings.latent,
            ensemble=settings.ensemble,
            bf16=settings.bf16,
            threads=settings.threads,
            **model,
        )

    def learn_settings(self) -> LearnSettings:
        """The training and scoring settings of this estimator's parameters (checked: one line
        naming the first out of range), as :meth:`from_settings` takes them; the scorer stays
        the estimator's own parameter (checked against its registry, to which a scorer may be
        added), so the settings name none."""
        if self.model not in MODEL_KINDS:
            raise DevicepipeError(f"BeatAnomalyDetector: model={self.model!r} is not one of {sorted(MODEL_KINDS)}.")
        if self.scorer not in SCORER_KINDS:
            raise DevicepipeError(f"BeatAnomalyDetector: scorer={self.scorer!r} is not one of {list(SCORER_KINDS)}.")
        auto = self.neighbours == "auto"
        whole = isinstance(self.neighbours, int) and not isinstance(self.neighbours, bool)
        limit = self.max_model_rows
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 2):
            raise DevicepipeError(f"BeatAnomalyDetector: max_model_rows must be at least 2 or None, got {limit!r}.")
        if not (auto or (whole and int(self.neighbours) >= 1)) or self.reference_rows < 2:
            raise DevicepipeError(
                f"BeatAnomalyDetector: neighbours must be 'auto' or at least 1 (got {self.neighbours!r}), "
                "and reference_rows at least 2."
            )
        if self.kl_weight != "auto" and not (
            isinstance(self.kl_weight, (int, float)) and not isinstance(self.kl_weight, bool) and self.kl_weight > 0
            and math.isfinite(self.kl_weight)
        ):  # fmt: skip
            raise DevicepipeError(
                f"BeatAnomalyDetector: kl_weight must be a positive number or 'auto', got {self.kl_weight!r}."
            )
        if not (isinstance(m := self.min_effect, (int, float)) and not isinstance(m, bool) and m >= 0):
            raise DevicepipeError(f"BeatAnomalyDetector: min_effect must be a number >= 0, got {self.min_effect!r}.")
        if self.scaling not in (*SCALERS, "none", "auto"):
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
            min_effect=self.min_effect,
            bf16=self.bf16,
            threads=self.threads,
            neighbours=None if self.neighbours == "auto" else int(self.neighbours),
        )

    @property
    def _scaling(self) -> str:
        if self.scaling != "auto":
            return self.scaling
        return MODEL_KINDS[self.model].scaling

    @property
    def _kl_weight(self) -> float:
        if self.kl_weight != "auto":
            return float(self.kl_weight)
        return KL_WEIGHT_FOR_SCORES if SCORER_KINDS[self.scorer].uses_model else KL_WEIGHT_FOR_MAPS

    def _trained_kl_weight(self, out: Path | None, resume: bool) -> float:
        """The KL weight to train with: ``kl_weight``'s; with ``"auto"`` and a checkpoint to resume,
        the checkpoint's (a resumed model goes on as it was trained, whichever scorer reads it now)."""
        if self.kl_weight == "auto" and resume and out is not None and (out / CHECKPOINT_NAME).exists():
            return float(load_checkpoint(out).get("config", {}).get("kl_weight", self._kl_weight))
        return self._kl_weight

    def _make_model(self, width: int, device: torch.device, kl_weight: float) -> Callable[[int], nn.Module]:
        minmax = self._scaling == "minmax"
        sizes = Sizes(width=width, latent=self.latent, hidden=self.hidden, minmax=minmax, kl_weight=kl_weight)
        kind = MODEL_KINDS[self.model]

        def make(seed: int) -> nn.Module:
            torch.manual_seed(seed)
            return kind.build(sizes).to(device)

        return make

    # ------------------------------------------------------------------ rows in

    def _rows(self, X: Any, device: torch.device, caller: str) -> torch.Tensor:
        """``X`` as a float tensor ``(n, columns)`` on ``device``; one line for what cannot be scored."""
        rows = getattr(X, "matrix", X)
        if not isinstance(rows, torch.Tensor):
            rows = table_rows(rows, caller)
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

        ``checkpoint_dir``: write ``checkpoint.pt`` there every 10 s and at the end (one model) or
        ``ensemble.pt`` at the end; ``resume`` continues its checkpoint exactly.
        ``callback(epoch, train loss, val loss)`` after every epoch; ``on_start(threads)`` once
        the thread count is chosen, before the first epoch; ``extra_state`` is stored in the
        checkpoint beside the weights. ``stream``: keep the rows in host memory and copy one
        batch at a time to the device (rows that do not fit on it; the result is the same). Sets ``models_``,
        ``scaler_``, ``decision_scores_`` ``(n,)``, ``threshold_``, ``labels_``, ``histories_``,
        ``threads_``, ``details_`` (embeddings, scores, spread and flags of the training rows,
        on the device) and ``train_scores_`` (the training split's sorted scores).
        """
        settings = self.learn_settings()
        if resume and checkpoint_dir is None:
            raise DevicepipeError("fit(): resume=True needs checkpoint_dir=, the directory of the checkpoint.")
        settings = LearnSettings(
            **{**settings.to_dict(), "resume": resume, "tensorboard": tensorboard and str(tensorboard)}
        )
        device = resolve_device(self.device)
        rows = self._rows(X, torch.device("cpu") if stream else device, "fit()")
        n_columns = rows.shape[1]
        data, width, scaler = self._training_rows(rows)
        out = None if checkpoint_dir is None else Path(checkpoint_dir)
        make = self._make_model(width, device, self._trained_kl_weight(out, resume))
        probe = data[: settings.batch_size].to(device)
        threads = choose_threads(make(settings.seed), probe, threads=settings.threads, copies=settings.ensemble)
        extra = {"scaler": None if scaler is None else scaler.state_dict(), **(extra_state or {})}
        if on_start is not None:
            on_start(threads)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        with using_threads(threads.threads):
            learn_from = data[self.model_rows_of(data.shape[0]).to(data.device)]
            models, histories = train_models(make, learn_from, settings, out, extra, callback, stream=stream)
            details = reconstruction_details(models, data)
        train_rows, held_out = split_indices(data.shape[0], settings.val_fraction, settings.seed, device)
        self.reference_, self.calibration_, self.neighbours_ = None, {}, None
        every = torch.arange(data.shape[0], device=device)  # validation rows are normal rows too
        effects = None
        if self._kind.uses_reference:
            self.reference_, positions = self._reference(data, every)
            self.neighbours_ = self._k(self.reference_.shape[0])
            with using_threads(threads.threads):
                scores, effects = self._nn_scores(details.scores, data, Fitting(positions, train_rows))
            details = Details(details.embeddings, scores, details.spread)
        # a row's distance leaves itself out, so every row's is a fair training score; the
        # reconstruction error is fair only on the rows that did not steer training
        train_rows = every if self._kind.leaves_self_out else train_rows
        train_scores = details.scores[train_rows]
        self.device_, self.models_, self.scaler_, self.histories_ = device, models, scaler, histories
        self.n_features_in_, self.width_ = n_columns, width
        self.threads_: ThreadChoice = threads
        self.train_scores_ = train_scores.sort().values
        self.threshold_ = self._threshold_of(train_scores)
        flags = self._flags(details.scores, effects)
        self.details_ = Scores(details.embeddings, details.scores, details.spread, self.threshold_, flags, effects)
        self.decision_scores_ = details.scores.detach().cpu().numpy()
        self.labels_ = flags.detach().cpu().numpy().astype(np.int64)
        self.geometry_: dict[str, Any] = {}
        self.fit_rows_ = {"rows": int(data.shape[0]), "held_out": int(held_out.numel()), "model": len(learn_from)}
        return self

    def _training_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, int, Any]:
        """``rows`` resampled to the model's width and scaled: float32 rows ``(n, width)``, the
        width, and the fitted scaler (None without scaling)."""
        n_columns = rows.shape[1]
        kind = MODEL_KINDS[self.model]
        width = self.width or kind.width(n_columns)
        kind.configure(
            Sizes(width, self.latent, self.hidden, self._scaling == "minmax")
        )  # refuses a width it cannot take
        rows = resample_rows(rows, width)
        scaler = None
        if self._scaling != "none":
            scaler = SCALERS[self._scaling]().fit(rows.reshape(-1))
            rows = scaler.transform(rows.reshape(-1)).reshape(rows.shape)
        data = rows.float()
        if data.shape[0] < MIN_ROWS:
            raise DevicepipeError(
                f"fit(): {data.shape[0]} sample(s) (rows) are too few to learn from; give at least {MIN_ROWS}."
            )
        return data, width, scaler

    def _k(self, n_reference: int) -> int:
        """The nearest-neighbour scorer's k for ``n_reference`` rows."""
        return int(self.neighbours) if self.neighbours != "auto" else neighbours_for(n_reference, self._share)

    @property
    def _share(self) -> float:
        """The share of anomalous training rows ``neighbours="auto"`` allows for."""
        fixed = self.threshold is not None or self.contamination == "auto"
        return KNN_SHARE if fixed else float(self.contamination)

    def model_rows_of(self, n: int) -> torch.Tensor:
        """Which of ``n`` training rows the model learns from, ``(m,)`` indices on the CPU: every
        row, or where the scores do not use the model and there are more than ``max_model_rows``,
        that many evenly spaced."""
        limit = self.max_model_rows
        if limit is None or n <= limit or self._kind.uses_model:
            return torch.arange(n)
        return torch.linspace(0, n - 1, limit, dtype=torch.float64).round().long()

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

    @property
    def _kind(self) -> Scorer:
        """The detector's scorer, from the registry."""
        return SCORER_KINDS[self.scorer]

    @property
    def _against(self) -> Reference:
        """What the fitted detector's scorer measures against."""
        return Reference(self.reference_, self.neighbours_, self.calibration_)

    def _nn_scores(
        self, recon: torch.Tensor, data: torch.Tensor, fitting: Fitting | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The scorer's scores ``(n,)`` for the scaled rows ``data`` whose reconstruction errors are
        ``recon``, and their effects ``(n,)`` where the scorer measures them (else None); in
        ``fit`` (``fitting``), its calibration is fitted first and kept."""
        scores, calibration, effects = self._kind.scores_and_effects(recon, data, self._against, fitting)
        if fitting is not None:
            self.calibration_ = calibration
        return scores, effects

    def _flags(self, scores: torch.Tensor, effects: torch.Tensor | None) -> torch.Tensor:
        """Rows scoring above ``threshold_`` whose effect, where measured, is at least ``min_effect``: ``(n,)`` bool."""
        flags = scores > self.threshold_
        return flags if effects is None or not self.min_effect else flags & (effects >= self.min_effect)

    def _threshold_of(self, train_scores: torch.Tensor) -> float:
        """The threshold by the detector's rule, from the training split's scores ``(n,)``."""
        if self.threshold is not None:
            return float(self.threshold)
        if self.contamination == "auto":
            return auto_threshold(train_scores, log=not self._kind.z_scores)
        share = quantile(train_scores.double(), 1.0 - float(self.contamination))
        return max(share, outlier_fence(train_scores, log=not self._kind.z_scores))

    @property
    def threshold_rule(self) -> str:
        """The threshold's rule in words (for summaries and reports)."""
        return threshold_rule(self)

    # ------------------------------------------------------------------ scoring

    def score_details(self, X: Any) -> Scores:
        """Embeddings ``(n, latent)``, scores ``(n,)``, ensemble spread ``(n,)`` and flags of the rows of ``X``,
        as tensors on the detector's device, with ``threshold_``."""
        data = self._prepare(X, "score_details()")
        with using_threads(self.threads_.threads):
            d = reconstruction_details(self.models_, data)
            scores, effects = self._nn_scores(d.scores, data)
        return Scores(d.embeddings, scores, d.spread, self.threshold_, self._flags(scores, effects), effects)

    def score_meaning(self, rows: str = "a row", units: str = "scaled values") -> str:
        """What a score of this fitted detector is, in words, for ``rows`` (e.g. "a beat
        standardised by its recording's beats") whose values are in ``units``
        (:func:`devicepipe.anomaly.describe.score_meaning`)."""
        return score_meaning(self, rows, units)

    def scorer_summary(self, reason: str | None = None) -> dict[str, Any]:
        """Which scorer scored the rows, with what, and why (``reason``: the caller's, first): for a
        run's ``summary.json`` (:func:`devicepipe.anomaly.describe.scorer_summary`)."""
        return scorer_summary(self, reason)

    def _scores(self, X: Any, caller: str) -> torch.Tensor:
        return self._scored(X, caller)[0]

    def _scored(self, X: Any, caller: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        data = self._prepare(X, caller)
        with using_threads(self.threads_.threads):
            recon = torch.stack([reconstruction_error(m, data) for m in self.models_]).mean(0)
            return self._nn_scores(recon, data)

    def _out(self, X: Any, values: torch.Tensor) -> Any:
        return values.detach().cpu().numpy() if host_kind(X) else values

    def decision_function(self, X: Any) -> Any:
        """Anomaly score of each row of ``X`` by the detector's ``scorer`` (see :meth:`score_meaning`):
        shape ``(n,)``, higher is more anomalous."""
        return self._out(X, self._scores(X, "decision_function()"))

    def score_samples(self, X: Any) -> Any:
        """The negated anomaly score, ``(n,)``: higher is more normal (scikit-learn's sign)."""
        return self._out(X, -self._scores(X, "score_samples()"))

    def predict(self, X: Any) -> Any:
        """1 for the flagged rows (scoring above ``threshold_``, with at least ``min_effect`` where the
        scorer measures it), 0 for the others: ``(n,)`` int64."""
        return self._out(X, self._flags(*self._scored(X, "predict()")).long())

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
        """Write the fitted detector to ``path`` (atomically): tensors and plain data only
        (:func:`devicepipe.anomaly.model_format.write_model`).

        ``geometry`` says what rows the model takes when they are cut from recordings (a
        pipeline's segmentation, window and scaling); it is kept as ``geometry_``.
        """
        self._check_fitted("save()")
        if geometry is not None:
            self.geometry_ = dict(geometry)
        return write_model(self, path)
