"""Time to result: each README command on its real input, as a user runs it, with wall time and peak memory.

Runs the ``devicepipe`` command in a fresh process per case (the import of torch included,
as a user sees it) with the defaults, records the wall time, the peak resident memory of
that process, the stage breakdown, epochs and threads from its ``summary.json``, and the
epochs' own seconds from its ``history.csv`` (the ``train`` stage also scores every row against
the training rows, which on a day's beats takes longer than the epochs):

- ``demo`` (simulated 30-minute ECG);
- ``beats`` and ``ecg`` on MIT-BIH record 100;
- ``series`` on the AEP hourly load (and its flagged days against a reference run, if given);
- ``ecg`` on a simulated 20 M-sample ECG (22.2 h at 250 Hz).

    python benchmarks/time_to_result.py [--data DIR] [--out DIR] [--skip-large]
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
import torch
from results_io import machine, parser, run_measured, table, write_results  # beside this script

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TARGETS_S = {"demo": 45.0, "ecg MIT-BIH 100": 30.0, "series AEP": 20.0}


def _run(args: list[str], out: Path | None) -> dict:
    """One command in its own process: wall seconds, peak resident memory (MiB, the command's own),
    and its summary.json when it wrote one."""
    wall, peak, proc = run_measured(args)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    row = {"command": "devicepipe " + " ".join(args), "wall_s": wall, "peak_rss_mib": peak / 2**20}
    if out is not None and (out / "summary.json").exists():
        summary = json.loads((out / "summary.json").read_text())
        row["seconds"] = summary.get("seconds")
        row["epochs"] = summary.get("epochs")
        row["threads"] = summary.get("threads")
        row["flagged"] = (summary.get("counts") or {}).get("flagged", summary.get("flagged"))
    if out is not None and (out / "history.csv").exists():  # the epochs' own time: "train" also scores every row
        row["epochs_s"] = float(pd.read_csv(out / "history.csv")["seconds"].sum())
    return row


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument("--data", type=Path, default=DEFAULT_DATA)
    options.add_argument("--skip-large", action="store_true", help="leave out the 20 M-sample ECG")
    args = options.parse_args(argv)
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = [
            ("demo", ["demo", "--out", str(work / "demo")], work / "demo"),
            (
                "beats MIT-BIH 100",
                ["beats", str(args.data / "mitdb/100"), "--out", str(work / "beats")]
                + ["--reference", str(args.data / "mitdb/100.atr")],
                work / "beats",
            ),
            ("ecg MIT-BIH 100", ["ecg", str(args.data / "mitdb/100"), "--out", str(work / "ecg")], work / "ecg"),
            (
                "series AEP",
                ["series", str(args.data / "electricity/AEP_hourly.csv"), "--column", "AEP_MW"]
                + ["--time-column", "Datetime", "--out", str(work / "series")],
                work / "series",
            ),
        ]
        if not args.skip_large:
            big = work / "ecg20M.parquet"
            _run(
                [
                    "simulate",
                    "ecg",
                    "--duration",
                    "80000s",
                    "--sampling-rate",
                    "250",
                    "--ectopic-rate",
                    "0.01",
                    "--out",
                    str(big),
                ],
                None,
            )
            cases.append(("ecg 20 M samples", ["ecg", str(big), "--out", str(work / "big")], work / "big"))
        for name, cmd, out in cases:
            rows[name] = _run(cmd, out)
            print(f"{name:<20} {rows[name]['wall_s']:8.1f} s  {rows[name]['peak_rss_mib']:8.0f} MiB", flush=True)
    result = {
        **machine(),
        "devicepipe_threads_env": os.environ.get("DEVICEPIPE_THREADS"),
        "targets_s": TARGETS_S,
        "cases": rows,
    }
    lines = [
        "# Time to result: the README's commands on their real inputs",
        "",
        f"Each command in a fresh process with its defaults, on the CPU ({result['cpu']},"
        f" {result['usable_cores']} cores); torch {torch.__version__}; {result['date'][:10]}."
        " Produced by `python benchmarks/time_to_result.py`; data in `time_to_result.json`.",
        "",
    ]
    cells = []
    for name, r in rows.items():
        stages = sorted((r.get("seconds") or {}).items(), key=lambda kv: -kv[1])[:3]
        e = r.get("epochs") or {}
        cells.append(
            [
                name,
                f"{r['wall_s']:.1f}",
                TARGETS_S.get(name, "-"),
                f"{r['peak_rss_mib']:.0f}",
                f"{e['run'][0]} / {e['kept'][0]}" if e else "-",
                (r.get("threads") or {}).get("threads", "-"),
                f"{r['epochs_s']:.1f}" if "epochs_s" in r else "-",
                ", ".join(f"{k} {v:.1f}" for k, v in stages),
            ]
        )
    header = ["command", "wall (s)", "target (s)", "peak memory (MiB)", "epochs run / kept", "threads", "epochs (s)"]
    lines += table([*header, "slowest stages (s)"], cells)
    write_results(args.out, "time_to_result", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
