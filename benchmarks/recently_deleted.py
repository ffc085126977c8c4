"""Where a folder run's kernel time grows when the run before deleted its outputs: ext4 skipping
recently deleted inodes, sampled with ``perf``.

    python benchmarks/recently_deleted.py [--rounds 4] [--quiet-s 330]     # about 7 minutes; needs perf

``devicepipe beats FOLDER --no-figures`` (the loop, one thread) on a small folder, its outputs
on this machine's disk, under ``perf record``. The first run starts after ``--quiet-s`` seconds
in which this script deleted nothing; before each later run the outputs of all runs so far are
deleted, as a benchmark's rounds do. When ext4 allocates an inode it passes over those deleted
in the last minutes (``recently_deleted`` in ``fs/ext4/ialloc.c``: 60 s, 300 s while their
inode table block is dirty), reading each one's inode table entry, so every file a run creates
costs more the more files were deleted shortly before. Per run: the share of the run's samples in
those kernel functions, its CPU time in kernel mode, and the files deleted before it.
Results: ``benchmarks/results/recently_deleted.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from datasets_and_long import make_folder  # noqa: E402
from results_io import machine, parser, write_table_page  # noqa: E402

#: The kernel functions of ext4's inode allocation that look past recently deleted inodes.
SYMBOLS = ("recently_deleted", "find_inode_bit", "find_get_block_common", "ext4_get_group_desc")


def shares(data: Path) -> dict[str, float]:
    """Percent of the samples in ``data`` whose own time is in each of :data:`SYMBOLS`."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "sym", "--stdio", "-g", "none"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found = {s: 0.0 for s in SYMBOLS}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[k\]\s+(\S+)", line)
        if m and m.group(2) in found:
            found[m.group(2)] = float(m.group(1))
    return found


def run_once(folder: Path, out: Path, data: Path) -> dict[str, float]:
    """One run under ``perf record``: its wall and kernel-mode CPU seconds and the symbols' shares."""
    env = {**os.environ, "DEVICEPIPE_THREADS": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "devicepipe", "beats", str(folder), "--out", str(out), "--no-figures"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        ["perf", "record", "-q", "-o", str(data), "--", *command, "--workers", "0"],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = shares(data)
    return {
        "wall_s": wall,
        "system_s": after.ru_stime - before.ru_stime,
        "user_s": after.ru_utime - before.ru_utime,
        **{f"{k}_pct": v for k, v in found.items()},
        "inode_search_pct": sum(found.values()),
    }


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=4)
    options.add_argument("--recordings", type=int, default=60)
    options.add_argument("--quiet-s", type=float, default=330.0)
    args = options.parse_args()
    if shutil.which("perf") is None:
        raise SystemExit("recently_deleted.py needs perf (linux-perf), with permission to sample the kernel.")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "folder"
        made = make_folder(folder, args.recordings)
        os.sync()
        time.sleep(args.quiet_s)  # (nothing deleted by this script meanwhile)
        outs: list[Path] = []
        deleted = 0
        for r in range(args.rounds):
            if outs:  # the outputs so far, deleted as a benchmark's rounds delete them
                for o in outs:
                    if o.exists():
                        deleted += sum(len(files) for _, _, files in os.walk(o))
                        shutil.rmtree(o)
                os.sync()
            out = Path(tmp) / f"out{r}"
            runs.append(
                {"run": r + 1, "files_deleted_before": deleted, **run_once(folder, out, Path(tmp) / f"perf{r}.data")}
            )
            outs.append(out)
    result = {**machine(), "recordings": made, "quiet_s": args.quiet_s, "symbols": list(SYMBOLS), "runs": runs}
    rows = [
        [r["run"], r["files_deleted_before"], f"{r['wall_s']:.2f}", f"{r['system_s']:.2f}",
         f"{r['inode_search_pct']:.2f}", f"{r['recently_deleted_pct']:.2f}"]
        for r in runs
    ]  # fmt: skip
    write_table_page(
        args.out, "recently_deleted", result, "A folder run's kernel time after deleting the runs before",
        ["run", "files deleted in the minutes before", "wall (s)", "kernel CPU (s)",
         "samples in ext4's inode search (%)", "of them in recently_deleted (%)"], rows, "1 thread",
        note=f"{made['simulated']} simulated and {made['real']} real recordings; the first run after "
        f"{args.quiet_s:g} s with nothing deleted; before each later run every earlier run's outputs deleted. "
        f"Kernel functions counted: {', '.join(SYMBOLS)}.",
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
