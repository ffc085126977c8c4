import math

import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.signal import convolve, find_peaks, peak_mask, ricker, segment, segment_between, sliding_max
from devicepipe.signal.blocks import POOLED_BLOCK, POOLED_ROW, block_reduce, centred_window
from devicepipe.signal.filters import choose_conv_method
from devicepipe.signal.resample import interpolate_nans, resample_rows

signal = pytest.importorskip("scipy.signal")


@pytest.mark.parametrize(("points", "width"), [(1, 1.0), (10, 2.0), (31, 4.0), (100, 7.5)])
def test_ricker_closed_form(points, width):
    t = np.arange(points) - (points - 1) / 2
    amplitude = 2 / (np.sqrt(3 * width) * np.pi**0.25)
    expected = amplitude * (1 - (t / width) ** 2) * np.exp(-(t**2) / (2 * width**2))
    got = ricker(points, width, dtype=torch.float64)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), got.numpy()[::-1])


def test_ricker_rejects_bad_arguments():
    with pytest.raises(ValueError):
        ricker(0, 1.0)
    with pytest.raises(ValueError):
        ricker(5, 0.0)


@pytest.mark.parametrize("taps", [1, 2, 7, 30, 31, 300])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("method", ["direct", "fft"])
def test_convolve_matches_scipy(device, taps, mode, method):
    g = torch.Generator().manual_seed(taps)
    x = torch.randn(2, 3, 5003, generator=g, dtype=torch.float64)
    h = torch.randn(taps, generator=g, dtype=torch.float64)
    expected = np.stack(
        [signal.convolve(r, h.numpy(), mode=mode, method="direct") for r in x.reshape(-1, 5003).numpy()]
    )
    got = convolve(x.to(device), h, mode=mode, method=method)
    assert got.shape[:2] == (2, 3) and got.device.type == device.type and got.dtype == torch.float64
    np.testing.assert_allclose(got.cpu().reshape(6, -1).numpy(), expected, atol=1e-9)


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 64, 95, 96, 97])
@pytest.mark.parametrize("taps", [1, 32, 33, 34, 61, 65, 66, 97, 98])
@pytest.mark.parametrize("mode", ["full", "same"])
def test_convolve_direct_at_block_boundaries(n, taps, mode):
    # the CPU direct method works in blocks of 32, a product more for each 32 past samples the
    # kernel reaches back over (2 up to 33 taps, 3 up to 65, 4 up to 97): lengths on and beside a
    # block edge, and a signal shorter than one block, must all give numpy's convolution; "same"
    # runs the rows end to end and takes off what each row's ends got from its neighbours
    g = torch.Generator().manual_seed(n * 100 + taps)
    x = torch.randn(3, n, generator=g, dtype=torch.float64)
    h = torch.randn(taps, generator=g, dtype=torch.float64)
    got = convolve(x, h, mode=mode, method="direct")
    expected = np.stack([signal.convolve(r, h.numpy(), mode=mode, method="direct") for r in x.numpy()])
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-9)


def test_convolve_fft_is_linear_over_many_blocks():
    # longer than several overlap-add blocks and groups: a circular convolution would wrap the ends
    x = torch.zeros(1_200_001, dtype=torch.float64)
    x[-3:] = 1.0
    x[:2] = -1.0
    h = torch.arange(1.0, 401.0, dtype=torch.float64)
    got = convolve(x, h, mode="full", method="fft")
    np.testing.assert_allclose(got.numpy(), np.convolve(x.numpy(), h.numpy()), atol=1e-6)


def test_convolve_float32_and_auto():
    x = torch.randn(100_000)
    h = ricker(31, 4.0)
    ref = np.convolve(x.double().numpy(), h.double().numpy(), mode="same")
    for method in ("auto", "direct", "fft"):
        got = convolve(x, h, method=method)
        assert got.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), ref, atol=2e-5)
    assert choose_conv_method(10**7, 31, "cpu") == "direct"
    assert choose_conv_method(10**7, 2001, "cpu") == "fft"
    with pytest.raises(ValueError, match="mode"):
        convolve(x, h, mode="circular")
    with pytest.raises(ValueError, match="1-D"):
        convolve(x, h[None])


def _brute_sliding_max(x, w):
    return np.array([x[i : i + w].max() for i in range(len(x) - w + 1)])


@pytest.mark.parametrize("window", [1, 2, 3, 7, 64, 180, 181])
@pytest.mark.parametrize("method", ["doubling", "pool"])
def test_sliding_max_brute_force(window, method):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(window))
    np.testing.assert_array_equal(sliding_max(x, window, method=method).numpy(), _brute_sliding_max(x.numpy(), window))


