"""One run per output directory at a time: a second run into it is refused with one line."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.core.errors import DevicepipeError, OutputError
from devicepipe.io.write import LOCK_SUFFIX, lock_path, output_lock
from devicepipe.pipelines import run_beats
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

runner = CliRunner()


@pytest.fixture
def ecg(tmp_path):
    path, _ = write_simulated_ecg(simulate_ecg(60, 250, seed=2), tmp_path / "in" / "e.parquet")
    return path


@contextlib.contextmanager
def _held_by_another_process(out, env=None):
    """Hold ``out``'s lock in another process (with ``env``) while the block runs."""
    holder = (
        "import sys\n"
        "from devicepipe.io.write import output_lock\n"
        f"with output_lock({str(out)!r}):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        yield
    finally:
        proc.communicate("\n", timeout=30)


def _refused_while_another_process_holds(out, ecg, env=None):
    """Hold ``out``'s lock in another process (with ``env``) while a run into ``out`` is refused."""
    _refused_while_another_process_holds_inside(out, out, ecg, env)


def _refused_while_another_process_holds_inside(out, held, ecg, env=None):
    """Hold ``held``'s lock in another process (with ``env``) while a run into ``out`` is refused."""
    with _held_by_another_process(held, env), pytest.raises(OutputError, match="another devicepipe run is writing to"):
        run_beats(ecg, out, device="cpu", figures=False)


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
    _refused_while_another_process_holds(out, ecg)
    with pytest.raises(DevicepipeError):
        run_beats(tmp_path / "missing.csv", out, device="cpu")  # a run that fails ...
    with output_lock(out):  # ... holds nothing afterwards
        pass
    run_beats(ecg, out, device="cpu", figures=False)
    assert not lock_path(out).exists()  # nothing left behind


def test_a_planted_symbolic_link_is_never_followed(ecg, tmp_path):
    out = tmp_path / "out"
    victim = tmp_path / "victim.txt"
    victim.write_text("another user's file\n")
    lock_path(out).symlink_to(victim)  # planted where the run's lock goes
    result = runner.invoke(app, ["beats", str(ecg), "--out", str(out), "--no-figures"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a symbolic link, which a run never follows" in lines[0]
    assert victim.read_text() == "another user's file\n" and not out.exists()


def test_the_lock_holds_across_temporary_folders_and_a_lock_file_only_readable(ecg, tmp_path):
    import os

    out = tmp_path / "out"
    (tmp_path / "elsewhere").mkdir()
    _refused_while_another_process_holds(out, ecg, {**os.environ, "TMPDIR": str(tmp_path / "elsewhere")})
    lock_path(out).touch(mode=0o444)  # a lock file left readable only (another user's): a lock is only read
    run_beats(ecg, out, device="cpu", figures=False)
    assert (out / "summary.json").exists() and not lock_path(out).exists()


def test_no_two_holders_overlap_under_contention(tmp_path):
    """Eight processes take and release the lock 300 times each (the lock of an earlier version let
    two hold it at once here); while holding it, each makes a
    marker file that must not exist (O_EXCL): a second holder at once would find it there."""
    out = tmp_path / "out"
    worker = (
        "import os, sys\n"
        "from devicepipe.core.errors import OutputError\n"
        "from devicepipe.io.write import output_lock\n"
        "held = overlaps = 0\n"
        "for _ in range(300):\n"
        "    try:\n"
        f"        with output_lock({str(out)!r}):\n"
        "            held += 1\n"
        "            try:\n"
        f"                fd = os.open({str(tmp_path / 'marker')!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY)\n"
        "            except FileExistsError:\n"
        "                overlaps += 1\n"
        "                continue\n"
        "            os.close(fd)\n"
        f"            os.unlink({str(tmp_path / 'marker')!r})\n"
        "    except OutputError:\n"
        "        pass\n"
        "print(held, overlaps)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", worker], stdout=subprocess.PIPE, text=True) for _ in range(8)]
    counts = [tuple(map(int, p.communicate(timeout=120)[0].split())) for p in procs]
    assert sum(h for h, _ in counts) >= 300  # the lock was taken, often
    assert sum(o for _, o in counts) == 0, counts


def _no_lock_left(folder):
    return not [p for p in folder.rglob("*") if p.name.endswith(LOCK_SUFFIX)]


def test_a_run_into_a_folder_of_a_run_in_progress_is_refused(ecg, tmp_path):
    folder = tmp_path / "runs"
    with output_lock(folder):  # a folder run writing its recordings' folders
        with pytest.raises(OutputError, match=r"another devicepipe run is writing to .*runs, which holds .*e"):
            run_beats(ecg, folder / "e", device="cpu", figures=False)
        result = runner.invoke(app, ["beats", str(ecg), "--out", str(folder / "x" / "y"), "--no-figures"])
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
        assert "another devicepipe run is writing to" in result.stderr and not (folder / "e").exists()
    run_beats(ecg, folder / "e", device="cpu", figures=False)  # once it ended
    assert (folder / "e" / "summary.json").is_file() and _no_lock_left(tmp_path)


def test_no_run_into_a_run_directory_starts_while_a_run_writes_inside_it(ecg, tmp_path):
    folder = tmp_path / "runs"
    run_beats(ecg, folder, device="cpu", figures=False)  # a run directory (its summary.json)
    # a run writing inside it (in another process)
    _refused_while_another_process_holds_inside(folder, folder / "inner", ecg)
    run_beats(ecg, folder, device="cpu", figures=False)  # once it ended
    assert _no_lock_left(tmp_path)


@pytest.mark.parametrize("kind", ["beats", "ecg"])
def test_a_folder_run_fails_only_the_recording_whose_folder_another_run_writes(ecg, tmp_path, kind):
    write_simulated_ecg(simulate_ecg(60, 250, seed=3), ecg.parent / "f.parquet")
    out = tmp_path / "out"
    extra = ["--epochs", "1"] if kind == "ecg" else ["--no-figures"]
    with output_lock(out / "e"):  # a single run writing to the folder of recording e
        result = runner.invoke(app, [kind, str(ecg.parent), "--out", str(out), "--workers", "0", *extra])
    assert (out / "f" / "summary.json").is_file() and not (out / "e" / "summary.json").exists(), result.output
    index = pq.read_table(out / "index.parquet").to_pylist()
    by_run = {row["run"]: row for row in index}
    assert by_run["f"]["status"] == "ok" and by_run["e"]["status"] == "failed"
    assert "another devicepipe run is writing to" in by_run["e"]["error"]
    assert _no_lock_left(tmp_path)
