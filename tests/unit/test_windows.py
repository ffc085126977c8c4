"""Load-series windows: grid placement, gap filling, dropping, errors; checked against hand-built series."""

import numpy as np
import pytest
import torch

from devicepipe.errors import DevicepipeError
from devicepipe.windows import make_windows

HOUR_NS = 3_600_000_000_000
DAY0 = int(np.datetime64("2021-03-01T00:00", "ns").view(np.int64))


def _series(hours: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Values equal to the hour index (so interpolation is checkable), at the given hours since DAY0."""
    values = torch.as_tensor(hours, dtype=torch.float32, device=device)
    stamps = torch.as_tensor(DAY0 + hours * HOUR_NS, dtype=torch.int64, device=device)
    return values, stamps


def test_days_fill_short_gaps_and_drop_long_ones(device):
    hours = np.arange(4 * 24)
    missing = np.r_[30, 31, 60:65]  # day 1 misses 2 hours (filled), day 2 misses 5 (dropped)
    values, stamps = _series(np.setdiff1d(hours, missing), device)
    wins = make_windows(values, stamps, window_s=86400, step_s=3600, max_missing=2)
    assert wins.values.device == values.device and wins.values.shape == (3, 24) and wins.per_window == 24
    assert [str(s)[:10] for s in wins.starts] == ["2021-03-01", "2021-03-02", "2021-03-04"]
    assert wins.filled.tolist() == [0, 2, 0] and [str(d)[:10] for d in wins.dropped] == ["2021-03-03"]
    # the values are the hour index, so a filled hole must hold exactly its own index
    expected = np.stack([np.arange(0, 24), np.arange(24, 48), np.arange(72, 96)]).astype(np.float32)
    np.testing.assert_allclose(wins.values.cpu().numpy(), expected)


def test_windows_start_at_midnight_whatever_the_first_sample():
    values, stamps = _series(np.arange(5, 3 * 24), torch.device("cpu"))  # starts at 05:00 on day 0
    wins = make_windows(values, stamps, window_s=86400, step_s=3600, max_missing=5)
    assert str(wins.starts[0]) == "2021-03-01T00:00:00.000000000" and wins.filled[0] == 5
    # the hours before the first sample take the first value (nothing earlier to interpolate from)
    assert wins.values[0, :6].tolist() == [5.0] * 6
    wins = make_windows(values, stamps, window_s=86400, step_s=3600, max_missing=4)
    assert len(wins.values) == 2 and str(wins.dropped[0])[:10] == "2021-03-01"


def test_twelve_hour_windows():
    values, stamps = _series(np.arange(48), torch.device("cpu"))
    wins = make_windows(values, stamps, window_s=43200, step_s=3600)
    assert wins.values.shape == (4, 12) and wins.values[1, 0] == 12.0


def test_window_errors():
    values, stamps = _series(np.arange(48), torch.device("cpu"))
    with pytest.raises(DevicepipeError, match="whole number"):
        make_windows(values, stamps, window_s=5000, step_s=3600)
    with pytest.raises(DevicepipeError, match="whole number"):
        make_windows(values, stamps, window_s=3600, step_s=3600)  # one step per window
    off_grid = stamps.clone()
    off_grid[5] += 60_000_000_000  # one minute off
    with pytest.raises(DevicepipeError, match="not on a regular 3600-s grid"):
        make_windows(values, off_grid, window_s=86400, step_s=3600)
