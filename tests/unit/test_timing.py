"""Stage timing and where host-device transfers are counted: every stage but training."""

import json

import torch

from devicepipe.core.interop import TransferLedger
from devicepipe.core.timing import UNCOUNTED_STAGES, StageTimer
from devicepipe.io import write_parquet
from devicepipe.pipelines import beats_finish, run_beats
from devicepipe.simulate import simulate_ecg


def test_stages_add_up_and_training_is_not_counted():
    # the meta device exercises the same dispatch path as a GPU on a machine without one
    timer = StageTimer(torch.device("cpu"), TransferLedger())
    x = torch.randn(100)
    with timer.stage("read"):
        x.to("meta")
    with timer.stage("train"):
        x.to("meta")  # not counted: training's many small operators stay outside the ledger
    with timer.stage("read"):
        torch.empty(10, device="meta").copy_(x[:10])
    assert "train" in UNCOUNTED_STAGES
    assert set(timer.seconds) == {"read", "train"} and all(v >= 0 for v in timer.seconds.values())
    assert timer.ledger.other == 2 and [e[2] for e in timer.ledger.events] == [400, 40]
    assert timer.transfers()["counted_in"] == "every stage but training"
    assert StageTimer(torch.device("cpu")).transfers() is None


def test_a_pipeline_reports_an_unexpected_transfer(tmp_path, monkeypatch):
    sim = simulate_ecg(60, 250, seed=1)
    write_parquet({"ecg": sim.signal}, tmp_path / "ecg.parquet", sampling_rate=250)
    clean = run_beats(tmp_path / "ecg.parquet", tmp_path / "clean", device="cpu", figures=False)
    assert clean.transfers["other"] == 0 and clean.transfers["host_to_device"] == 0

    segment = beats_finish.ecg_segment

    def leaky_segment(x, peaks, fs, **kw):
        x[:1000].to("meta")  # a stray copy to another device, 4000 bytes
        return segment(x, peaks, fs, **kw)

    monkeypatch.setattr(beats_finish, "ecg_segment", leaky_segment)
    leaky = run_beats(tmp_path / "ecg.parquet", tmp_path / "leaky", device="cpu", figures=False)
    assert leaky.transfers["other"] == 1
    summary = json.loads((tmp_path / "leaky" / "summary.json").read_text())
    assert summary["transfers"]["other"] == 1
    # the ledger changes nothing but the count
    assert torch.equal(torch.from_numpy(leaky.peaks), torch.from_numpy(clean.peaks))
    off = run_beats(tmp_path / "ecg.parquet", tmp_path / "off", device="cpu", figures=False, count_transfers=False)
    assert off.transfers is None and (off.peaks == clean.peaks).all()
