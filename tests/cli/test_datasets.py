"""Many recordings in one command: folders, globs and lists on a real Dask cluster, failures that
do not stop the batch, resume after a real kill, and batched detection equal to one call each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from conftest import require_data
from devicepipe.batch import INDEX_NAME, Dataset, Engine, find_recordings, is_dataset, run_dataset
from devicepipe.cli import app
from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import ecg_peaks
from devicepipe.io import read_series
from devicepipe.pipelines import BeatsOptions, run_beats, run_beats_many
from devicepipe.simulate import simulate_ecg, write_simulated_ecg

runner = CliRunner()
# columns that say how a run went, not what it found
HOW = ["seconds", "worker", "resumed"]


def make_folder(root: Path, n: int = 8, bad_at: int | None = None) -> list[Path]:
    """``n`` simulated ECGs as Parquet (rate in the metadata): 10-s recordings at 250 Hz (which
    batch together), a 12-s one at 500 Hz and a 15-s one; a text file posing as a CSV at ``bad_at``."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        name = root / f"rec{i:03d}.parquet"
        if i == bad_at:
            name = root / f"rec{i:03d}.csv"
            name.write_text("this is not,an ecg\nhello,world\n")
        else:
            duration, rate = (12.0, 500.0) if i % 4 == 1 else (15.0, 250.0) if i % 4 == 3 else (10.0, 250.0)
            sim = simulate_ecg(duration, rate, heart_rate_bpm=60 + 3 * i, seed=i)
            write_simulated_ecg(sim, name)
        paths.append(name)
    return paths


def index(out: Path):
    return pq.read_table(out / INDEX_NAME).to_pandas()


def test_folder_glob_and_list_name_the_same_recordings(tmp_path):
    paths = make_folder(tmp_path / "in", 4)
    (tmp_path / "in" / "sub").mkdir()
    write_simulated_ecg(simulate_ecg(10.0, 250.0, seed=9), tmp_path / "in" / "sub" / "deep.parquet")
    (tmp_path / "in" / ".hidden.csv").write_text("1\n2\n")
    folder = find_recordings(tmp_path / "in")
    # the simulator's *.truth.csv beside each recording and hidden files are not recordings
    assert [p.name for p in folder.paths] == [p.name for p in paths] + ["deep.parquet"]
    assert folder.run_names()[-1] == "sub/deep"
    pattern = find_recordings(str(tmp_path / "in" / "**" / "*.parquet"))
    assert [p.name for p in pattern.paths] == [p.name for p in folder.paths]
    listing = tmp_path / "in" / "list.txt"
    listing.write_text("# two of them\nrec001.parquet\n\nsub/deep.parquet\n")
    listed = find_recordings(listing)
    assert [p.name for p in listed.paths] == ["rec001.parquet", "deep.parquet"]
    assert is_dataset(tmp_path / "in") and is_dataset(listing) and is_dataset(str(tmp_path / "*.parquet"))
    assert not is_dataset(paths[0])
    with pytest.raises(DevicepipeError, match="no recordings found"):
        find_recordings(str(tmp_path / "nothing" / "*.hea"))


def test_run_names_stay_apart_when_names_collide(tmp_path):
    a, b = tmp_path / "x.csv", tmp_path / "x.parquet"
    names = Dataset((a, b), tmp_path, "x").run_names()
    assert names == ["x_csv", "x_parquet"]


def test_wfdb_records_by_their_header(data_dir):
    folder = require_data("cpsc2019")
    found = find_recordings(folder)
    headers = sorted(folder.glob("*.hea"))
    assert [p.name for p in found.paths] == [p.name for p in headers]  # .dat and .atr are not counted again


def test_batched_detection_equals_one_call_per_recording(tmp_path):
    paths = make_folder(tmp_path / "in", 8)
    outs = [tmp_path / "out" / p.stem for p in paths]
    results = run_beats_many(paths, outs, options=BeatsOptions(figures=False), device="cpu")
    for path, result in zip(paths, results, strict=True):
        rec = read_series(path)
        alone = ecg_peaks(rec.samples, rec.sampling_rate).numpy()
        np.testing.assert_array_equal(result.peaks, alone)
        single = run_beats(path, tmp_path / "single" / path.stem, figures=False, device="cpu")
        assert (result.files["beats.parquet"].read_bytes()) == single.files["beats.parquet"].read_bytes()


