"""Readers on the real recordings in ../shared/data (see its README for the facts checked here)."""

import numpy as np
import pytest
import torch

from conftest import require_data
from devicepipe.core.errors import ReadError
from devicepipe.io import read_series


def test_mitdb_100_matches_wfdb(device):
    wfdb = pytest.importorskip("wfdb")
    path = require_data("mitdb/100")
    rec = read_series(path, device=device)
    assert rec.samples.shape == (2, 650_000)
    assert rec.sampling_rate == 360.0
    assert rec.channels == ("MLII", "V5") and rec.units == ("mV", "mV")
    assert rec.samples.device.type == device.type and rec.samples.dtype == torch.float32
    ref = wfdb.rdrecord(str(path))
    np.testing.assert_allclose(rec.samples[:, :5000].cpu().numpy(), ref.p_signal[:5000].T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rec.samples[:, -100:].cpu().numpy(), ref.p_signal[-100:].T, rtol=1e-6, atol=1e-6)


def test_mitdb_100_channel_selection():
    path = require_data("mitdb/100")
    v5 = read_series(path.with_suffix(".hea"), channel="V5")
    assert v5.samples.shape == (650_000,) and v5.channels == ("V5",)
    torch.testing.assert_close(read_series(path, channel=1).samples, v5.samples)
    with pytest.raises(ReadError, match=r"channel 'V1' not found in 100; channels are \['MLII', 'V5'\]"):
        read_series(path, channel="V1")


def test_aep_time_column_irregularities():
    path = require_data("electricity/AEP_hourly.csv")
    rec = read_series(path, "AEP_MW", time_column="Datetime")
    report = rec.time_report
    # the data README: 121,273 rows, 27 two-hour gaps, 4 duplicate timestamps (daylight saving).
    # It also calls the file unsorted, but this copy is in time order: pandas is the oracle for that.
    pd = pytest.importorskip("pandas")
    times = pd.to_datetime(pd.read_csv(path, usecols=["Datetime"])["Datetime"], format="%m/%d/%Y %H:%M")
    assert rec.n_samples == report.n_rows == 121_273
    assert report.was_sorted == times.is_monotonic_increasing
    assert report.n_duplicates == 4
    assert report.n_gaps == 27 and report.missing_steps == 27 and report.step_s == 3600
    assert str(report.start).startswith("2004-10-01T01:00") and str(report.end).startswith("2018-08-03T00:00")
    ts = rec.timestamps.numpy()
    assert (np.diff(ts) >= 0).all()
    merged = read_series(path, "AEP_MW", time_column="Datetime", duplicates="mean")
    assert merged.n_samples == 121_273 - 4
    assert (np.diff(merged.timestamps.numpy()) > 0).all()
