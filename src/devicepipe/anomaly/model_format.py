"""The model file's format: its name, its version, the models and scalers it may hold."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

import devicepipe
from devicepipe.io.write import write_torch
from devicepipe.scale import MinMaxScaler, StandardScaler

#: File name of the model a run writes (what ``devicepipe score --model RUN_DIR`` reads).
MODEL_NAME = "model.pt"
#: What a model file says it is; files of another format are refused with one line.
MODEL_FORMAT = "devicepipe-model"
#: Bumped when the file changes in a way an older reader cannot follow. Format 2: the local
#: scorer's rule changed (see :data:`LOCAL_FROM`); a format-1 file of a local scorer is refused.
MODEL_FORMAT_VERSION = 2
#: The first model format whose ``scorer="local"`` is today's (format 1 had another rule and calibration).
LOCAL_FROM = 2


_SCALERS = {"standard": StandardScaler, "minmax": MinMaxScaler}


def write_model(det: BeatAnomalyDetector, path: str | Path) -> Path:
    """Write the fitted detector ``det`` to ``path`` (atomically): tensors and plain data only,
    in :data:`MODEL_FORMAT` version :data:`MODEL_FORMAT_VERSION`."""
    first = det.models_[0]
    return write_torch(
        {
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
        },
        path,
    )


if TYPE_CHECKING:
    from devicepipe.anomaly.estimator import BeatAnomalyDetector
