"""The same answers on the CPU and a CUDA GPU: detection, windows, scaling, embeddings, a whole pipeline.

Skipped without a GPU. Integer results (peaks, counts, kept flags) must be equal; floating
results equal to float32 tolerance (the devices sum in different orders).
"""

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from devicepipe.ecg import ecg_peaks
from devicepipe.io import write_parquet
from devicepipe.learning.score import embed
from devicepipe.learning.train import fit
from devicepipe.models import LightVAE, LightVAEConfig
from devicepipe.pipelines import run_beats
from devicepipe.signal.scale import MinMaxScaler
from devicepipe.signal.windows import make_windows
from devicepipe.simulate import simulate_ecg, simulate_load

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]


def test_detector_gives_the_same_peaks():
    sim = simulate_ecg(600, 360, noise_mV=0.05, ectopic_rate=0.02, seed=2)
    gpu = ecg_peaks(sim.signal.cuda(), 360)
    assert gpu.device.type == "cuda"
    assert torch.equal(ecg_peaks(sim.signal, 360), gpu.cpu())
    assert torch.equal(
        ecg_peaks(sim.signal, 360, method="seed"), ecg_peaks(sim.signal.cuda(), 360, method="seed").cpu()
    )


def test_windows_and_scaling_agree():
    sim = simulate_load(60, seed=1)
    stamps = torch.from_numpy(sim.timestamps.view(np.int64))
    keep = torch.ones(stamps.numel(), dtype=torch.bool)
    keep[100:103] = False  # a gap to fill
    results = {}
    for dev in ("cpu", "cuda"):
        wins = make_windows(sim.values[keep].to(dev), stamps[keep].to(dev), window_s=86400, step_s=3600)
        scaler = MinMaxScaler().fit(wins.values.reshape(-1))
        results[dev] = (wins, scaler.transform(wins.values.reshape(-1)).cpu())
    (cw, cs), (gw, gs) = results["cpu"], results["cuda"]
    assert np.array_equal(cw.starts, gw.starts) and np.array_equal(cw.filled, gw.filled)
    torch.testing.assert_close(gw.values.cpu(), cw.values)
    torch.testing.assert_close(gs, cs)


def test_embeddings_agree():
    sim = simulate_ecg(120, 250, seed=0)
    data = torch.randn(300, 64, generator=torch.Generator().manual_seed(0)) + sim.signal[:64]
    models = {}
    for dev in ("cpu", "cuda"):
        torch.manual_seed(0)
        models[dev] = LightVAE(LightVAEConfig(width=64, latent=2)).to(dev)
    models["cuda"].load_state_dict(models["cpu"].state_dict())
    torch.testing.assert_close(
        embed(models["cuda"], data.cuda()).cpu(), embed(models["cpu"], data), rtol=1e-4, atol=1e-5
    )
    fit(models["cpu"], data, epochs=2, batch_size=32, seed=0)
    fit(models["cuda"], data.cuda(), epochs=2, batch_size=32, seed=0)
    torch.testing.assert_close(
        embed(models["cuda"], data.cuda()).cpu(), embed(models["cpu"], data), rtol=1e-3, atol=1e-4
    )


def test_beats_pipeline_writes_the_same_beats(tmp_path):
    sim = simulate_ecg(300, 250, seed=3, ectopic_rate=0.02)
    write_parquet({"ecg": sim.signal}, tmp_path / "ecg.parquet", sampling_rate=250)
    runs = {}
    for dev in ("cpu", "cuda"):
        runs[dev] = run_beats(tmp_path / "ecg.parquet", tmp_path / dev, device=dev, figures=False)
    cpu, gpu = (pq.read_table(tmp_path / d / "beats.parquet").to_pandas() for d in ("cpu", "cuda"))
    assert cpu[["peak", "kept"]].equals(gpu[["peak", "kept"]])
    np.testing.assert_allclose(
        np.load(tmp_path / "cuda" / "beat_matrix.npy"), np.load(tmp_path / "cpu" / "beat_matrix.npy"), atol=1e-6
    )
    # reading onto the GPU is one host-to-device copy; results come back once
    assert runs["cuda"].transfers["host_to_device"] >= 1 and runs["cpu"].transfers["host_to_device"] == 0