def _brute_peaks(x, min_distance, height=None):
    reach = max(1, min_distance - 1)
    out = []
    for i, v in enumerate(x):
        left = x[max(0, i - reach) : i]
        right = x[i + 1 : i + 1 + reach]
        if (left < v).all() and (right <= v).all() and (height is None or v >= height):
            out.append(i)
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("min_distance", [1, 2, 3, 5, 17, 60])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("whole_padded", [True, False])
def test_find_peaks_brute_force_with_ties(min_distance, seed, whole_padded, monkeypatch):
    # small integers: many ties and plateaus; both ways of handling the ends (a padded copy of a
    # small input, short padded end pieces of a long one)
    if not whole_padded:
        monkeypatch.setattr("devicepipe.signal.peaks._PADDED_UP_TO", 0)
    x = torch.randint(0, 6, (700,), generator=torch.Generator().manual_seed(seed)).to(torch.float32)
    got = find_peaks(x, min_distance=min_distance)
    assert got.dtype == torch.int64
    np.testing.assert_array_equal(got.numpy(), _brute_peaks(x.numpy(), min_distance))
    assert (np.diff(got.numpy()) >= min_distance).all()
    np.testing.assert_array_equal(
        find_peaks(x, min_distance=min_distance, height=4).numpy(), _brute_peaks(x.numpy(), min_distance, 4)
    )


def test_plateaus_and_nan_give_one_peak():
    x = torch.tensor([0, 1, 5, 5, 5, 5, 2, float("nan"), 3, 3, 0])
    np.testing.assert_array_equal(find_peaks(x, min_distance=2).numpy(), [2, 8])
    assert find_peaks(torch.full((50,), 2.0), min_distance=10).tolist() == [0]


def test_height_per_sample():
    x = torch.randn(3000, generator=torch.Generator().manual_seed(9))
    thresholds = torch.linspace(0, 2, 3000)
    expected = peak_mask(x, min_distance=5) & (x >= thresholds)
    assert torch.equal(peak_mask(x, min_distance=5, height=thresholds), expected)


def test_segment_against_a_loop_with_edges(device):
    x = torch.arange(100, dtype=torch.float32, device=device)
    positions = torch.tensor([0, 3, 50, 97, 99])
    windows, valid = segment(x, positions, before=4, after=5)
    assert windows.shape == (5, 9) and windows.device.type == device.type
    for row, p in enumerate(positions.tolist()):
        for j, i in enumerate(range(p - 4, p + 5)):
            inside = 0 <= i < 100
            assert bool(valid[row, j]) == inside
            assert float(windows[row, j]) == (float(i) if inside else 0.0)
    two = torch.stack([x, -x])
    w2, _ = segment(two, positions, before=2, after=2)
    assert w2.shape == (5, 2, 4) and torch.equal(w2[:, 1], -w2[:, 0])


def test_segment_between_against_a_loop():
    x = torch.arange(1, 51, dtype=torch.float32)
    starts, lengths = torch.tensor([0, 10, 45, 30]), torch.tensor([5, 12, 8, 0])
    out, valid = segment_between(x, starts, lengths, width=10)
    for row, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        expected = [x[i].item() if k < n and i < 50 else 0.0 for k, i in enumerate(range(s, s + 10))]
        assert out[row].tolist() == expected
        assert valid[row].sum() == min(n, 10, 50 - s)
    assert math.isclose(float(out.sum()), float(x[0:5].sum() + x[10:20].sum() + x[45:50].sum()))
    # every row inside the signal (a row may still end past it once padded to the width)
    starts, lengths = torch.tensor([0, 10, 38, 30]), torch.tensor([5, 12, 12, 0])
    out, valid = segment_between(x, starts, lengths, width=14)
    for row, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        assert out[row].tolist() == [x[s + k].item() if k < n else 0.0 for k in range(14)]
        assert valid[row].tolist() == [k < n for k in range(14)]


@pytest.mark.parametrize("seed", range(5))
def test_segment_random_against_a_loop(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(5, 300, (1,), generator=g))
    x = torch.randn(2, n, generator=g)
    positions = torch.randint(-20, n + 20, (40,), generator=g)
    before, after = int(torch.randint(0, 40, (1,), generator=g)), int(torch.randint(1, 40, (1,), generator=g))
    windows, valid = segment(x, positions, before=before, after=after, fill=-9.0)
    one, _ = segment(x[1], positions, before=before, after=after, fill=-9.0)
    lengths = torch.randint(0, 60, (40,), generator=g)
    between, bvalid = segment_between(x[0], positions, lengths, width=50)
    for r, p in enumerate(positions.tolist()):
        for j, i in enumerate(range(p - before, p + after)):
            inside = 0 <= i < n
            assert bool(valid[r, j]) == inside
            expected = x[:, i] if inside else torch.full((2,), -9.0)
            assert torch.equal(windows[r, :, j], expected)
            assert float(one[r, j]) == float(expected[1])
        for k in range(50):
            i = p + k
            ok = k < int(lengths[r]) and 0 <= i < n
            assert bool(bvalid[r, k]) == ok
            assert float(between[r, k]) == (float(x[0, i]) if ok else 0.0)


