"""The light convolutional VAE of the zero-copy ECG notebook, with its width and latent size as parameters.

Architecture as in the notebook: one Swish activation with a learnable slope shared by every
layer; a fixed ``[1, 2, 1]`` depthwise filter with stride 2 to downsample; convolutions
1 -> 4 -> 8 -> 16 channels; two convolutional heads (mean-pooled over time) for the latent
mean and log-variance; a linear layer restoring ``(8, width / 8)``; nearest-neighbour
upsampling and convolutions 8 -> 4 -> 2 -> 1 back to the input width.

Loss (per beat): the mean squared reconstruction error plus ``kl_weight`` times the negative
of the mean over latent dimensions of ``1 + log sigma^2 - mu^2 - sigma^2`` (Kingma and
Welling, "Auto-Encoding Variational Bayes", ICLR 2014, appendix B; the notebook weighs it
by 0.1). The notebook sums over the batch; here the batch mean is used, which Adam does not
distinguish.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from devicepipe.core.errors import DevicepipeError

__all__ = ["LightVAE", "LightVAEConfig", "Swish"]


@dataclass
class LightVAEConfig:
    width: int = 256  # samples per beat; a power of two, at least 8
    latent: int = 2  # latent dimensions (2 in the notebook, which plots them directly)
    kl_weight: float = 0.1  # weight of the KL term (the notebook's 0.1)

    def __post_init__(self) -> None:
        if self.width < 8 or self.width & (self.width - 1):
            raise DevicepipeError(
                f"LightVAEConfig(): {{param}} must be a power of two >= 8, got {self.width}",
                fix="use e.g. {width=256} (or 128, 512).",
                param="width",
                value=self.width,
            )
        if self.latent < 1:
            raise DevicepipeError(f"LightVAEConfig: latent must be at least 1, got {self.latent}.")


class Swish(nn.Module):
    """``x * sigmoid(alpha * x)`` with a learnable ``alpha`` (initially 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.alpha * x)


class LightVAE(nn.Module):
    """Convolutional VAE on beats of shape ``(batch, width)``."""

    smooth: torch.Tensor  # (1, 1, 3) the [1, 2, 1] smoothing before each halving (a buffer)

    def __init__(self, config: LightVAEConfig | None = None) -> None:
        super().__init__()
        self.config = config or LightVAEConfig()
        w, z = self.config.width, self.config.latent
        self.sigma = Swish()
        self.register_buffer("smooth", torch.tensor([1.0, 2.0, 1.0]).view(1, 1, 3), persistent=False)
        self.conv0 = nn.Conv1d(1, 4, 3, padding=1)
        self.conv1 = nn.Conv1d(4, 8, 3, padding=1)
        self.conv2 = nn.Conv1d(8, 16, 3, padding=1)
        self.conv_mu = nn.Conv1d(16, z, 3, padding=1)
        self.conv_logvar = nn.Conv1d(16, z, 3, padding=1)
        self.restore = nn.Linear(z, w)  # viewed as (8, w / 8)
        self.conv3 = nn.Conv1d(8, 4, 3, padding=1)
        self.conv4 = nn.Conv1d(4, 2, 3, padding=1)
        self.conv5 = nn.Conv1d(2, 1, 3, padding=1)

    @property
    def noise_dim(self) -> int:
        """The VAE samples ``z = mu + eps * sigma`` with one noise value per latent dimension."""
        return self.config.latent

    @property
    def row_width(self) -> int:
        """Samples per row the model takes: ``config.width``."""
        return self.config.width

    def _down(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        return F.conv1d(x, self.smooth.expand(channels, 1, 3), stride=2, padding=1, groups=channels)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` of shape ``(batch, width)`` -> mean and log-variance, each ``(batch, latent)``."""
        h = x.reshape(-1, 1, self.config.width)  # (batch, 1, width)
        h = self._down(self.sigma(self.conv0(h)))  # (batch, 4, width / 2)
        h = self._down(self.sigma(self.conv1(h)))  # (batch, 8, width / 4)
        h = self._down(self.sigma(self.conv2(h)))  # (batch, 16, width / 8)
        return self.conv_mu(h).mean(-1), self.conv_logvar(h).mean(-1)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``z`` of shape ``(batch, latent)`` -> beats ``(batch, width)``."""
        w = self.config.width
        h = self.restore(z).view(-1, 8, w // 8)  # (batch, 8, width / 8)
        h = self.sigma(self.conv3(F.interpolate(h, scale_factor=2)))  # (batch, 4, width / 4)
        h = self.sigma(self.conv4(F.interpolate(h, scale_factor=2)))  # (batch, 2, width / 2)
        return self.conv5(F.interpolate(h, scale_factor=2)).view(-1, w)  # (batch, width)

    def forward(
        self, x: torch.Tensor, eps: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reconstruction, mean and log-variance. ``z = mu + eps * sigma`` with ``eps`` given, or
        drawn when training, or zero (``z = mu``) in eval mode without ``eps``."""
        mu, logvar = self.encode(x)
        if eps is None:
            eps = torch.randn_like(mu) if self.training else torch.zeros_like(mu)
        z = mu + eps * torch.exp(0.5 * logvar)
        return self.decode(z), mu, logvar

    def losses(self, x: torch.Tensor, eps: torch.Tensor | None = None) -> torch.Tensor:
        """Per-beat loss, shape ``(batch,)``."""
        recon, mu, logvar = self(x, eps)
        mse = (recon - x.reshape(recon.shape)).square().mean(-1)
        kld = -(1 + logvar - mu.square() - logvar.exp()).mean(-1)
        return mse + self.config.kl_weight * kld

    def config_dict(self) -> dict:
        return asdict(self.config)
