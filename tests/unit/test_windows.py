"""Load-series windows: grid placement, gap filling, dropping, errors; checked against hand-built series."""

import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.signal.windows import departures, flat_windows, make_windows, windows_holding

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


def _days(n_days: int, start: str = "2021-03-01") -> tuple[np.ndarray, np.ndarray]:
    """``n_days`` hourly days: weekdays a two-peak shape, weekends 30 % lower, and their starts."""
    starts = np.datetime64(start, "ns") + np.arange(n_days) * np.timedelta64(1, "D")
    hour = np.arange(24)
    shape = 100 + 40 * np.exp(-0.5 * ((hour - 9) / 2) ** 2) + 60 * np.exp(-0.5 * ((hour - 19) / 2) ** 2)
    weekday = (starts.astype("datetime64[D]").view(np.int64) + 3) % 7  # 0 = Monday
    values = np.where(weekday[:, None] >= 5, 0.7, 1.0) * shape[None, :]
    return values, starts


def test_departures_say_low_for_an_outage_and_high_for_a_spike_against_the_same_weekday():
    values, starts = _days(9 * 7)  # from a Monday
    values[20, 10:16] *= 0.3  # an outage from 10:00 to 15:00 on a Sunday
    values[30, 12:17] *= 1.5  # an afternoon spike on a Wednesday
    dep = departures(values, starts, 86_400)
    assert dep.direction[20] == "low" and dep.direction[30] == "high"
    # the largest departure: hand-computed from the shape (the like days are unchanged weekdays)
    assert 10 <= dep.step[20] <= 15 and dep.share[20] == pytest.approx(-0.7)
    assert 12 <= dep.step[30] <= 16 and dep.share[30] == pytest.approx(0.5)
    # a weekend day is compared with weekends (not with the weekdays around it): no departure
    saturday = int(np.flatnonzero((starts.astype("datetime64[D]").view(np.int64) + 3) % 7 == 5)[4])
    assert dep.share[saturday] == pytest.approx(0.0) and dep.like[saturday] == 8
    np.testing.assert_allclose(dep.usual[saturday], values[saturday])
    # at the ends of the series, fewer like days: the first day has only the four after it
    assert dep.like[0] == 4 and dep.like[28] == 8 and dep.like[27] == 7


def test_departures_of_a_window_longer_than_a_week_compare_neighbours():
    values = np.ones((6, 4))
    values[2] = [1, 1, 3, 1]
    starts = np.datetime64("2021-01-04", "ns") + np.arange(6) * np.timedelta64(14, "D")
    dep = departures(values, starts, 14 * 86_400)
    assert dep.direction[2] == "high" and dep.step[2] == 2 and dep.share[2] == pytest.approx(2.0)
    assert dep.like.tolist() == [4, 5, 5, 5, 5, 4]  # the other windows, up to four either side


def test_a_window_with_no_like_window_is_compared_with_the_median_window():
    values = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 1.0]])
    starts = np.datetime64("2021-01-04", "ns") + np.arange(4) * np.timedelta64(1, "D")  # 4 days: no same weekday
    dep = departures(values, starts, 86_400)
    assert dep.like.tolist() == [0, 0, 0, 0] and dep.direction[3] == "low" and dep.share[3] == pytest.approx(-1.0)


def test_windows_holding_each_time():
    starts = np.array(["2021-03-01", "2021-03-02", "2021-03-04"], dtype="datetime64[ns]")  # 03-03 left out
    times = np.array(
        ["2021-03-01T23:59", "2021-03-02", "2021-03-03T12:00", "2021-03-04T06:00", "2021-03-05", "2021-02-28"],
        dtype="datetime64[ns]",
    )
    assert windows_holding(starts, 86_400, times).tolist() == [0, 1, -1, 2, -1, -1]


def test_flat_windows_are_those_of_one_value_throughout():
    values = np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [0.0, 0.0, 1e-9], [-2.0, -2.0, -2.0]])
    assert flat_windows(values).tolist() == [False, True, False, True]
