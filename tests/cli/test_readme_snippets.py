"""Every Python snippet of the README runs as written, alone (a fresh namespace each), in a
directory holding what the README says it holds. (test_readme.py, a slow test, runs every command
and checks the numbers the snippets state.)"""

from __future__ import annotations

from pathlib import Path

import pytest
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
