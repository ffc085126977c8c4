"""Read a model file back (:func:`load_model`): a fitted detector from ``model.pt`` or a run directory."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from devicepipe.anomaly.estimator import BeatAnomalyDetector
from devicepipe.anomaly.model_format import (
    LOCAL_FROM,
    MODEL_FORMAT,
    MODEL_FORMAT_VERSION,
    SCALERS,
    content_digest,
)
from devicepipe.artifacts.names import CHECKPOINT_NAME, ENSEMBLE_NAME, MODEL_NAME
from devicepipe.core.device import resolve_device
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import choose_threads, most_threads
from devicepipe.models.kinds import ModelKind, kind_of_module
from devicepipe.scorers import SCORER_KINDS


def _model_file(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        candidate = p / MODEL_NAME
        if candidate.exists():
            return _model_file(candidate)
        others = [n for n in (CHECKPOINT_NAME, ENSEMBLE_NAME) if (p / n).exists()]
        why = (
            f"it holds {others[0]}, written by an older devicepipe that saved no {MODEL_NAME}; rerun that run"
            if others
            else "is it the directory of an 'ecg' or 'train' run?"
        )
        raise DevicepipeError(f"no model in {p}: {MODEL_NAME} not found ({why}).")
    if not p.exists():
        raise DevicepipeError(f"model {p} does not exist; give a run directory or its {MODEL_NAME}.")
    if not p.is_file():  # (a named pipe or a device: reading it would wait for ever)
        raise DevicepipeError(f"model {p} is not a file; give a run directory or its {MODEL_NAME}.")
    return p


def _read_state(file: Path) -> tuple[dict[str, Any], ModelKind]:
    """The checked contents of a model file and its kind of model (see :data:`devicepipe.models.kinds.MODEL_KINDS`)."""
    if not zipfile.is_zipfile(file):  # (what torch.save writes: torch.load's own error would be a paragraph)
        raise DevicepipeError(
            f"cannot read model {file}: it is not the archive torch.save writes (damaged or truncated, or not a "
            f"model file at all); give a run directory or its {MODEL_NAME}."
        )
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        why = next((ln for ln in lines if "Unsupported global" in ln), lines[0])
        raise DevicepipeError(
            f"cannot read model {file}: it is damaged or truncated, or holds more than tensors and plain data "
            f"({why[:200]})."
        ) from None
    if not isinstance(state, dict) or state.get("format") != MODEL_FORMAT:
        if isinstance(state, dict) and ("optimizer" in state or "members" in state and "format" not in state):
            raise DevicepipeError(
                f"{file} is a training checkpoint, not a model file; give its run directory's {MODEL_NAME}."
            )
        raise DevicepipeError(f"{file} is not a devicepipe model file (no '{MODEL_FORMAT}' marker).")
    version = state.get("format_version")
    if not isinstance(version, int) or version > MODEL_FORMAT_VERSION:
        raise DevicepipeError(
            f"{file} is model format {version} (written by devicepipe {state.get('devicepipe')}); this devicepipe "
            f"reads format {MODEL_FORMAT_VERSION} and older: upgrade devicepipe to load it."
        )
    if version < LOCAL_FROM and state.get("params", {}).get("scorer") == "local":
        raise DevicepipeError(
            f"{file} is a model of the local scorer written by devicepipe {state.get('devicepipe')}, whose rule "
            "has changed since: train it again (devicepipe train, or the run that wrote it)."
        )
    if "digest" in state and state["digest"] != content_digest(state):  # (files of older versions have none)
        raise DevicepipeError(
            f"{file} has changed since devicepipe wrote it: its contents no longer match the digest written with "
            "them (a damaged disk or copy, or an edit); copy it again from where it was written, or train it again."
        )
    kind = kind_of_module(str(state.get("model_kind")))
    if kind is None or state.get("estimator") != BeatAnomalyDetector.__name__:
        raise DevicepipeError(f"{file} holds a {state.get('model_kind')} model, which this devicepipe cannot score.")
    return state, kind


def _members(state: dict[str, Any], kind: ModelKind, dev: torch.device, file: Path) -> tuple[list[nn.Module], Any]:
    """The members' models and the scaler of a model file's contents, on ``dev``."""
    model_cls, config_cls = kind.module, kind.config
    try:
        models = []
        for weights in state["members"]:
            m = model_cls(config_cls(**state["config"]))
            m.load_state_dict(weights)
            models.append(m.to(dev).eval())
    except (RuntimeError, TypeError, KeyError) as exc:
        raise DevicepipeError(f"{file}: its weights do not fit its model ({str(exc).splitlines()[0][:160]}).") from None
    scaler = None
    if state.get("scaler") is not None:
        scaler = SCALERS["standard" if state["scaler"]["kind"] == "StandardScaler" else "minmax"]()
        scaler.load_state_dict(state["scaler"]).to(dev)
    return models, scaler


def load_model(path: str | Path, device: str | torch.device = "auto") -> BeatAnomalyDetector:
    """A fitted :class:`BeatAnomalyDetector` from a model file or a run directory holding ``model.pt``.

    Read with ``weights_only=True`` (a file from elsewhere cannot run code) and placed on
    ``device`` (a model trained on a GPU scores on a CPU and the reverse). The result has
    ``models_``, ``scaler_``, ``threshold_``, ``train_scores_``, ``get_params()`` (the
    settings it was trained with), ``geometry_`` (what rows it takes) and ``path_`` (``path``
    as given). A training
    checkpoint, a foreign or damaged file, or one of a newer format is refused with one line.
    """
    file = _model_file(path)
    dev = resolve_device(device)
    state, kind = _read_state(file)
    params = dict(state["params"])
    params["device"] = str(device) if not isinstance(device, torch.device) else str(device)
    known = set(BeatAnomalyDetector._param_names())
    det = BeatAnomalyDetector(**{k: v for k, v in params.items() if k in known})
    try:
        det._kind  # noqa: B018 - the estimator's registry knows the scorer
    except KeyError:
        raise DevicepipeError(f"{file}: its scorer {det.scorer!r} is not one of {', '.join(SCORER_KINDS)}.") from None
    models, scaler = _members(state, kind, dev, file)
    det.device_ = dev
    det.models_ = models
    det.scaler_ = scaler
    det.n_features_in_ = int(state["n_features_in"])
    det.width_ = int(state["width"])
    det.histories_ = state.get("histories", [])
    probe = torch.zeros(det.batch_size, det.width_, device=dev)
    try:
        # (the threads it was trained with are a setting of that machine: at most what this one runs)
        threads = None if det.threads is None else max(1, min(int(det.threads), most_threads()))
        det.threads_ = choose_threads(models[0], probe, threads=threads, copies=len(models))
    except RuntimeError as exc:
        raise DevicepipeError(
            f"{file}: the model's parts do not fit together: its models do not take rows of its width "
            f"{det.width_} ({str(exc).splitlines()[0][:100]}). It was changed after devicepipe wrote it; use the file "
            "as written, or train the model again."
        ) from None
    det.train_scores_ = state["train_scores"].to(dev)
    det.reference_ = None if state.get("reference") is None else state["reference"].to(dev)
    det.calibration_ = {k: tuple(v) for k, v in (state.get("calibration") or {}).items()}
    neighbours = state.get("neighbours", params.get("neighbours"))
    if det.reference_ is None:
        det.neighbours_ = None
    else:
        det.neighbours_ = det._k(det.reference_.shape[0]) if neighbours in (None, "auto") else int(neighbours)
    rows = int(det.train_scores_.numel())
    det.fit_rows_ = dict(state.get("fit_rows") or {"rows": rows, "held_out": 0})
    if det._kind.uses_reference and det.reference_ is None:
        raise DevicepipeError(f"{file}: its scorer {det.scorer!r} needs the training rows, which the file lacks.")
    det.threshold_ = float(state["threshold"])
    det.geometry_ = dict(state.get("geometry") or {})
    det.versions_ = {"devicepipe": state.get("devicepipe"), "torch": state.get("torch")}
    det.trained_on_ = state.get("trained_on")
    det.path_ = str(path)  # where it was read from, as named: a run directory or the file
    _check_parts(det, file)
    return det


def _check_parts(det: BeatAnomalyDetector, file: Path) -> None:
    """Refuse, with one line, a model whose parts do not fit together (a file changed after it was
    written): a threshold or training scores that are not finite numbers, a width or neighbour
    count out of range, or parts that fail to score a row."""
    scores = det.train_scores_
    problems = []
    if not math.isfinite(det.threshold_):
        problems.append(f"its threshold is {det.threshold_}")
    if scores.ndim != 1 or scores.numel() == 0 or not bool(torch.isfinite(scores).all()):
        problems.append("its training scores are missing or not finite")
    if det.n_features_in_ < 1 or det.width_ < 1:
        problems.append(f"it takes rows of {det.n_features_in_} columns at width {det.width_}")
    if det.reference_ is not None and not (1 <= (det.neighbours_ or 0) <= det.reference_.shape[0]):
        problems.append(f"its {det.neighbours_} neighbours are not within its {det.reference_.shape[0]} training rows")
    if not problems:
        try:  # the parts together: a row of zeros through the scaler, the models and the scorer
            det.decision_function(torch.zeros(1, det.n_features_in_, device=det.device_))
        except (RuntimeError, KeyError, ValueError, IndexError, TypeError, DevicepipeError) as exc:
            problems.append(f"its parts fail to score a row ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})")
    if problems:
        raise DevicepipeError(
            f"{file}: the model's parts do not fit together: {'; '.join(problems)}. It was changed after devicepipe "
            "wrote it; use the file as written, or train the model again."
        )
