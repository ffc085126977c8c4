"""devicepipe: device-resident pipelines for long recordings.

Read a recording (CSV, Parquet, NPY, WFDB, EDF) straight onto a device, keep it there through
scaling, segmentation, training and scoring, and get the same answers on the CPU and a GPU.

The public API is imported lazily, so ``import devicepipe`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "DevicepipeError": "devicepipe.core.errors",
    "DeviceError": "devicepipe.core.errors",
    "ReadError": "devicepipe.core.errors",
    "resolve_device": "devicepipe.core.device",
    "device_report": "devicepipe.core.device",
    "Recording": "devicepipe.io",
    "TimeReport": "devicepipe.io",
    "read_series": "devicepipe.io",
    "read_stacked": "devicepipe.io",
    "StackedRecordings": "devicepipe.io",
    "OverrideRate": "devicepipe.io",
    "write_parquet": "devicepipe.io",
    "write_csv": "devicepipe.io",
    "write_npy": "devicepipe.io",
    "write_json": "devicepipe.io",
    "MinMaxScaler": "devicepipe.signal.scale",
    "StandardScaler": "devicepipe.signal.scale",
    "simulate_ecg": "devicepipe.simulate",
    "simulate_load": "devicepipe.simulate",
    "to_torch": "devicepipe.core.interop",
    "shares_memory": "devicepipe.core.interop",
    "parse_duration": "devicepipe.core.units",
    "ecg_peaks": "devicepipe.ecg",
    "ecg_classes": "devicepipe.ecg",
    "holter_summary": "devicepipe.heart.holter",
    "ecg_segment": "devicepipe.ecg",
    "ecg_peaks_chunked": "devicepipe.ecg",
    "evaluate_beats": "devicepipe.ecg",
    "read_beat_annotations": "devicepipe.io",
    "read_reference": "devicepipe.io",
    "hrv": "devicepipe.heart.rate",
    "HRV": "devicepipe.heart.rate",
    "nn_intervals": "devicepipe.heart.rate",
    "hrv_frequency": "devicepipe.heart.spectral",
    "run_beats": "devicepipe.pipelines",
    "run_ecg": "devicepipe.pipelines",
    "run_series": "devicepipe.pipelines",
    "run_score_series": "devicepipe.pipelines",
    "run_score": "devicepipe.pipelines",
    "run_train": "devicepipe.pipelines",
    "BeatAnomalyDetector": "devicepipe.anomaly",
    "load_model": "devicepipe.anomaly",
    "row_pyramid": "devicepipe.anomaly",
    "knn_distance": "devicepipe.anomaly",
    "local_residual": "devicepipe.anomaly",
    "evaluate_anomalies": "devicepipe.learning.score",
    "resample_rows": "devicepipe.signal.resample",
    "run_dataset": "devicepipe.batch",
    "find_recordings": "devicepipe.batch",
    "Engine": "devicepipe.batch",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'devicepipe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
