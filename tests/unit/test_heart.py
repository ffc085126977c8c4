"""Heart rate and HRV: hand-computed values, cleaning by hand, batches equal to one by one."""

import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.heart import rate as heart
from devicepipe.heart.rate import hrv, nn_intervals


def _peaks(intervals_samples):
    return torch.tensor(np.concatenate([[100], 100 + np.cumsum(intervals_samples)]), dtype=torch.int64)


def test_measures_by_hand(device):
    fs = 100.0
    rr = np.array([80, 82, 78, 90, 70, 85, 80])  # samples: 800, 820, ... ms
    h = hrv(_peaks(rr).to(device), fs, clean=False)
    ms = rr * 10.0
    d = np.diff(ms)
    assert float(h.mean_nn_ms) == pytest.approx(ms.mean())
    assert float(h.mean_hr_bpm) == pytest.approx(60_000 / ms.mean())
    assert float(h.sdnn_ms) == pytest.approx(ms.std(ddof=1))
    assert float(h.rmssd_ms) == pytest.approx(np.sqrt(np.mean(d**2)))
    # successive differences 20, -40, 120, -200, 150, -50 ms: three over 50 ms (exactly 50 is not), of 7 intervals
    assert float(h.pnn50_pct) == pytest.approx(100 * 3 / 7)
    assert h.mean_nn_ms.device.type == torch.device(device).type
    assert np.isnan(float(h.sdann_ms))  # under three 5-minute segments


def test_cleaning_excludes_ectopic_and_implausible_intervals_and_counts_them():
    fs = 250.0
    rr = np.full(40, 200)  # 0.8 s
    rr[10], rr[11] = 120, 280  # a premature beat and its compensatory pause
    rr[25] = 600  # 2.4 s: a missed beat, implausible
    rr_ms, kept, implausible, ectopic = nn_intervals(_peaks(rr), fs)
    assert implausible.nonzero().flatten().tolist() == [25]
    assert ectopic.nonzero().flatten().tolist() == [10, 11]
    assert (~kept).sum() == 3
    h = hrv(_peaks(rr), fs)
    assert (int(h.n_intervals), int(h.n_implausible), int(h.n_ectopic)) == (37, 1, 2)
    assert float(h.sdnn_ms) == 0.0 and float(h.rmssd_ms) == 0.0  # what remains is perfectly regular
    assert float(h.mean_nn_ms) == pytest.approx(800.0)
    # without cleaning the same beats are far from regular
    assert float(hrv(_peaks(rr), fs, clean=False).rmssd_ms) > 100


def test_segments_give_sdann_and_the_sdnn_index():
    fs = 100.0
    # three 5-minute segments of steady rhythm at 0.8, 1.0 and 0.8 s, with a small alternation
    parts = [np.tile([a - 2, a + 2], int(30_000 / (2 * a))) for a in (80, 100, 80)]
    rr = np.concatenate(parts)
    h = hrv(_peaks(rr), fs, clean=False)
    ends = np.cumsum(rr)
    segment = ends // 30_000
    means = [rr[segment == k].mean() * 10 for k in range(3)]
    sds = [rr[segment == k].std(ddof=1) * 10 for k in range(3)]
    assert float(h.sdann_ms) == pytest.approx(np.std(means, ddof=1))
    assert float(h.sdnn_index_ms) == pytest.approx(np.mean(sds))


def test_a_batch_equals_each_recording_alone():
    rng = np.random.default_rng(0)
    recordings = [_peaks(rng.integers(180, 220, size=n)) for n in (50, 400, 1200)]
    batch = hrv(recordings, 250.0)
    for i, peaks in enumerate(recordings):
        alone = hrv(peaks, 250.0)
        for name, value in alone.__dict__.items():
            torch.testing.assert_close(getattr(batch, name)[i], value, equal_nan=True)


