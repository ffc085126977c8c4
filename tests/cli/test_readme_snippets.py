"""Every Python snippet of the README runs as written, alone (a fresh namespace each), in a
directory holding what the README says it holds, and gives the numbers its comments state.
(test_readme.py, a slow test, runs every command.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_readme import readme_blocks, why_not_run

from conftest import require_data
from devicepipe.simulate import simulate_ecg, write_simulated_ecg


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mitdb/100, AEP_hourly.csv and the ecg.csv of the Commands block's `simulate ecg` line."""
    work = tmp_path_factory.mktemp("snippets")
    (work / "mitdb").symlink_to(require_data("mitdb"), target_is_directory=True)
    (work / "AEP_hourly.csv").symlink_to(require_data("electricity/AEP_hourly.csv"))
    write_simulated_ecg(simulate_ecg(1800, 250), work / "ecg.csv")
    return work


SNIPPETS = [code for language, code in readme_blocks() if language == "python" and not why_not_run(language, code)]


def test_the_readme_has_its_snippets():
    assert len(SNIPPETS) >= 4


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i + 1}" for i in range(len(SNIPPETS))])
def test_each_readme_snippet_runs_alone(code, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(code, "README.md", "exec"), namespace)  # a NameError here: the snippet leans on another
    _check_stated_numbers(namespace, workdir)


def _check_stated_numbers(ns: dict[str, object], workdir: Path) -> None:
    """The numbers a snippet's comments state, checked apart from what it prints."""
    if "accuracy" in ns:
        assert ns["accuracy"].f1 == 1.0  # MIT-BIH 100 against its reference annotations
        assert tuple(ns["beats"].matrix.shape)[1] == 256
        assert 70 < float(ns["h"].mean_hr_bpm) < 80  # MIT-BIH 100 beats at about 75 per minute
    if "sim" in ns:
        assert ns["sim"].signal.shape[-1] == 3600 * 360
    if "det" in ns:
        det, scores, tail = ns["det"], ns["scores"], ns["tail"]
        assert 0 < int(det.labels_.sum()) <= 0.01 * det.labels_.size + 1  # contamination 0.01: at most 1 % flagged
        assert len(det.histories_[0]["train"]) == 20  # the epochs it was asked for
        # the reloaded model on the CPU gives the scores of the fitted one (computed where it was fitted)
        np.testing.assert_allclose(scores, det.decision_scores_, rtol=1e-5, atol=1e-7)
        assert 0 < tail.min() and tail.max() <= 1
        assert (workdir / "beats-model.pt").exists()
    if "ledger" in ns:
        assert ns["ledger"].host_to_device == (1 if torch.cuda.is_available() else 0)
