"""The MLP autoencoder of the RAPIDS electricity notebook, with configurable sizes.

Encoder ``Linear(input, hidden) -> ReLU -> Linear(hidden, latent) -> ReLU``; decoder
``Linear(latent, hidden) -> ReLU -> Linear(hidden, input) -> sigmoid`` (inputs scaled to
``[0, 1]``, as the notebook's MinMax scaling does). The notebook feeds one sample at a time
(``input = 1``); on windows of a load series the input is a whole day.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from devicepipe.core.errors import DevicepipeError

__all__ = ["MLPAutoencoder", "MLPAutoencoderConfig"]


@dataclass
class MLPAutoencoderConfig:
    input: int = 24  # samples per window (24 = a day of hourly load; 1 = the notebook's per-sample model)
    hidden: int = 32  # hidden units (the notebook's 32)
    latent: int = 8  # code size (the notebook's "dimension", 32)
    sigmoid_output: bool = True  # squash outputs to [0, 1] as the notebook does

    def __post_init__(self) -> None:
        if min(self.input, self.hidden, self.latent) < 1:
            raise DevicepipeError(f"MLPAutoencoderConfig: sizes must be positive, got {asdict(self)}.")


class MLPAutoencoder(nn.Module):
    """Autoencoder on windows of shape ``(batch, input)``."""

    def __init__(self, config: MLPAutoencoderConfig | None = None) -> None:
        super().__init__()
        self.config = config or MLPAutoencoderConfig()
        c = self.config
        self.encoder = nn.Sequential(nn.Linear(c.input, c.hidden), nn.ReLU(), nn.Linear(c.hidden, c.latent), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(c.latent, c.hidden), nn.ReLU(), nn.Linear(c.hidden, c.input))

    @property
    def noise_dim(self) -> None:
        """Deterministic: the loss takes no noise."""
        return None

    @property
    def row_width(self) -> int:
        """Samples per row (window) the model takes: ``config.input``."""
        return self.config.input

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        """``x`` of shape ``(batch, input)`` -> code ``(batch, latent)`` (and no variance)."""
        return self.encoder(x.reshape(-1, self.config.input)), None

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        out = self.decoder(z)
        return torch.sigmoid(out) if self.config.sigmoid_output else out

    def forward(self, x: torch.Tensor, eps: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, None]:
        z, _ = self.encode(x)
        return self.decode(z), z, None

    def losses(self, x: torch.Tensor, eps: torch.Tensor | None = None) -> torch.Tensor:
        """Per-window mean squared error, shape ``(batch,)``."""
        recon, _, _ = self(x)
        return (recon - x.reshape(recon.shape)).square().mean(-1)

    def config_dict(self) -> dict:
        return asdict(self.config)
