"""Reading one numeric CSV column: ours against pandas' own parser and PyArrow's, at one thread each.

    python benchmarks/csv_parsers.py                           # about two minutes on 2 cores
    python benchmarks/csv_parsers.py --quick                   # checks that it runs
    pip install --target /tmp/pandas2 pandas==2.3.3 pytz       # (optional) an older pandas beside
    python benchmarks/csv_parsers.py --other-pandas /tmp/pandas2

The input is what ``devicepipe bench`` reads: 20 M samples of simulated ECG written as one
``heartbeats`` column (``devicepipe.bench.stages.prepare_input``, 233 MB of text). Each reader
runs in a fresh process (``OMP_NUM_THREADS=1``, PyArrow's pools at one thread, torch at one)
that reads it once to warm up and then three times; the process reports its fastest and median
read. The readers are run in a rotated order, ``--rounds`` rounds. Every reader must return the
same float32 values as PyArrow's parser.

- ``pandas C``: ``pandas.read_csv(path, dtype="float32")``, the seed notebook's call, with the
  installed pandas (and, with ``--other-pandas DIR``, the pandas found in DIR first on the path);
- ``pyarrow.csv``: ``pyarrow.csv.read_csv`` with the column typed float32, ``use_threads=False``;
- ``ours``: ``devicepipe.read_series(path, "heartbeats", device="cpu")``.

Results: ``benchmarks/results/csv_parsers.{json,md}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from results_io import heading, machine, parser, table, write_results

from devicepipe.bench.stages import prepare_input

#: One reader, run in its own process: prints {"version", "seconds", "checksum"} as JSON.
READER = r"""
import json, sys, time
kind, path = sys.argv[1], sys.argv[2]
if kind == "pandas C":
    import pandas as pd
    read, version = (lambda: pd.read_csv(path, dtype="float32")["heartbeats"].to_numpy()), pd.__version__
elif kind == "pyarrow.csv":
    import pyarrow as pa, pyarrow.csv as pc
    pa.set_cpu_count(1); pa.set_io_thread_count(1)
    opts = pc.ConvertOptions(column_types={"heartbeats": pa.float32()})
    read = lambda: pc.read_csv(path, read_options=pc.ReadOptions(use_threads=False), convert_options=opts)[
        "heartbeats"].to_numpy()
    version = pa.__version__
else:
    import torch
    torch.set_num_threads(1)
    import devicepipe
    from devicepipe.io import read_series
    read, version = (lambda: read_series(path, "heartbeats", device="cpu").samples.numpy()), devicepipe.__version__
values = read()
seconds = []
for _ in range(3):
    started = time.perf_counter()
    read()
    seconds.append(time.perf_counter() - started)
print(json.dumps({"version": version, "seconds": seconds, "sum": float(values.astype("float64").sum()),
                  "n": int(values.size), "first": float(values[0]), "last": float(values[-1])}))
"""


def run_reader(kind: str, path: Path, pythonpath: str | None) -> dict[str, Any]:
    """One fresh process reading ``path`` with ``kind``; its versions, times and a checksum."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    label = kind.split(":")[0]
    out = subprocess.run([sys.executable, "-c", READER, label, str(path)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{kind} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--other-pandas", help="a folder holding another pandas (pip install --target DIR pandas==X)")
    args = p.parse_args()
    n = 200_000 if args.quick else 20_000_000
    rounds = 1 if args.quick else args.rounds
    readers = {"pandas C": None, "pyarrow.csv": None, "ours": None}
    if args.other_pandas:
        readers["pandas C:other"] = args.other_pandas
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in readers}
    with tempfile.TemporaryDirectory() as tmp:
        csv = prepare_input(n, tmp).csv
        size = csv.stat().st_size
        kinds = list(readers)
        for r in range(rounds):
            for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                runs[kind].append(run_reader(kind, csv, readers[kind]))
    reference = runs["pyarrow.csv"][0]
    for kind, got in runs.items():
        if any(
            (g["n"], g["sum"], g["first"], g["last"]) != tuple(reference[k] for k in ("n", "sum", "first", "last"))
            for g in got
        ):
            raise SystemExit(f"{kind} read different values from pyarrow.csv")
    rows = []
    for kind, got in runs.items():
        fastest = [min(g["seconds"]) for g in got]
        rows.append(
            {
                "reader": kind.split(":")[0],
                "version": got[0]["version"],
                "runs": got,
                "median_of_fastest_s": float(np.median(fastest)),
                "fastest_s": float(min(fastest)),
                "mb_per_s": size / float(np.median(fastest)) / 1e6,
            }
        )
    result = {**machine(), "n_samples": n, "csv_bytes": size, "rounds": rounds, "rows": rows}
    lines = [
        heading("Reading a numeric CSV column at one thread", result, result["cpu"], "OMP_WAIT_POLICY=PASSIVE"),
        "",
        f"{n:,} samples in one column ({size / 1e6:.0f} MB of text); each reader in a fresh process, fastest of "
        f"three reads after a warm-up, median over {rounds} rounds in rotated order; equal values from every reader.",
        "",
        *table(
            ["reader", "version", "seconds", "MB/s"],
            [[r["reader"], r["version"], f"{r['median_of_fastest_s']:.3f}", f"{r['mb_per_s']:.0f}"] for r in rows],
        ),
    ]
    write_results(args.out, "csv_parsers" + ("_quick" if args.quick else ""), result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
