"""Work split into chunks gives the answer of the whole: streaming scaler fits, beat detection in chunks."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require_data
from devicepipe.ecg import ecg_peaks, ecg_peaks_chunked
from devicepipe.io import read_series
from devicepipe.io.chunks import chunk_reader, iter_chunks, recording_length
from devicepipe.signal.scale import MinMaxScaler, StandardScaler
from devicepipe.simulate import simulate_ecg, write_simulated_ecg


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=6), st.integers(0, 10_000))
def test_any_chunking_gives_the_whole_fit(sizes, seed):
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((sum(sizes), 2)) * 10)
    whole = StandardScaler().fit(x)
    chunked = StandardScaler()
    for part in torch.split(x, sizes):
        chunked.partial_fit(part)
    torch.testing.assert_close(chunked.mean_, whole.mean_)
    torch.testing.assert_close(chunked.var_, whole.var_)
    mm_whole, mm_chunked = MinMaxScaler().fit(x), MinMaxScaler()
    for part in torch.split(x, sizes):
        mm_chunked.partial_fit(part)
    torch.testing.assert_close(mm_chunked.min_, mm_whole.min_)


# ----------------------------------------------------------------------------- beat detection in chunks


def _chunked(x, fs, chunk):
    return ecg_peaks_chunked(lambda a, b: x[a:b], x.shape[-1], fs, chunk=chunk)


def test_chunks_of_mitdb_100_give_the_peaks_of_one_call(device):
    rec = read_series(require_data("mitdb/100"), "MLII", device=device)
    whole = ecg_peaks(rec.samples, rec.sampling_rate)
    assert whole.numel() > 2200
    # the smallest chunk (one block alignment, 4 s at 360 Hz) cuts through a beat every few seconds
    for chunk in (1, 5_000, 33_333, 200_000):
        assert torch.equal(_chunked(rec.samples, rec.sampling_rate, chunk), whole), chunk


@pytest.mark.parametrize("block", [1, 7, 64, 500])
def test_the_rules_applied_a_part_at_a_time_give_the_peaks_of_one_call(monkeypatch, block):
    # chunked detection applies the T-wave, polarity and search-back rules SELECT_BLOCK candidates
    # at a time (a week holds about 700,000); parts this small put an edge every few beats
    from devicepipe.ecg import chunked

    monkeypatch.setattr(chunked, "SELECT_BLOCK", block)
    # one candidate a block puts an edge at every beat: ten minutes and two records show it as well
    minutes, records = (10, 2) if block == 1 else (None, 6)
    rec = read_series(require_data("mitdb/100"), "MLII", stop=None if minutes is None else f"{minutes}min")
    whole = ecg_peaks(rec.samples, rec.sampling_rate)
    assert torch.equal(_chunked(rec.samples, rec.sampling_rate, 50_000), whole)
    # the search-back at work: stretches of beats at a tenth of their size, under the threshold
    sim = simulate_ecg(600, 250, seed=7, ectopic_rate=0.05, noise_mV=0.1)
    t = torch.arange(sim.signal.numel())
    x = sim.signal * (1 - 0.9 * (torch.sin(t / 311 * 6.283) > 0.6).float())
    whole = ecg_peaks(x, 250)
    assert whole.numel() - ecg_peaks(x, 250, searchback_rr=0).numel() >= 15  # beats only the search-back finds
    assert torch.equal(_chunked(x, 250, 20_000), whole)
    for path in sorted(require_data("cpsc2021").glob("*.hea"))[:records]:
        rec = read_series(path, 0)
        whole = ecg_peaks(rec.samples, rec.sampling_rate)
        assert torch.equal(_chunked(rec.samples, rec.sampling_rate, 7_777), whole), path.name


@pytest.mark.parametrize("blocks", [1, 29, 700])
def test_the_thresholds_taken_a_stretch_of_chunks_at_a_time_give_the_peaks_of_one_call(monkeypatch, blocks):
    # the second pass takes at least THRESHOLD_BLOCKS blocks of chunks together (a week of
    # 10-minute chunks: 27 at a time); small stretches put their edges every chunk or few
    from devicepipe.ecg import chunked

    monkeypatch.setattr(chunked, "THRESHOLD_BLOCKS", blocks)
    rec = read_series(require_data("mitdb/100"), "MLII")
    whole = ecg_peaks(rec.samples, rec.sampling_rate)
    for chunk in (1, 5_000, 33_333):
        assert torch.equal(_chunked(rec.samples, rec.sampling_rate, chunk), whole), chunk


def test_chunks_of_every_shared_cpsc_record_give_the_peaks_of_one_call():
    records = sorted(require_data("cpsc2021").glob("*.hea")) + sorted(require_data("cpsc2019").glob("*.hea"))
    assert len(records) >= 34
    for path in records:
        rec = read_series(path, 0)
        whole = ecg_peaks(rec.samples, rec.sampling_rate)
        for chunk in (1, 3_000, 7_777):
            assert torch.equal(_chunked(rec.samples, rec.sampling_rate, chunk), whole), (path.name, chunk)


@pytest.mark.slow
def test_a_simulated_24_hour_ecg_in_10_minute_chunks_from_disk(tmp_path):
    sim = simulate_ecg(24 * 3600, 250, seed=5, ectopic_rate=0.01, noise_mV=0.05)
    path, _ = write_simulated_ecg(sim, tmp_path / "day.npy")
    whole = ecg_peaks(sim.signal, 250)
    read, n, fs = chunk_reader(path, sampling_rate=250)
    assert (n, fs) == (sim.signal.numel(), 250.0)
    got = ecg_peaks_chunked(read, n, fs, chunk=10 * 60 * 250)
    assert whole.numel() > 90_000 and torch.equal(got, whole)


def test_a_signal_that_is_no_ecg_stays_without_beats_in_chunks():
    noise = torch.randn(250 * 120, generator=torch.Generator().manual_seed(0))
    assert ecg_peaks(noise, 250).numel() == 0 and _chunked(noise, 250, 4000).numel() == 0


@pytest.mark.parametrize("chunk", [997, 4000, 7001])
def test_the_chunks_gather_the_subsample_and_size_of_one_call(monkeypatch, chunk):
    """The no-ECG test sees, in chunks, the feature's subsample, its signs, the signal's size and
    the subsample's stride that one call gives it (every stride-th value, the strides crossing
    chunk edges anywhere)."""
    from devicepipe.ecg import ricker

    seen = []
    original = ricker.Ricker.no_ecg

    def no_ecg(self, typical, subsample, magnitude=None, stride=1, negative=None):
        seen.append((subsample.clone(), magnitude.clone(), stride, negative.clone()))
        return original(self, typical, subsample, magnitude, stride, negative)

    monkeypatch.setattr(ricker.Ricker, "no_ecg", no_ecg)
    monkeypatch.setattr(
        ricker, "SUBSAMPLE", 2500
    )  # a stride of 7 at this length (18,000 // 2,500), prime to the chunks
    x = simulate_ecg(72, 250, seed=3).signal
    ecg_peaks(x, 250)
    _chunked(x, 250, chunk)
    (whole, whole_size, whole_stride, whole_signs), (parts, parts_size, parts_stride, parts_signs) = seen
    assert whole.shape == (1, -(-18_000 // 7)) and whole.shape == parts.shape
    assert whole_stride == parts_stride == 7
    assert torch.equal(whole_signs, parts_signs) and 0.2 < whole_signs.float().mean() < 0.8
    torch.testing.assert_close(parts, whole, rtol=0, atol=0)
    torch.testing.assert_close(parts_size.reshape(-1), whole_size.reshape(-1), rtol=0, atol=0)


def test_chunks_tile_the_recording_and_carry_their_halo(tmp_path):
    sim = simulate_ecg(100, 200, seed=0)
    path, _ = write_simulated_ecg(sim, tmp_path / "x.parquet")
    assert recording_length(path) == 20_000
    chunks = list(iter_chunks(path, chunk_s=30, halo_s=2))
    assert [(c.core_start, c.core_stop) for c in chunks] == [(0, 6000), (6000, 12000), (12000, 18000), (18000, 20000)]
    assert [(c.start, c.stop) for c in chunks] == [(0, 6400), (5600, 12400), (11600, 18400), (17600, 20000)]
    torch.testing.assert_close(torch.cat([c.core for c in chunks]), sim.signal, rtol=0, atol=0)
    torch.testing.assert_close(chunks[1].samples, sim.signal[5600:12400], rtol=0, atol=0)


def test_a_non_finite_sample_is_named_by_its_place_in_the_recording():
    x = simulate_ecg(60, 250, seed=0).signal.clone()
    x[12_345] = float("nan")
    with pytest.raises(ValueError, match="sample 12,345"):
        _chunked(x, 250, 4000)


def _fused_chunked(x, fs, chunk):
    from devicepipe.core.spill import Spill
    from devicepipe.ecg import ecg_peaks_fused_chunked_to

    with Spill() as held:
        reads = [lambda a, b, lead=lead: x[lead, a:b] for lead in range(x.shape[0])]
        ecg_peaks_fused_chunked_to(held, reads, x.shape[-1], fs, chunk=chunk)
        return held.read("peaks")


def test_chunks_of_every_two_lead_shared_record_give_the_fused_peaks_of_one_call():
    records = [require_data("mitdb/100")] + sorted(p.with_suffix("") for p in require_data("cpsc2021").glob("*.hea"))
    assert len(records) >= 10
    for path in records:
        rec = read_series(path, [0, 1])
        assert rec.samples.shape[0] == 2
        whole = ecg_peaks(rec.samples, rec.sampling_rate, leads="fuse")
        # both leads' own peaks differ somewhere, so the fusion (the lead chosen per stretch) is at work
        own = [ecg_peaks(lead, rec.sampling_rate) for lead in rec.samples]
        assert not torch.equal(own[0], own[1])
        for chunk in (1, 7_777, 43_200):  # (1: a block alignment, a few seconds)
            assert torch.equal(_fused_chunked(rec.samples, rec.sampling_rate, chunk), whole), (path.name, chunk)


def test_a_rhythm_too_fast_for_a_quiet_stretch_is_found_in_chunks_as_in_one_call():
    # the no-ECG test's look at the rhythm (the subsample's signs, gathered from the chunks)
    from devicepipe.simulate import Rhythm

    for rhythm in (Rhythm(vt=1.0, vt_bpm=230), Rhythm(vt=0.3, vt_bpm=240)):  # (and the per-block polarity sums)
        x = simulate_ecg(90, 250, rhythm=rhythm, noise_mV=0.05, seed=2).signal
        whole = ecg_peaks(x, 250)
        assert whole.numel() > 150
        for chunk in (997, 4096):
            torch.testing.assert_close(_chunked(x, 250, chunk), whole, rtol=0, atol=0)
