"""The fork server of a command's local cluster, started from the command line before torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devicepipe.batch import INDEX_NAME, Engine, run_dataset
from devicepipe.simulate import simulate_ecg, write_simulated_ecg
from devicepipe.startup.server import pause_collector, resume_collector, starts_cluster


def test_which_command_lines_start_a_cluster(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    listing = tmp_path / "records.txt"
    listing.write_text("a.parquet\n")
    one = tmp_path / "one.parquet"
    one.write_bytes(b"")
    dp = "devicepipe"
    for spec in (str(folder), str(listing), f"{folder}/*.hea"):
        assert starts_cluster([dp, "beats", spec, "--out", "o"])
        assert starts_cluster([dp, "ecg", spec, "--workers", "2"])
        assert starts_cluster([dp, "score", spec, "--model", "m", "--workers=3"])
    assert not starts_cluster([dp, "beats", str(one), "--out", "o"])  # one recording
    assert not starts_cluster([dp, "beats", str(tmp_path / "missing.parquet")])
    assert not starts_cluster([dp, "beats", str(folder), "--workers", "0"])  # the plain loop
    assert not starts_cluster([dp, "beats", str(folder), "--workers=0"])
    assert not starts_cluster([dp, "beats", str(folder), "--workers", "00"])
    assert not starts_cluster([dp, "beats", str(folder), "--scheduler", "tcp://h:8786"])  # someone else's cluster
    assert not starts_cluster([dp, "beats", str(folder), "--scheduler=tcp://h:8786"])
    assert not starts_cluster([dp, "beats", str(folder), "--help"])
    assert not starts_cluster([dp, "read", str(folder)])  # not a dataset command
    assert not starts_cluster([dp, "beats", "--out", "o", str(folder)])  # options first: left to the cluster
    assert not starts_cluster([dp, "beats"])
    assert not starts_cluster([dp])


def test_the_server_starts_once_with_the_pipelines_imported(tmp_path):
    (tmp_path / "in").mkdir()
    code = textwrap.dedent(
        f"""
        import os, time, psutil
        from devicepipe.startup.server import STARTED, start_worker_server
        argv = ["devicepipe", "beats", {str(tmp_path / "in")!r}]
        print(start_worker_server(argv), start_worker_server(argv), os.environ.get(STARTED))
        def servers():  # a child shows its command line once it has exec'd
            lines = [" ".join(p.cmdline()) for p in psutil.Process().children()]
            return sum("forkserver" in c and "devicepipe.startup.preload" in c for c in lines)
        deadline = time.monotonic() + 10
        while not servers() and time.monotonic() < deadline:
            time.sleep(0.05)
        print(servers())
        print("torch" in __import__("sys").modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    # started by the first call only; its server imports the preload (torch and the pipelines), this one did not
    assert out == ["True", "False", "1", "1", "False"]


def test_the_server_leaves_the_ordinary_way_when_the_command_ends(tmp_path):
    (tmp_path / "in").mkdir()
    code = textwrap.dedent(
        f"""
        import time, psutil
        from devicepipe.startup.server import start_worker_server
        start_worker_server(["devicepipe", "beats", {str(tmp_path / "in")!r}])
        deadline = time.monotonic() + 10
        found = []
        while not found and time.monotonic() < deadline:
            found = [p.pid for p in psutil.Process().children() if "forkserver" in " ".join(p.cmdline())]
            time.sleep(0.05)
        print(found[0])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    import psutil

    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the fork server outlived its command by 30 s"
        time.sleep(0.05)


ORDINARY_END = """
import atexit, sys
atexit.register(lambda: print("handler ran", flush=True))  # as coverage or a tracing agent does at start-up
from devicepipe.__main__ import main
sys.argv = ["devicepipe", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(("args", "status"), [(["--version"], 0), (["read", "missing.csv"], 2)])
def test_the_command_ends_the_ordinary_way_with_every_exit_handler(tmp_path, args, status):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as a pipe's is
    proc = subprocess.run(
        [sys.executable, "-c", ORDINARY_END, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert proc.returncode == status, proc.stderr
    assert proc.stdout.splitlines()[-1] == "handler ran"  # registered before the command: it ran, and last
    assert ("devicepipe 0.1" in proc.stdout) == (status == 0)


def test_main_called_in_process_returns_control_to_its_host():
    code = """
        from devicepipe.cli import main
        for argv in (["--version"], ["read", "/nonexistent/x.csv"]):
            try:
                main(argv)
            except SystemExit as exc:
                print("host goes on", exc.code)
        """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    ).stdout.splitlines()
    assert out[-2:] == ["host goes on 0", "host goes on 2"]


def test_importing_the_command_line_imports_no_torch_and_starts_nothing(tmp_path):
    (tmp_path / "in").mkdir()
    code = f"""
        import sys, psutil
        sys.argv = ["devicepipe", "beats", {str(tmp_path / "in")!r}]  # a folder on the command line
        import devicepipe.cli
        print("torch" in sys.modules, len(psutil.Process().children()))
        """
    assert _python(code) == ["False", "0"]


def test_the_command_exits_through_its_entry_point_with_its_status_and_whole_output(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "devicepipe", *args], capture_output=True, text=True, timeout=120)

    info = run("info", "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["torch"]  # the whole document reached the pipe
    bad = run("read", str(tmp_path / "missing.csv"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # starts a two-worker Dask cluster from the installed command; CI runs it
def test_a_command_whose_server_started_early_equals_the_plain_loop(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        write_simulated_ecg(simulate_ecg(10.0 + i, 250.0, seed=i), folder / f"rec{i}.parquet")
    run_dataset(folder, tmp_path / "loop", options={"figures": False}, engine=Engine(workers=0))
    # the installed command: its workers import the command's script again (python -m does not)
    script = Path(sys.executable).with_name("devicepipe")
    if not script.exists():
        pytest.skip(f"no installed devicepipe command beside {sys.executable}")
    cmd = [str(script), "beats", str(folder), "--out", str(tmp_path / "dask")]
    done = subprocess.run([*cmd, "--no-figures", "--workers", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "local Dask cluster: 2 workers" in done.stdout
    a, b = (pq.read_table(tmp_path / d / INDEX_NAME).to_pandas() for d in ("loop", "dask"))
    keep = [c for c in a.columns if c not in ("seconds", "worker", "resumed")]
    assert len(a) == 4 and a[keep].equals(b[keep])
    assert set(b.worker) <= {"0", "1"}


def _python(code: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    ).stdout.split()


def test_the_collector_is_paused_and_resumed_as_found():
    import gc

    assert gc.isenabled()
    try:
        assert pause_collector() is True and not gc.isenabled()
        assert pause_collector() is False  # already off: stays off when resumed with this
        resume_collector(False)
        assert not gc.isenabled()
        resume_collector(True)
        assert gc.isenabled()
    finally:
        gc.enable()
    assert gc.get_freeze_count() == 0  # nothing frozen unless asked (asking would freeze this test run)


def test_the_command_imports_without_collections_and_freezes_them_when_it_runs():
    counted = """
        import gc
        starts = []
        gc.callbacks.append(lambda phase, info: starts.append(info["generation"]) if phase == "start" else None)
        from devicepipe.cli import app
        """
    # without the pause, importing the command's modules starts several hundred collections
    plain = _python(
        counted.replace("from devicepipe.cli import app", "import torch, distributed, pandas, wfdb, typer, rich")
        + "print(len(starts))"
    )
    paused = _python(counted + "print(len(starts), gc.isenabled(), gc.get_freeze_count())")
    assert int(plain[0]) > 200 and int(paused[0]) < 50 and paused[1:] == ["True", "0"]  # importing freezes nothing
    # the command itself (main) freezes what the import of the command asked for made, and leaves
    # the collector on; --version imports no command, so there is nothing to freeze
    for argv, frozen in ((["devicepipe", "beats", "--help"], "True"), (["devicepipe", "--version"], "False")):
        ran = _python(
            f"""
            import atexit, gc, sys
            from devicepipe.cli import main
            atexit.register(lambda: print(gc.get_freeze_count() > 100_000, gc.isenabled()))
            sys.argv = {argv!r}
            main()
            """
        )
        assert ran[-2:] == [frozen, "True"], argv


def test_the_command_imports_neither_wfdb_nor_pandas_nor_scipy_until_a_record_needs_them(tmp_path):
    import numpy as np
    import wfdb

    signal = np.sin(np.arange(2500) / 40.0)[:, None]
    wfdb.wrsamp("rec", fs=250, units=["mV"], sig_name=["ecg"], p_signal=signal, fmt=["16"], write_dir=str(tmp_path))
    code = f"""
        import sys
        from devicepipe.cli import app
        print("wfdb" in sys.modules, "pandas" in sys.modules, "scipy" in sys.modules)
        from devicepipe.io import read_series
        rec = read_series({str(tmp_path / "rec.hea")!r})
        print("wfdb" in sys.modules, rec.n_samples, rec.sampling_rate)
        """
    assert _python(code) == ["False", "False", "False", "True", "2500", "250.0"]


def test_the_workers_preload_is_imported_with_the_collector_paused_and_frozen():
    out = _python(
        """
        import gc, sys
        import devicepipe.startup.preload
        print(all(m in sys.modules for m in ("torch", "distributed", "devicepipe.pipelines", "wfdb")))
        print(gc.isenabled(), gc.get_freeze_count() > 100_000, len(gc.get_objects()) < 10_000)
        """
    )
    assert out == ["True", "True", "True", "True"]


if sys.platform == "win32":  # no fork server there: nothing starts early
    pytestmark = pytest.mark.skip(reason="no fork server on Windows")


def test_the_dataset_commands_are_the_commands_with_workers():
    # prestart.py cannot import the command line (it runs before torch): its list must follow it
    import inspect

    from devicepipe.cli import app
    from devicepipe.startup.server import DATASET_COMMANDS

    with_workers = {
        (c.name or c.callback.__name__)
        for c in app.registered_commands
        if "workers" in inspect.signature(c.callback).parameters
    }
    assert with_workers == set(DATASET_COMMANDS)
    from devicepipe.pipelines import DATASET_PIPELINES

    assert set(DATASET_PIPELINES) == with_workers  # each command that takes folders has its pipeline
