"""Benchmark result files: read one back, and compare two."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicepipe.core.errors import DevicepipeError

if TYPE_CHECKING:
    pass


def source_commit(where: str | Path | None = None) -> str | None:
    """The git commit of the source tree ``where`` (default: this package's checkout), short, with
    ``-dirty`` when tracked files differ from it; None outside a git checkout (an installed
    wheel) or without git. What a results file records, so that its figures name the code they
    measured.

    A copy of a checkout without its ``.git`` (a container image, a remote machine the tree was
    sent to) names the commit it was copied from in ``DEVICEPIPE_SOURCE_COMMIT``; it is used
    only where git cannot say."""
    import os
    import subprocess

    copied = os.environ.get("DEVICEPIPE_SOURCE_COMMIT", "").strip() or None
    root = Path(where) if where is not None else Path(__file__).resolve().parents[3]
    if where is None and not (root / "pyproject.toml").is_file():
        return None  # an installed package: not a checkout of its source
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        )
        if head.returncode != 0 or not head.stdout.strip():
            return copied
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:  # no git on this machine
        return copied
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")


def _flatten(result: dict[str, Any]) -> dict[str, float]:
    """Comparable medians keyed by section/name/device."""
    out: dict[str, float] = {}
    for r in result.get("stages", []):
        out[f"stage {r['stage']} on {r['device']}"] = r["median_s"]
    for r in result.get("baselines", []):
        if "median_s" in r:
            out[f"notebook {r['baseline']}"] = r["median_s"]
    for r in result.get("peers", []):
        if "median_s" in r:
            out[f"peer {r['peer']}"] = r["median_s"]
    for r in result.get("ddp", []):
        out[f"ddp epoch, {r['processes']} x {r['threads_per_process']} threads on {r['device']}"] = r[
            "epoch_seconds_median"
        ]
    for sec, recs in (result.get("micro") or {}).items():
        for r in recs:
            if sec == "matmul":
                out[f"matmul {r['n']} on {r['device']}"] = r["median_s"]
            elif sec == "cnn_step":
                out[f"cnn step on {r['device']}"] = r["median_s"]
            elif sec == "ensemble":
                out[f"ensemble vmap on {r['device']}"] = r["vmap"]["median_s"]
                out[f"ensemble loop on {r['device']}"] = r["loop"]["median_s"]
    return out


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Entries measured in both results: A's and B's medians and the ratio A / B (> 1: B is faster)."""
    fa, fb = _flatten(a), _flatten(b)
    return [{"name": k, "a_s": fa[k], "b_s": fb[k], "ratio": fa[k] / fb[k]} for k in fa if k in fb and fb[k] > 0]


def load_result(path: str | Path) -> dict[str, Any]:

    p = Path(path)
    if not p.exists():
        raise DevicepipeError(f"benchmark result not found: {p}.")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DevicepipeError(f"{p} is not a benchmark JSON file ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(data, dict) or "devices" not in data:
        raise DevicepipeError(f"{p} is not a devicepipe bench result (no 'devices' entry).")
    return data
