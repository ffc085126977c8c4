"""Models: a config dataclass plus an ``nn.Module`` each, all speaking one small protocol.

Every model satisfies :class:`Model`: ``encode(x) -> (mu, logvar or None)``,
``decode(z) -> x``, ``forward(x, eps=None) -> (recon, mu, logvar or None)``,
``losses(x, eps=None) -> per-row loss``, ``config_dict()``, and ``noise_dim``, the width of
the sampling noise ``eps`` its loss takes (the latent size for a VAE, None for a
deterministic model). ``eps`` is passed in explicitly so that training is reproducible and
a vmap ensemble can be compared with members trained one by one.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch

from devicepipe.models.autoencoder import MLPAutoencoder, MLPAutoencoderConfig
from devicepipe.models.vae import LightVAE, LightVAEConfig, Swish

__all__ = ["LightVAE", "LightVAEConfig", "MLPAutoencoder", "MLPAutoencoderConfig", "Model", "Swish"]


@runtime_checkable
class Model(Protocol):
    """What training, ensembles and scoring need of a model."""

    config: Any

    @property
    def noise_dim(self) -> int | None:
        """Width of the noise rows ``losses`` takes (``(batch, noise_dim)``), or None."""
        ...

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def decode(self, z: torch.Tensor) -> torch.Tensor: ...

    def losses(self, x: torch.Tensor, eps: torch.Tensor | None = None) -> torch.Tensor: ...

    def config_dict(self) -> dict[str, Any]: ...
