"""What the compiled detector's first call costs: Numba compiling it into an empty cache (once
per install), and loading it from the cache (once per process), each in a fresh process that
detects beats in one 10-s CPSC 2019 record (500 Hz) through ``ecg_peaks``.

Each process is timed from before ``devicepipe.ecg`` is imported to after its first and then
its second call; the first call's time is what the compiled path adds to a process. A third
process runs the tensor path alone (``peaks_ricker``), as a short call ran before it. The cache
is a fresh folder (``NUMBA_CACHE_DIR``, which Numba prefers to the one beside the package), so
the installed cache is neither used nor touched.

    python benchmarks/compile_once.py [--data DIR] [--out DIR] [--repeats 3]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from results_io import machine, parser, write_table_page  # beside this script

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

CHILD = """
import json, sys, time
started = time.perf_counter()
from devicepipe.ecg import ecg_peaks
from devicepipe.ecg.ricker import peaks_ricker
from devicepipe.io import read_series
rec = read_series(sys.argv[1])
x, fs = rec.samples.float(), float(rec.sampling_rate)
if sys.argv[2] == "tensor":  # the tensor path alone, as before the compiled one
    ecg_peaks = lambda x, fs: peaks_ricker(x[None], fs)[1]
imported = time.perf_counter()
first = ecg_peaks(x, fs)
done = time.perf_counter()
second = ecg_peaks(x, fs)
again = time.perf_counter()
print(json.dumps({"import_s": imported - started, "first_s": done - imported, "second_s": again - done,
                  "beats": int(first.numel()), "same": bool((first == second).all())}))
"""


def _child(record: Path, cache: Path, path: str = "compiled") -> dict[str, Any]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "DEVICEPIPE_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(record), path], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(data: Path, repeats: int) -> dict[str, Any]:
    record = data / "cpsc2019" / "data_00014"
    cold, warm, tensor = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(_child(record, Path(cache)))  # compiles into the empty cache
            warm.append(_child(record, Path(cache)))  # loads what the first wrote
            tensor.append(_child(record, Path(cache), "tensor"))
    summary = {
        kind: {key: statistics.median(r[key] for r in runs) for key in ("import_s", "first_s", "second_s")}
        | {"first_s_range": [min(r["first_s"] for r in runs), max(r["first_s"] for r in runs)]}
        for kind, runs in (("compiling", cold), ("from the cache", warm), ("none (the tensor path)", tensor))
    }
    same = len({r["beats"] for r in cold + warm + tensor}) == 1 and all(r["same"] for r in cold + warm + tensor)
    runs = {"compiling": cold, "from the cache": warm, "none (the tensor path)": tensor}
    return {**machine(), "record": str(record.relative_to(data)), "repeats": repeats, "runs": runs,
            "summary": summary, "same_beats": same}  # fmt: skip


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    result = run(args.data, args.repeats)
    rows = [
        [kind, f"{s['import_s']:.2f}", f"{s['first_s']:.2f}", "{:.2f}-{:.2f}".format(*s["first_s_range"]),
         f"{1e3 * s['second_s']:.2f}"]
        for kind, s in result["summary"].items()
    ]  # fmt: skip
    header = ["cache", "import and read (s)", "first call (s, median)", "first call (s, range)", "second call (ms)"]
    note = f"Medians of {args.repeats} fresh processes each; the same beats in every call: {result['same_beats']}."
    write_table_page(args.out, "compile_once", result, "The compiled detector's first call", header, rows,
                     "one 10-s CPSC 2019 record, 500 Hz", note=note)  # fmt: skip


if __name__ == "__main__":
    main()
