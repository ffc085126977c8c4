"""Models: a config dataclass plus an ``nn.Module`` each, all speaking one small protocol.

Every model satisfies :class:`Model`: ``encode(x) -> (mu, logvar or None)``,
``decode(z) -> x``, ``forward(x, eps=None) -> (recon, mu, logvar or None)``,
``losses(x, eps=None) -> per-row loss``, ``config_dict()``, ``row_width`` (samples per row
it takes), and ``noise_dim``, the width of
the sampling noise ``eps`` its loss takes (the latent size for a VAE, None for a
deterministic model). ``eps`` is passed in explicitly so that training is reproducible and
a vmap ensemble can be compared with members trained one by one.
"""

from __future__ import annotations

from typing import Any, Protocol, cast, runtime_checkable

import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.interop import convert
from devicepipe.models.autoencoder import MLPAutoencoder, MLPAutoencoderConfig
from devicepipe.models.vae import LightVAE, LightVAEConfig, Swish

__all__ = [
    "LightVAE",
    "LightVAEConfig",
    "MLPAutoencoder",
    "MLPAutoencoderConfig",
    "Model",
    "Swish",
    "as_model",
    "model_rows",
]


@runtime_checkable
class Model(Protocol):
    """What training, ensembles and scoring need of a model."""

    config: Any

    @property
    def row_width(self) -> int:
        """Samples per row the model takes (rows are ``(batch, row_width)``)."""
        ...

    @property
    def noise_dim(self) -> int | None:
        """Width of the noise rows ``losses`` takes (``(batch, noise_dim)``), or None."""
        ...

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def decode(self, z: torch.Tensor) -> torch.Tensor: ...

    def losses(self, x: torch.Tensor, eps: torch.Tensor | None = None) -> torch.Tensor: ...

    def config_dict(self) -> dict[str, Any]: ...


def as_model(module: torch.nn.Module) -> Model:
    """``module`` seen as the :class:`Model` it is (what the type checker cannot tell of an
    ``nn.Module``, whose attributes it takes for tensors or submodules)."""
    return cast(Model, module)


def model_rows(model: torch.nn.Module, data: Any, caller: str, *, host: bool = False) -> torch.Tensor:
    """``data`` as the rows ``model`` takes: a floating tensor ``(n, row_width)`` on its device.

    ``data`` is a tensor already on the model's device, a :class:`devicepipe.ecg.Beats` (its
    ``matrix``), or anything :func:`devicepipe.to_torch` takes (a NumPy array, a DataFrame, ...),
    which is placed on the model's device. Integer rows become float32. ``caller`` names the
    function in error messages. ``host``: rows in host memory stay there (to be streamed to the
    model's device a batch at a time).
    """
    rows = getattr(data, "matrix", data)
    device = next(model.parameters()).device
    if not isinstance(rows, torch.Tensor):
        rows = convert(rows, device="cpu" if host else device).tensor
    elif rows.device != device and not (host and rows.device.type == "cpu"):
        raise DevicepipeError(
            f"{caller}: the rows are on {rows.device} but the model is on {device}; "
            f"move one of them (rows.to({str(device)!r}) or model.to({str(rows.device)!r}))."
        )
    if not rows.is_floating_point():
        rows = rows.float()
    width = getattr(model, "row_width", None)
    if rows.ndim != 2 or (width is not None and rows.shape[1] != width):
        wanted = f"(n, {width})" if width is not None else "(n, samples)"
        raise DevicepipeError(
            f"{caller}: the model takes rows of shape {wanted}, got {tuple(rows.shape)}; resample the rows "
            "to the model's width (ecg_segment(..., width=...) or devicepipe.signal.resample.resample_rows) "
            "or build the model for theirs."
        )
    return rows
