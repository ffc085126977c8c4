"""Find R peaks: :func:`ecg_peaks` dispatches ``method=`` through :data:`ECG_PEAK_METHODS`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.threads import detection_threads, using_threads
from devicepipe.ecg.compiled import peaks_ricker_compiled
from devicepipe.ecg.fuse import peaks_ricker_fused
from devicepipe.ecg.inputs import check_input
from devicepipe.ecg.ricker import Ricker, ordinary
from devicepipe.ecg.seed import peaks_seed
from devicepipe.signal.peaks import split_by_row

#: What a peak method maps: ``(batch, time)`` and a rate in Hz (and its keyword settings) to the
#: rows and columns of its peaks, sorted.
FindPeaks = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def ricker_defaults() -> dict[str, float]:
    """The ``"ricker"`` method's settings and their defaults (seconds, ratios and factors; see
    the module docstring), as :func:`ecg_peaks` takes them by keyword."""
    return {f.name: f.default for f in fields(Ricker) if f.name != "fs" and f.default is not MISSING}


#: The ``"ricker"`` method's settings by name (what :func:`ricker_defaults` gives, read once).
RICKER_OPTIONS: tuple[str, ...] = tuple(ricker_defaults())


@dataclass(frozen=True)
class PeakMethod:
    """A way to find R peaks, and what it supports: ``find`` (see :data:`FindPeaks`); ``fused``,
    the same from the leads of a recording together (``ecg_peaks(..., leads="fuse")``; None:
    not supported); ``chunks``, whether it finds the same peaks a chunk at a time (a recording
    read in chunks, ``--chunk``); ``settings``, its keyword settings (None: ``find``'s
    keyword-only parameters)."""

    find: FindPeaks
    fused: FindPeaks | None = None
    chunks: bool = False
    settings: Callable[[], list[str]] | None = None

    def options(self) -> list[str]:
        """The keyword settings the method accepts."""
        if self.settings is not None:
            return self.settings()
        return [p.name for p in inspect.signature(self.find).parameters.values() if p.kind is p.KEYWORD_ONLY]


#: Every peak method by name: a new one is one module and one line here.
ECG_PEAK_METHODS: dict[str, PeakMethod] = {
    "ricker": PeakMethod(
        peaks_ricker_compiled, fused=peaks_ricker_fused, chunks=True, settings=lambda: list(RICKER_OPTIONS)
    ),
    "seed": PeakMethod(peaks_seed),
}


def methods_that(supports: str) -> list[str]:
    """The peak methods that support ``"chunks"`` or ``"fused"`` leads, by name."""
    return [name for name, m in ECG_PEAK_METHODS.items() if (m.chunks if supports == "chunks" else m.fused)]


def ecg_contrast(x: torch.Tensor, sampling_rate: float, **options: float) -> torch.Tensor:
    """How far beats stand above the rest in each row of ``x`` (``(time,)`` or ``(batch, time)``):
    the typical QRS response of the ``"ricker"`` filter over its median response, ``(batch,)``
    (a scalar for one row). A row under ``min_contrast`` (6) is taken to hold no ECG, unless its
    response repeats at a beat's interval (a fast rhythm of wide beats, whose response is never
    quiet: ventricular tachycardia over 180 bpm)."""
    x = check_input(x, sampling_rate, "ecg_contrast()")
    rows = x.reshape(-1, x.shape[-1])
    r = Ricker(float(sampling_rate), **options)
    feature, _ = r.feature(rows, r.kernel(rows), *r.edge_means(rows, rows), start=True, end=True)
    block_max, _ = r.summaries(feature)
    contrast = r.contrast(block_max, feature[..., :: r.subsample_stride(rows.shape[-1])])[1]
    return contrast[0] if x.ndim == 1 else contrast


def options_of(method: str) -> list[str]:
    """The keyword settings a peak method accepts."""
    return ECG_PEAK_METHODS[method].options()


def ecg_peaks(
    x: torch.Tensor, sampling_rate: float, *, method: str = "ricker", leads: str = "each", **options: Any
) -> torch.Tensor | list[torch.Tensor]:
    """Find the R peaks of an ECG.

    Parameters
    ----------
    x : Tensor of shape ``(time,)``, or ``(batch, time)`` for many equal-length recordings
        processed in one pass; with ``leads="fuse"``, ``(leads, time)`` for the leads of one
        recording or ``(batch, leads, time)``; any device.
    sampling_rate : Hz (125 to 1000 Hz tested).
    method : a key of ``ECG_PEAK_METHODS``: ``"ricker"`` (default) or ``"seed"``.
    leads : ``"each"`` (default: every row is a recording of its own) or ``"fuse"`` (the rows of
        ``x`` are leads of one recording, and one set of beats is found from all of them: each
        10-s stretch takes the beats of the lead whose beats there look most like its typical
        beat, so a lead with artefacts, noise or a lost contact is passed over where it has
        them; ``"ricker"`` only).
    options : keyword settings of the method (for ``"ricker"``: ``sigma_s``, ``refractory_s``,
        ``threshold``, ... in seconds or as fractions; see the module docstring).

    On the CPU, ``"ricker"`` detects float32 rows of up to 262,144 samples with its steps
    compiled by Numba (:mod:`devicepipe.ecg.compiled`: the same peaks; the first such call of a
    process loads the compiled code, and the first after an install compiles it;
    ``DEVICEPIPE_COMPILED=0`` in the environment turns it off).

    Returns
    -------
    int64 Tensor of shape ``(n_peaks,)`` of sample indices on ``x``'s device, sorted; for a
    ``(batch, time)`` input (``(batch, leads, time)`` when fused), a list with one such tensor
    per recording.
    """
    if leads not in ("each", "fuse"):
        raise DevicepipeError(f"ecg_peaks(): leads must be 'each' or 'fuse', got {leads!r}.")
    x = check_input(x, sampling_rate, "ecg_peaks()", leads=leads == "fuse")
    if method not in ECG_PEAK_METHODS:
        raise DevicepipeError(f"ecg_peaks(): unknown method {method!r}; choose one of {sorted(ECG_PEAK_METHODS)}.")
    chosen = ECG_PEAK_METHODS[method]
    fused = chosen.fused if leads == "fuse" else None
    if leads == "fuse" and fused is None:
        raise DevicepipeError(f"ecg_peaks(): leads='fuse' needs a method of {methods_that('fused')}, got {method!r}.")
    find = chosen.find
    accepted = options_of(method)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise DevicepipeError(
            f"ecg_peaks(): method {method!r} has no option {unknown[0]!r}; its options are {accepted or 'none'}."
        )
    threads = using_threads(detection_threads(x.numel(), x.device))  # short inputs: one thread
    if fused is not None:
        many = x.ndim == 3
        with threads, torch.inference_mode():
            rows, cols = fused(x if many else x[None], float(sampling_rate), **options)
        rows, cols = ordinary(rows, cols)
        per_recording = split_by_row(rows, cols, x.shape[0] if many else 1)
        return per_recording if many else per_recording[0]
    with threads, torch.inference_mode():  # no autograd bookkeeping: a tenth of a short call's time
        rows, cols = find(x.reshape(-1, x.shape[-1]), float(sampling_rate), **options)
    rows, cols = ordinary(rows, cols)
    per_row = split_by_row(rows, cols, 1 if x.ndim == 1 else x.shape[0])
    return per_row[0] if x.ndim == 1 else per_row