def test_bad_peaks_are_clear_errors():
    with pytest.raises(DevicepipeError, match="strictly increasing"):
        hrv(torch.tensor([10, 5, 20, 30]), 100.0)
    with pytest.raises(DevicepipeError, match="at least three R peaks"):
        hrv(torch.tensor([10, 50]), 100.0)
    with pytest.raises(DevicepipeError, match="sampling_rate"):
        hrv(torch.tensor([10, 50, 90]), 0)


def test_blocks_of_intervals_give_the_measures_of_one_block(monkeypatch):
    # long recordings are reduced BLOCK intervals at a time; blocks that cut through segments,
    # successive differences and cleaned intervals must not change any measure
    rng = np.random.default_rng(3)
    fs = 250.0
    recordings = []
    for n in (1500, 900):
        rr = rng.integers(170, 260, n)
        rr[rng.choice(n, 20, replace=False)] = 90  # premature beats
        rr[rng.choice(n, 5, replace=False)] = 700  # missed beats, implausible
        recordings.append(_peaks(rr))
    whole = [hrv(p, fs).to_dict() for p in recordings] + [hrv(recordings, fs).to_dict()]
    monkeypatch.setattr(heart, "BLOCK", 7)
    parts = [hrv(p, fs).to_dict() for p in recordings] + [hrv(recordings, fs).to_dict()]
    assert not np.isnan(whole[0]["sdann_ms"])  # several 5-minute segments
    for a, b in zip(whole, parts, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(b[key], a[key], rtol=1e-12, err_msg=key)


@pytest.mark.parametrize("block", [7, 100, 16_384])
def test_hrv_of_peaks_on_disk_equals_hrv_in_memory(monkeypatch, block):
    from devicepipe.core.spill import Spill, Stored
    from devicepipe.heart import rate as heart

    rng = np.random.default_rng(3)
    rr = rng.normal(200, 20, 4000).astype(np.int64)
    rr[::97], rr[::131] = 40, 700  # implausible intervals, and ectopic ones beside them
    peaks = torch.from_numpy(np.cumsum(rr))
    monkeypatch.setattr(heart, "BLOCK", block)  # blocks cut between an interval and its neighbours
    expected = heart.hrv(peaks, 250.0).to_dict()
    assert expected["n_implausible"] > 0 and expected["n_ectopic"] > 0
    with Spill() as spill:
        spill.append("peaks", peaks)
        assert heart.hrv_stored(Stored(spill, "peaks"), 250.0).to_dict() == expected
    assert heart.hrv_stored(peaks, 250.0).to_dict() == expected
    with pytest.raises(DevicepipeError, match="three R peaks"):
        heart.hrv_stored(peaks[:2], 250.0)


@pytest.mark.parametrize("block", [7, 16_384])
def test_intervals_not_between_two_normal_beats_are_left_out(monkeypatch, block):
    rng = np.random.default_rng(5)
    rr = rng.normal(200, 15, 600).astype(np.int64)  # samples at 250 Hz, all plausible
    peaks = torch.from_numpy(np.cumsum(rr))
    normal = rng.random(rr.size - 1) > 0.1  # (rr[0] is the first peak's offset, not an interval)
    h = hrv(peaks, 250.0, clean=False, normal=torch.from_numpy(normal))
    ms = np.diff(peaks.numpy()) * 4.0
    assert int(h.n_intervals) == normal.sum() and int(h.n_ectopic) == int(h.n_implausible) == 0
    assert float(h.mean_nn_ms) == pytest.approx(ms[normal].mean())
    assert float(h.sdnn_ms) == pytest.approx(ms[normal].std(ddof=1))
    monkeypatch.setattr(heart, "BLOCK", block)  # on disk, block by block: the same
    stored = heart.hrv_stored(peaks, 250.0, clean=False, normal=normal).to_dict()
    for key, value in h.to_dict().items():
        np.testing.assert_allclose(stored[key], value, rtol=1e-12, err_msg=key)
    with pytest.raises(DevicepipeError, match="one bool per interval"):
        hrv(peaks, 250.0, normal=torch.from_numpy(normal[1:]))
    with pytest.raises(DevicepipeError, match="one bool per interval"):
        heart.hrv_stored(peaks, 250.0, normal=normal[1:])
