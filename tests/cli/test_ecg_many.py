"""``ecg`` on a folder: stopped at any moment (Ctrl-C), it goes on with ``--resume`` to the run it
would have been (records done are kept, a record stopped in training continues from its checkpoint,
one that never began or began no epoch is trained afresh); with each record's ``.atr``, its beats
are scored against it as ``beats`` scores them."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from devicepipe.batch import Engine, run_dataset
from devicepipe.learning.learn import LearnSettings
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

#: The files compared: what a run found and scored (figures are left out to keep the test short).
WRITTEN = ("embeddings.parquet", "history.csv", "checkpoint.pt", "model.pt")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    for i in range(3):
        write_simulated_ecg(simulate_ecg(60.0, 250.0, heart_rate_bpm=65 + 5 * i, seed=i), root / f"r{i}.parquet")
    return root


def _run(folder, out, resume=False):
    options = {"settings": LearnSettings(epochs=3, threads=1, seed=0, resume=resume)}
    return run_dataset(folder, out, kind="ecg", options=options, engine=Engine(workers=0), resume=resume)


def _no_figures(monkeypatch):
    from devicepipe.pipelines import ecg

    monkeypatch.setattr(ecg, "write_artifacts", functools.partial(ecg.write_artifacts, only=WRITTEN))


def _stop_at(monkeypatch, module, name, call):
    """Raise KeyboardInterrupt in place of the ``call``-th call of ``module.name`` (from 1)."""
    original, calls = getattr(module, name), []

    def stopping(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, stopping)


@pytest.fixture(scope="module")
def whole(folder, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        _no_figures(mp)
        out = tmp_path_factory.mktemp("whole") / "out"
        assert _run(folder, out).n_ok == 3
    return out


@pytest.mark.parametrize(
    "stage",
    [
        "in training",  # the second record, after its first epoch's checkpoint
        "before an epoch",  # the third record, before its first checkpoint: nothing to resume there
        "writing",  # the second record, trained, while its files are written
    ],
)
def test_a_folder_run_stopped_at_any_stage_resumes_to_the_whole_run(folder, whole, tmp_path, monkeypatch, stage):
    from devicepipe.learning import train
    from devicepipe.pipelines import ecg

    _no_figures(monkeypatch)
    with monkeypatch.context() as mp:
        if stage == "writing":
            _stop_at(mp, ecg, "write_artifacts", 2)
        else:  # a checkpoint a record's epoch (not every 10 s): three a record
            mp.setattr(train, "CHECKPOINT_EVERY_S", 0.0)
            _stop_at(mp, train, "write_torch", 5 if stage == "in training" else 7)
        with pytest.raises(KeyboardInterrupt):
            _run(folder, tmp_path / "out")
    result = _run(folder, tmp_path / "out", resume=True)
    assert result.n_ok == 3 and result.n_failed == 0, [r["error"] for r in result.rows]
    assert result.n_resumed >= 1
    kept = f"wall time of this run ({result.n_resumed} recording{'s' if result.n_resumed != 1 else ''} kept from"
    assert kept in (tmp_path / "out" / "report.html").read_text()  # not a wall time for all three
    for run in ("r0", "r1", "r2"):
        a = pd.read_parquet(whole / run / "embeddings.parquet")
        b = pd.read_parquet(tmp_path / "out" / run / "embeddings.parquet")
        np.testing.assert_allclose(b["score"], a["score"], rtol=1e-5, atol=1e-6)  # the run it would have been
        assert list(b["flag"]) == list(a["flag"])


def test_each_record_s_atr_scores_its_beats_as_beats_would(tmp_path, monkeypatch):
    from conftest import require_data
    from devicepipe.pipelines import run_beats

    _no_figures(monkeypatch)
    folder = tmp_path / "in"
    folder.mkdir()
    for record in ("data_21_7", "data_21_8"):
        for ext in ("hea", "dat", "atr"):
            (folder / f"{record}.{ext}").symlink_to(require_data(f"cpsc2021/{record}.{ext}"))
    options = {"settings": LearnSettings(epochs=1, threads=1)}
    result = run_dataset(
        folder, tmp_path / "out", kind="ecg", options=options, engine=Engine(workers=0), reference="atr"
    )
    index = pd.read_parquet(tmp_path / "out" / "index.parquet")
    for row in index.itertuples():
        beats = run_beats(folder / f"{row.run}.hea", tmp_path / "b" / row.run, reference=folder / f"{row.run}.atr",
                          figures=False, mode="centered")  # fmt: skip
        assert (row.tp, row.fp, row.fn) == (beats.score.tp, beats.score.fp, beats.score.fn)
    accuracy = result.summary.accuracy
    assert accuracy.records_scored == 2 and accuracy.tp == int(index["tp"].sum())


@pytest.mark.parametrize(
    ("command", "says"),
    [("ecg", "run the same command with --resume to go on from there"), ("simulate", "run it again")],
)
def test_ctrl_c_is_one_line_saying_how_to_go_on(folder, tmp_path, monkeypatch, command, says):
    from typer.testing import CliRunner

    from devicepipe.cli import app
    from devicepipe.cli.commands import ecg, simulate

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    if command == "ecg":
        monkeypatch.setattr(ecg, "run_dataset_cli", stopped)
        args = ["ecg", str(folder), "--out", str(tmp_path / "o")]
    else:
        monkeypatch.setattr(simulate, "simulate_ecg", stopped)
        args = ["simulate", "ecg", "--out", str(tmp_path / "e.csv")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines() == [f"stopped (Ctrl-C): what was finished is kept; {says}."]
