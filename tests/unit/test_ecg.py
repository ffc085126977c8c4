import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import BeatScore, ecg_peaks, ecg_segment, evaluate_beats, seed_gates
from devicepipe.signal import convolve, ricker
from devicepipe.signal.blocks import row_median
from devicepipe.signal.filters import centred_convolve, centred_convolve_at
from devicepipe.simulate import simulate_ecg


@pytest.mark.parametrize("fs", [125, 250, 360, 500, 1000])
@pytest.mark.parametrize(
    ("noise", "wander", "inverted", "heart_rate", "ectopic"),
    [
        (0.02, 0.15, False, 70, 0.0),
        (0.1, 0.5, True, 110, 0.05),
        (0.05, 1.0, True, 150, 0.05),
        (0.05, 0.3, False, 40, 0),
    ],
)
def test_detector_finds_simulated_truth(device, fs, noise, wander, inverted, heart_rate, ectopic):
    sim = simulate_ecg(
        180,
        fs,
        noise_mV=noise,
        wander_mV=wander,
        inverted=inverted,
        heart_rate_bpm=heart_rate,
        ectopic_rate=ectopic,
        seed=fs + heart_rate,
        device=device,
    )
    peaks = ecg_peaks(sim.signal, fs)
    assert peaks.device == sim.signal.device and peaks.dtype == torch.int64 and (torch.diff(peaks) > 0).all()
    score = evaluate_beats(sim.r_peaks, peaks, fs, tolerance_s=0.05, n_samples=sim.signal.numel())
    assert score.f1 >= 0.99, score
    # refined onto the signal: most detections sit within 10 ms of the true R peak
    matched = np.abs(peaks.cpu().numpy()[:, None] - sim.r_peaks.cpu().numpy()[None]).min(1)
    assert np.median(matched) <= max(1, 0.01 * fs)


def test_flat_and_noise_only_give_no_beats(device):
    g = torch.Generator().manual_seed(0)
    for fs in (125, 250, 1000):
        assert ecg_peaks(torch.zeros(60 * fs, device=device), fs).numel() == 0
        for level in (4.2, 3.0, -7.25, 1234.5):  # a constant's filter response is rounding, not beats
            assert ecg_peaks(torch.full((60 * fs,), level, device=device), fs).numel() == 0
        assert ecg_peaks(0.3 * torch.randn(60 * fs, generator=g).to(device), fs).numel() == 0


@pytest.mark.parametrize("fs", [250, 500])
@pytest.mark.parametrize("bpm", [180, 220, 250])
def test_ventricular_tachycardia_too_fast_for_a_quiet_stretch_is_found(device, fs, bpm):
    # wide beats at 180-250 bpm leave the filter's response no quiet stretch: its contrast is
    # noise's (3.2-6), so these recordings were taken to hold no ECG and gave no beat at all
    from devicepipe.ecg import ecg_contrast, ricker_defaults
    from devicepipe.simulate import Rhythm

    sim = simulate_ecg(60, fs, rhythm=Rhythm(vt=1.0, vt_bpm=bpm), noise_mV=0.05, seed=bpm, device=device)
    if bpm >= 200:
        assert float(ecg_contrast(sim.signal, fs)) < ricker_defaults()["min_contrast"]
    peaks = ecg_peaks(sim.signal, fs)
    assert evaluate_beats(sim.r_peaks, peaks, fs, n_samples=sim.signal.numel()).f1 >= 0.99


@pytest.mark.parametrize("bpm", [220, 250])
def test_episodes_of_tachycardia_too_fast_for_a_quiet_half_second_are_found_in_sinus_rhythm(device, bpm):
    # inside a recording of sinus rhythm the contrast is high, but in the episode the quietest
    # half-second holds beats: three times its mean response (the noise floor) rose over the
    # beats themselves, and 39 % of a 220-bpm run's beats were missed
    from devicepipe.simulate import Rhythm

    sim = simulate_ecg(600, 250, rhythm=Rhythm(vt=0.1, vt_bpm=bpm, ectopic_rate=0.01), noise_mV=0.05, seed=bpm)
    peaks = ecg_peaks(sim.signal.to(device), 250).cpu()
    inside = torch.as_tensor(sim.rhythms == "VT")
    assert int(inside.sum()) > 150
    assert evaluate_beats(sim.r_peaks, peaks, 250, n_samples=sim.signal.numel()).f1 >= 0.998
    assert evaluate_beats(sim.r_peaks[inside], peaks, 250).sensitivity >= 0.995


def test_noise_hum_and_smooth_waves_of_low_contrast_still_give_no_beats():
    # what tells such a rhythm from noise is its response repeating at a beat's interval (and
    # not at half of it, as a hum's or a sine's does)
    g = torch.Generator().manual_seed(3)
    fs, n = 250, 60 * 250
    t = torch.arange(n) / fs
    white = torch.randn(n, generator=g)
    spectrum = torch.fft.rfft(torch.randn(n, generator=g))
    pink = torch.fft.irfft(spectrum / torch.arange(spectrum.numel()).clamp(min=1).sqrt(), n=n)
    brown = torch.randn(n, generator=g).cumsum(0)
    sines = [torch.sin(2 * torch.pi * hz * t) + 0.05 * white for hz in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 50.0)]
    for x in (white, pink, brown, *sines):
        assert ecg_peaks(x.float(), fs).numel() == 0


def test_noise_stretch_inside_a_recording_gives_no_beats(device):
    sim = simulate_ecg(120, 250, seed=3)
    x = sim.signal.clone()
    x[250 * 40 : 250 * 80] = 0.05 * torch.randn(250 * 40, generator=torch.Generator().manual_seed(1))
    peaks = ecg_peaks(x.to(device), 250).cpu()
    assert int(((peaks > 250 * 41) & (peaks < 250 * 79)).sum()) == 0
    outside = sim.r_peaks[(sim.r_peaks < 250 * 39) | (sim.r_peaks > 250 * 81)]
    assert evaluate_beats(outside, peaks[(peaks < 250 * 39) | (peaks > 250 * 81)], 250).f1 >= 0.99


