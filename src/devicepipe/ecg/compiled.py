"""The ``"ricker"`` detector compiled with Numba, for short recordings on the CPU.

The same steps as :func:`~devicepipe.ecg.ricker.peaks_ricker` on one row (the Ricker filter, the
candidates and their refinement, the block thresholds, the T-wave and polarity rules and the
search-back; see :class:`~devicepipe.ecg.ricker.Ricker`), written as loops over the row's samples
and candidates. A short call of the tensor path is bound by its operators' fixed cost (a
thousand of them for a 10-s record), not by the samples; compiled, the call costs what its
samples do. It answers with the same peaks: the arithmetic is the tensor path's (float32 where
that is float32, float64 where that accumulates in float64), so only a comparison within a
float32 rounding of a tie could differ, and the tests compare both paths on every shared record.

What it does not compile it hands back (:meth:`Plan.of` or :meth:`Plan.peaks` return None),
and the tensor path answers: where Numba cannot load the compiled code (:func:`loops`); a row
of low contrast, whose rhythm check reads its autocorrelation; a row too short for the filter's
two ends; a rate under 94 Hz, where candidates are found sample by sample.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from devicepipe.ecg.ricker import (
    ONE_SIGN,
    ROUNDING,
    Ricker,
    peaks_ricker,
    samples,
)
from devicepipe.ecg.spikes import SPIKE_PASSES

__all__ = ["COMPILED_ENV", "COMPILED_UP_TO", "Plan", "compiled_suits", "loops", "peaks_ricker_compiled", "taps"]

#: Rows up to this many samples take the compiled path on the CPU (where one call is cheaper
#: compiled; see BENCHMARKS.md, "Beat detection").
COMPILED_UP_TO = 1 << 18
#: The environment variable that turns the compiled path off (``0``) for a process. A process
#: pays for loading the compiled code once (0.9 s on the 2-core machine,
#: benchmarks/results/compile_once.md) and each short call then saves a few milliseconds: a
#: command on one recording sets it (:func:`devicepipe.cli.many.one_recording`).
COMPILED_ENV = "DEVICEPIPE_COMPILED"
#: The values of :data:`COMPILED_ENV` that turn the path off.
OFF = ("0", "false", "no", "off")


def compiled_suits(x: torch.Tensor) -> bool:
    """Whether rows ``x`` (``(batch, time)``) are for the compiled path: float32 on the CPU, at
    most :data:`COMPILED_UP_TO` samples each, and the path not turned off (:data:`COMPILED_ENV`)."""
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and x.shape[-1] <= COMPILED_UP_TO
        and os.environ.get(COMPILED_ENV, "1").strip().lower() not in OFF
    )


def loops() -> ModuleType | None:
    """:mod:`devicepipe.ecg.compiled_loops`, imported (and Numba with it) on the first compiled
    call; None where Numba cannot load it (no cache folder it may write, beside the package or in
    the user's): the tensor path answers then."""
    try:
        from devicepipe.ecg import compiled_loops  # noqa: PLC0415 - Numba only where a call is compiled
    except (ImportError, RuntimeError):
        return None
    return compiled_loops


def taps(r: Ricker) -> np.ndarray:
    """``r.kernel``'s taps (the zero-sum Ricker wavelet, float32 ``(taps,)``), the same values
    compiled: a few microseconds, where the tensor operators took a tenth of a short call."""
    from devicepipe.ecg import compiled_loops  # noqa: PLC0415 - Numba only where a call is compiled

    return compiled_loops.ricker_taps(r.sigma_s * r.fs, r.taps)


@dataclass(frozen=True)
class Plan:
    """What the compiled detector takes for rows of ``n`` samples with settings ``r``: the filter's
    taps, the settings in samples (``ints``) and as float32 factors (``floats``), in the order
    :func:`~devicepipe.ecg.compiled_loops.detect` reads them."""

    kernel: np.ndarray
    ints: np.ndarray
    floats: np.ndarray
    rr_limit: float

    @classmethod
    def of(cls, r: Ricker, n: int) -> Plan | None:
        """The plan for rows of ``n`` samples; None where the tensor path must answer (a rate
        under 94 Hz, rows too short for the filter's two ends, or long enough to be subsampled)."""
        if r.sub <= 1 or n <= 2 * r.taps or Ricker.subsample_stride(n) != 1 or loops() is None:
            return None
        kernel = taps(r)
        ints = (
            r.block,
            r.sub,
            r.refractory,
            samples(r.refine_s, r.fs),
            r.spike_window,
            min(samples(r.edge_s, r.fs), n),
            samples(r.envelope_s / r.block_s, 1.0),
            samples(r.level_s / r.block_s, 1.0),
            samples(r.close_s, r.fs),
            SPIKE_PASSES,
        )
        floats = (
            r.threshold,
            r.global_floor,
            r.noise_factor,
            r.close_ratio,
            r.min_contrast,
            r.polarity_ratio,
            r.searchback_ratio,
            ROUNDING,
            ONE_SIGN,
            2 * r.threshold,
            1000.0 / r.fs,
            r.spike_ms,
        )
        return cls(kernel, np.array(ints, np.int64), np.array(floats, np.float32), float(r.searchback_rr))

    def peaks(self, x: np.ndarray) -> np.ndarray | None:
        """The R peaks of one row ``x`` (``(n,)`` float32), int64 sample indices, sorted; None
        where its contrast is low and the tensor path's rhythm check must answer."""
        from devicepipe.ecg.compiled_loops import detect  # noqa: PLC0415 - Numba only where a call is compiled

        found, handed_back = detect(np.ascontiguousarray(x), self.kernel, self.ints, self.floats, self.rr_limit)
        return None if handed_back else found

    def rows(self, rows: np.ndarray) -> list[np.ndarray | None]:
        """:meth:`peaks` of each row of ``rows`` (``(batch, n)``)."""
        return [self.peaks(row) for row in rows]


def peaks_ricker_compiled(x: torch.Tensor, sampling_rate: float, **options: float) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~devicepipe.ecg.ricker.peaks_ricker` (rows ``(batch, time)`` to the rows and columns
    of their peaks, sorted), compiled where :func:`compiled_suits` and :meth:`Plan.of` say so, on
    torch's intra-op threads (a share of the rows each), the tensor path elsewhere: the same peaks."""
    plan = Plan.of(Ricker(float(sampling_rate), **options), x.shape[-1]) if compiled_suits(x) else None
    if plan is None:
        return peaks_ricker(x, sampling_rate, **options)
    rows = x.numpy()
    threads = min(torch.get_num_threads(), rows.shape[0])
    if threads > 1:  # (the compiled steps leave the GIL: the threads run together)
        with ThreadPoolExecutor(threads) as pool:
            found = [p for part in pool.map(plan.rows, np.array_split(rows, threads)) for p in part]
    else:
        found = plan.rows(rows)
    peaks = [
        p if p is not None else peaks_ricker(x[i : i + 1], sampling_rate, **options)[1].numpy()
        for i, p in enumerate(found)  # a row of low contrast: the tensor path reads its rhythm
    ]
    cols = np.concatenate(peaks) if len(peaks) > 1 else peaks[0]
    counts = [len(p) for p in peaks]
    return torch.from_numpy(np.repeat(np.arange(len(peaks), dtype=np.int64), counts)), torch.from_numpy(cols)
