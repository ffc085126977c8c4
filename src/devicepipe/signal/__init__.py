"""Device-agnostic signal kernels on ``(..., time)`` tensors; dtype and device follow the input."""

from devicepipe.signal.filters import convolve
from devicepipe.signal.peaks import find_peaks, peak_mask, sliding_max, sliding_min
from devicepipe.signal.segment import rows_at, segment, segment_between
from devicepipe.signal.wavelets import ricker

__all__ = [
    "convolve",
    "find_peaks",
    "peak_mask",
    "ricker",
    "rows_at",
    "segment",
    "segment_between",
    "sliding_max",
    "sliding_min",
]