def test_seed_gates_follow_the_notebook_kernel():
    # the notebook's Numba kernel, written as a plain loop: p is a gate when curvature[p + 90] is the
    # maximum of curvature[p : p + 180]; then 0000011000 -> 0000010000
    sim = simulate_ecg(20, 250, seed=4)
    gates, curvature = seed_gates(sim.signal, 250)
    c = curvature.numpy()
    out = np.zeros(len(c) - 180 + 1, dtype=np.int64)
    for p in range(len(out)):
        out[p] = 1 if c[p : p + 180].max() == c[p + 90] else 0
    out[1:] *= np.diff(out) == 1
    np.testing.assert_array_equal(np.flatnonzero(gates.numpy()), np.flatnonzero(out))
    t = np.linspace(-3, 3, 30)
    kernel = 2 * np.exp(-0.5 * t**2) * (1 - t**2) / np.sqrt(30)
    np.testing.assert_allclose(c, np.convolve(sim.signal.numpy(), kernel)[: len(c)], atol=1e-5)
    # its peaks line up with the R waves of a clean recording
    peaks = ecg_peaks(sim.signal, 250, method="seed")
    assert evaluate_beats(sim.r_peaks, peaks, 250, n_samples=sim.signal.numel()).f1 > 0.95


def test_ecg_peaks_errors():
    with pytest.raises(DevicepipeError, match="unknown method 'pan'"):
        ecg_peaks(torch.zeros(1000), 250, method="pan")
    with pytest.raises(DevicepipeError, match="at least two seconds"):
        ecg_peaks(torch.zeros(100), 250)
    with pytest.raises(DevicepipeError, match="sampling_rate"):
        ecg_peaks(torch.zeros(1000), 0)
    with pytest.raises(DevicepipeError, match="method 'ricker' has no option 'sigma'; its options are .*'sigma_s'"):
        ecg_peaks(torch.zeros(1000), 250, sigma=3)
    with pytest.raises(DevicepipeError, match="method 'seed' has no option 'sigma_s'; its options are none"):
        ecg_peaks(torch.zeros(1000), 250, method="seed", sigma_s=0.01)


def test_segment_centered_against_a_loop(device):
    x = torch.arange(1000, dtype=torch.float32, device=device)
    peaks = torch.tensor([10, 100, 500, 990])
    beats = ecg_segment(x, peaks, 100, before_s=0.2, after_s=0.3)
    assert beats.matrix.device == x.device and beats.kept.tolist() == [False, True, True, False]
    assert beats.matrix.shape == (2, 50)
    # the geometry travels with the beats: 20 samples before each peak, rows of 0.5 s
    assert (beats.mode, beats.before, beats.length_range, beats.window_s) == ("centered", 20, None, 0.5)
    for row, p in zip(beats.matrix, [100, 500], strict=True):
        assert row.tolist() == list(range(p - 20, p + 30))


def test_segment_centered_width_resamples_the_same_window(device):
    # a straight line sampled at 100 Hz: resampled rows must stay on the line, spanning the same 0.5 s
    x = torch.arange(1000, dtype=torch.float32, device=device)
    peaks = torch.tensor([100, 500])
    native = ecg_segment(x, peaks, 100, before_s=0.2, after_s=0.3)
    wide = ecg_segment(x, peaks, 100, before_s=0.2, after_s=0.3, width=64)
    assert wide.matrix.shape == (2, 64) and native.matrix.shape == (2, 50)
    for row, p in zip(wide.matrix.cpu().numpy(), [100, 500], strict=True):
        # sample centres of 64 cells over [p - 20, p + 30) (align_corners=False), clamped at the ends
        centres = np.clip(p - 20 + (np.arange(64) + 0.5) * 50 / 64 - 0.5, p - 20, p + 29)
        np.testing.assert_allclose(row, centres, atol=1e-3)
    assert wide.before == native.before and wide.lengths.tolist() == native.lengths.tolist()
    with pytest.raises(DevicepipeError, match="width must be a positive"):
        ecg_segment(x, peaks, 100, width=0)


def test_segment_seed_mode_against_a_loop(device):
    x = torch.arange(5000, dtype=torch.float32, device=device) + 1
    peaks = torch.tensor([100, 300, 350, 700, 1500, 1700])  # at 250 Hz: lengths 200, 50, 350, 800, 200
    beats = ecg_segment(x, peaks, 250, mode="seed")
    lead = 76
    assert beats.matrix.shape[1] == 256
    assert (beats.before, beats.length_range, beats.window_s) == (lead, (100, 256), 256 / 250)
    expected_kept = []
    for i in range(len(peaks) - 1):
        length = int(peaks[i + 1] - peaks[i])
        expected_kept.append(100 <= length <= 256 and peaks[i] - lead >= 0)
    assert beats.kept.tolist() == expected_kept + [False]
    for row, p, n in zip(beats.matrix, beats.peaks.tolist(), beats.lengths.tolist(), strict=True):
        s = p - lead
        assert row[:n].tolist() == x[s : s + n].tolist() and (row[n:] == 0).all()


def test_evaluate_beats_by_hand():
    fs = 100
    ref = [100, 200, 300, 400, 500]
    det = [105, 190, 190, 310, 600, 20]  # 20 lies in the unscored first 0.5 s
    score = evaluate_beats(ref, det, fs, tolerance_s=0.15)
    # 105->100, 190->200 (once), 310->300 (within 15 samples); the second 190 and 600 are false; 400 and 500 missed
    assert (score.tp, score.fp, score.fn) == (3, 2, 2)
    assert score.sensitivity == pytest.approx(0.6) and score.ppv == pytest.approx(0.6)
    assert score.f1 == pytest.approx(0.6)
    # closest pairs first: 256 is nearer to 260 than 240 is, so 240 takes 250
    assert evaluate_beats([250, 260], [240, 256], fs, tolerance_s=0.15).tp == 2
    assert evaluate_beats([100, 590], [100, 590], fs, n_samples=600).tp == 1  # 590 is in the last 0.5 s
    assert (BeatScore(1, 2, 3) + BeatScore(1, 0, 0)).tp == 2


