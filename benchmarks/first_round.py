"""Why a folder run's first round is its fastest: the same run again and again, with where its time went.

    python benchmarks/first_round.py [--rounds 6] [--recordings 240]

``devicepipe beats FOLDER`` (the plain loop, one thread, no figures) on one folder of simulated
and real recordings, in a fresh process each time, ``--rounds`` times with its outputs on this
machine's disk and as many on a RAM file system (``/dev/shm``), the two alternated. Each run's
wall time, its CPU time in user and kernel mode, page faults and context switches (``wait4``),
and the disk's sectors written and discards issued during it (``/proc/diskstats``). In
``datasets_and_long.py`` each round deletes the thousands of files the run before wrote; on a
file system mounted with ``discard``, each deletion is sent on to the disk as it is committed.
Results: ``benchmarks/results/first_round.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # before torch starts its OpenMP runtime

import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from datasets_and_long import make_folder  # noqa: E402
from results_io import machine, parser, write_table_page  # noqa: E402

RAM = Path("/dev/shm")


def disk_of(path: Path) -> str:
    """The block device (``/proc/diskstats`` name) holding ``path``."""
    dev = os.stat(path).st_dev
    return Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve().name


def disk_counts(name: str) -> dict[str, int]:
    """Sectors written and discarded, and discard requests, on disk ``name`` since boot."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == name:
            # fields after the name: reads (4), writes (4), in flight, io ms, weighted ms, discards (4)
            return {"written_sectors": int(f[9]), "discards": int(f[14]), "discarded_sectors": int(f[16])}
    return {"written_sectors": 0, "discards": 0, "discarded_sectors": 0}


def run_once(folder: Path, out: Path, disk: str) -> dict[str, float]:
    """One ``devicepipe beats`` run into ``out``: its wall and CPU seconds, faults, switches and disk traffic."""
    env = {**os.environ, "DEVICEPIPE_THREADS": "1", "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-m", "devicepipe", "beats", str(folder), "--out", str(out), "--no-figures"]
    os.sync()  # the run before's write-back is not this run's
    before = disk_counts(disk)
    started = time.perf_counter()
    child = subprocess.Popen([*args, "--workers", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if status:
        raise SystemExit(f"the run failed: {child.stderr.read().decode()[-2000:]}")
    shutil.rmtree(out)
    os.sync()  # the deletion committed (and, with discard, sent to the disk) before the next run
    after = disk_counts(disk)
    return {
        "wall_s": wall,
        "user_s": usage.ru_utime,
        "system_s": usage.ru_stime,
        "minor_faults": usage.ru_minflt,
        "major_faults": usage.ru_majflt,
        "voluntary_switches": usage.ru_nvcsw,
        "involuntary_switches": usage.ru_nivcsw,
        **{k: after[k] - before[k] for k in after},
        "written_mb": (after["written_sectors"] - before["written_sectors"]) * 512 / 1e6,
    }


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=6)
    options.add_argument("--recordings", type=int, default=240)
    args = options.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "folder"
        made = make_folder(folder, args.recordings)
        disk = disk_of(Path(tmp))
        places = {"disk": Path(tmp), "RAM": RAM}
        runs: list[dict[str, object]] = []
        for i in range(args.rounds):
            for where in ("disk", "RAM") if i % 2 == 0 else ("RAM", "disk"):
                out = Path(tempfile.mkdtemp(dir=places[where])) / "run"
                runs.append({"round": i + 1, "outputs": where, **run_once(folder, out, disk)})
                shutil.rmtree(out.parent)
    options_of = sorted({str(r["outputs"]) for r in runs})
    summary = {
        w: {
            k: statistics.median(float(r[k]) for r in runs if r["outputs"] == w)
            for k in ("wall_s", "user_s", "system_s", "discards", "written_mb")
        }
        for w in options_of
    }
    mount = next((line for line in Path("/proc/mounts").read_text().splitlines() if line.split()[1] == "/"), "unknown")
    result = {
        **machine(),
        "recordings": made,
        "recordings_total": made["simulated"] + made["real"],
        "disk": disk,
        "root_mount": mount,
        "runs": runs,
        "medians": summary,
    }
    rows = [
        [
            r["round"], r["outputs"], f"{r['wall_s']:.2f}", f"{r['user_s']:.2f}", f"{r['system_s']:.2f}",
            r["voluntary_switches"], r["written_sectors"], r["discards"],
        ]
        for r in runs
    ]  # fmt: skip
    note = (
        f"{made['simulated']} simulated and {made['real']} real recordings; the plain loop at one thread, a fresh "
        f"process each run, outputs deleted after each; the root file system: `{mount}`."
    )
    write_table_page(
        args.out, "first_round", result, "A folder run, again and again",
        ["round", "outputs on", "wall (s)", "user (s)", "system (s)", "voluntary switches", "sectors written",
         "discards"], rows, "1 thread", note=note,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
