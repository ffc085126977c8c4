"""The contract of ``summary.json``: every pipeline's keys and value types, pinned.

``summary.json`` is what other tools read of a run (and what ``--resume`` and a dataset's index
read back), so its shape is a contract. This test runs every pipeline on small simulated
inputs and compares the shape of what each wrote (every key, recursively; the JSON type of each
value; the shape of a list's first element) with ``summary_contract.json`` beside it.

The golden file was made by this code and guards against change, not for correctness (the other
tests check the values): a change of shape must be deliberate. Then bump
:data:`devicepipe.artifacts.write.SUMMARY_SCHEMA` where a reader could break (a key renamed, removed or
retyped; an added key needs no bump), and rewrite the file with
``DEVICEPIPE_UPDATE_CONTRACT=1 pytest tests/contract``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import wfdb
from markupsafe import escape

from devicepipe.artifacts import caption
from devicepipe.artifacts.write import SUMMARY_SCHEMA
from devicepipe.batch import Engine, run_dataset
from devicepipe.learning.learn import LearnSettings, SeriesLearnSettings
from devicepipe.pipelines import run_beats, run_ecg, run_score, run_score_series, run_series, run_train
from devicepipe.simulate import simulate_ecg, simulate_load, write_simulated_ecg, write_simulated_load

GOLDEN = Path(__file__).with_name("summary_contract.json")


def shape(value: Any) -> Any:
    """The shape of a JSON value: a dict of shapes, a list of its first element's shape, or a type name."""
    if isinstance(value, dict):
        return {key: shape(v) for key, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def _summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def written(runs: Path) -> dict[str, Any]:
    """What every pipeline wrote for small simulated inputs: {name: summary.json, ...}."""
    out: dict[str, Any] = {}
    for name in ("beats", "ecg", "score", "train", "series", "score_series", "dataset"):
        out[name] = _summary(runs / name)
    out["dataset index.parquet columns"] = pq.read_schema(runs / "dataset" / "index.parquet").names
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding every pipeline's run directory for small simulated inputs (``beats``,
    ``ecg``, ``score``, ``train``, ``series``, ``score_series``, ``dataset``; ``beats_figures``)."""
    tmp = tmp_path_factory.mktemp("contract")
    ecg, _truth = write_simulated_ecg(simulate_ecg(120, 250, seed=1, ectopic_rate=0.05), tmp / "ecg.parquet")
    folder = tmp / "folder"
    for i in range(2):
        write_simulated_ecg(simulate_ecg(60, 250, seed=10 + i), folder / f"rec{i}.parquet")
    records = tmp / "records"  # WFDB records with their .atr, for a dataset run scored per record
    records.mkdir()
    for i in range(2):
        sim = simulate_ecg(40, 250, seed=20 + i, ectopic_rate=0.1)
        signal = sim.signal.numpy()[:, None].astype("float64")
        wfdb.wrsamp(
            f"r{i}", fs=250, units=["mV"], sig_name=["ECG"], p_signal=signal, fmt=["16"], write_dir=str(records)
        )
        wfdb.wrann(f"r{i}", "atr", sim.r_peaks.numpy(), list(sim.symbols), write_dir=str(records))
    load, days = write_simulated_load(simulate_load(70, seed=2, n_anomalies=2), tmp / "load.parquet")
    fast = LearnSettings(epochs=2)
    run_beats(ecg, tmp / "beats", device="cpu", reference=tmp / "ecg.truth.csv", figures=False)
    run_beats(ecg, tmp / "beats_figures", device="cpu", reference=tmp / "ecg.truth.csv")
    run_ecg(ecg, tmp / "ecg", device="cpu", settings=fast, reference=tmp / "ecg.truth.csv")
    run_score(ecg, tmp / "score", model=tmp / "ecg", device="cpu", reference=tmp / "ecg.truth.csv")
    run_train(folder, tmp / "train", device="cpu", settings=fast)
    run_series(load, tmp / "series", device="cpu", settings=SeriesLearnSettings(epochs=2), reference=days)
    run_score_series(load, tmp / "score_series", model=tmp / "series", device="cpu", reference=days)
    opts = {"figures": False, "count_transfers": False}
    run_dataset(records, tmp / "dataset", options=opts, engine=Engine(workers=0), reference="atr")
    return tmp


@pytest.mark.parametrize("name", ["beats_figures", "ecg", "score", "train", "series", "score_series"])
def test_every_figure_a_run_wrote_is_on_its_page(runs, name):
    # the pages take their figures from the artifact list: each PNG in the run directory is shown,
    # with its caption, in report.html (the ECG runs hold 5 to 9 of them)
    out = runs / name
    page = (out / "report.html").read_text(encoding="utf-8")
    written = sorted(p.name for p in out.glob("*.png"))
    assert len(written) >= 3, written
    shown = [n for n in written if f'alt="{n}"' in page and f"<strong>{n}</strong>: {escape(caption(n))}" in page]
    missing = sorted(set(written) - set(shown))
    assert not missing, missing


def test_every_summary_carries_the_schema_version(written):
    for name, summary in written.items():
        if isinstance(summary, dict):
            assert summary.get("schema") == SUMMARY_SCHEMA, name


def test_every_summary_keeps_its_shape(written):
    got = {name: shape(value) if isinstance(value, dict) else value for name, value in written.items()}
    if os.environ.get("DEVICEPIPE_UPDATE_CONTRACT") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(GOLDEN.read_text(encoding="utf-8"))
    for name in pinned:
        assert got.get(name) == pinned[name], f"the shape of {name}'s summary.json changed"
    assert sorted(got) == sorted(pinned)


def test_every_summary_is_its_typed_record_written_out(written):
    # the typed summaries declare every key of the contract (nothing left in `extra`), and
    # reading and writing one gives back exactly what the pipeline wrote
    from devicepipe.artifacts.summaries import ABSENT, DatasetSummary, RunSummary, read_summary

    for name, summary in written.items():
        if not isinstance(summary, dict):
            continue
        typed = read_summary(summary)
        assert isinstance(typed, DatasetSummary if name == "dataset" else RunSummary), name
        assert typed.to_dict() == summary, name
        assert not typed.extra, (name, typed.extra)
        sections = [getattr(typed, f) for f in typed.__dataclass_fields__ if f != "extra"]
        assert all(not s.extra for s in sections if hasattr(s, "extra")), name
    ecg = read_summary(written["ecg"])
    assert ecg.counts.flagged == written["ecg"]["counts"]["flagged"]
    assert ecg.reference.aami["V"].beats == written["ecg"]["reference"]["aami"]["V"]["beats"]
    assert ecg.column is ABSENT and not ecg.column and "column" not in ecg.to_dict()
    assert read_summary(written["beats"]).accuracy.f1 == written["beats"]["accuracy"]["f1"]
