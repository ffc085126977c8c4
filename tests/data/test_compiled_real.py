"""The compiled short-call path gives the tensor path's peaks on every shared recording, every lead."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import require_data
from devicepipe.ecg.compiled import COMPILED_UP_TO, Plan, peaks_ricker_compiled
from devicepipe.ecg.ricker import Ricker, peaks_ricker
from devicepipe.io import read_series

RECORDS = ["mitdb/100", "mitdb_v/105", "mitdb_v/106", "mitdb_v/200", "cpsc2021", "cpsc2019"]


def pieces(record: str) -> list[tuple[str, np.ndarray, float]]:
    """Each lead of each recording under ``record``, cut into stretches of at most
    COMPILED_UP_TO samples (the last one whole if it is at least 2 s)."""
    path = require_data(record)
    paths = sorted(path.glob("*.hea")) if path.is_dir() else [path]
    out = []
    for hea in paths:
        series = read_series(hea.with_suffix(""))
        fs = float(series.sampling_rate)
        signal = series.samples.reshape(-1, series.samples.shape[-1]).float().numpy()
        for lead, row in enumerate(signal):
            for start in range(0, row.size, COMPILED_UP_TO):
                part = row[start : start + COMPILED_UP_TO]
                if part.size >= 2 * fs:
                    out.append((f"{hea.stem}:{lead}:{start}", part, fs))
    return out


@pytest.mark.parametrize("record", RECORDS)
def test_every_lead_of_every_shared_record_gives_the_same_peaks_both_ways(record):
    compared = handed_back = 0
    for name, part, fs in pieces(record):
        x = torch.from_numpy(np.ascontiguousarray(part))[None]
        want = peaks_ricker(x, fs)[1].numpy()
        got = peaks_ricker_compiled(x, fs)[1].numpy()
        assert np.array_equal(want, got), f"{name}: {np.setdiff1d(want, got)[:5]} / {np.setdiff1d(got, want)[:5]}"
        plan = Plan.of(Ricker(fs), part.size)
        handed_back += plan is None or plan.peaks(part) is None
        compared += 1
    assert compared > 0 and handed_back == 0, f"{handed_back} of {compared} stretches went to the tensor path"
