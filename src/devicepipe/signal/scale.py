"""Scalers on tensors, on any device, with scikit-learn's semantics.

Like scikit-learn's ``MinMaxScaler``/``StandardScaler`` (``sklearn/preprocessing/_data.py``):
``fit`` is a reset plus ``partial_fit``, so a long recording can be scaled chunk by chunk;
fitted state carries a trailing underscore; a constant feature gets scale 1 instead of a
division by zero. Inputs are ``(n_samples, n_features)``, or ``(n_samples,)`` for one
feature. NaNs are ignored when fitting and kept when transforming. Statistics accumulate in
float64 on the input's device; transforms return the input's dtype.
"""

from __future__ import annotations

from typing import Any, Self, cast

import torch

from devicepipe.core.errors import DevicepipeError

__all__ = ["MinMaxScaler", "StandardScaler"]


def _as_2d(x: torch.Tensor, where: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise DevicepipeError(f"{where}: expected a torch.Tensor, got {type(x).__name__}.")
    if x.ndim not in (1, 2):
        raise DevicepipeError(f"{where}: expected shape (n_samples,) or (n_samples, n_features), got {tuple(x.shape)}.")
    if not x.dtype.is_floating_point:
        raise DevicepipeError(f"{where}: expected a floating tensor, got {x.dtype}; convert it, e.g. x.float().")
    if x.numel() == 0:
        raise DevicepipeError(f"{where}: the tensor is empty; there is nothing to scale.")
    return x.unsqueeze(1) if x.ndim == 1 else x


def _handle_zeros_in_scale(scale: torch.Tensor) -> torch.Tensor:
    """Replace (near-)zero scales by 1, as scikit-learn does for constant features."""
    eps = torch.finfo(scale.dtype).eps
    return torch.where(scale < 10 * eps, torch.ones_like(scale), scale)


class _Scaler:
    _state_names: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.n_samples_seen_: torch.Tensor | None = None

    @property
    def fitted(self) -> bool:
        return self.n_samples_seen_ is not None

    def _reset(self) -> None:
        for name in ("n_samples_seen_", *self._state_names):
            setattr(self, name, None)

    def fit(self, x: torch.Tensor) -> Self:
        """Forget earlier data and fit on ``x`` of shape ``(n_samples[, n_features])``."""
        self._reset()
        return self.partial_fit(x)

    def partial_fit(self, x: torch.Tensor) -> Self:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def inverse_transform(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit_transform(self, x: torch.Tensor) -> torch.Tensor:
        return self.fit(x).transform(x)

    def _check(self, x: torch.Tensor, where: str) -> torch.Tensor:
        if not self.fitted:
            raise DevicepipeError(f"{type(self).__name__}.{where}(): not fitted yet; call fit() first.")
        x2 = _as_2d(x, f"{type(self).__name__}.{where}()")
        n_features = getattr(self, self._state_names[0]).shape[0]
        if x2.shape[1] != n_features:
            raise DevicepipeError(
                f"{type(self).__name__}.{where}(): x has {x2.shape[1]} feature(s), "
                f"the scaler was fitted on {n_features}."
            )
        return x2

    def _param(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, name).to(device=x.device, dtype=x.dtype)

    def to(self, device: torch.device | str) -> Self:
        """Move the fitted state to ``device`` (in place) and return self."""
        for name in ("n_samples_seen_", *self._state_names):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.to(device))
        return self

    def state_dict(self) -> dict[str, Any]:
        """Config and fitted state (CPU tensors), for saving alongside a model checkpoint."""
        state: dict[str, Any] = {"kind": type(self).__name__, "config": self._config()}
        for name in ("n_samples_seen_", *self._state_names):
            value = getattr(self, name)
            state[name] = None if value is None else value.detach().cpu()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> Self:
        if state.get("kind") != type(self).__name__:
            raise DevicepipeError(f"{type(self).__name__}.load_state_dict(): state is for {state.get('kind')}.")
        for name in ("n_samples_seen_", *self._state_names):
            setattr(self, name, state.get(name))
        return self

    def _config(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


class MinMaxScaler(_Scaler):
    """Scale each feature to ``feature_range``: ``x * scale_ + min_``.

    Fitted state: ``data_min_``, ``data_max_``, ``data_range_``, ``scale_``, ``min_`` (each of
    shape ``(n_features,)``, float64) and ``n_samples_seen_``.
    """

    _state_names = ("data_min_", "data_max_", "data_range_", "scale_", "min_")
    # fitted state, None until fitted (see :attr:`fitted`)
    data_min_: torch.Tensor
    data_max_: torch.Tensor
    data_range_: torch.Tensor
    scale_: torch.Tensor
    min_: torch.Tensor

    def __init__(self, feature_range: tuple[float, float] = (0.0, 1.0), *, clip: bool = False) -> None:
        super().__init__()
        lo, hi = feature_range
        if not lo < hi:
            raise DevicepipeError(f"MinMaxScaler(): feature_range minimum must be below maximum, got {feature_range}.")
        self.feature_range = (float(lo), float(hi))
        self.clip = clip
        self._reset()

    def _config(self) -> dict[str, Any]:
        return {"feature_range": list(self.feature_range), "clip": self.clip}

    def partial_fit(self, x: torch.Tensor) -> Self:
        """Update the running minimum and maximum with ``x`` of shape ``(n_samples[, n_features])``."""
        x = _as_2d(x, "MinMaxScaler.partial_fit()")
        if x.shape[1] == 1:  # one pass over a flat view
            lo, hi = torch.aminmax(x.reshape(-1))
            batch_min, batch_max = lo.reshape(1).to(torch.float64), hi.reshape(1).to(torch.float64)
        else:
            lo, hi = torch.aminmax(x, dim=0)
            batch_min, batch_max = lo.to(torch.float64), hi.to(torch.float64)
        if bool(torch.isnan(batch_min).any() | torch.isnan(batch_max).any()):
            # aminmax propagates NaN, so only a feature holding one needs a second pass that
            # ignores NaNs (as scikit-learn's nanmin/nanmax do); clean data is read once
            nan = torch.isnan(x)
            batch_min = torch.where(nan, torch.inf, x).amin(0).to(torch.float64)
            batch_max = torch.where(nan, -torch.inf, x).amax(0).to(torch.float64)
        if self.fitted:
            if batch_min.shape != self.data_min_.shape:
                raise DevicepipeError(
                    f"MinMaxScaler.partial_fit(): x has {x.shape[1]} feature(s), "
                    f"earlier chunks had {self.data_min_.shape[0]}."
                )
            batch_min = torch.minimum(batch_min, self.data_min_.to(x.device))
            batch_max = torch.maximum(batch_max, self.data_max_.to(x.device))
            assert self.n_samples_seen_ is not None  # (fitted)
            self.n_samples_seen_ = self.n_samples_seen_.to(x.device) + x.shape[0]
        else:
            self.n_samples_seen_ = torch.tensor(x.shape[0], device=x.device)
        if not torch.isfinite(batch_min).all():
            raise DevicepipeError("MinMaxScaler.partial_fit(): a feature holds only NaN values; nothing to scale by.")
        self.data_min_, self.data_max_ = batch_min, batch_max
        self.data_range_ = batch_max - batch_min
        low, high = self.feature_range
        self.scale_ = cast(torch.Tensor, (high - low) / _handle_zeros_in_scale(self.data_range_))
        self.min_ = low - batch_min * self.scale_
        return self

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """Scale ``x``; same shape and dtype as ``x``."""
        x2 = self._check(x, "transform")
        if x2.shape[1] == 1:
            x2 = x2.reshape(-1)  # flat: faster elementwise passes
        # (x - data_min) * scale + lo is the same map as x * scale_ + min_ without the cancellation
        # that costs float32 precision when a feature sits far from zero; one allocation, in place after
        out = (x2 - self._param("data_min_", x2)).mul_(self._param("scale_", x2))
        if self.feature_range[0]:
            out.add_(self.feature_range[0])
        if self.clip:
            out.clamp_(*self.feature_range)
        return out.reshape(x.shape)

    def inverse_transform(self, x: torch.Tensor) -> torch.Tensor:
        """Undo :meth:`transform`; same shape and dtype as ``x``."""
        x2 = self._check(x, "inverse_transform")
        return ((x2 - self.feature_range[0]) / self._param("scale_", x2) + self._param("data_min_", x2)).reshape(
            x.shape
        )


class StandardScaler(_Scaler):
    """Centre and scale each feature: ``(x - mean_) / scale_``.

    Running mean and variance merge chunks with Chan et al.'s pairwise update (as
    scikit-learn's ``_incremental_mean_and_var``). Fitted state: ``mean_``, ``var_``
    (population variance, ddof=0), ``scale_`` (shape ``(n_features,)``, float64) and
    ``n_samples_seen_`` (per feature, NaNs not counted).
    """

    _state_names = ("mean_", "var_", "scale_")
    # fitted state, None until fitted (see :attr:`fitted`)
    mean_: torch.Tensor
    var_: torch.Tensor
    scale_: torch.Tensor

    def __init__(self, *, with_mean: bool = True, with_std: bool = True) -> None:
        super().__init__()
        self.with_mean = with_mean
        self.with_std = with_std
        self._reset()

    def _config(self) -> dict[str, Any]:
        return {"with_mean": self.with_mean, "with_std": self.with_std}

    def partial_fit(self, x: torch.Tensor) -> Self:
        """Merge ``x`` of shape ``(n_samples[, n_features])`` into the running mean and variance."""
        x = _as_2d(x, "StandardScaler.partial_fit()")
        x64 = x.to(torch.float64)
        valid = ~torch.isnan(x64)
        n_b = valid.sum(0).to(torch.float64)
        if self.fitted and n_b.shape != self.mean_.shape:
            raise DevicepipeError(
                f"StandardScaler.partial_fit(): x has {x.shape[1]} feature(s), "
                f"earlier chunks had {self.mean_.shape[0]}."
            )
        zeroed = torch.where(valid, x64, 0.0)
        mean_b = zeroed.sum(0) / n_b.clamp(min=1)
        m2_b = torch.where(valid, (x64 - mean_b) ** 2, 0.0).sum(0)
        if self.n_samples_seen_ is not None:  # fitted
            n_a = self.n_samples_seen_.to(x.device, torch.float64)
            mean_a, m2_a = self.mean_.to(x.device), self.var_.to(x.device) * n_a
            n = n_a + n_b
            delta = mean_b - mean_a
            safe_n = n.clamp(min=1)
            mean = mean_a + delta * n_b / safe_n
            m2 = m2_a + m2_b + delta**2 * n_a * n_b / safe_n
        else:
            n, mean, m2 = n_b, mean_b, m2_b
        if (n == 0).any():
            raise DevicepipeError("StandardScaler.partial_fit(): a feature holds only NaN values; nothing to scale by.")
        self.n_samples_seen_ = n
        self.mean_ = mean
        self.var_ = m2 / n
        self.scale_ = _handle_zeros_in_scale(torch.sqrt(self.var_))
        return self

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """Standardise ``x``; same shape and dtype as ``x``."""
        x2 = self._check(x, "transform")
        out = x2
        if self.with_mean:
            out = out - self._param("mean_", x2)
        if self.with_std:
            out = out / self._param("scale_", x2)
        return out.reshape(x.shape)

    def inverse_transform(self, x: torch.Tensor) -> torch.Tensor:
        """Undo :meth:`transform`; same shape and dtype as ``x``."""
        x2 = self._check(x, "inverse_transform")
        out = x2
        if self.with_std:
            out = out * self._param("scale_", x2)
        if self.with_mean:
            out = out + self._param("mean_", x2)
        return out.reshape(x.shape)
