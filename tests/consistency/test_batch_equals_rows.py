"""A batch gives what its rows give one by one: detection, peak finding, scoring, scaling, ensembles."""

import numpy as np
import torch

from devicepipe.ecg import ecg_peaks, ecg_segment
from devicepipe.learning.ensemble import fit_ensemble, member_seeds
from devicepipe.learning.score import embed, reconstruction_error
from devicepipe.learning.train import fit
from devicepipe.models import LightVAE, LightVAEConfig
from devicepipe.signal import find_peaks
from devicepipe.signal.resample import resample_rows
from devicepipe.signal.scale import StandardScaler
from devicepipe.simulate import simulate_ecg


def _beats(device: torch.device, seconds: float = 120, width: int = 64) -> torch.Tensor:
    sim = simulate_ecg(seconds, 250, seed=0, ectopic_rate=0.03, device=device)
    m = resample_rows(ecg_segment(sim.signal, ecg_peaks(sim.signal, 250), 250).matrix, width)
    return (m - m.mean()) / m.std()


def _trained_tolerance(device: torch.device) -> dict:
    """How close two trainings of one model on the same batches must end: on the CPU the vmapped
    and the single model sum in the same order. cuDNN picks other kernels for the vmapped
    (grouped) convolutions; with TF32 off (training runs under ``full_float32``) they ended at
    most 1.5e-6 apart relative to the largest weight on an H100, after 60 epochs at lr 1e-2 (with
    TF32 on: 1.5e-3)."""
    return dict(rtol=1e-5, atol=1e-6) if device.type == "cpu" else dict(rtol=1e-4, atol=1e-5)


def test_detector_batch_equals_one_by_one(device):
    sims = [simulate_ecg(60, 250, seed=s, inverted=bool(s % 2), noise_mV=0.05, device=device) for s in range(3)]
    rows = ecg_peaks(torch.stack([s.signal for s in sims]), 250)
    assert len(rows) == 3
    for sim, got in zip(sims, rows, strict=True):
        assert got.device == sim.signal.device
        assert torch.equal(got, ecg_peaks(sim.signal, 250))


def test_find_peaks_batched_rows_equal_single(device):
    x = torch.randn(4, 3000, generator=torch.Generator().manual_seed(9)).to(device)
    rows = find_peaks(x, min_distance=25, height=0.5)
    assert len(rows) == 4
    for r, got in zip(x, rows, strict=True):
        assert torch.equal(got, find_peaks(r, min_distance=25, height=0.5))


def test_scores_and_embeddings_do_not_depend_on_the_batch_size(device):
    data = _beats(device)
    torch.manual_seed(0)
    model = LightVAE(LightVAEConfig(width=64, latent=2)).to(device)
    fit(model, data, epochs=2, batch_size=64, seed=0)
    one_by_one = reconstruction_error(model, data, batch_size=1)
    torch.testing.assert_close(reconstruction_error(model, data), one_by_one, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(embed(model, data, batch_size=7), embed(model, data), rtol=1e-5, atol=1e-6)


def test_scaling_a_batch_equals_scaling_each_row(device):
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(1)).to(device) * 10 + 4
    scaler = StandardScaler().fit(x)
    whole = scaler.transform(x)
    for i in range(x.shape[0]):
        torch.testing.assert_close(scaler.transform(x[i : i + 1]), whole[i : i + 1])


def test_vmap_ensemble_equals_members_trained_one_by_one(device):
    data = _beats(device)

    def make(s):
        torch.manual_seed(s)
        return LightVAE(LightVAEConfig(width=64, latent=2)).to(device)

    ens = fit_ensemble(make, data, members=3, epochs=3, batch_size=32, seed=11, val_fraction=0.2)
    assert ens.seeds == member_seeds(11, 3)
    for member, s, hist in zip(ens.members, ens.seeds, ens.histories, strict=True):
        alone = make(s)
        h = fit(alone, data, epochs=3, batch_size=32, seed=s, split_seed=11, val_fraction=0.2)
        for a, b in zip(alone.state_dict().values(), member.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, **_trained_tolerance(device))
        np.testing.assert_allclose(hist.train, h.train, rtol=1e-5)
        np.testing.assert_allclose(hist.val, h.val, rtol=1e-5)
    # members differ from each other (own initialisation and batch order)
    assert not torch.allclose(ens.members[0].conv0.weight, ens.members[1].conv0.weight)


def test_early_stopping_ensemble_equals_members_stopped_alone(device):
    data = _beats(device)

    def make(s):
        torch.manual_seed(s)
        return LightVAE(LightVAEConfig(width=64, latent=2)).to(device)

    common = dict(epochs=60, batch_size=32, val_fraction=0.2, lr=1e-2, patience=2, min_improvement=0.05)
    ens = fit_ensemble(make, data, members=3, seed=4, **common)
    for member, s, hist in zip(ens.members, ens.seeds, ens.histories, strict=True):
        alone = make(s)
        h = fit(alone, data, seed=s, split_seed=4, **common)
        assert hist.best_epoch == h.best_epoch and h.stopped_early
        for a, b in zip(alone.state_dict().values(), member.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, **_trained_tolerance(device))


def test_a_batch_counted_in_groups_of_rows_equals_its_rows():
    # 60 rows of 5,000 samples: the no-ECG count runs 52 rows at a time (2**18 samples), and the
    # convolution runs the rows end to end; each row's peaks must be its own call's
    sims = [simulate_ecg(10, 500, seed=s, noise_mV=0.05 + 0.01 * (s % 5), inverted=bool(s % 3 == 0)) for s in range(60)]
    x = torch.stack([s.signal for s in sims])
    x[7] = torch.randn(5000, generator=torch.Generator().manual_seed(7)) * 0.1  # noise: no beats, in the batch too
    rows = ecg_peaks(x, 500)
    assert rows[7].numel() == 0 and sum(r.numel() for r in rows) > 500
    for row, got in zip(x, rows, strict=True):
        assert torch.equal(got, ecg_peaks(row, 500))
