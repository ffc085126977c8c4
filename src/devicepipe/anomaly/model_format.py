"""The model file's format: its name, its version, the models and scalers it may hold."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

import devicepipe
from devicepipe.io.write import write_torch
from devicepipe.models import as_model
from devicepipe.signal.scale import MinMaxScaler, StandardScaler

#: What a model file says it is; files of another format are refused with one line.
MODEL_FORMAT = "devicepipe-model"
#: Bumped when the file changes in a way an older reader cannot follow. Format 2: the local
#: scorer's rule changed (see :data:`LOCAL_FROM`); a format-1 file of a local scorer is refused.
MODEL_FORMAT_VERSION = 2
#: The first model format whose ``scorer="local"`` is today's (format 1 had another rule and calibration).
LOCAL_FROM = 2


SCALERS = {"standard": StandardScaler, "minmax": MinMaxScaler}


def write_model(det: BeatAnomalyDetector, path: str | Path) -> Path:
    """Write the fitted detector ``det`` to ``path`` (atomically): tensors and plain data only,
    in :data:`MODEL_FORMAT` version :data:`MODEL_FORMAT_VERSION`."""
    first = as_model(det.models_[0])
    state = {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "devicepipe": devicepipe.__version__,
        "torch": str(torch.__version__),
        "estimator": type(det).__name__,
        "params": det.get_params(),
        "model_kind": type(first).__name__,
        "config": first.config_dict(),
        "members": [{k: v.detach().cpu() for k, v in m.state_dict().items()} for m in det.models_],
        "scaler": None if det.scaler_ is None else det.scaler_.state_dict(),
        "n_features_in": det.n_features_in_,
        "width": det.width_,
        "threshold": det.threshold_,
        "threshold_rule": det.threshold_rule,
        "train_scores": det.train_scores_.detach().cpu(),
        "reference": None if det.reference_ is None else det.reference_.detach().cpu(),
        "neighbours": det.neighbours_,
        "fit_rows": det.fit_rows_,
        "calibration": det.calibration_,
        "histories": det.histories_,
        "trained_on": str(det.device_),
        "geometry": det.geometry_,
    }
    return write_torch({**state, "digest": content_digest(state)}, path)


def content_digest(state: dict[str, Any]) -> str:
    """SHA-256 of a model file's contents (every key but ``digest``; tensors by dtype, shape and
    bytes, plain values by type and value): written with the file, so that a file changed after
    devicepipe wrote it (a bit flipped on a disk or in a copy) is refused, not scored with."""
    h = hashlib.sha256()
    _digest_into(h, {k: v for k, v in state.items() if k != "digest"})
    return h.hexdigest()


def _digest_into(h: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        h.update(f"D{len(value)}".encode())
        for key in sorted(value, key=str):
            h.update(f"K{key!s}".encode())
            _digest_into(h, value[key])
    elif isinstance(value, (list, tuple)):
        h.update(f"L{len(value)}".encode())
        for item in value:
            _digest_into(h, item)
    else:
        h.update(f"V{type(value).__name__}:{value!r}".encode())


if TYPE_CHECKING:
    from devicepipe.anomaly.estimator import BeatAnomalyDetector
