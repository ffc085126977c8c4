"""A command's time to its first line of output and to its end, for two source trees side by side.

Runs ``python -m devicepipe ARGS`` with each tree's ``src`` first on ``PYTHONPATH``, alternating
the trees (the order rotated every round) so that both see the same machine load, and records
per run: seconds to the first line on stdout, to the process's exit, and to the end of its
output (the last process holding the pipe gone: a local cluster's fork server included).

    python benchmarks/process_life.py --before /tmp/before/src --after src [--repeats 9] [--data DIR]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results_io import machine, parser, table, write_results  # beside this script

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def one_run(src: Path, args: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve()), "OMP_WAIT_POLICY": "PASSIVE"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicepipe", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    first_s = time.perf_counter() - started
    exited_s = None
    rest = proc.stdout.read()  # to the end of the output: every holder of the pipe gone
    eof_s = time.perf_counter() - started
    code = proc.wait()
    exited_s = time.perf_counter() - started
    if code != 0 or not first:
        raise RuntimeError(f"{args} in {src}: exit {code}: {proc.stderr.read().decode()[-500:]}{rest[-200:]!r}")
    return {"first_line_s": first_s, "output_end_s": eof_s, "exit_s": max(exited_s, eof_s)}


def summarise(raw: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per case and per time (to the first line, to the end): each side's median and their difference."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for case, sides in raw.items():
        for what in ("first_line_s", "exit_s"):
            b = statistics.median(x[what] for x in sides["before"])
            a = statistics.median(x[what] for x in sides["after"])
            out.setdefault(case, {})[what] = {
                "before": b,
                "after": a,
                "after_minus_before": a - b,
                "before_minus_after": b - a,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument("--before", type=Path, required=True)
    options.add_argument("--after", type=Path, required=True)
    options.add_argument("--repeats", type=int, default=9)
    options.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = options.parse_args(argv)
    trees = {"before": args.before, "after": args.after}
    raw: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = {
            "--version": lambda out: ["--version"],
            "beats MIT-BIH 100": lambda out: ["beats", str(args.data / "mitdb/100"), "--out", str(out), "--no-figures"],
            "beats 25 CPSC 2019 records, 2 workers": lambda out: [
                "beats",
                str(args.data / "cpsc2019"),
                "--out",
                str(out),
                "--no-figures",
                "--workers",
                "2",
            ],
        }
        for r in range(args.repeats):
            for case, make in cases.items():
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    out = work / f"{name}-{r}-{len(raw)}"
                    row = one_run(trees[name], make(out))
                    raw.setdefault(case, {}).setdefault(name, []).append(row)
    medians = summarise(raw)
    rows = [
        [case, what, f"{m['before']:.3f}", f"{m['after']:.3f}", f"{m['after_minus_before']:+.3f}"]
        for case, whats in medians.items()
        for what, m in whats.items()
    ]
    md = [
        "# A command's time to its first line and to its end",
        "",
        f"{args.repeats} alternated runs per side (order rotated each round), medians, seconds; "
        "`OMP_WAIT_POLICY=PASSIVE`. before: the tree that ended the process with os._exit and stopped the "
        "fork server through multiprocessing's internals; after: an ordinary end.",
        "",
        *table(["command", "time to", "before", "after", "after - before"], rows),
        "",
    ]
    commits = {
        name: subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        for name, src in trees.items()
    }
    md.insert(
        3,
        f"Machine: {machine()['cpu']}, {machine()['usable_cores']} cores; date {machine()['date']}; "
        f"commits: before {commits['before']}, after {commits['after']}.",
    )
    md.insert(4, "")
    result = {"machine": machine(), "commits": commits, "repeats": args.repeats, "medians": medians, "raw": raw}
    write_results(Path(args.out), "process_life", result, "\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
