"""Why a large CPU stage sometimes takes ten times its usual time here: memory the host backs again.

    python benchmarks/fresh_memory.py [--processes 4] [--pretouch-gib 8]       # about 3 minutes

This machine is a virtual machine whose balloon device reports the guest's free pages to the
host (virtio-balloon's free page reporting, read from sysfs): the host takes back the memory of
pages the guest has freed, and the next time the guest uses such a page, the host must back it
again before the write goes on. A stage that writes a new 80 MB tensor, as min-max scaling of
20,000,000 float32 samples does, then pays for each page the host backs anew.

Each fresh process (``THP_MEM_ALLOC_ENABLE=1`` and ``OMP_WAIT_POLICY=PASSIVE``, as the command
sets them) times ``MinMaxScaler().fit_transform`` of 20,000,000 samples 12 times, at 1 or 2
threads, either straight away or after writing and freeing ``--pretouch-gib`` GiB (so that the
pages it then gets are ones the host has just backed), timing that writing too. The settings are
alternated, ``--processes`` of each. Results: ``benchmarks/results/fresh_memory.{json,md}``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from results_io import machine, parser, write_table_page

CALLS = 12
SAMPLES = 20_000_000

_CHILD = """
import json, os, sys, time
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ["THP_MEM_ALLOC_ENABLE"] = "1"
import torch
from devicepipe.signal.scale import MinMaxScaler
threads, gib, calls, samples = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
pretouch_s = None
if gib:
    started = time.perf_counter()
    blocks = [torch.ones(int(gib * 2**30) // 4 // 8) for _ in range(8)]  # written, then freed
    del blocks
    pretouch_s = time.perf_counter() - started
x = torch.randn(samples, generator=torch.Generator().manual_seed(0))
times = []
for _ in range(calls):
    started = time.perf_counter()
    y = MinMaxScaler().fit_transform(x)
    times.append(time.perf_counter() - started)
    del y
print(json.dumps({"pretouch_s": pretouch_s, "calls_s": times}))
"""


def free_page_reporting() -> bool | None:
    """Whether a virtio balloon device here offers free page reporting (feature bit 5); None without one."""
    for dev in Path("/sys/bus/virtio/devices").glob("*"):
        try:
            if int((dev / "device").read_text(), 16) == 5:  # virtio-balloon
                return (dev / "features").read_text().strip()[5:6] == "1"
        except (OSError, ValueError):
            continue
    return None


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--processes", type=int, default=4)
    options.add_argument("--pretouch-gib", type=float, default=8.0)
    args = options.parse_args()
    settings = [(t, g) for g in (0.0, args.pretouch_gib) for t in (1, 2)]
    names = [f"{t} thread{'s' if t > 1 else ''}, pretouch {g:g} GiB" for t, g in settings]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for p in range(args.processes):
        for i in range(len(settings)):  # the order rotated for each process
            (t, g), name = settings[(p + i) % len(settings)], names[(p + i) % len(settings)]
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, str(t), str(g), str(CALLS), str(SAMPLES)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            runs[name].append(json.loads(out.stdout))
    summary = {}
    for name, rs in runs.items():
        calls = [c for r in rs for c in r["calls_s"]]
        typical = statistics.median(calls)
        summary[name] = {
            "median_ms": 1e3 * typical,
            "fastest_ms": 1e3 * min(calls),
            "slowest_ms": 1e3 * max(calls),
            "calls_over_3x_fastest": sum(c > 3 * min(calls) for c in calls),
            "calls": len(calls),
            "pretouch_s": [r["pretouch_s"] for r in rs] if rs[0]["pretouch_s"] is not None else None,
        }
    result = {
        **machine(),
        "free_page_reporting": free_page_reporting(),
        "samples": SAMPLES,
        "calls_per_process": CALLS,
        "processes": args.processes,
        "pretouch_gib": args.pretouch_gib,
        "summary": summary,
        "runs": runs,
    }
    rows = [
        [name, f"{s['median_ms']:.1f}", f"{s['fastest_ms']:.1f}", f"{s['slowest_ms']:.1f}",
         f"{s['calls_over_3x_fastest']} of {s['calls']}",
         ", ".join(f"{v:.2f}" for v in s["pretouch_s"]) if s["pretouch_s"] else "—"]
        for name, s in summary.items()
    ]  # fmt: skip
    write_table_page(
        args.out, "fresh_memory", result, "Min-max scaling of 20,000,000 samples, call by call, in fresh processes",
        ["setting", "median (ms)", "fastest (ms)", "slowest (ms)", "calls over 3x the fastest",
         f"writing {args.pretouch_gib:g} GiB first (s, each process)"], rows,
        note=f"Free page reporting by the balloon device: {result['free_page_reporting']}. {args.processes} "
        f"processes per setting, alternated, {CALLS} calls each; huge pages on, OMP_WAIT_POLICY=PASSIVE.",
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
