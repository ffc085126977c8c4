"""Where a long recording's chunked run holds its memory: resident size by stage.

    python benchmarks/memory_trace.py

Simulated single-lead recordings of 1 h, 24 h and 7 days at 250 Hz (float32 NPY, as in
``datasets_and_long.py``). Each measurement runs in a fresh process, 2 torch threads, and
samples the process's resident size (``VmRSS``) every 3 ms:

- ``beats --chunk 10min --no-figures`` through the CLI's own entry point, the samples grouped
  by the stage the run is in (``outside`` is between stages: the checks of the peaks, the
  kept beats, releasing memory); at its end, the resident size, how much of it glibc's heap
  holds freed (``mallinfo2``), and the resident size after ``malloc_trim``;
- detection alone (``ecg_peaks_chunked``, 10-minute chunks), with the beat rules applied
  ``SELECT_BLOCK`` candidates at a time (as shipped) and all at once (``SELECT_BLOCK`` set past
  the candidates' count), to show what the parts save.

Results: ``benchmarks/results/memory_trace.{json,md}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@contextlib.contextmanager
def _sampling(peaks: dict[str, float], where: list[str]):
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peaks[where[0]] = max(peaks.get(where[0], 0.0), _rss_mib())
            time.sleep(0.003)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def child_beats(path: str, out: str) -> dict:
    from devicepipe.cli import app
    from devicepipe.core import timing

    where, peaks = ["outside"], {}
    original = timing.StageTimer.stage

    @contextlib.contextmanager
    def stage(self, name, **kw):
        before, where[0] = where[0], name
        with original(self, name, **kw):
            yield
        where[0] = before

    timing.StageTimer.stage = stage
    with _sampling(peaks, where):
        app(["beats", path, "--sampling-rate", "250", "--no-figures", "--out", out, "--device", "cpu",
             "--chunk", "10min"], standalone_mode=False)  # fmt: skip
    found = {k: round(v, 1) for k, v in peaks.items()}
    found["end"] = round(_rss_mib(), 1)
    found["end_heap_free"] = round(_heap_free_mib(), 1)
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)  # what the heap holds freed, handed back
    found["end_after_trim"] = round(_rss_mib(), 1)
    return found


def _heap_free_mib() -> float:
    """Bytes glibc's heap holds freed but not handed back (``mallinfo2().fordblks``), in MiB."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"
        )]  # fmt: skip

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    return libc.mallinfo2().fordblks / 2**20


def child_detect(path: str, block: int) -> dict:
    from devicepipe.ecg import chunked
    from devicepipe.io.chunks import chunk_reader

    chunked.SELECT_BLOCK = block
    read, n, fs = chunk_reader(path, sampling_rate=250)
    where, peaks = ["detect"], {}
    start = _rss_mib()
    with _sampling(peaks, where):
        found = chunked.ecg_peaks_chunked(read, n, fs, chunk=int(600 * fs))
    return {"start_mib": round(start, 1), "peak_mib": round(peaks["detect"], 1), "beats": int(found.numel())}


def _child(*args: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, str(HERE))
    from datasets_and_long import write_long

    from devicepipe.bench.results import source_commit
    from devicepipe.ecg.chunked import SELECT_BLOCK

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for hours in (1.0, 24.0, 168.0):
            path = Path(tmp) / f"ecg_{hours:g}h.npy"
            n = write_long(path, hours)
            stages = _child("beats", str(path), str(Path(tmp) / f"out{hours:g}"))
            parts = _child("detect", str(path), str(SELECT_BLOCK))
            whole = _child("detect", str(path), str(10**9))
            rows.append({"hours": hours, "samples": n, "beats_stages_mib": stages,
                         "detect_in_parts": parts, "detect_all_at_once": whole})  # fmt: skip
            print(rows[-1], flush=True)
    import torch

    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": source_commit(RESULTS.parent.parent),  # "-dirty" where tracked files differ
        "machine": {"platform": platform.platform(), "cores": os.cpu_count(), "torch": torch.__version__},
        "threads": 2,
        "rows": rows,
    }
    (RESULTS / "memory_trace.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Resident memory by stage, `beats --chunk 10min` ({result['date']} UTC, 2 threads)", ""]
    ends = ("end", "end_heap_free", "end_after_trim")
    names = sorted({k for r in rows for k in r["beats_stages_mib"] if k not in ends})
    lines += ["| length | " + " | ".join(names) + " | detection, rules in parts | detection, rules at once "
              "| at the end | of it freed, held by the heap | at the end, after malloc_trim |",
              "|---|" + "---|" * (len(names) + 5)]  # fmt: skip
    for r in rows:
        cells = [f"{r['beats_stages_mib'][k]:.0f}" if k in r["beats_stages_mib"] else "—" for k in names]
        lines.append(
            f"| {r['hours']:g} h | "
            + " | ".join(cells)
            + f" | {r['detect_in_parts']['peak_mib']:.0f} | {r['detect_all_at_once']['peak_mib']:.0f} | "
            + " | ".join(f"{r['beats_stages_mib'][k]:.0f}" for k in ends)
            + " |"
        )
    lines += ["", "Peak resident MiB within each stage (sampled every 3 ms; — where a stage ran under a sample); "
              "at the end of the run, the resident size, the part of glibc's heap that is freed but not handed "
              "back (mallinfo2's fordblks), and the resident size once malloc_trim has handed it back."]  # fmt: skip
    (RESULTS / "memory_trace.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        out = child_beats(*rest) if kind == "beats" else child_detect(rest[0], int(rest[1]))
        print(json.dumps(out))
        raise SystemExit(0)
    raise SystemExit(main())
