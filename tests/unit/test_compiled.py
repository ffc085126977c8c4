"""The compiled short-call path of the ``"ricker"`` detector answers with the tensor path's peaks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devicepipe.ecg import compiled, ecg_peaks
from devicepipe.ecg.compiled import COMPILED_UP_TO, Plan, peaks_ricker_compiled
from devicepipe.ecg.ricker import Ricker, peaks_ricker
from devicepipe.simulate import simulate_ecg
from devicepipe.simulate.rhythm import Rhythm


def tensor_path(x: torch.Tensor, fs: float, **options: float) -> list[np.ndarray]:
    rows, cols = peaks_ricker(x, fs, **options)
    return [cols[rows == i].numpy() for i in range(x.shape[0])]


def compiled_path(x: torch.Tensor, fs: float, **options: float) -> list[np.ndarray]:
    rows, cols = peaks_ricker_compiled(x, fs, **options)
    return [cols[rows == i].numpy() for i in range(x.shape[0])]


def assert_same_peaks(x: torch.Tensor, fs: float, **options: float) -> None:
    want, got = tensor_path(x, fs, **options), compiled_path(x, fs, **options)
    for row, (a, b) in enumerate(zip(want, got, strict=True)):
        only_tensor, only_compiled = np.setdiff1d(a, b)[:5], np.setdiff1d(b, a)[:5]
        assert np.array_equal(a, b), f"row {row}: {only_tensor} only tensor, {only_compiled} only compiled"


@pytest.mark.parametrize("fs", [125.0, 200.0, 250.0, 360.0, 500.0, 1000.0])
@pytest.mark.parametrize(
    "rhythm",
    [
        Rhythm(),
        Rhythm(ectopic_rate=0.15, atrial_rate=0.05, couplets=2, runs=1, pauses=1),
        Rhythm(bigeminy=0.5, afib=0.4),
        Rhythm(vt=0.6, vt_bpm=220.0),
    ],
    ids=["sinus", "ectopy", "bigeminy-af", "vt-220"],
)
def test_the_simulator_at_every_rate_gives_the_same_peaks_both_ways(fs, rhythm):
    duration = min(120.0, (COMPILED_UP_TO - 1) / fs)
    noises = ((1, 0.02), (2, 0.2))
    sims = [simulate_ecg(duration, fs, noise_mV=noise, rhythm=rhythm, seed=seed) for seed, noise in noises]
    x = torch.stack([s.signal.reshape(-1) for s in sims]).float()
    plan = Plan.of(Ricker(fs), x.shape[-1])
    assert plan is not None
    if not (rhythm.vt and fs < 200):  # (VT at 220 bpm sampled at 125 Hz is of low contrast: handed back)
        assert all(plan.peaks(row) is not None for row in x.numpy())  # compiled, not handed back
    assert_same_peaks(x, fs)
    found = compiled_path(x, fs)[0]  # and they are the beats: a check on both paths at once
    truth = sims[0].r_peaks.numpy()
    near = np.abs(found[:, None] - truth[None, :]).min(0) <= 0.05 * fs
    assert near.mean() > 0.95


@pytest.mark.parametrize(
    "options",
    [{"searchback_rr": 0.0}, {"close_ratio": 0.0}, {"polarity_ratio": 0.0}, {"spike_ms": 0.0}, {"threshold": 0.6}],
)
def test_each_rule_switched_off_or_changed_gives_the_same_peaks_both_ways(options):
    sim = simulate_ecg(60.0, 360.0, noise_mV=0.1, rhythm=Rhythm(ectopic_rate=0.2, pauses=2), seed=5)
    x = sim.signal.reshape(1, -1).float()
    assert_same_peaks(x, 360.0, **options)


def test_noise_flat_and_spiky_rows_in_one_batch_give_the_same_peaks_both_ways():
    fs, n = 250.0, 5000
    g = torch.Generator().manual_seed(3)
    ecg = simulate_ecg(n / fs, fs, seed=4).signal.reshape(-1).float()[:n]
    spikes = ecg.clone()
    spikes[::97] += 3.0  # one-sample glitches: the spike rule's work
    rows = [
        ecg,
        torch.randn(n, generator=g),  # white noise: low contrast, handed back to the tensor path
        torch.cumsum(torch.randn(n, generator=g), 0) * 0.01,  # brown noise
        torch.zeros(n),  # flat
        torch.full((n,), 7.5),  # a constant: float rounding of a level, no heart
        spikes,
        -ecg,  # inverted
        ecg * 1e4,  # in microvolts
    ]
    x = torch.stack(rows)
    plan = Plan.of(Ricker(fs), n)
    assert plan is not None
    assert plan.peaks(rows[1].numpy()) is None  # noise: the rhythm check is the tensor path's
    assert plan.peaks(rows[3].numpy()).size == 0 and plan.peaks(rows[4].numpy()).size == 0
    assert_same_peaks(x, fs)


def test_rows_too_short_or_too_long_or_too_slow_go_to_the_tensor_path():
    assert Plan.of(Ricker(500.0), 2 * compiled.taps(Ricker(500.0)).size) is None  # twice the filter
    assert Plan.of(Ricker(250.0), 400_000) is None  # subsampled for its median
    assert Plan.of(Ricker(80.0), 8_000) is None  # candidates sample by sample
    assert not compiled.compiled_suits(torch.zeros(1, COMPILED_UP_TO + 1))
    assert not compiled.compiled_suits(torch.zeros(1, 5000, dtype=torch.float64))


def test_ecg_peaks_takes_the_compiled_path_for_a_short_call(monkeypatch):
    sim = simulate_ecg(30.0, 500.0, seed=9)
    want = ecg_peaks(sim.signal, 500.0)

    def refuse(*_args, **_kwargs):
        raise AssertionError("the tensor path ran")

    monkeypatch.setattr(compiled, "peaks_ricker", refuse)
    got = ecg_peaks(sim.signal, 500.0)
    assert torch.equal(got, want) and got.numel() > 25
    batch = torch.stack([sim.signal.reshape(-1)] * 3)
    assert all(torch.equal(p, want) for p in ecg_peaks(batch, 500.0))


def test_threads_share_the_rows_and_give_the_same_peaks():
    sims = [simulate_ecg(20.0, 250.0, rhythm=Rhythm(ectopic_rate=0.1), seed=s).signal.reshape(-1) for s in range(6)]
    x = torch.stack(sims).float()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = peaks_ricker_compiled(x, 250.0)
        torch.set_num_threads(3)
        three = peaks_ricker_compiled(x, 250.0)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one[0], three[0]) and torch.equal(one[1], three[1])


def test_the_taps_are_the_tensor_paths():
    for fs in np.arange(94.0, 1001.0, 7.5):
        for sigma in (0.01, 0.015, 0.03):
            r = Ricker(float(fs), sigma_s=sigma)
            assert np.array_equal(compiled.taps(r), r.kernel(torch.empty(0)).numpy())


def test_where_numba_cannot_load_the_compiled_code_the_tensor_path_answers(monkeypatch):
    sim = simulate_ecg(30.0, 360.0, rhythm=Rhythm(ectopic_rate=0.1), seed=2)
    want = ecg_peaks(sim.signal, 360.0)
    monkeypatch.setattr(compiled, "loops", lambda: None)  # as where no cache folder may be written
    assert Plan.of(Ricker(360.0), sim.signal.numel()) is None
    assert torch.equal(ecg_peaks(sim.signal, 360.0), want) and want.numel() > 30


def test_leads_fused_give_the_same_peaks_with_each_lead_compiled(monkeypatch):
    sims = [
        simulate_ecg(40.0, 360.0, noise_mV=n, rhythm=Rhythm(ectopic_rate=0.1), seed=s) for s, n in ((3, 0.02), (4, 0.3))
    ]
    x = torch.stack([s.signal.reshape(-1) for s in sims]).float()  # (leads, time): one clean lead, one noisy
    compiled_answer = ecg_peaks(x, 360.0, leads="fuse")
    monkeypatch.setattr(compiled, "loops", lambda: None)  # every lead through the tensor path
    assert torch.equal(ecg_peaks(x, 360.0, leads="fuse"), compiled_answer) and compiled_answer.numel() > 40


def test_the_compiled_path_is_off_where_the_environment_says_so(monkeypatch):
    sim = simulate_ecg(30.0, 500.0, seed=11)
    want = ecg_peaks(sim.signal, 500.0)
    row = sim.signal.reshape(1, -1).float()
    for off in ("0", "false", " Off ", "NO"):
        monkeypatch.setenv(compiled.COMPILED_ENV, off)
        assert not compiled.compiled_suits(row)
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    assert compiled.compiled_suits(row)
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    assert torch.equal(ecg_peaks(sim.signal, 500.0), want)


def test_a_command_on_one_recording_loads_no_compiled_code_and_one_on_many_does(tmp_path):
    import os
    import subprocess
    import sys

    import numpy as np

    folder = tmp_path / "records"
    folder.mkdir()
    for i in range(2):
        np.save(folder / f"r{i}.npy", simulate_ecg(10.0, 500.0, seed=i).signal.reshape(-1).numpy())
    code = (
        "import sys\n"
        "from devicepipe.cli import main\n"
        "try:\n    main(sys.argv[1:])\n"
        "except SystemExit as end:\n    assert not end.code, end.code\n"
        "print('numba' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != compiled.COMPILED_ENV}
    one = [str(folder / "r0.npy"), "--sampling-rate", "500", "--out", str(tmp_path / "one"), "--no-figures"]
    many = [str(folder), "--sampling-rate", "500", "--out", str(tmp_path / "many"), "--no-figures", "--workers", "0"]
    said = [
        subprocess.run([sys.executable, "-c", code, "beats", *args], capture_output=True, text=True, env=env)
        for args in (one, many)
    ]
    assert [s.stdout.strip().splitlines()[-1] for s in said] == ["False", "True"], [s.stderr[-800:] for s in said]
