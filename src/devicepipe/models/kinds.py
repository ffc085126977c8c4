"""The kinds of model a detector can train, by name: :data:`MODEL_KINDS`.

Each :class:`ModelKind` says how to build the model for rows of a width, what width it takes
for rows of a number of columns, and how its rows are scaled by default. A new kind of model is
its module in :mod:`devicepipe.models` plus one entry here; the estimator, the model file and
its reader look kinds up by name (or by the model's class name, in a model file).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from torch import nn

from devicepipe.core.errors import DevicepipeError
from devicepipe.models.autoencoder import MLPAutoencoder, MLPAutoencoderConfig
from devicepipe.models.vae import LightVAE, LightVAEConfig


def nearest_power_of_two(n: int) -> int:
    """The power of two nearest to ``n`` on a log scale (at least 8): 140 -> 128, 256 -> 256, 200 -> 256."""
    if n < 1:
        raise DevicepipeError(f"nearest_power_of_two(): n must be positive, got {n}.")
    return max(8, 2 ** round(math.log2(n)))


@dataclass(frozen=True)
class Sizes:
    """What a model is built for: samples per row, latent size, hidden units (where it has a
    hidden layer), whether its rows are min-max scaled (outputs then squashed to [0, 1]), and
    the VAE's KL weight."""

    width: int
    latent: int
    hidden: int
    minmax: bool
    kl_weight: float = 0.1  # the VAE's weight of its KL term (see LightVAEConfig)


@dataclass(frozen=True)
class ModelKind:
    """One kind of model: its module and config classes, its config for :class:`Sizes` (which
    refuses sizes it cannot take), the row width it takes for rows of ``columns`` samples, and
    its rows' default scaling."""

    name: str
    module: type[nn.Module]
    config: type
    configure: Callable[[Sizes], Any]
    width: Callable[[int], int]
    scaling: str  # "standard" or "minmax"

    def build(self, sizes: Sizes) -> nn.Module:
        """A new model of this kind for ``sizes`` (initialised from torch's current seed)."""
        return self.module(self.configure(sizes))


MODEL_KINDS = MappingProxyType(
    {
        "vae": ModelKind(
            "vae",
            LightVAE,
            LightVAEConfig,
            lambda s: LightVAEConfig(width=s.width, latent=s.latent, kl_weight=s.kl_weight),
            nearest_power_of_two,  # (its convolutions halve the row five times)
            "standard",
        ),
        "mlp": ModelKind(
            "mlp",
            MLPAutoencoder,
            MLPAutoencoderConfig,
            lambda s: MLPAutoencoderConfig(input=s.width, hidden=s.hidden, latent=s.latent, sigmoid_output=s.minmax),
            lambda columns: columns,
            "minmax",
        ),
    }
)


def kind_of_module(name: str) -> ModelKind | None:
    """The kind whose module class is named ``name`` (as a model file records it), or None."""
    return next((k for k in MODEL_KINDS.values() if k.module.__name__ == name), None)
