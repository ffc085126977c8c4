"""Evaluation harness on the shared reference data: beat accuracy per annotated record, ECG5000 ROC AUC.

Used by the benchmark scripts beside it and by the tests under ``tests/data`` (which put
this folder on ``sys.path``); it names the shared data's files, so it is not part of the
library.

``ecg5000_auc``: train on the normal beats (class 1) of the UCR ECG5000 training split, score
every beat of the test split, and report the ROC AUC of normal against abnormal (classes
2-5). Rows of 140 samples are resampled to 128 (the VAE's width is a power of two) and
standardised with the training normals' mean and deviation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import ecg_peaks, evaluate_beats
from devicepipe.io import read_beat_annotations, read_series
from devicepipe.learning.ensemble import fit_ensemble
from devicepipe.learning.learn import LearnSettings
from devicepipe.learning.score import roc_auc, score
from devicepipe.learning.train import fit
from devicepipe.models import LightVAE, LightVAEConfig
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.scale import StandardScaler

__all__ = [
    "ANNOTATED_RECORDS",
    "AucResult",
    "annotated_records",
    "detection_records",
    "DETECTION_SETS",
    "ecg5000_auc",
    "load_ecg5000",
    "score_record",
]

#: The reference-annotated records of the shared data: (group, record) pairs.
ANNOTATED_RECORDS = (("mitdb", "100"),) + tuple(
    ("cpsc2021", f"data_{r}") for r in ("21_7", "21_8", "21_9", "84_1", "84_2", "84_3", "92_12", "92_19", "92_4")
)


def annotated_records(data: str | Path) -> list[tuple[str, str, Path]]:
    """(group, record name, record path) of MIT-BIH 100 and the nine CPSC 2021 records under ``data``."""
    return [(group, name, Path(data) / group / name) for group, name in ANNOTATED_RECORDS]


#: The record sets beat detection is measured on, in the order the tables show them.
DETECTION_SETS = ("mitdb", "cpsc2021", "cpsc2019")


def detection_records(data: str | Path) -> list[tuple[str, str, Path]]:
    """(set, record name, record path) of every beat-annotated record: MIT-BIH 100, the nine
    CPSC 2021 records and the CPSC 2019 records (10-s, 500 Hz) found under ``data/cpsc2019``."""
    cpsc2019 = sorted((Path(data) / "cpsc2019").glob("*.hea"))
    return annotated_records(data) + [("cpsc2019", h.stem, h.with_suffix("")) for h in cpsc2019]


def score_record(path: str | Path, method: str = "ricker", **options: Any) -> tuple[Any, int, float]:
    """Our detector on the first channel of a WFDB record against its beat annotations.

    Returns (BeatScore, detected beats, sampling rate), EC57 convention (150 ms, 0.5 s edges).
    """
    rec = read_series(path, channel=0)
    ref = read_beat_annotations(path)
    peaks = ecg_peaks(rec.samples, rec.sampling_rate, method=method, **options)
    score = evaluate_beats(ref.samples, peaks, rec.sampling_rate, n_samples=rec.n_samples)
    return score, int(peaks.numel()), rec.sampling_rate


def load_ecg5000(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train rows, train labels, test rows, test labels) from ``ECG5000_TRAIN.txt`` and ``ECG5000_TEST.npy``."""
    folder = Path(folder)
    train_path, test_path = folder / "ECG5000_TRAIN.txt", folder / "ECG5000_TEST.npy"
    for p in (train_path, test_path):
        if not p.exists():
            raise DevicepipeError(f"ECG5000 file not found: {p}.")
    train = np.loadtxt(train_path, dtype=np.float32)
    test = np.load(test_path).astype(np.float32)
    return train[:, 1:], train[:, 0].astype(int), test[:, 1:], test[:, 0].astype(int)


@dataclass(frozen=True)
class AucResult:
    auc: float
    members: int
    epochs: int  # epochs run (the most of any member)
    latent: int
    n_train: int
    n_test: int


def ecg5000_auc(
    folder: str | Path,
    *,
    members: int = 1,
    epochs: int | None = 300,
    latent: int = 4,
    seed: int = 0,
    device: str | torch.device = "cpu",
    width: int = 128,
    batch_size: int = 64,
    lr: float = 3e-3,
) -> AucResult:
    """Train a VAE (or a ``members``-model vmap ensemble) on ECG5000's normal training beats; AUC on the test split.

    ``epochs=None`` trains as the pipelines do by default: until the validation loss (10 % of
    the normal beats) has not improved by 0.1 % for 20 epochs, at most 300 epochs, keeping
    the best epoch's weights.
    """
    x_train, y_train, x_test, y_test = load_ecg5000(folder)
    dev = torch.device(device)
    normal = resample_rows(torch.from_numpy(x_train[y_train == 1]).to(dev), width)
    test = resample_rows(torch.from_numpy(x_test).to(dev), width)
    scaler = StandardScaler().fit(normal.reshape(-1))
    normal = scaler.transform(normal.reshape(-1)).reshape(normal.shape)
    test = scaler.transform(test.reshape(-1)).reshape(test.shape)

    def make(s: int) -> torch.nn.Module:
        torch.manual_seed(s)
        return LightVAE(LightVAEConfig(width=width, latent=latent)).to(dev)

    if epochs is None:
        defaults = LearnSettings()
        common = dict(
            epochs=300,
            batch_size=batch_size,
            lr=lr,
            val_fraction=defaults.val_fraction,
            patience=defaults.patience,
            min_improvement=defaults.min_improvement,
        )
    else:
        common = dict(epochs=epochs, batch_size=batch_size, lr=lr, val_fraction=0.0)
    if members > 1:
        ens = fit_ensemble(make, normal, members=members, seed=seed, **common)
        models, ran = ens.members, max(len(h.train) for h in ens.histories)
    else:
        model = make(seed)
        ran = len(fit(model, normal, seed=seed, **common).train)
        models = model
    scores = score(models, test).scores.cpu().numpy()
    return AucResult(roc_auc(y_test != 1, scores), members, ran, latent, int(normal.shape[0]), int(test.shape[0]))