@pytest.mark.parametrize("polarity", [-1.0, 1.0])
def test_spikes_are_not_beats(device, polarity):
    # narrow spikes between beats (a pacemaker's stimulus, a glitch), as tall as the R waves, of
    # either polarity: one sample above half height, where a QRS has several
    sim = simulate_ecg(120, 250, seed=9, noise_mV=0.02)
    x = sim.signal.clone()
    r = sim.r_peaks.numpy()
    spikes = ((r[:-1] + r[1:]) // 2)[::4]  # midway between beats, every fourth gap
    for s in spikes:
        x[s - 1 : s + 2] += polarity * torch.tensor([0.4, 1.2, 0.4])
    x = x.to(device)
    found = ecg_peaks(x, 250).cpu().numpy()
    assert not any(np.min(np.abs(found - s)) <= 5 for s in spikes)
    assert evaluate_beats(sim.r_peaks, found, 250, n_samples=x.numel()).f1 >= 0.99
    # the width rule is what removes them
    without = ecg_peaks(x, 250, spike_ms=0.0).cpu().numpy()
    assert sum(np.min(np.abs(without - s)) <= 5 for s in spikes) >= len(spikes) // 3


def test_wide_beats_of_the_other_polarity_are_beats(device):
    # ventricular beats whose QRS points the other way, every other beat (bigeminy), each a
    # wide deflection as tall as the R waves: beats, though the usual interval then hides them
    # from the search-back (MIT-BIH 200's ventricular beats in MLII)
    sim = simulate_ecg(120, 250, seed=9, noise_mV=0.02)
    x = sim.signal.clone()
    r = sim.r_peaks.numpy()
    ectopic = (r[:-1] + (r[1:] - r[:-1]) // 2)[1:-1]  # premature (0.4 s), between every two beats
    shape = -1.2 * torch.hann_window(31, periodic=False, dtype=x.dtype)  # 120 ms wide
    for s in ectopic:
        x[s - 15 : s + 16] += shape
    x = x.to(device)
    truth = np.sort(np.concatenate([r, ectopic]))
    found = ecg_peaks(x, 250).cpu().numpy()
    assert evaluate_beats(truth, found, 250, n_samples=x.numel()).sensitivity >= 0.99


def test_an_offset_does_not_move_the_peaks(device):
    # raw ADC units often sit on a large offset: the zero-sum filter and the edge correction
    # must give the same beats, including those within a kernel's length of either end
    sim = simulate_ecg(60, 250, seed=4, noise_mV=0.02)
    x = sim.signal.double().to(device)
    base = ecg_peaks(x, 250)
    for offset in (-1000.0, 3.5, 1000.0):
        assert torch.equal(ecg_peaks(x + offset, 250), base)
    # a beat right at the start is still found, and no edge artefact appears, with an offset
    cut = x[int(sim.r_peaks[3]) - 3 :]
    assert torch.equal(ecg_peaks(cut + 1000.0, 250), ecg_peaks(cut, 250))
    assert int(ecg_peaks(cut + 1000.0, 250)[0]) <= 3


def test_a_level_far_above_the_signal_in_float32_does_not_hide_the_beats(device):
    # ADC counts or a DC offset a million times the signal's spread, in float32: the filter's
    # rounding buried every beat (none found at 3e5 and up); now the level goes first, in one
    # call, in chunks and per row of a batch alike
    from devicepipe.ecg import ecg_peaks_chunked

    sim = simulate_ecg(60, 250, seed=4, noise_mV=0.02)
    x = sim.signal.double()
    for offset in (3e5, 1e6, -1e7):
        y = (x + offset).float().to(device)
        found = ecg_peaks(y, 250)
        assert evaluate_beats(sim.r_peaks, found.cpu(), 250, n_samples=y.numel()).f1 == 1.0, offset
        chunked = ecg_peaks_chunked(lambda a, b, y=y: y[a:b], y.numel(), 250, chunk=4000)
        assert torch.equal(chunked, found)
        batch = ecg_peaks(torch.stack([y, x.float().to(device)]), 250)
        assert torch.equal(batch[0], found) and torch.equal(batch[1], ecg_peaks(x.float().to(device), 250))


@pytest.mark.parametrize("fs", [250, 360, 500])
def test_a_pacemaker_s_stimulus_before_every_beat_hides_none(fs):
    # a paced ECG: a stimulus (a spike one or two samples wide) before every QRS, 0-160 ms ahead of
    # the R peak, taller than it (3 mV against about 1.3) or of either sign. The spike stood over
    # the QRS in the filter, was taken for the candidate there and, being no beat, left none: no
    # beat was found at all. Spikes that hide beats are taken out and the recording detected
    # again, the same in one call, compiled, in chunks and in a batch
    from devicepipe.ecg import ecg_peaks_chunked
    from devicepipe.ecg.ricker import peaks_ricker

    sim = simulate_ecg(120, fs, seed=3)
    x, truth = sim.signal.double().numpy(), sim.r_peaks.numpy()
    for amp, ahead_ms, width in ((3.0, 40, 1), (-3.0, 160, 2), (3.0, 0, 2), (1.0, 20, 1)):
        y = x.copy()
        for r in truth:
            at = r - round(ahead_ms / 1000 * fs)
            if at > 0:
                y[at : at + width] += amp
        t = torch.as_tensor(y).float()
        found = ecg_peaks(t, fs)  # (compiled: a short row on the CPU)
        assert evaluate_beats(truth, found.numpy(), fs, n_samples=t.numel()).f1 >= 0.99, (amp, ahead_ms, width)
        assert torch.equal(found, peaks_ricker(t[None], float(fs))[1])  # the tensor path
        assert torch.equal(ecg_peaks_chunked(lambda a, b, t=t: t[a:b], t.numel(), fs, chunk=5000), found)
        plain = torch.as_tensor(x).float()
        batch = ecg_peaks(torch.stack([t, plain]), fs)  # (each row as alone: the other's spikes not taken out)
        assert torch.equal(batch[0], found) and torch.equal(batch[1], ecg_peaks(plain, fs))
        rows, cols = peaks_ricker(torch.stack([t, plain]), float(fs))  # (the tensor path's batch too)
        assert torch.equal(cols[rows == 0], found) and torch.equal(cols[rows == 1], ecg_peaks(plain, fs))


def test_row_median_matches_torch_median():
    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        n_rows = int(torch.randint(1, 5, (1,), generator=g))
        rows = torch.sort(torch.randint(0, n_rows, (int(torch.randint(0, 30, (1,), generator=g)),), generator=g)).values
        values = torch.rand(rows.numel(), generator=g)
        got = row_median(values, rows, n_rows)
        for r in range(n_rows):  # the lower median, by NumPy (one row takes its own path)
            chosen = np.sort(values[rows == r].numpy())
            assert float(got[r]) == (float(chosen[(chosen.size - 1) // 2]) if chosen.size else 0.0)


def test_a_tall_beat_of_the_other_polarity_is_kept(device):
    # ectopic beats of flipped polarity, twice as tall as the usual QRS: beats, not artefacts
    sim = simulate_ecg(120, 250, seed=5, noise_mV=0.02)
    x = sim.signal.clone()
    r = sim.r_peaks.numpy()
    flipped = r[5:-5:10]
    for p in flipped:
        x[p - 6 : p + 7] -= 3 * x[p - 6 : p + 7]  # the QRS inverted and doubled
    found = ecg_peaks(x.to(device), 250).cpu().numpy()
    assert all(np.min(np.abs(found - p)) <= 5 for p in flipped)


def _reshaped_qrs(x: torch.Tensor, peaks, gain: float, half: int = 6) -> torch.Tensor:
    """``x`` with the QRS around each of ``peaks`` (+-``half`` samples) scaled by ``gain`` about
    the straight line joining the window's ends (negative: inverted)."""
    x = x.clone()
    ramp = torch.linspace(0, 1, 2 * half + 1, dtype=x.dtype)
    for p in peaks:
        seg = x[p - half : p + half + 1]
        base = seg[0] + (seg[-1] - seg[0]) * ramp
        x[p - half : p + half + 1] = base + gain * (seg - base)
    return x


def test_beats_whose_polarity_flips_are_all_found(device):
    # an equiphasic QRS (R as deep as S) shows the filter either sign from beat to beat, and
    # ventricular beats often the other sign: here some beats are inverted at the same size
    sim = simulate_ecg(120, 250, seed=11, noise_mV=0.02)
    r = sim.r_peaks.numpy()
    for flipped in (r[1::2], r[1::3], r[1::4], r[1::7]):  # half, a third, a quarter, a seventh
        x = _reshaped_qrs(sim.signal, flipped, -1.0).to(device)
        found = ecg_peaks(x, 250).cpu()
        assert evaluate_beats(sim.r_peaks, found, 250, n_samples=x.numel()).f1 == 1.0
        # a beat of the minority sign is a beat on its own, not only where the rhythm wants one
        without = ecg_peaks(x, 250, searchback_rr=0.0).cpu()
        assert evaluate_beats(sim.r_peaks, without, 250, n_samples=x.numel()).f1 == 1.0


def test_sharp_t_waves_against_the_qrs_are_not_beats(device):
    # a QS complex (all negative) followed by a tall, sharp, upright T wave, as in a CPSC 2019
    # record: the T wave shows the filter the other sign within the T-wave reach, and is no beat
    sim = simulate_ecg(120, 250, seed=11, noise_mV=0.02)
    r = sim.r_peaks.numpy()
    x = _reshaped_qrs(sim.signal, r, -1.0)
    t_waves = r[1:-1] + 60  # 240 ms after each R peak
    spike = 1.0 * torch.hann_window(13, periodic=False, dtype=x.dtype)  # 50 ms wide, as tall as the QRS
    for t in t_waves:
        x[t - 6 : t + 7] += spike
    x = x.to(device)
    found = ecg_peaks(x, 250).cpu().numpy()
    assert evaluate_beats(sim.r_peaks, found, 250, n_samples=x.numel()).f1 == 1.0
    # without the polarity rule most of them are taken
    without = ecg_peaks(x, 250, polarity_ratio=0.0).cpu().numpy()
    assert sum(np.min(np.abs(without - t)) <= 5 for t in t_waves) >= len(t_waves) // 2


def test_the_search_back_finds_a_beat_smaller_than_its_neighbours(device):
    sim = simulate_ecg(120, 250, seed=12, noise_mV=0.02)
    r = sim.r_peaks.numpy()
    small = r[4:-4:9]
    x = _reshaped_qrs(sim.signal, small, 0.25).to(device)  # under the threshold's 0.4 of the beat level
    found = ecg_peaks(x, 250).cpu().numpy()
    assert all(np.min(np.abs(found - p)) <= 5 for p in small)
    assert evaluate_beats(sim.r_peaks, found, 250, n_samples=x.numel()).ppv == 1.0
    without = ecg_peaks(x, 250, searchback_rr=0.0).cpu().numpy()
    assert sum(np.min(np.abs(without - p)) <= 5 for p in small) <= len(small) // 4


def test_the_search_back_adds_nothing_to_an_irregular_rhythm(device):
    # an irregular rhythm (RR varying by about 30 %) has long intervals with no beat missed
    sim = simulate_ecg(300, 250, seed=13, hrv=0.3, noise_mV=0.05)
    found = ecg_peaks(sim.signal.to(device), 250).cpu()
    score = evaluate_beats(sim.r_peaks, found, 250, n_samples=sim.signal.numel())
    assert score.fp == 0 and score.fn == 0, score


def test_a_tall_ectopic_beat_does_not_lift_the_noise_floor_over_its_neighbours():
    # block summaries of a recording at 250 Hz: every 2-s window holds a beat of response 1.0
    # over a mean response of 0.05, except one half-second holding a wide ectopic beat, whose
    # mean response is 20 times that: the threshold beside it must stay the beats' threshold
    # (0.4 of their level), not three times a mean that counts the ectopic beat as noise
    from devicepipe.ecg.ricker import Ricker

    r = Ricker(250.0)
    blocks = 40
    block_max = torch.ones(1, blocks, dtype=torch.float64)
    block_mean = torch.full((1, blocks), 0.05, dtype=torch.float64)
    block_max[0, 20], block_mean[0, 20] = 8.0, 1.0
    subsample = torch.full((1, 1000), 0.01, dtype=torch.float64)  # most samples quiet: an ECG
    per_block, level, secondary = r.thresholds(block_max, block_mean, subsample)
    assert torch.allclose(per_block, torch.full_like(per_block, 0.4))  # 0.4 x level 1.0 everywhere
    # the search-back's threshold: half of it, but never under 3 x the quietest block's mean
    assert torch.allclose(secondary, torch.full_like(secondary, 0.2))
    block_mean[0, 8:16] = 0.1  # a noisier 4 s: its floor, 0.3, is above half the threshold
    assert torch.allclose(
        r.thresholds(block_max, block_mean, subsample)[2][0, 11:13], torch.tensor(0.3, dtype=torch.float64)
    )


def test_neighbour_median_matches_numpy():
    from devicepipe.signal.blocks import neighbour_median

    g = np.random.default_rng(0)
    for _ in range(50):
        rows = np.sort(g.integers(0, 3, g.integers(1, 40)))
        values = g.random(rows.size)
        got = neighbour_median(torch.from_numpy(values), 4, rows=torch.from_numpy(rows)).numpy()
        for i in range(rows.size):
            near = [values[j] for j in range(max(0, i - 4), min(rows.size, i + 5)) if rows[j] == rows[i]]
            # torch's median of an even count is the lower middle value
            assert got[i] == np.sort(near)[(len(near) - 1) // 2]
        in_blocks = neighbour_median(torch.from_numpy(values), 4, rows=torch.from_numpy(rows), block=7).numpy()
        np.testing.assert_array_equal(in_blocks, got)  # a few values at a time: the same medians


@pytest.mark.parametrize("n", [5, 31, 40, 62, 63, 100, 1000])
def test_filter_without_mean_removal_matches_filtering_the_centred_signal(n):
    kernel = ricker(31, 3.75, dtype=torch.float64)
    kernel = kernel - kernel.mean()
    g = torch.Generator().manual_seed(n)
    x = torch.randn(2, n, generator=g, dtype=torch.float64) + 50.0
    mean = x.mean(-1, keepdim=True)
    expected = convolve(x - mean, kernel, mode="same")
    torch.testing.assert_close(centred_convolve(x, mean, kernel), expected, rtol=0, atol=1e-10)
    rows = torch.tensor([0, 0, 1, 1, 1])
    cols = torch.tensor([0, n - 1, n // 2, 1 % n, n - 1])
    torch.testing.assert_close(
        centred_convolve_at(x, mean, kernel, rows, cols), expected[rows, cols], rtol=0, atol=1e-10
    )


def _two_leads(fs: int, seed: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Two leads of one simulated heart: the second inverted, smaller and noisier; and the true R peaks."""
    a = simulate_ecg(120, fs, seed=seed, ectopic_rate=0.02, device=device)
    b = simulate_ecg(120, fs, seed=seed, ectopic_rate=0.02, inverted=True, noise_mV=0.05, device=device)
    assert torch.equal(a.r_peaks, b.r_peaks)  # one heart: the same beats in both leads
    return torch.stack([a.signal, 0.6 * b.signal]), a.r_peaks


@pytest.mark.parametrize("fs", [250, 500])
def test_fused_leads_find_the_truth_and_leave_out_a_lost_lead(device, fs):
    leads, truth = _two_leads(fs, 7, device)
    n = leads.shape[-1]
    fused = ecg_peaks(leads, fs, leads="fuse")
    assert fused.device == leads.device and fused.dtype == torch.int64 and (torch.diff(fused) > 0).all()
    assert evaluate_beats(truth, fused, fs, tolerance_s=0.05, n_samples=n).f1 >= 0.99
    alone = ecg_peaks(leads[0], fs)
    g = torch.Generator().manual_seed(1)
    for lost in (torch.zeros(n), torch.full((n,), 3.0), 0.3 * torch.randn(n, generator=g)):  # off, saturated, noise
        with_lost = torch.stack([leads[0], lost.to(device)])
        assert torch.equal(ecg_peaks(with_lost, fs, leads="fuse"), alone)  # the clean lead's beats, exactly
        assert torch.equal(ecg_peaks(with_lost.flip(0), fs, leads="fuse"), alone)  # whichever lead is lost


def test_fused_leads_outvote_an_artefact_in_one_lead(device):
    fs = 250
    leads, truth = _two_leads(fs, 11, device)
    noisy = leads.clone()
    g = torch.Generator().manual_seed(2)
    burst = slice(40 * fs, 70 * fs)  # 30 s of motion artefact in the first lead: bursts larger than its QRS
    noisy[0, burst] += (2.0 * torch.randn(30 * fs, generator=g)).cumsum(0).div(8).to(device)
    n = leads.shape[-1]
    scores = [
        evaluate_beats(truth, p, fs, tolerance_s=0.05, n_samples=n).f1
        for p in (ecg_peaks(noisy[0], fs), ecg_peaks(noisy[1], fs), ecg_peaks(noisy, fs, leads="fuse"))
    ]
    assert scores[2] >= max(scores[:2]) - 0.005 and scores[2] > scores[0], scores


def test_fused_leads_take_each_stretch_from_its_cleaner_lead(device):
    # artefacts in the first lead over 20-40 s and in the second over 70-90 s: each lead alone
    # loses beats there, fused takes every stretch from the lead that is clean in it
    fs = 250
    leads, truth = _two_leads(fs, 13, device)
    noisy = leads.clone()
    g = torch.Generator().manual_seed(4)
    for lead, start in ((0, 20), (1, 70)):
        noise = (2.0 * torch.randn(20 * fs, generator=g)).cumsum(0).div(8)
        noisy[lead, start * fs : (start + 20) * fs] += noise.to(device)
    n = leads.shape[-1]
    fused = ecg_peaks(noisy, fs, leads="fuse")
    assert (torch.diff(fused) > 0.2 * fs).all()  # one peak per beat, also where the chosen lead changes
    scores = [
        evaluate_beats(truth, p, fs, tolerance_s=0.05, n_samples=n).f1
        for p in (ecg_peaks(noisy[0], fs), ecg_peaks(noisy[1], fs), fused)
    ]
    assert scores[2] >= 0.99 and scores[2] > max(scores[:2]), scores


def test_fused_batch_equals_one_recording_at_a_time(device):
    x = torch.stack([_two_leads(250, s, device)[0] for s in (3, 4)])  # (batch, leads, time)
    batch = ecg_peaks(x, 250, leads="fuse")
    assert isinstance(batch, list) and len(batch) == 2
    for row, peaks in zip(x, batch, strict=True):
        assert torch.equal(peaks, ecg_peaks(row, 250, leads="fuse"))


def test_fused_leads_errors():
    x = torch.zeros(2, 2000)
    with pytest.raises(DevicepipeError, match="leads must be 'each' or 'fuse'"):
        ecg_peaks(x, 250, leads="all")
    with pytest.raises(DevicepipeError, match=r"needs a method of \['ricker'\]"):
        ecg_peaks(x, 250, leads="fuse", method="seed")
    with pytest.raises(DevicepipeError, match=r"\(leads, time\) or \(batch, leads, time\)"):
        ecg_peaks(torch.zeros(2000), 250, leads="fuse")
    with pytest.raises(DevicepipeError, match="pass leads='fuse'"):
        ecg_peaks(torch.zeros(2, 2, 2000), 250)


def test_beat_quality_against_numpy_and_marks_an_artefact_stretch(device):
    from devicepipe.ecg import beat_quality

    fs = 250
    sim = simulate_ecg(120, fs, seed=5, device=device)
    x = sim.signal.clone()
    g = torch.Generator().manual_seed(3)
    x[60 * fs : 70 * fs] += (1.5 * torch.randn(10 * fs, generator=g)).to(device)  # 10 s of heavy noise
    peaks = ecg_peaks(sim.signal, fs)  # the true beats, cut from the noisy signal
    beats = ecg_segment(x, peaks, fs, mode="centered")
    q = beat_quality(beats, window_s=10.0)
    m = beats.matrix.cpu().double().numpy()
    template = np.sort(m, axis=0)[(m.shape[0] - 1) // 2]  # torch's median: the lower middle value
    expected = np.array([np.corrcoef(row, template)[0, 1] for row in m])
    np.testing.assert_allclose(q.beat.cpu().numpy(), expected, atol=1e-5)
    stretch = (beats.peaks.cpu().numpy() // (10 * fs)).astype(int)
    for s in np.unique(stretch):
        values = np.sort(expected[stretch == s])
        assert q.stretch.cpu().numpy()[stretch == s] == pytest.approx(values[(values.size - 1) // 2], abs=1e-5)
    inside = ((beats.peaks >= 60 * fs) & (beats.peaks < 70 * fs)).cpu()
    reach = beats.width  # a beat whose row reaches into the noise may be marked too
    clear = ((beats.peaks < 60 * fs - reach) | (beats.peaks >= 70 * fs + reach)).cpu()
    usable = q.usable().cpu()
    assert not usable[inside].any() and usable[clear].all()  # the noisy stretch, and nothing clear of it


def test_poor_stretches_by_hand():
    from devicepipe.ecg import BeatQuality, Beats, beat_quality, poor_stretches, stretch_medians

    fs, n = 100.0, 5_500  # 10-s stretches of 1,000 samples: five whole ones and half a sixth
    peaks = torch.tensor([100, 500, 900, 1_200, 1_800, 3_100, 3_500, 3_900, 4_400, 5_200])
    beat = torch.tensor([0.9, 0.8, 0.95, 0.9, 0.1, 0.2, 0.3, 0.9, 0.7, 0.6], dtype=torch.float64)
    holder = Beats(torch.zeros(0, 1), peaks[:0], peaks, peaks[:0], peaks[:0] > 0, fs)  # only the peaks are read
    q = beat_quality(holder, window_s=10.0, correlation=beat)  # each beat's stretch median, as a run computes it
    # stretch 0: 0.8, 0.9, 0.95 -> 0.9; 1: 0.1, 0.9 -> 0.1 (the lower middle); 2: no beat;
    # 3: 0.2, 0.3, 0.9 -> 0.3; 4: 0.7; 5: 0.6
    medians = stretch_medians(q, peaks, n, fs)
    np.testing.assert_array_equal(medians.numpy(), [0.9, 0.1, np.nan, 0.3, 0.7, 0.6])
    np.testing.assert_array_equal(poor_stretches(q, peaks, n, fs, 0.5).numpy(), [[1_000, 4_000]])
    np.testing.assert_array_equal(poor_stretches(q, peaks, n, fs, 0.65).numpy(), [[1_000, 4_000], [5_000, 5_500]])
    np.testing.assert_array_equal(poor_stretches(q, peaks, n, fs, 0.05).numpy(), [[2_000, 3_000]])
    empty = BeatQuality(beat[:0], beat[:0], 10.0)
    np.testing.assert_array_equal(poor_stretches(empty, peaks[:0], n, fs).numpy(), [[0, 5_500]])  # no beat at all


def test_ecg_contrast_tells_an_ecg_from_noise():
    from devicepipe.ecg import ecg_contrast, ricker_defaults

    g = torch.Generator().manual_seed(5)
    noise = torch.randn(3, 60 * 250, generator=g)
    ecg = simulate_ecg(60, 250, seed=5, noise_mV=0.05).signal
    limit = ricker_defaults()["min_contrast"]
    assert (ecg_contrast(noise, 250) < limit).all()  # white noise: about 4.4
    assert float(ecg_contrast(ecg, 250)) > 3 * limit
    assert ecg_contrast(ecg, 250).ndim == 0 and ecg_contrast(noise, 250).shape == (3,)


@pytest.mark.parametrize("n", [5, 51, 52, 1000])
def test_refinement_moves_each_candidate_to_its_extremum(n):
    # against a plain loop: the window of +-reach samples (an end sample repeated past either
    # end), its mean taken off, the first extremum in the candidate's polarity
    from devicepipe.ecg.ricker import _refined

    g = torch.Generator().manual_seed(n)
    reach = 25
    wide = torch.randn(3, n + 9, generator=g)
    for x in (wide[:, :n].contiguous(), wide[:, 4 : 4 + n]):  # a contiguous input and a strided one
        rows = torch.randint(0, 3, (400,), generator=g)
        cols = torch.randint(0, n, (400,), generator=g)
        polarity = torch.where(torch.rand(400, generator=g) < 0.5, -1.0, 1.0)
        got, none = _refined(x, polarity, rows, cols, reach)
        same, width = _refined(x, polarity, rows, cols, reach, spike=5)
        assert none is None and torch.equal(got, same)
        xs = x.numpy()
        for r, c, p, moved, w in zip(rows.tolist(), cols.tolist(), polarity.tolist(), got.tolist(), width.tolist(),
                                     strict=True):  # fmt: skip
            idx = np.clip(np.arange(c - reach, c + reach + 1), 0, n - 1)
            window = xs[r, idx]
            best = int(np.argmax((window - window.mean()) * p))
            assert moved == idx[best]
            # the spike test: samples within 5 of the extremum (inside the window) at half its height or above
            near = window[np.clip(np.arange(best - 5, best + 6), 0, window.size - 1)] * p
            assert w == int(np.sum(near >= (near[5] + near.min()) / 2))


def test_peaks_are_ordinary_tensors():
    # detection runs without autograd bookkeeping; what it returns can still be changed in place
    sim = simulate_ecg(20, 250, seed=2)
    one, rows = ecg_peaks(sim.signal, 250), ecg_peaks(torch.stack([sim.signal, sim.signal]), 250)
    from devicepipe.ecg import ecg_peaks_chunked

    chunked = ecg_peaks_chunked(lambda a, b: sim.signal[a:b], sim.signal.numel(), 250, chunk=2000)
    for peaks in (one, *rows, chunked):
        assert not peaks.is_inference()
        before = peaks.clone()
        peaks += 1
        assert torch.equal(peaks, before + 1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_chunked_detection_names_the_first_non_finite_sample(bad):
    from devicepipe.ecg import ecg_peaks_chunked

    x = simulate_ecg(60, 250, seed=4).signal
    x[12_345] = bad
    with pytest.raises(DevicepipeError, match="non-finite value .* at sample 12,345"):
        ecg_peaks_chunked(lambda a, b: x[a:b], x.numel(), 250, chunk=4000)
    huge = torch.full((3000,), 3e38)  # finite samples whose sum is not: still accepted
    assert ecg_peaks_chunked(lambda a, b: huge[a:b], huge.numel(), 250, chunk=1000).numel() == 0


def test_stretch_medians_taken_a_block_at_a_time_equal_numpy(monkeypatch):
    # a week's beats have their stretch medians taken QUALITY_BLOCK beats at a time, cut between
    # stretches; blocks that end inside a stretch must still give that whole stretch's median
    from devicepipe.ecg import Beats, beat_quality, quality

    rng = np.random.default_rng(4)
    fs = 100.0
    peaks = torch.from_numpy(np.cumsum(rng.integers(40, 160, 3000)))  # 10-s stretches of 7 to 25 beats
    corr = torch.from_numpy(rng.uniform(-1, 1, peaks.numel()))
    holder = Beats(torch.zeros(0, 1), peaks[:0], peaks, peaks[:0], peaks[:0] > 0, fs)
    stretch = peaks.numpy() // 1000
    expected = np.empty(peaks.numel())
    for s in np.unique(stretch):
        values = np.sort(corr.numpy()[stretch == s])
        expected[stretch == s] = values[(values.size - 1) // 2]  # the lower middle value
    for block in (5, 64, 1000):
        monkeypatch.setattr(quality, "QUALITY_BLOCK", block)
        np.testing.assert_array_equal(beat_quality(holder, correlation=corr).stretch.numpy(), expected)


def _strong_candidates(signs, levels, spacing):
    """Strong candidates of one row, ``spacing`` samples apart (far past the T-wave rule's reach)."""
    n = len(signs)
    cols = torch.arange(1, n + 1) * spacing
    return {
        "rows": torch.zeros(n, dtype=torch.int64), "cols": cols, "height": torch.tensor(levels, dtype=torch.float32),
        "sign": torch.tensor(signs, dtype=torch.float32), "refined": cols + 1,
        "level": torch.tensor(levels, dtype=torch.float32), "strong": torch.ones(n, dtype=torch.bool),
    }  # fmt: skip


def _held(c, r, spill):
    """Candidates ``c`` held on disk as a chunked detection holds them after the thresholds."""
    from devicepipe.ecg import chunked, ricker

    name = f"kept{spill.size('count')}_"
    spill.append("count", torch.zeros(1))  # (a new name each time)
    for key, values in chunked._packed(c, r).items():
        spill.append(name + key, values)
    return ricker.Held(spill, name, torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("block", [1, 2, 3, 100])
def test_the_polarity_figures_in_parts_equal_those_of_all_candidates_at_once(block):
    from devicepipe.core.spill import Spill
    from devicepipe.ecg import ricker

    with Spill() as spill:
        _polarity_cases(ricker.Ricker(250.0), block, spill)


def _polarity_cases(r, block, spill):
    from devicepipe.ecg import ricker

    # a tie of signs: a candidate counted in two parts would break it
    c = _strong_candidates([1, 1, -1, -1], [4.0, 1.0, 3.0, 2.0], 1000)
    c["strong"][2] = False  # a weak one between: the part boundaries still find the strong one before
    keep = c["strong"]
    expected = ricker._polarity(c["rows"][keep], c["sign"][keep], c["level"][keep], 1)
    got = r.polarity_of(_held(c, r, spill), block)
    assert got[0].tolist() == expected[0].tolist() == [1.0]  # +1 +1 -1: one more positive
    assert got[1].tolist() == expected[1].tolist() == [2.0]  # the lower median of 4, 1, 2
    c = _strong_candidates([1, -1, 1, -1], [4.0, 1.0, 3.0, 2.0], 1000)
    assert r.polarity_of(_held(c, r, spill), block)[0].tolist() == [0.0]  # a tie: no dominant polarity
    # a weak follower (the T-wave rule: close after a beat, under half its height) is left out, in any part
    c = _strong_candidates([1, -1, -1, 1], [4.0, 4.0, 3.0, 2.0], 1000)
    c["cols"][1], c["height"][1] = c["cols"][0] + 10, 0.5
    assert r.polarity_of(_held(c, r, spill), block)[0].tolist() == [1.0]  # +1 -1 +1 without it (a tie with it)


def test_parts_joined_on_disk_equal_unique_of_all_peaks():
    from devicepipe.core.spill import Spill
    from devicepipe.ecg.chunked import _joined

    def joined(*parts, seam=2):
        with Spill() as spill:
            spill.append("peaks", torch.zeros(0, dtype=torch.int64))
            _joined([torch.tensor(p, dtype=torch.int64) for p in parts], spill, "peaks", seam=seam)
            return spill.read("peaks").tolist()

    assert joined([1, 5, 9], [9, 12], [20]) == [1, 5, 9, 12, 20]  # a repeat at a seam
    assert joined([1, 5, 9], [8, 12]) == [1, 5, 8, 9, 12]  # a refined position moved over a seam
    assert joined([1, 5], [], [5, 6], [6]) == [1, 5, 6]  # an empty part between, a part that is all repeat
    assert joined([1, 7, 9], [6, 8, 10]) == [1, 6, 7, 8, 9, 10]  # two values back over the seam, interleaved
    assert joined([1, 2], [3], [0, 4], seam=3) == [0, 1, 2, 3, 4]  # back over two short parts
    assert joined() == [] and joined([], []) == [] and joined([3]) == [3]
    for seam in (1, 2, 5):  # more than the seam out of order: an error, never a wrong order
        with pytest.raises(RuntimeError, match="seam"):
            joined(list(range(10, 20)), list(range(10 - seam - 1, 30)), seam=seam)


@pytest.mark.parametrize("rows_per_group", [1, 2, 3])
def test_a_batch_detected_in_groups_of_rows_gives_each_row_its_own_peaks(monkeypatch, rows_per_group):
    """On the CPU a long batch is detected a group of rows at a time; the groups' row numbers
    are put back, so each row gets the peaks it gets alone, and the batch in one piece."""
    from devicepipe.ecg import ricker

    sims = [simulate_ecg(12, 250, seed=s, heart_rate_bpm=50 + 12 * s) for s in range(7)]
    x = torch.stack([s.signal for s in sims])
    alone = [ecg_peaks(row, 250) for row in x]
    monkeypatch.setattr(ricker, "BATCH_GROUP_SAMPLES", 10**9)
    whole = ecg_peaks(x, 250)
    monkeypatch.setattr(ricker, "BATCH_GROUP_SAMPLES", rows_per_group * x.shape[1] // torch.get_num_threads())
    grouped = ecg_peaks(x, 250)
    assert len(grouped) == 7
    for got, one, together, sim in zip(grouped, alone, whole, sims, strict=True):
        assert torch.equal(got, one) and torch.equal(got, together)
        assert got.numel() == sim.r_peaks.numel()  # (each row's own rhythm: a shifted row would not match)


def test_neighbours_in_rows_finds_the_beat_whose_qrs_reaches_into_a_row():
    from devicepipe.ecg import neighbours_in_rows

    fs = 100.0  # rows from 25 samples before the peak to 45 after; a QRS starts 6 samples before its R
    peaks = torch.tensor([100, 200, 250, 400, 420, 600], dtype=torch.int64)
    beats = ecg_segment(torch.zeros(800), peaks, fs, mode="centered")
    got = neighbours_in_rows(beats, peaks).numpy()
    # by hand: 100 -> next at 200 (100 samples on: 200 - 6 >= 145, outside); 200 -> next at 250 (50 on:
    # 250 - 6 = 244 < 245, inside); 250 -> previous at 200 is 50 back (200 + 6 < 225, outside), next 400
    # far; 400 -> next at 420 (+0.2 s) nearer than nothing before; 420 -> previous at 400 (-0.2 s,
    # 406 >= 395, inside); 600 alone
    expected = np.array([np.nan, 0.5, np.nan, 0.2, -0.2, np.nan])
    np.testing.assert_allclose(got, expected, equal_nan=True)
    # the seed mode's rows run from beat to beat: no neighbour is a surprise there
    seed = ecg_segment(torch.zeros(800), peaks, fs, mode="seed")
    assert np.isnan(neighbours_in_rows(seed, peaks).numpy()).all()


def test_the_baseline_is_two_median_filters_as_scipy_computes_them():
    from scipy.ndimage import median_filter

    from devicepipe.ecg import ecg_baseline

    rng = np.random.default_rng(2)
    x = np.cumsum(rng.normal(size=3000)).astype(np.float32)
    # at 50 Hz no averaging: windows of 0.2 s and 0.6 s are 11 and 31 samples, the ends repeated
    got, step = ecg_baseline(torch.tensor(x), 50.0)
    expected = median_filter(median_filter(x, 11, mode="nearest"), 31, mode="nearest")
    assert step == 1
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-6)


def test_levelled_beats_lose_the_wander_under_them():
    from devicepipe.ecg import baseline_rows

    fs = 250.0
    still = simulate_ecg(300, fs, noise_mV=0.0, wander_mV=0.0, seed=5)
    wandering = simulate_ecg(300, fs, noise_mV=0.0, wander_mV=0.4, seed=5)  # the same beats, swinging 0.4 mV
    peaks = still.r_peaks
    rows_still = ecg_segment(still.signal, peaks, fs, mode="centered")
    rows_wander = ecg_segment(wandering.signal, peaks, fs, mode="centered")
    before = float((rows_wander.matrix - rows_still.matrix).abs().mean())
    levelled_still = rows_still.matrix - baseline_rows(still.signal, rows_still)
    levelled_wander = rows_wander.matrix - baseline_rows(wandering.signal, rows_wander)
    after = float((levelled_wander - levelled_still).abs().mean())
    # against the simulation's truth: the same beats differ by the wander (mean 0.17 mV) before, and by
    # under 40 % of it once each is levelled (median filters follow a 0.5 Hz swing only so far)
    assert before > 0.1 and after < 0.4 * before


def test_align_rows_undoes_known_shifts_of_the_qrs():
    from devicepipe.ecg import align_rows

    t = torch.arange(256, dtype=torch.float64)
    template = 5 * torch.exp(-(((t - 91) / 3) ** 2)) + torch.exp(-(((t - 180) / 20) ** 2))  # a sharp QRS, a T wave
    moved_by = torch.tensor([0, 1, -1, 2, -2, 3, -3, 0, 0, 0])  # columns each row's QRS comes late (+) or early
    rows = torch.stack([torch.roll(template, int(k)) for k in moved_by])
    rows = rows + 0.01 * torch.randn(rows.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # 256 columns over 0.7 s: 8 ms is 2.9 columns, so up to 2 either way is undone, 3 is beyond the limit
    aligned, shifts = align_rows(rows, 91.0, 256 / 0.7)
    assert shifts[:5].tolist() == moved_by[:5].tolist()
    assert shifts[5:7].abs().tolist() == [2, 2]  # as far as it may go, in the right direction
    assert shifts[5] > 0 > shifts[6]
    np.testing.assert_allclose(aligned[:5, 60:120], template[60:120].expand(5, -1), atol=0.05)
    # rows that need no move keep their values exactly
    assert torch.equal(aligned[7:], rows[7:])


def test_a_peak_method_declares_what_it_supports(monkeypatch):
    # a new method is one entry: its options from its signature, refused where it declares no
    # fused leads or chunks, the command's chunked path asked of the table rather than a name
    from devicepipe.ecg import peaks as peak_module
    from devicepipe.ecg.peaks import PeakMethod, methods_that, options_of
    from devicepipe.pipelines.chunked import check_settings

    def every_second(x, fs, *, spacing_s: float = 1.0):
        step = max(1, int(spacing_s * fs))
        cols = torch.arange(0, x.shape[-1], step).repeat(x.shape[0])
        rows = torch.arange(x.shape[0]).repeat_interleave(cols.numel() // x.shape[0])
        return rows, cols

    monkeypatch.setitem(peak_module.ECG_PEAK_METHODS, "tick", PeakMethod(every_second))
    assert options_of("tick") == ["spacing_s"] and "tick" not in methods_that("chunks")
    assert methods_that("chunks") == methods_that("fused") == ["ricker"]
    x = torch.zeros(2, 1000)
    assert peak_module.ecg_peaks(x[0], 100.0, method="tick", spacing_s=2.0).tolist() == [0, 200, 400, 600, 800]
    with pytest.raises(DevicepipeError, match="leads='fuse' needs a method of \\['ricker'\\]"):
        peak_module.ecg_peaks(x, 100.0, method="tick", leads="fuse")
    with pytest.raises(DevicepipeError, match="made for the ricker method, not tick"):
        check_settings({"chunk": 1000, "method": "tick"})


def test_the_detector_finds_every_beat_down_to_30_hz_and_not_below_25():
    # the measure behind MIN_ECG_HZ (pipelines/checks.py): a simulated ECG at 1000 Hz, resampled
    from devicepipe.pipelines.checks import MIN_ECG_HZ

    sim = simulate_ecg(120, 1000, seed=1)
    f1 = {}
    for fs in (50, 30, 20):
        x = torch.nn.functional.interpolate(sim.signal[None, None], size=120 * fs, mode="linear")[0, 0]
        truth = np.round(np.asarray(sim.r_peaks) * fs / 1000).astype(np.int64)
        f1[fs] = evaluate_beats(truth, ecg_peaks(x.contiguous(), fs).numpy(), fs).f1
    assert f1[50] == f1[30] == 1.0 and f1[20] < 0.9 and MIN_ECG_HZ == 30