def test_a_bad_recording_fails_alone_and_the_command_exits_1(tmp_path):
    make_folder(tmp_path / "in", 6, bad_at=2)
    out = tmp_path / "out"
    result = runner.invoke(app, ["beats", str(tmp_path / "in"), "--out", str(out), "--workers", "0", "--no-figures"])
    assert result.exit_code == 1, result.output
    assert "5 ok, 1 failed: see" in result.stdout
    rows = index(out)
    assert list(rows.status) == ["ok", "ok", "failed", "ok", "ok", "ok"]
    bad = rows.iloc[2]
    assert bad.path.endswith("rec002.csv") and "\n" not in bad.error and len(bad.error) > 10
    assert not (out / "rec002").exists()  # nothing half-written for it
    for row in rows[rows.status == "ok"].itertuples():
        assert (out / row.run / "summary.json").is_file() and row.beats > 5
    summary = (out / "summary.json").read_text()
    assert '"failed": 1' in summary and "rec002.csv" in summary


def test_a_listed_path_too_long_for_the_file_system_fails_on_its_own_row(tmp_path):
    paths = make_folder(tmp_path / "in", 3)
    listing = tmp_path / "records.txt"
    too_long = "x" * 300 + ".parquet"  # one name longer than any file system allows (255 bytes)
    listing.write_text("\n".join([str(paths[0]), too_long, str(paths[1]), str(paths[2])]) + "\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["beats", str(listing), "--out", str(out), "--workers", "0", "--no-figures"])
    assert result.exit_code == 1, result.output
    assert "3 ok, 1 failed: see" in result.stdout
    rows = index(out)
    assert list(rows.status) == ["ok", "failed", "ok", "ok"]
    assert "too long" in rows.error[1].lower() and "\n" not in rows.error[1]


def test_a_local_cluster_of_two_processes_equals_the_plain_loop(tmp_path):
    import contextlib
    import socket
    import warnings

    make_folder(tmp_path / "in", 8)
    run_dataset(tmp_path / "in", tmp_path / "loop", options={"figures": False}, engine=Engine(workers=0))
    with contextlib.ExitStack() as stack, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(OSError):  # Dask's default port taken, as by another cluster on the machine
            stack.enter_context(socket.create_server(("", 8787)))
        dask = run_dataset(tmp_path / "in", tmp_path / "dask", options={"figures": False}, engine=Engine(workers=2))
    assert not [str(w.message) for w in caught if "8787" in str(w.message)]
    assert dask.summary["engine"]["kind"] == "dask (local cluster)" and dask.summary["engine"]["workers"] == 2
    a, b = index(tmp_path / "loop"), index(tmp_path / "dask")
    assert set(b.worker) == {"0", "1"}  # both worker processes ran recordings
    keep = [c for c in a.columns if c not in HOW]
    assert a[keep].equals(b[keep])
    for run in a.run:
        for name in ("beats.parquet", "beat_matrix.npy"):
            assert (tmp_path / "loop" / run / name).read_bytes() == (tmp_path / "dask" / run / name).read_bytes()


def test_the_local_cluster_slows_dask_diagnostics_unless_the_user_set_them(monkeypatch):
    import dask
    import distributed  # noqa: F401 - its defaults join Dask's configuration

    from devicepipe.batch import engine

    keys = list(engine.LOCAL_CLUSTER_CONFIG)
    monkeypatch.setenv("DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL", "100ms")  # Dask's default, but said
    assert dask.config.get("distributed.admin.tick.interval") == "20ms"  # Dask's own default here
    with (
        dask.config.set({"distributed.admin.tick.interval": "100ms"}),  # the user's choice
        engine.dask_client(Engine(workers=1), 1, 1) as client,
    ):
        seen = client.run(lambda: {k: dask.config.get(k) for k in keys})
        scheduler = client.run_on_scheduler(lambda: {k: dask.config.get(k) for k in keys})
    (worker,) = seen.values()
    for where in (worker, scheduler):
        assert where["distributed.worker.profile.enabled"] is False
        assert where["distributed.admin.system-monitor.interval"] == "2s"
        assert where["distributed.worker.memory.monitor-interval"] == "100ms"  # the user's, though the default
        assert where["distributed.admin.tick.interval"] == "100ms"  # kept, not replaced
    assert dask.config.get("distributed.worker.profile.enabled") is True  # nothing left set here


def test_a_local_cluster_that_does_not_start_is_one_line(tmp_path):
    import dask

    make_folder(tmp_path / "in", 2)
    out = tmp_path / "o"
    with dask.config.set({"distributed.admin.tick.interval": "banana"}):  # the user's Dask configuration, broken
        result = runner.invoke(app, ["beats", str(tmp_path / "in"), "--out", str(out), "--workers", "2"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not start" in lines[0] and "banana" in lines[0] and "--workers 0" in lines[0]
    assert not out.exists()


def test_no_more_local_workers_than_recordings(tmp_path):
    make_folder(tmp_path / "in", 2)
    result = run_dataset(tmp_path / "in", tmp_path / "out", options={"figures": False}, engine=Engine(workers=4))
    assert result.summary["engine"]["workers"] == 2 and result.n_ok == 2


def test_more_local_workers_than_the_cores_can_run_is_one_line(tmp_path, monkeypatch):
    from devicepipe.batch import engine

    monkeypatch.setattr(engine, "usable_cores", lambda: 2)
    make_folder(tmp_path / "in", 2)
    args = ["beats", str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--no-figures"]
    result = runner.invoke(app, [*args, "--workers", "9"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers 9 is more local workers than this machine's 2 core(s)" in lines[0]
    assert "give at most 8, or --scheduler ADDRESS" in lines[0] and not (tmp_path / "o").exists()
    assert runner.invoke(app, [*args, "--workers", "0"]).exit_code == 0  # the loop is never refused


def test_devices_one_per_worker(tmp_path):
    make_folder(tmp_path / "in", 4)
    result = run_dataset(
        tmp_path / "in", tmp_path / "out", options={"figures": False}, engine=Engine(devices=("cpu", "cpu"))
    )
    assert result.summary["engine"]["workers"] == 2 and result.n_ok == 4


@pytest.mark.slow
def test_resume_after_a_real_kill_equals_an_uninterrupted_run(tmp_path):
    make_folder(tmp_path / "in", 40)
    base = [sys.executable, "-m", "devicepipe", "beats", str(tmp_path / "in"), "--no-figures", "--workers", "2"]
    whole = subprocess.run([*base, "--out", str(tmp_path / "whole")], capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr
    out = tmp_path / "killed"
    proc = subprocess.Popen([*base, "--out", str(out)], start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120

    def complete() -> int:  # a run's staging directory (".NAME.partial") may hold its summary before it moves
        return sum(not p.parent.name.startswith(".") for p in out.glob("*/summary.json"))

    while complete() < 8 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the command and its Dask workers, at once
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done = complete()
    assert 8 <= done < 40 and not (out / INDEX_NAME).exists()
    resumed = subprocess.run([*base, "--out", str(out), "--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"({done} complete from an earlier run)" in resumed.stdout
    a, b = index(tmp_path / "whole"), index(out)
    assert int(b.resumed.sum()) == done
    keep = [c for c in a.columns if c not in HOW]
    assert a[keep].equals(b[keep])
    for run in a.run:
        for name in ("beats.parquet", "beat_matrix.npy", f"{run}.qrs"):
            assert (tmp_path / "whole" / run / name).read_bytes() == (out / run / name).read_bytes()
    assert not list(out.glob(".*partial")) and not list(out.glob("*/.*.tmp"))


@pytest.mark.parametrize("spoiled", ["{not json", "[]", "\xff\xfe", ""])
def test_resume_runs_again_a_recording_whose_summary_cannot_be_read(tmp_path, spoiled):
    make_folder(tmp_path / "in", 3)
    args = ["beats", str(tmp_path / "in"), "--workers", "0", "--no-figures"]
    assert runner.invoke(app, [*args, "--out", str(tmp_path / "whole")]).exit_code == 0
    out = tmp_path / "out"
    assert runner.invoke(app, [*args, "--out", str(out)]).exit_code == 0
    (out / "rec001" / "summary.json").write_bytes(spoiled.encode("latin-1"))  # cut short, or edited
    result = runner.invoke(app, [*args, "--out", str(out), "--resume"])
    assert result.exit_code == 0, result.output
    assert "(2 complete from an earlier run)" in result.stdout
    rows = index(out)
    assert list(rows.resumed) == [True, False, True]
    keep = [c for c in rows.columns if c not in HOW]
    assert rows[keep].equals(index(tmp_path / "whole")[keep])
    assert json.loads((out / "rec001" / "summary.json").read_text())["input"].endswith("rec001.parquet")


def test_cpsc2019_folder_with_references(tmp_path):
    folder = require_data("cpsc2019")
    out = tmp_path / "out"
    args = ["beats", str(folder), "--out", str(out), "--workers", "0", "--no-figures", "--reference", "atr"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = index(out)
    assert len(rows) == 25 and (rows.status == "ok").all()
    # the dataset's accuracy is the sum of the records' own, each scored as one run would be
    single = run_beats(folder / "data_00014.hea", tmp_path / "one", reference=folder / "data_00014.atr", figures=False)
    first = rows[rows.run == "data_00014"].iloc[0]
    assert (first.tp, first.fp, first.fn) == (single.score.tp, single.score.fp, single.score.fn)
    assert "F1 0.9" in result.stdout and "none was scored" not in result.stdout


def test_a_reference_no_record_has_is_said(tmp_path):
    make_folder(tmp_path / "in", 2)  # Parquet recordings: no annotation files beside them
    args = ["beats", str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--workers", "0", "--no-figures"]
    result = runner.invoke(app, [*args, "--reference", "atr"])
    assert result.exit_code == 0, result.output
    assert "no record had a .atr file beside it" in result.stdout and "none was scored" in result.stdout
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["accuracy"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "2"], "--workers is for many recordings"),
        (["--resume"], "--resume is for many recordings"),
    ],
)
def test_dataset_options_on_one_recording_are_refused(tmp_path, args, message):
    path = make_folder(tmp_path / "in", 1)[0]
    result = runner.invoke(app, ["beats", str(path), "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("beats", ["--sampling-rate", "-5"], "--sampling-rate must be a finite, positive number of Hz"),
        ("beats", ["--chunk", "0s"], "duration '0s' must be positive"),
        ("beats", ["--chunk", "10min", "--method", "seed"], "--chunk is made for the ricker method, not seed"),
        ("ecg", ["--sampling-rate", "0", "--epochs", "1"], "--sampling-rate must be a finite, positive"),
    ],
)
def test_a_wrong_setting_for_many_recordings_is_one_line_before_any_runs(tmp_path, command, args, message):
    # short recordings are detected in one batched call, which never uses --chunk: checked first,
    # and a wrong rate is one line, not every recording's failure
    make_folder(tmp_path / "in", 3)
    result = runner.invoke(app, [command, str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--workers", "0", *args])
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert not (tmp_path / "o").exists()


def test_a_reference_file_for_many_recordings_is_refused(tmp_path):
    make_folder(tmp_path / "in", 2)
    result = runner.invoke(
        app, ["beats", str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--reference", "a/b.atr", "--workers", "0"]
    )
    assert result.exit_code == 2 and "annotation extension" in result.stderr
    assert not (tmp_path / "o").exists()


def test_ecg_on_a_folder_trains_one_model_per_recording(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        write_simulated_ecg(simulate_ecg(90.0, 250.0, seed=i, ectopic_rate=0.05), folder / f"p{i}.parquet")
    out = tmp_path / "out"
    result = runner.invoke(app, ["ecg", str(folder), "--out", str(out), "--workers", "0", "--epochs", "2"])
    assert result.exit_code == 0, result.output
    rows = index(out)
    assert list(rows.status) == ["ok", "ok"]
    for row in rows.itertuples():
        assert (out / row.run / "model.pt").is_file() or list((out / row.run).glob("*.pt"))
        summary = (out / row.run / "summary.json").read_text()
        assert f'"flagged": {row.flagged}' in summary and row.beats > 80
    assert "2 ok, 0 failed" in result.stdout


def test_a_running_cluster_by_its_address(tmp_path):
    from distributed import LocalCluster

    make_folder(tmp_path / "in", 4)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = run_dataset(
            tmp_path / "in",
            tmp_path / "out",
            options={"figures": False},
            engine=Engine(scheduler=cluster.scheduler_address),
        )
    assert result.summary["engine"]["kind"] == "dask (scheduler)" and result.n_ok == 4
    run_dataset(tmp_path / "in", tmp_path / "loop", options={"figures": False}, engine=Engine(workers=0))
    keep = [c for c in index(tmp_path / "out").columns if c not in HOW]
    assert index(tmp_path / "out")[keep].equals(index(tmp_path / "loop")[keep])


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("tcp://127.0.0.1:1", "nothing listens there"),
        ("localhost", "missing port"),  # not an address
        ("http://127.0.0.1:8786", "unknown address scheme"),
        ("http-server", "a server is there, but no Dask answer came within 1 s"),  # it waits for a request
        ("chatter", "what answers there is not a Dask scheduler"),  # bytes Dask would read as exabytes
    ],
)
def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch, address, why):
    import socket
    import threading

    from devicepipe.batch import scheduler

    monkeypatch.setattr(scheduler, "SCHEDULER_TIMEOUT_S", 1.0)
    if address in ("http-server", "chatter"):
        server = socket.create_server(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        talks = why.startswith("what")

        def serve():
            with server:
                while True:
                    try:
                        conn, _ = server.accept()
                    except OSError:
                        return
                    if talks:
                        conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n" * 50)
                        conn.close()

        threading.Thread(target=serve, daemon=True).start()
    make_folder(tmp_path / "in", 1)
    result = runner.invoke(app, ["beats", str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--scheduler", address])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach the Dask scheduler at {address} (" in lines[0] and why in lines[0]
    assert not (tmp_path / "o").exists()


def test_a_folder_on_all_leads_is_batched_like_one_recording_at_a_time(tmp_path):
    # two-lead recordings (the second lead inverted and smaller); batched fused detection equals one call each
    from devicepipe.io import write_parquet

    paths = []
    for i in range(3):
        a = simulate_ecg(10.0, 250.0, seed=i)
        b = simulate_ecg(10.0, 250.0, seed=i, inverted=True, noise_mV=0.05)
        paths.append(
            write_parquet({"I": a.signal, "II": 0.6 * b.signal}, tmp_path / f"r{i}.parquet", sampling_rate=250)
        )
    outs = [tmp_path / "out" / p.stem for p in paths]
    results = run_beats_many(paths, outs, options=BeatsOptions(figures=False, channel="all"), device="cpu")
    for path, result in zip(paths, results, strict=True):
        rec = read_series(path)
        np.testing.assert_array_equal(result.peaks, ecg_peaks(rec.samples, 250.0, leads="fuse").numpy())
        single = run_beats(path, tmp_path / "single" / path.stem, channel="all", figures=False, device="cpu")
        assert result.files["beats.parquet"].read_bytes() == single.files["beats.parquet"].read_bytes()
        assert result.channel == "I"


def test_the_thread_count_asked_for_is_each_workers(tmp_path, monkeypatch):
    # DEVICEPIPE_THREADS fixes the loop's threads too (it had been the cores, whatever was asked)
    import torch

    from devicepipe.batch import run as batch_run

    paths = make_folder(tmp_path / "in", 2)
    seen = []
    run = batch_run._run_kind

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return run(*args, **kwargs)

    monkeypatch.setattr(batch_run, "_run_kind", spy)
    monkeypatch.setenv("DEVICEPIPE_THREADS", "1")
    opts = {"figures": False}
    result = run_dataset(tmp_path / "in", tmp_path / "one", options=opts, engine=Engine(workers=0))
    assert seen and set(seen) == {1} and result.summary["engine"]["threads_per_worker"] == 1
    monkeypatch.delenv("DEVICEPIPE_THREADS")
    seen.clear()
    result = run_dataset(tmp_path / "in", tmp_path / "all", options=opts, engine=Engine(workers=0))
    cores = batch_run.usable_cores()
    assert set(seen) == {cores} and result.summary["engine"]["threads_per_worker"] == cores
    assert len(paths) == 2


def test_an_earlier_run_inside_the_input_folder_is_not_taken_for_recordings(tmp_path):
    # a beats run written into the folder it read (its tables are .csv and .parquet files too)
    folder = tmp_path / "in"
    write_simulated_ecg(simulate_ecg(30, 250, seed=1), folder / "a.parquet")
    first = runner.invoke(app, ["beats", str(folder / "a.parquet"), "--out", str(folder / "run"), "--no-figures"])
    assert first.exit_code == 0, first.output
    assert {"beats.csv", "beats.parquet", "heart_rate.csv"} <= {p.name for p in (folder / "run").iterdir()}
    assert [p.name for p in find_recordings(folder).paths] == ["a.parquet"]
    assert [p.name for p in find_recordings(str(folder / "**" / "*.parquet")).paths] == ["a.parquet"]
    (tmp_path / "summary.json").write_text("{}")  # a run directory above the folder searched does not count
    assert [p.name for p in find_recordings(folder).paths] == ["a.parquet"]


def test_resume_keeps_only_runs_of_the_same_settings_whose_files_are_all_there(tmp_path):
    folder = tmp_path / "in"
    for i in range(3):
        write_simulated_ecg(simulate_ecg(30, 250, seed=40 + i), folder / f"r{i}.parquet")
    out = tmp_path / "set"
    args = ["beats", str(folder), "--out", str(out), "--workers", "0", "--no-figures"]
    assert runner.invoke(app, args).exit_code == 0
    other = runner.invoke(app, [*args, "--resume", "--mode", "centered"])
    assert other.exit_code == 2, other.output
    line = other.stderr.strip().splitlines()
    assert len(line) == 1 and "made with mode 'seed', not 'centered'" in line[0] and "--resume" in line[0]
    (out / "r1" / "beats.csv").unlink()  # a run with a file missing is not complete
    again = run_dataset(folder, out, options={"figures": False}, engine=Engine(workers=0), resume=True)
    assert again.n_resumed == 2 and again.n_ok == 3 and (out / "r1" / "beats.csv").is_file()
    # what does not change the outputs may differ
    same = run_dataset(folder, out, options={"figures": False, "count_transfers": True}, engine=Engine(workers=0),
                       resume=True)  # fmt: skip
    assert same.n_resumed == 3


def test_the_index_carries_each_recording_s_burden_and_events(tmp_path):
    from devicepipe.simulate import Rhythm

    folder = tmp_path / "in"
    folder.mkdir()
    for i, rhythm in enumerate([Rhythm(), Rhythm(ectopic_rate=0.15, couplets=1), Rhythm(bigeminy=1.0)]):
        write_simulated_ecg(simulate_ecg(120, 250, rhythm=rhythm, seed=i), folder / f"r{i}.parquet")
    out = tmp_path / "out"
    result = runner.invoke(app, ["beats", str(folder), "--out", str(out), "--workers", "0", "--no-figures"])
    assert result.exit_code == 0, result.output
    rows = index(out).set_index("run")
    for run in rows.index:
        h = json.loads((out / run / "summary.json").read_text())["holter"]
        truth = pd.read_csv(folder / f"{run}.truth.csv")
        assert rows.loc[run, "v_beats"] == h["counts"]["V"] == int((truth["class"] == "V").sum()), run
        assert rows.loc[run, "v_burden_pct"] == pytest.approx(h["burden_pct"]["V"])
        assert rows.loc[run, "couplets"] == h["events"]["couplet"]
    assert rows.loc["r0", "v_beats"] == 0 and rows.loc["r2", "v_burden_pct"] > 40  # bigeminy: about half the beats
    assert "V %" in (out / "report.html").read_text()


def test_resume_runs_again_a_recording_whose_file_was_replaced(tmp_path):
    make_folder(tmp_path / "in", 3)
    args = ["beats", str(tmp_path / "in"), "--workers", "0", "--no-figures"]
    out = tmp_path / "out"
    assert runner.invoke(app, [*args, "--out", str(out)]).exit_code == 0
    before = json.loads((out / "rec001" / "summary.json").read_text())["counts"]["beats_found"]
    # another recording under the same name (two minutes, where the first was seconds long)
    write_simulated_ecg(simulate_ecg(120, 250, seed=99), tmp_path / "in" / "rec001.parquet")
    result = runner.invoke(app, [*args, "--out", str(out), "--resume"])
    assert result.exit_code == 0, result.output
    assert "(2 complete from an earlier run)" in result.stdout
    assert list(index(out).resumed) == [True, False, True]
    after = json.loads((out / "rec001" / "summary.json").read_text())
    assert after["counts"]["beats_found"] > 1.5 * before
    assert after["input_files"][0]["bytes"] == (tmp_path / "in" / "rec001.parquet").stat().st_size


def test_resume_of_runs_whose_settings_were_never_written_is_refused(tmp_path):
    # a run killed (kill -9) after a recording's run ended but before settings.json was written:
    # the settings those runs were made with cannot be checked, so resuming would mix two settings
    make_folder(tmp_path / "in", 3)
    args = ["beats", str(tmp_path / "in"), "--workers", "0", "--no-figures"]
    out = tmp_path / "out"
    assert runner.invoke(app, [*args, "--out", str(out)]).exit_code == 0
    (out / "settings.json").unlink()
    result = runner.invoke(app, [*args, "--out", str(out), "--resume", "--mode", "seed"])
    assert result.exit_code == 2, result.output
    assert "have no settings.json" in result.stderr and "without --resume" in result.stderr
    assert runner.invoke(app, [*args, "--out", str(out), "--mode", "seed"]).exit_code == 0  # run again: fine


def test_a_text_file_that_lists_no_file_is_refused_in_one_line_not_run_line_by_line(tmp_path):
    # a recording saved as .txt had been taken for a list of 15,001 recordings, each failing on its row
    sim = simulate_ecg(30, 250, seed=1)
    numbers = tmp_path / "ecg.txt"
    numbers.write_text("ecg\n" + "\n".join(f"{v:.6f}" for v in sim.signal.tolist()) + "\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["beats", str(numbers), "--out", str(out), "--workers", "0"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert (
        "none of the 7,501 lines of" in result.stderr and "names a file that exists (the first: 'ecg')" in result.stderr
    )
    assert "save it as one of .hea, .csv" in result.stderr and not out.exists()
    # a list whose lines name a WFDB record by its name, without a suffix, is a list all the same
    import wfdb

    (tmp_path / "rec").mkdir()
    signal = sim.signal.numpy().astype("float64")[:, None]
    wfdb.wrsamp(
        "r1", fs=250, units=["mV"], sig_name=["MLII"], p_signal=signal, fmt=["16"], write_dir=str(tmp_path / "rec")
    )
    listing = tmp_path / "records.txt"
    listing.write_text("x" * 300 + "\nrec/r1\n")
    result = runner.invoke(
        app, ["beats", str(listing), "--out", str(tmp_path / "o2"), "--workers", "0", "--no-figures"]
    )
    assert result.exit_code == 1 and "1 ok, 1 failed: see" in result.stdout, result.output
