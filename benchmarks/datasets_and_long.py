"""Many recordings and long ones: Dask against a plain loop, batched detection against sleepecg,
memory of whole against chunked detection, and detection time against sleepecg by length.

Four parts, each timed in one run (interleaved where two ways are compared), results in
``benchmarks/results/datasets_long.json`` (merged per part) and a summary printed:

- ``folder``: a folder of simulated recordings of mixed lengths (10 s to 30 min, log-uniform)
  at 250, 360 and 500 Hz, plus every shared real record; ``devicepipe beats`` on it (no
  figures) as a plain loop at 1 and at 2 torch threads, on Dask with 1 worker (2 threads) and
  with 2 workers (1 thread each); records per second, and Dask's cost per recording.
- ``batch``: 1,000 10-s ECGs at 500 Hz in memory: one ``(1000, 5000)`` ``ecg_peaks`` call
  against sleepecg looping over them (one thread each), and our call again on 2 threads
  (sleepecg has no threads to use a second core); then the same 1,000 as WFDB records
  in a folder: ``devicepipe beats`` on the folder (loop, no figures, every output written), our
  reading plus one batched call (no outputs), and ``wfdb.rdrecord`` plus the sleepecg loop.
- ``memory``: peak resident memory and seconds of ``devicepipe beats`` (no figures) on simulated
  single-lead recordings of 1 h, 24 h and 7 days at 250 Hz (NPY), in one piece and in
  10-minute and 1-hour chunks, and of 4 weeks in 10-minute chunks, each in its own process.
- ``sizes``: detection time of ``ecg_peaks`` and sleepecg from 10 k to 20 M samples (250 Hz,
  one thread each, interleaved, median of repeats).

Usage: python benchmarks/datasets_and_long.py [--only folder,batch,memory,sizes] [--quick]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from results_io import run_measured  # beside this script

import devicepipe
from devicepipe.bench.results import source_commit

RESULTS = Path(__file__).parent / "results" / "datasets_long.json"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _median_time(fn, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


def _cli(*args: str, threads: int | None = None) -> float:
    env = dict(os.environ)
    if threads is not None:
        env["DEVICEPIPE_THREADS"] = str(threads)
        env["OMP_NUM_THREADS"] = str(threads)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "devicepipe", *args], check=True, env=env, capture_output=True)
    return time.perf_counter() - started


# ----------------------------------------------------------------------------- folder


def make_folder(root: Path, n: int, seed: int = 0) -> dict:
    from devicepipe.io import write_parquet
    from devicepipe.simulate import simulate_ecg

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    samples = 0
    for i in range(n):
        rate = float(rng.choice([250.0, 360.0, 500.0]))
        duration = float(np.exp(rng.uniform(np.log(10.0), np.log(1800.0))))
        sim = simulate_ecg(duration, rate, seed=i, heart_rate_bpm=float(rng.uniform(50, 110)))
        write_parquet({"ecg": sim.signal}, root / f"sim{i:04d}.parquet", sampling_rate=rate)
        samples += sim.signal.numel()
    real = 0
    for group in ("mitdb", "cpsc2021", "cpsc2019"):
        for hea in sorted((DATA / group).glob("*.hea")):
            (root / group).mkdir(exist_ok=True)
            for suffix in (".hea", ".dat"):
                shutil.copy(hea.with_suffix(suffix), root / group / hea.with_suffix(suffix).name)
            real += 1
    return {"simulated": n, "real": real, "simulated_samples": samples}


#: Interleaved rounds of the folder part: a run's time moves by up to a quarter from round to
#: round on the 2-core machine (file writing), so medians of several, not the best of two.
ROUNDS = 4


def part_folder(quick: bool) -> dict:
    n = 60 if quick else 480
    # the package's bytecode, written once as pip writes it at install: where
    # PYTHONDONTWRITEBYTECODE is set (as on the machine of these runs), an editable install's
    # modules were otherwise compiled from source by every command and every worker server,
    # 0.14 s each, which an installed package never pays
    compileall.compile_dir(str(Path(devicepipe.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "folder"
        made = make_folder(root, n)
        total = made["simulated"] + made["real"]
        runs = {
            "loop, 1 thread": (["--workers", "0"], 1),
            "loop, 2 threads": (["--workers", "0"], 2),
            "dask, 1 worker (2 threads)": (["--workers", "1"], None),
            "dask, 2 workers (1 thread each)": (["--workers", "2"], None),
        }
        # the same command on a folder of one short recording: what a run costs before its first
        # recording (starting Python and torch, and for Dask the cluster and its workers)
        from devicepipe.io import write_parquet
        from devicepipe.simulate import simulate_ecg

        one = Path(tmp) / "one"
        one.mkdir()
        write_parquet({"ecg": simulate_ecg(10.0, 250.0, seed=n).signal}, one / "short.parquet", sampling_rate=250.0)
        seconds: dict[str, list[float]] = {k: [] for k in runs}
        startup: dict[str, list[float]] = {k: [] for k in runs}
        orders = []
        for repeat in range(1 if quick else ROUNDS):  # interleaved, the order rotated each round
            names = list(runs)
            order = names[repeat % len(names) :] + names[: repeat % len(names)]  # (each setting first once)
            orders.append(order)
            for name in order:
                args, threads = runs[name]
                for folder, times, count in ((root, seconds, total), (one, startup, 1)):
                    out = Path(tmp) / f"out-{repeat}-{len(times[name])}"
                    # the run before wrote (and then deleted) thousands of files: flushed now, their
                    # write-back does not fall inside this run's time (by hand, it slowed two busy
                    # Dask workers by 0.6 s and the loop by less than its spread)
                    os.sync()
                    times[name].append(
                        _cli("beats", str(folder), "--out", str(out), "--no-figures", *args, threads=threads)
                    )
                    index = __import__("pyarrow.parquet", fromlist=["x"]).read_table(out / "index.parquet")
                    assert index.num_rows == count and set(index.column("status").to_pylist()) == {"ok"}
                    shutil.rmtree(out)
    best = {k: statistics.median(v) for k, v in seconds.items()}
    first = {k: statistics.median(v) for k, v in startup.items()}
    steady = {k: (total - 1) / (best[k] - first[k]) for k in runs}  # records per second past the start
    loop = min(best["loop, 1 thread"], best["loop, 2 threads"])
    loop_steady = max(steady["loop, 1 thread"], steady["loop, 2 threads"])
    dask2 = "dask, 2 workers (1 thread each)"
    return {
        "recordings": made,
        "seconds": seconds,
        "startup_seconds": startup,
        "orders": orders,  # each round's order of the settings
        "records_per_s": {k: total / v for k, v in best.items()},
        "records_per_s_after_start": steady,
        "dask_2_workers_vs_best_loop": loop / best[dask2],
        "dask_2_workers_vs_best_loop_after_start": steady[dask2] / loop_steady,
        "dask_overhead_per_recording_ms": 1e3
        * (1 / steady["dask, 1 worker (2 threads)"] - 1 / steady["loop, 2 threads"]),
        "note": "medians of the rounds per setting; 'seconds' include starting Python, torch and (for Dask) the "
        "cluster; 'startup_seconds' is the same command on a folder of one 10-s recording, and the rates after "
        "the start are (recordings - 1) / (seconds - startup_seconds); the settings' order rotated each round; "
        "os.sync() before every timed run; the package's bytecode compiled once before the runs (as pip does at "
        "install)",
    }


# ----------------------------------------------------------------------------- batch


def part_batch(quick: bool) -> dict:
    import sleepecg
    import wfdb

    from devicepipe.ecg import ecg_peaks
    from devicepipe.io import read_series
    from devicepipe.simulate import simulate_ecg

    torch.set_num_threads(1)
    n = 200 if quick else 1000
    signals = torch.stack([simulate_ecg(10.0, 500.0, seed=i, noise_mV=0.03).signal for i in range(n)])
    as_numpy = signals.numpy().astype(np.float64)
    ours = lambda: ecg_peaks(signals, 500.0)  # noqa: E731
    theirs = lambda: [sleepecg.detect_heartbeats(s, 500.0) for s in as_numpy]  # noqa: E731

    def ours_on_both_cores() -> None:  # sleepecg has no threads; our call can use the machine's two cores
        torch.set_num_threads(2)
        try:
            ecg_peaks(signals, 500.0)
        finally:
            torch.set_num_threads(1)

    ours(), theirs(), ours_on_both_cores()
    t_ours, t_theirs, t_two = [], [], []
    for _ in range(3 if quick else 7):
        t_ours.append(_median_time(ours, 1)[0])
        t_theirs.append(_median_time(theirs, 1)[0])
        t_two.append(_median_time(ours_on_both_cores, 1)[0])
    found = sum(p.numel() for p in ours())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ecgs"
        root.mkdir()
        for i, s in enumerate(as_numpy):
            wfdb.wrsamp(f"r{i:04d}", fs=500, units=["mV"], sig_name=["II"], p_signal=s[:, None], write_dir=str(root),
                        fmt=["16"], adc_gain=[1000.0], baseline=[0])  # fmt: skip
        paths = sorted(root.glob("*.hea"))

        def read_and_detect() -> None:
            x = torch.stack([read_series(p, 0).samples for p in paths])
            ecg_peaks(x, 500.0)

        def wfdb_and_sleepecg() -> None:
            for p in paths:
                sleepecg.detect_heartbeats(wfdb.rdrecord(str(p.with_suffix(""))).p_signal[:, 0], 500.0)

        folder = {"ours: read + one batched call": [], "wfdb.rdrecord + sleepecg loop": [], "devicepipe beats": []}
        for repeat in range(1 if quick else 3):
            folder["ours: read + one batched call"].append(_median_time(read_and_detect, 1)[0])
            folder["wfdb.rdrecord + sleepecg loop"].append(_median_time(wfdb_and_sleepecg, 1)[0])
            out = Path(tmp) / f"out{repeat}"
            folder["devicepipe beats"].append(
                _cli("beats", str(root), "--out", str(out), "--no-figures", "--workers", "0", threads=1)
            )
    return {
        "signals": {"count": n, "seconds": 10, "sampling_rate_hz": 500, "beats_found": found},
        "in_memory_s": {
            "ecg_peaks (batch, time)": t_ours,
            "sleepecg loop": t_theirs,
            "ecg_peaks (batch, time), 2 threads": t_two,
        },
        "in_memory_speedup": statistics.median(t_theirs) / statistics.median(t_ours),
        "in_memory_speedup_ours_on_2_threads": statistics.median(t_theirs) / statistics.median(t_two),
        "folder_s": folder,
        "folder_ratio_read_detect": statistics.median(folder["wfdb.rdrecord + sleepecg loop"])
        / statistics.median(folder["ours: read + one batched call"]),
        "folder_ratio_full_command": statistics.median(folder["wfdb.rdrecord + sleepecg loop"])
        / statistics.median(folder["devicepipe beats"]),
        "threads": "1 (and our in-memory call again on 2)",
    }


# ----------------------------------------------------------------------------- memory


def _peak_rss(args: list[str]) -> tuple[float, int]:
    """Seconds and peak resident bytes of ``devicepipe ARGS`` in a process of its own (-1: it failed)."""
    elapsed, peak, proc = run_measured(args)
    return elapsed, peak if proc.returncode == 0 else -1


def write_long(path: Path, hours: float, rate: float = 250.0) -> int:
    """A simulated recording of ``hours`` written an hour at a time into an NPY memory map."""
    from devicepipe.simulate import simulate_ecg

    n = int(hours * 3600 * rate)
    out = np.lib.format.open_memmap(path, "w+", np.float32, (n,))
    hour = int(3600 * rate)
    for i, start in enumerate(range(0, n, hour)):
        piece = simulate_ecg(min(hour, n - start) / rate, rate, seed=i).signal.numpy()
        out[start : start + piece.size] = piece
    out.flush()
    return n


def _throughput(path: Path, threads: int, repeats: int = 5) -> dict:
    """Reading and detecting in this process (no outputs) on ``threads`` torch threads: the whole
    file in one call against chunks of 10 minutes and of 1 hour, interleaved."""
    from devicepipe.ecg import ecg_peaks, ecg_peaks_chunked
    from devicepipe.io.chunks import chunk_reader

    read, n, fs = chunk_reader(path, sampling_rate=250)
    ways = {
        "whole: np.load + ecg_peaks": lambda: ecg_peaks(torch.from_numpy(np.load(path)), fs),
        "chunks of 10 min": lambda: ecg_peaks_chunked(read, n, fs, chunk=int(600 * fs)),
        "chunks of 1 h": lambda: ecg_peaks_chunked(read, n, fs, chunk=int(3600 * fs)),
    }
    torch.set_num_threads(threads)
    for way in ways.values():
        way()
    seconds: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            seconds[name].append(_median_time(way, 1)[0])
    whole = statistics.median(seconds["whole: np.load + ecg_peaks"])
    return {
        "hours": 24.0,
        "how": "in-process read + detect, medians of interleaved repeats",
        "seconds": seconds,
        "chunked_throughput_vs_whole": {k: whole / statistics.median(v) for k, v in seconds.items()},
        "threads": threads,
    }


def part_memory(quick: bool) -> dict:
    hours = [1.0, 6.0] if quick else [1.0, 24.0, 168.0, 672.0]  # (4 weeks: chunked in 10 minutes only)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for h in hours:
            path = Path(tmp) / f"ecg_{h:g}h.npy"
            n = write_long(path, h)
            if h == 24.0:
                threads = torch.get_num_threads()
                rows += [_throughput(path, t) for t in (1, 2)]
                torch.set_num_threads(threads)
            ways = [("whole", []), ("chunked 10 min", ["--chunk", "10min"]), ("chunked 1 h", ["--chunk", "1h"])]
            for how, extra in ways if h < 672 else ways[1:2]:
                out = Path(tmp) / "out"
                args = ["beats", str(path), "--sampling-rate", "250", "--no-figures", "--out", str(out),
                        "--device", "cpu", *extra]  # fmt: skip
                seconds, rss = _peak_rss(args)
                summary = json.loads((out / "summary.json").read_text()) if rss > 0 else {}
                rows.append(
                    {
                        "hours": h,
                        "samples": n,
                        "how": how,
                        "seconds": seconds,
                        "detect_s": summary.get("seconds", {}).get("detect"),
                        "peak_rss_bytes": rss,
                        "beats": summary.get("counts", {}).get("beats_found"),
                    }
                )
                shutil.rmtree(out, ignore_errors=True)
            path.unlink()
    return {"runs": rows, "threads": "torch default (2 on this machine)", "file": "float32 NPY, read by memory map"}


# ----------------------------------------------------------------------------- sizes


def part_sizes(quick: bool) -> dict:
    import sleepecg

    from devicepipe.ecg import ecg_peaks
    from devicepipe.simulate import simulate_ecg

    torch.set_num_threads(1)
    sizes = [10_000, 100_000, 1_000_000] if quick else [10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000,
                                                         10_000_000, 20_000_000]  # fmt: skip
    longest = simulate_ecg(sizes[-1] / 250, 250, seed=3).signal
    rows = []
    for n in sizes:
        x = longest[:n].clone()
        xn = x.numpy().astype(np.float64)
        repeats = max(3, min(31, int(3e6 / n)))
        ecg_peaks(x, 250.0), sleepecg.detect_heartbeats(xn, 250.0)
        ours, theirs = [], []
        for _ in range(repeats):  # interleaved
            ours.append(_median_time(lambda x=x: ecg_peaks(x, 250.0), 1)[0])
            theirs.append(_median_time(lambda xn=xn: sleepecg.detect_heartbeats(xn, 250.0), 1)[0])
        rows.append(
            {
                "samples": n,
                "repeats": repeats,
                "ours_ms": 1e3 * statistics.median(ours),
                "sleepecg_ms": 1e3 * statistics.median(theirs),
                "speed_ratio": statistics.median(theirs) / statistics.median(ours),
            }
        )
    return {"rows": rows, "threads": 1, "input": "simulated ECG at 250 Hz; sleepecg on float64, ours on float32"}


PARTS = {"folder": part_folder, "batch": part_batch, "memory": part_memory, "sizes": part_sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS))
    parser.add_argument("--quick", action="store_true", help="small sizes, to try the script")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() and not args.quick else {}
    # the code measured, read before the first part writes this results file (a tracked file:
    # read after it, every later part would be recorded "-dirty")
    commit = source_commit(RESULTS.parent.parent)
    for name in args.only.split(","):
        started = time.perf_counter()
        part = PARTS[name](args.quick)
        part["date"] = time.strftime("%Y-%m-%d %H:%M")
        part["commit"] = commit  # "-dirty" where tracked files differed at the start
        part["wall_s"] = time.perf_counter() - started
        part["machine"] = {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "python": platform.python_version(),
        }
        results[name] = part
        print(json.dumps({name: {k: v for k, v in part.items() if k not in ("machine",)}}, indent=1, default=str))
        if not args.quick:
            RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
