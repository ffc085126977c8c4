"""Models: a config dataclass plus an ``nn.Module`` each, with a shared interface.

Every model has ``encode(x) -> (mu, logvar or None)``, ``forward(x, eps=None) -> (recon, mu,
logvar or None)`` and ``losses(x, eps=None) -> per-row loss``. ``eps`` is the VAE's sampling
noise passed in explicitly, so that training is reproducible and a vmap ensemble can be
compared with members trained one by one.
"""

from devicepipe.errors import DevicepipeError
from devicepipe.models.autoencoder import MLPAutoencoder, MLPAutoencoderConfig
from devicepipe.models.vae import LightVAE, LightVAEConfig, Swish

__all__ = ["LightVAE", "LightVAEConfig", "MLPAutoencoder", "MLPAutoencoderConfig", "Swish", "build_model"]


def build_model(kind: str, config: dict):
    """Rebuild a model from its kind (class name) and config dict (as saved in a checkpoint)."""
    kinds = {"LightVAE": (LightVAE, LightVAEConfig), "MLPAutoencoder": (MLPAutoencoder, MLPAutoencoderConfig)}
    if kind not in kinds:
        raise DevicepipeError(f"build_model(): unknown model {kind!r}; expected one of {sorted(kinds)}.")
    model_cls, config_cls = kinds[kind]
    return model_cls(config_cls(**config))
