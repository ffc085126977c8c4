"""Score detected beats against reference annotations (ANSI/AAMI EC57: a match within 150 ms),
and the AAMI classes of reference labels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import hertz
from devicepipe.ecg.ricker import EDGE_S, MATCH_TOLERANCE_S


@dataclass(frozen=True)
class BeatScore:
    """Detection accuracy against reference beats (ANSI/AAMI EC57 style)."""

    tp: int
    fp: int
    fn: int

    @property
    def sensitivity(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def ppv(self) -> float:
        """Positive predictivity."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def f1(self) -> float:
        return 2 * self.tp / (2 * self.tp + self.fp + self.fn) if self.tp + self.fp + self.fn else float("nan")

    def __add__(self, other: BeatScore) -> BeatScore:
        return BeatScore(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    def __str__(self) -> str:
        return f"TP {self.tp:,}, FP {self.fp:,}, FN {self.fn:,}; {self.shares()}"

    def shares(self) -> str:
        """Sensitivity, positive predictivity and F1 as a person reads them (:func:`share_text`),
        with why where one is undefined (no reference beat, no beat found)."""
        sensitivity = share_text(self.sensitivity) + (" (no reference beat)" if self.tp + self.fn == 0 else "")
        ppv = share_text(self.ppv) + (" (no beat found)" if self.tp + self.fp == 0 else "")
        return f"sensitivity {sensitivity}, positive predictivity {ppv}, F1 {share_text(self.f1)}"

    def to_dict(self) -> dict[str, float]:
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "sensitivity": self.sensitivity,
            "ppv": self.ppv,
            "f1": self.f1,
        }


def share_text(value: float | None) -> str:
    """A sensitivity, positive predictivity or F1 to four places; "-" where it has nothing to
    divide by (NaN or None), not "nan"."""
    return "-" if value is None or math.isnan(value) else f"{value:.4f}"


def _as_host_int(values: Any, what: str = "beats") -> np.ndarray:
    """Sorted int64 sample indices; a clear error for positions that are not whole finite numbers."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    array = np.asarray(values).reshape(-1)
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise DevicepipeError(f"evaluate_beats(): the {what} hold NaN or infinite positions.")
        if not np.equal(np.mod(array, 1), 0).all():
            raise DevicepipeError(f"evaluate_beats(): the {what} must be sample indices (whole numbers).")
    elif array.dtype.kind not in "iub":
        raise DevicepipeError(f"evaluate_beats(): the {what} must be sample indices, got {array.dtype}.")
    return np.sort(array.astype(np.int64))


#: The beat classes of ANSI/AAMI EC57 and the MIT-BIH annotation symbols each gathers: normal and
#: bundle-branch-block beats (N), supraventricular ectopic (S), ventricular ectopic (V), fusion (F),
#: paced and unclassifiable (Q).
AAMI_CLASSES = {"N": "NLRej", "S": "AaJS", "V": "VE", "F": "F", "Q": "/fQ"}


def aami_class(symbol: str) -> str | None:
    """The AAMI class (``"N"``, ``"S"``, ``"V"``, ``"F"``, ``"Q"``) of a MIT-BIH beat symbol, None for
    a symbol that is not a beat of any class (``""``, rhythm or noise annotations)."""
    for name, symbols in AAMI_CLASSES.items():
        if symbol and symbol in symbols:
            return name
    return None


def label_beats(
    reference: Any,
    symbols: Any,
    detected: Any,
    sampling_rate: float,
    *,
    tolerance_s: float = MATCH_TOLERANCE_S,
) -> np.ndarray:
    """The reference label of each detected beat: that of the nearest reference beat within
    ``tolerance_s``, or ``""`` where there is none.

    Parameters
    ----------
    reference : sample indices of the reference beats, shape ``(n_ref,)``, any order.
    symbols : their labels (``"N"``, ``"V"``, ...), shape ``(n_ref,)``.
    detected : sample indices of the detected beats, shape ``(n,)``, in the order wanted back.

    Returns
    -------
    str NumPy array of shape ``(n,)``, in the order of ``detected``.
    """
    ref = np.asarray(reference.detach().cpu() if isinstance(reference, torch.Tensor) else reference, dtype=np.int64)
    det = np.asarray(detected.detach().cpu() if isinstance(detected, torch.Tensor) else detected, dtype=np.int64)
    labels = np.asarray(symbols, dtype=str)
    if ref.shape != labels.shape:
        raise DevicepipeError(f"label_beats(): {ref.size} reference beats but {labels.size} labels.")
    out = np.full(det.shape, "", dtype=labels.dtype if labels.size else "<U1")
    if ref.size == 0 or det.size == 0:
        return out
    order = np.argsort(ref, kind="stable")
    ref, labels = ref[order], labels[order]
    right = np.clip(np.searchsorted(ref, det), 1, ref.size - 1) if ref.size > 1 else np.zeros_like(det)
    left = np.maximum(right - 1, 0)
    nearest = np.where(np.abs(ref[left] - det) <= np.abs(ref[right] - det), left, right)
    close = np.abs(ref[nearest] - det) <= tolerance_s * float(sampling_rate)
    out[close] = labels[nearest[close]]
    return out


def evaluate_beats(
    reference: Any,
    detected: Any,
    sampling_rate: float,
    *,
    tolerance_s: float = MATCH_TOLERANCE_S,
    n_samples: int | None = None,
    edge_s: float = EDGE_S,
) -> BeatScore:
    """Match detected beats to reference beats and count TP, FP and FN.

    A detection matches a reference beat within ``tolerance_s`` of it; each reference and each
    detection is matched at most once (closest pairs first). Beats within ``edge_s`` of either
    end are not scored (the end needs ``n_samples``, the recording's length).

    Parameters
    ----------
    reference, detected : sample indices (tensor, array or list), any order.
    sampling_rate : Hz.
    """
    fs = hertz(sampling_rate, "evaluate_beats()")
    if not (math.isfinite(tolerance_s) and tolerance_s >= 0 and math.isfinite(edge_s) and edge_s >= 0):
        raise DevicepipeError(
            f"evaluate_beats(): tolerance_s and edge_s must be finite and not negative, got {tolerance_s}, {edge_s}."
        )
    ref, det = _as_host_int(reference, "reference"), _as_host_int(detected, "detected")
    lo = edge_s * fs
    hi = np.inf if n_samples is None else n_samples - edge_s * fs
    ref = ref[(ref >= lo) & (ref < hi)]
    det = det[(det >= lo) & (det < hi)]
    tol = tolerance_s * fs
    if ref.size == 0 or det.size == 0:
        return BeatScore(0, int(det.size), int(ref.size))
    # each detection's nearest references on either side are its only candidates
    right = np.searchsorted(ref, det)
    pairs = []
    for side in (right - 1, right):
        ok = (side >= 0) & (side < ref.size)
        d_idx = np.flatnonzero(ok)
        r_idx = side[ok]
        dist = np.abs(ref[r_idx] - det[d_idx])
        close = dist <= tol
        pairs.append(np.stack([dist[close], d_idx[close], r_idx[close]], axis=1))
    candidates = np.concatenate(pairs)
    candidates = candidates[np.lexsort((candidates[:, 2], candidates[:, 1], candidates[:, 0]))]
    used_d = np.zeros(det.size, dtype=bool)
    used_r = np.zeros(ref.size, dtype=bool)
    tp = 0
    for _, d, r in candidates:
        if not used_d[d] and not used_r[r]:
            used_d[d] = used_r[r] = True
            tp += 1
    return BeatScore(tp=tp, fp=int(det.size - tp), fn=int(ref.size - tp))
