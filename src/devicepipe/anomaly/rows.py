"""Rows in, and what the model makes of them: the rows a detector is given (any table or
array), where its results go back, and the members' embeddings and reconstruction errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.interop import convert
from devicepipe.learning.score import embed, reconstruction_error


def table_rows(X: Any, caller: str) -> torch.Tensor:
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
        return convert(X).tensor  # read, never written in place
    except DevicepipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything that is not an array of rows
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DevicepipeError(f"{caller}: X must be a 2-D array of rows, got {type(X).__name__} ({first}).") from None


def host_kind(x: Any) -> bool:
    """Whether results for ``x`` go back as NumPy (anything but a tensor or a Beats of tensors)."""
    rows = getattr(x, "matrix", x)
    return not isinstance(rows, torch.Tensor)


@dataclass(frozen=True)
class Details:
    embeddings: torch.Tensor
    scores: torch.Tensor
    spread: torch.Tensor


def reconstruction_details(models: list[nn.Module], data: torch.Tensor) -> Details:
    errors = torch.stack([reconstruction_error(m, data) for m in models])  # (members, n)
    mean = errors.mean(0)
    spread = errors.std(0, unbiased=False) if len(models) > 1 else torch.zeros_like(mean)
    return Details(embed(models[0], data), mean, spread)
