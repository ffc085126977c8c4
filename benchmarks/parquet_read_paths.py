"""Reading a 20 M-sample Parquet file: devicepipe's checked read against the ways PyArrow offers.

    python benchmarks/parquet_read_paths.py [--out benchmarks/results/parquet_read_paths.json]

The file is the bench's (one float32 column, written by ``write_parquet``: 306 row groups, page
checksums). Contenders, in rotated order each round, at the machine's default threads:

- ``read_row_groups``: ``ParquetFile.read_row_groups`` with page checksums verified (the path
  ``read_series`` took until it changed to the next one);
- ``fragment``: a dataset fragment of the same row groups with page checksums verified (the path
  now), which decodes row groups on several cores;
- ``read_table``: ``pyarrow.parquet.read_table`` without checks (the floor);
- ``read_series``: all of devicepipe's read: the fragment, each row group checked against the
  file's statistics, the tensor.

Every contender's values are checked equal to the written signal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from devicepipe import read_series
from devicepipe.io import write_parquet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_io import RESULTS, machine  # noqa: E402


def contenders(path: Path, groups: list[int]) -> dict:
    checked = ds.ParquetFileFormat(
        default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
    )

    def read_row_groups():
        with pq.ParquetFile(path, page_checksum_verification=True) as f:
            return f.read_row_groups(groups).column(0)

    return {
        "read_row_groups": read_row_groups,
        "fragment": lambda: (
            checked.make_fragment(str(path), filesystem=pafs.LocalFileSystem(), row_groups=groups).to_table().column(0)
        ),
        "read_table": lambda: pq.read_table(path).column(0),
        "read_series": lambda: read_series(path).samples,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20_000_000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", type=Path, default=RESULTS / "parquet_read_paths.json")
    args = ap.parse_args()
    signal = np.random.default_rng(0).normal(size=args.samples).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_parquet({"heartbeats": signal}, Path(tmp) / "ecg.parquet", sampling_rate=250.0)
        groups = list(range(pq.ParquetFile(path).metadata.num_row_groups))
        runs = contenders(path, groups)
        for name, run in runs.items():  # warm-up, and each answer checked
            got = run()
            values = got.numpy() if hasattr(got, "numpy") else pa.chunked_array(got).to_numpy()
            assert np.array_equal(values.reshape(-1), signal), name
        times: dict[str, list[float]] = {name: [] for name in runs}
        order = list(runs)
        for r in range(args.repeats):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                t0 = time.perf_counter()
                runs[name]()
                times[name].append(time.perf_counter() - t0)
    result = {
        **machine(),
        "arrow_threads": pa.cpu_count(),
        "pyarrow": pa.__version__,
        "samples": args.samples,
        "row_groups": len(groups),
        "repeats": args.repeats,
        "seconds": times,
        "median_s": {name: statistics.median(t) for name, t in times.items()},
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        f"# Reading {args.samples:,} samples of Parquet ({len(groups)} row groups)",
        "",
        f"{result['date']}, commit {result['commit']}, {result['cpu']}, {result['usable_cores']} cores, "
        f"{result['arrow_threads']} Arrow threads, pyarrow {result['pyarrow']}; "
        f"median of {args.repeats} rotated rounds.",
        "",
        "| path | median ms |",
        "|---|---|",
        *(f"| {name} | {1e3 * s:.1f} |" for name, s in result["median_s"].items()),
    ]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
