"""One run per output directory at a time: a second run into it is refused with one line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.errors import DevicepipeError, OutputError
from devicepipe.io.write import lock_path, output_lock
from devicepipe.pipelines import run_beats
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

runner = CliRunner()


@pytest.fixture
def ecg(tmp_path):
    path, _ = write_simulated_ecg(simulate_ecg(60, 250, seed=2), tmp_path / "in" / "e.parquet")
    return path


def test_a_second_run_into_a_directory_being_written_is_refused(ecg, tmp_path):
    out = tmp_path / "out"
    for args in (["beats", ecg], ["beats", ecg.parent, "--workers", "0"], ["ecg", ecg, "--epochs", "1"]):
        with output_lock(out):  # a run in progress
            result = runner.invoke(app, [*map(str, args), "--out", str(out)])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "another devicepipe run is writing to" in lines[0] and "--out" in lines[0]
        assert not out.exists()
    assert runner.invoke(app, ["beats", str(ecg), "--out", str(out), "--no-figures"]).exit_code == 0  # once it ended


def test_the_lock_is_another_process_s_too_and_is_released_however_a_run_ends(ecg, tmp_path):
    out = tmp_path / "out"
    holder = (
        "import sys, time\n"
        "from devicepipe.io.write import output_lock\n"
        f"with output_lock({str(out)!r}):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(OutputError, match="another devicepipe run is writing to"):
            run_beats(ecg, out, device="cpu", figures=False)
    finally:
        proc.communicate("\n", timeout=30)
    with pytest.raises(DevicepipeError):
        run_beats(tmp_path / "missing.csv", out, device="cpu")  # a run that fails ...
    with output_lock(out):  # ... holds nothing afterwards
        pass
    run_beats(ecg, out, device="cpu", figures=False)
    assert not lock_path(out).exists()  # nothing left behind
