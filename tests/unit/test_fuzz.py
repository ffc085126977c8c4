"""Property-based tests: whatever the input, the readers and the detector end in a value or a
DevicepipeError, never another exception; peaks are sorted, unique and in range; a batch equals
its rows. The number of examples is bounded so that CI stays quick (DEVICEPIPE_FUZZ_EXAMPLES
raises it for a longer run)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import ecg_peaks
from devicepipe.io import read_series

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis (the dev extra) drives these tests")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("DEVICEPIPE_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# pieces a CSV is made of, good and bad
FIELD = st.one_of(
    st.sampled_from(["1", "-2.5", "3e4", "nan", "inf", "-inf", "1e39", "", " ", "x", "2020-01-01 00:00", "\ufeffa"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=6),
)
ROW = st.lists(FIELD, min_size=0, max_size=5)
CSV = st.tuples(
    st.lists(ROW, min_size=0, max_size=12), st.sampled_from([",", ";", "\t"]), st.sampled_from(["\n", "\r\n"])
)


def _read(data: bytes, suffix: str, **kwargs) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"x{suffix}"
        path.write_bytes(data)
        try:
            rec = read_series(path, sampling_rate=100, **kwargs)
        except DevicepipeError:
            return
        assert rec.samples.ndim in (1, 2) and rec.n_samples >= 1
        assert bool(torch.isfinite(rec.samples).all())  # the default policy lets nothing non-finite through


@FUZZ
@given(CSV, st.sampled_from([".csv", ".tsv"]))
def test_any_csv_ends_in_a_recording_or_a_clear_error(table, suffix):
    rows, delimiter, newline = table
    text = newline.join(delimiter.join(r) for r in rows) + (newline if rows else "")
    for encoding in ("utf-8", "utf-16"):
        _read(text.encode(encoding, errors="surrogatepass"), suffix)


@FUZZ
@given(st.binary(max_size=2000))
def test_any_bytes_end_in_a_recording_or_a_clear_error(data):
    _read(data, ".csv")
    _read(data, ".parquet")
    _read(data, ".npy")


@FUZZ
@given(
    st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=2, max_size=3000), st.sampled_from([100.0, 250.0])
)
def test_peaks_are_sorted_unique_in_range_and_a_batch_equals_its_rows(values, fs):
    x = torch.tensor(values, dtype=torch.float32)
    try:
        peaks = ecg_peaks(x, fs)
    except DevicepipeError:
        return
    p = peaks.numpy()
    assert p.dtype == np.int64 and np.all(np.diff(p) > 0) and (p.size == 0 or (p[0] >= 0 and p[-1] < x.numel()))
    batch = ecg_peaks(torch.stack([x, x.flip(0)]), fs)
    assert torch.equal(batch[0], peaks) and torch.equal(batch[1], ecg_peaks(x.flip(0), fs))
