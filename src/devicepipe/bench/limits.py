"""What a stage could reach on this machine, and how much of it it reaches.

Three rates are measured in the same run as the stages, with the same thread count; each is
the best of the repeats, as a ceiling should be:

* **copy**: bytes read plus bytes written per second by a copy of a 256 MB float32 buffer
  into one that exists already (main-memory bandwidth on a CPU, device memory on a GPU);
* **matmul**: float32 GFLOP/s of one square matrix product (n = 2048);
* **CSV parse**: megabytes of CSV text per second turned into float32 Arrow columns by
  PyArrow's reader, on the benchmark's own file (the host; the parse that ``read_series``
  builds on, without its checks and its hand-over to torch).

Each stage then gets its achieved rate from the least work it must do (bytes it must read
and write, floating-point operations it must execute) and that rate's share of the limit
that bounds it, so "what limits it" is a measurement rather than a guess.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from devicepipe.bench.timer import measure

__all__ = ["STAGE_LIMIT", "annotate", "count_flops", "measure_limits"]

#: The limit each stage is set against: "copy" (bytes/s), "matmul" (FLOP/s) or "csv_parse" (text bytes/s).
STAGE_LIMIT = {
    "read_csv": "csv_parse",
    "pipeline": "csv_parse",
    "read_parquet": "copy",
    "scale": "copy",
    "filter": "matmul",
    "peaks": "copy",
    "detect": "copy",
    "segment": "copy",
    "train_epoch": "matmul",
    "score": "matmul",
}


def count_flops(work: Callable[[], Any]) -> int:
    """Floating-point operations of the matrix products and convolutions ``work`` runs (PyTorch's counter)."""
    with FlopCounterMode(display=False) as counter:
        work()
    return int(counter.get_total_flops())


def measure_limits(
    devices: list[torch.device], csv_path: Any = None, *, quick: bool = False, repeats: int = 3
) -> dict[str, dict[str, float]]:
    """Per device: ``copy_gb_per_s`` (read + written), ``matmul_gflop_s``; for the CPU, also
    ``csv_parse_mb_per_s`` (text of ``csv_path`` parsed by ``pyarrow.csv.read_csv``)."""
    out: dict[str, dict[str, float]] = {}
    elements = (1 << 22) if quick else (1 << 26)  # 16 MB or 256 MB: beyond any cache in the full run
    n = 512 if quick else 2048
    for dev in devices:
        src = torch.ones(elements, device=dev)
        dst = torch.empty_like(src)
        copy = measure(partial(dst.copy_, src), device=dev, repeats=repeats)
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        mm = measure(partial(torch.matmul, a, b), device=dev, repeats=repeats)
        rec = {
            "copy_bytes": 2 * src.numel() * src.element_size(),
            "copy_gb_per_s": 2 * src.numel() * src.element_size() / copy.min_s / 1e9,
            "matmul_n": n,
            "matmul_gflop_s": 2 * n**3 / mm.min_s / 1e9,
            "threads": copy.threads,
        }
        del src, dst, a, b
        if dev.type == "cpu" and csv_path is not None:
            size = os.path.getsize(csv_path)
            parse = measure(lambda: _parse_csv(csv_path), device=dev, repeats=repeats)
            rec["csv_bytes"] = size
            rec["csv_parse_mb_per_s"] = size / parse.min_s / 1e6
        out[str(dev)] = rec
    return out


def _parse_csv(path: Any) -> Any:
    """PyArrow's parse of a CSV with a header into float32 columns: the work under any CSV read here."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(path, encoding="utf-8") as f:
        names = f.readline().strip().split(",")
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.float32())))


def annotate(records: list[dict[str, Any]], limits: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Add to each stage record that carries ``bytes`` (and ``flops``) its achieved rates and
    their shares of the limits measured on its device (the CSV parse rate is the host's); a
    stage with no limit in :data:`STAGE_LIMIT` (the host-device copies) gets rates only.

    Adds ``gb_per_s`` and ``share_of_copy``; ``gflop_s`` and ``share_of_matmul`` where the
    stage counts FLOPs; for reading CSV, ``text_mb_per_s`` and ``share_of_csv_parse``."""
    host = limits.get("cpu", {})
    for r in records:
        r["limit"] = STAGE_LIMIT.get(r["stage"])
        lim = limits.get(r["device"], {}) if r["limit"] else {}
        t = r["median_s"]
        if r.get("bytes"):
            r["gb_per_s"] = r["bytes"] / t / 1e9
            if lim.get("copy_gb_per_s"):
                r["share_of_copy"] = r["gb_per_s"] / lim["copy_gb_per_s"]
        if r.get("flops"):
            r["gflop_s"] = r["flops"] / t / 1e9
            if lim.get("matmul_gflop_s"):
                r["share_of_matmul"] = r["gflop_s"] / lim["matmul_gflop_s"]
        if r.get("text_bytes"):
            r["text_mb_per_s"] = r["text_bytes"] / t / 1e6
            if r["limit"] and host.get("csv_parse_mb_per_s"):
                r["share_of_csv_parse"] = r["text_mb_per_s"] / host["csv_parse_mb_per_s"]
    return records