# ----------------------------------------------------------------------------- blocks and resampling


@pytest.mark.parametrize("n", [1, 7, 16, 17, 100])
@pytest.mark.parametrize("block", [1, 4, 16])
def test_block_reduce_against_a_loop(device, n, block):
    x = torch.randn(2, n, generator=torch.Generator().manual_seed(n)).to(device)
    for how, fn in (("max", np.max), ("mean", np.mean)):
        got = block_reduce(x, block, how).cpu().numpy()
        host = x.cpu().numpy()
        expected = np.stack([[fn(row[i : i + block]) for i in range(0, n, block)] for row in host])
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 1001), (3, 403), (1, POOLED_ROW + 13)])
def test_block_reduce_max_equals_numpy_on_both_paths(shape, threads):
    """Short blocks' maxima go through max pooling or amax by the threads and the row length:
    either way the exact maxima, NaN and infinities included."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[1]))
    x[0, 5], x[0, 17], x[-1, 40] = torch.nan, torch.inf, -torch.inf
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for block in (2, 4, 6, POOLED_BLOCK, POOLED_BLOCK + 1):
            got = block_reduce(x, block, "max").numpy()
            host = x.numpy()
            expected = np.stack([[row[i : i + block].max() for i in range(0, shape[1], block)] for row in host])
            np.testing.assert_array_equal(got, expected)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("window", [1, 2, 3, 6, 12, 50])
def test_centred_window_against_a_loop(device, window):
    n = 30
    x = torch.randn(2, n, generator=torch.Generator().manual_seed(window)).to(device)
    host = x.cpu().numpy()
    w = min(window, n)  # a window longer than the signal is cut to it
    left, right = (w - 1) // 2, w - 1 - (w - 1) // 2  # an even window reaches further right
    for how, fn in (("max", np.max), ("min", np.min), ("mean", np.mean)):
        got = centred_window(x, window, how).cpu().numpy()
        expected = np.stack([[fn(row[max(0, i - left) : i + right + 1]) for i in range(n)] for row in host])
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_interpolate_nans_matches_numpy_interp(device):
    x = torch.tensor([[np.nan, 1.0, np.nan, np.nan, 4.0, np.nan], [0.0, 2.0, 4.0, np.nan, 8.0, 10.0]], device=device)
    got = interpolate_nans(x).cpu().numpy()
    for row, out in zip(x.cpu().numpy(), got, strict=True):
        ok = ~np.isnan(row)
        np.testing.assert_allclose(out, np.interp(np.arange(row.size), np.flatnonzero(ok), row[ok]))
    # uneven positions (e.g. nanoseconds of a time column) weigh the neighbours by distance
    where = torch.tensor([0.0, 1.0, 4.0, 5.0, 6.0, 10.0], device=device)
    row = x[1:2]
    np.testing.assert_allclose(interpolate_nans(row, where).cpu().numpy()[0, 3], 4.0 + (8.0 - 4.0) * (5 - 4) / (6 - 4))
    clean = torch.arange(5.0, device=device)
    assert interpolate_nans(clean) is clean  # nothing to fill: no copy
    with pytest.raises(DevicepipeError, match="row 0 holds only NaN"):
        interpolate_nans(torch.full((1, 4), float("nan"), device=device))


def test_resample_rows_keeps_linear_ramps(device):
    m = torch.arange(10.0, device=device).repeat(3, 1)
    assert resample_rows(m, 10) is m
    out = resample_rows(m, 20)
    assert out.shape == (3, 20) and out.device == m.device
    # align_corners=False: output sample j sits at input position (j + 0.5) / 2 - 0.5, clamped to the ends
    expected = np.clip((np.arange(20) + 0.5) / 2 - 0.5, 0, 9)
    np.testing.assert_allclose(out[0].cpu().numpy(), expected, atol=1e-6)


def test_peak_mask_told_the_score_is_finite_gives_the_same_mask():
    g = torch.Generator().manual_seed(4)
    for n in (9, 200, 5000):
        x = torch.randn(3, n, generator=g).abs()
        x[:, n // 3 : n // 3 + 4] = 0.5  # a plateau
        for distance in (1, 2, 5, 40):
            assert torch.equal(peak_mask(x, min_distance=distance, finite=True), peak_mask(x, min_distance=distance))


@pytest.mark.parametrize("n", [1, 5, 300, 301, 302, 5_000])
def test_rows_with_the_ends_repeated_equal_clamped_indexing(n):
    # fill=None: a row running past an end repeats the end sample, as indexing x at positions
    # clamped into it does (the reference, built element by element)
    from devicepipe.signal import rows_at

    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g)
    for before, after in ((150, 151), (3, 4), (0, 1)):
        centres = torch.randint(0, n, (min(n, 400),), generator=g)
        positions = (centres[:, None] + torch.arange(-before, after)).clamp(0, n - 1)
        assert torch.equal(rows_at(x, centres - before, before + after, fill=None), x[positions])
