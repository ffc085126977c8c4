"""A load series' windows in words: each flagged window low or high against like windows
(:func:`~devicepipe.signal.windows.departures`), and the flagged windows against a reference's listed
days (``series --reference``, ``score --reference`` with a series model)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from devicepipe.core.errors import DevicepipeError
from devicepipe.io import ReferenceDays, read_reference_days
from devicepipe.signal.windows import Departures, Windows, windows_holding

__all__ = [
    "Listed",
    "departure_words",
    "flagged_entries",
    "listed_windows",
    "reference_days",
    "reference_summary",
]


def reference_days(reference: str | Path | None) -> ReferenceDays | None:
    """The reference's listed days, read before the run starts (a bad file: one line, nothing written)."""
    return None if reference is None else read_reference_days(reference)


def _moment(wins: Windows, dep: Departures, i: int) -> str:
    """When window ``i``'s largest departure is: its time, to the minute."""
    at = wins.starts[i] + np.timedelta64(int(round(dep.step[i] * wins.step_s * 1e9)), "ns")
    return str(at)[:16].replace("T", " ")


def departure_words(wins: Windows, dep: Departures, i: int) -> str:
    """Window ``i``'s departure in words: ``"low: 63 % under like windows at 11:00"`` (the time
    of day in a window of a day or less, else the date and time)."""
    share = dep.share[i]
    size = "" if not np.isfinite(share) else f"{100 * abs(share):.0f} % "
    side = "under" if dep.direction[i] == "low" else "over"
    like = "like windows" if dep.like[i] else "the series' median window"
    moment = _moment(wins, dep, i)
    when = moment[11:] if wins.per_window * wins.step_s <= 86_400 else moment
    return f"{dep.direction[i]}: {size}{side} {like} at {when}"


def flagged_entries(
    wins: Windows, scores: np.ndarray, flagged: np.ndarray, dep: Departures, tail: np.ndarray | None = None
) -> list[dict[str, Any]]:
    """``summary.json``'s flagged windows (``flagged``: positions, highest score first): start,
    score, tail probability (where ``tail`` is given), direction and largest departure."""
    return [
        {
            "start": str(wins.starts[i])[:19],
            "score": float(scores[i]),
            **({} if tail is None else {"tail_probability": float(tail[i])}),
            "direction": str(dep.direction[i]),
            "departure_share": None if not np.isfinite(dep.share[i]) else float(dep.share[i]),
            "departure_at": _moment(wins, dep, int(i)),
        }
        for i in flagged
    ]


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Each window's rank among the scores: 1 for the highest (ties in order of time)."""
    ranks = np.empty(scores.size, dtype=np.int64)
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, scores.size + 1)
    return ranks


@dataclass(frozen=True)
class Listed:
    """The windows that hold a reference's listed times (see :func:`listed_windows`).

    ``windows``: int64 ``(n_listed,)``, positions of the windows, sorted, each once; ``times``,
    ``kinds``: the first listed time in each and its kind; ``outside``: listed times in no
    window; ``rows``: the reference's rows; ``source``: its name."""

    windows: np.ndarray
    times: np.ndarray
    kinds: np.ndarray
    outside: np.ndarray
    rows: int
    source: str


def listed_windows(ref: ReferenceDays, wins: Windows) -> Listed:
    """The windows holding ``ref``'s listed times (a window holding several counts once, with
    the first one's kind); refuses a reference none of whose times is in a window."""
    pos = windows_holding(wins.starts, wins.per_window * wins.step_s, ref.times)
    inside = pos >= 0
    if not inside.any():
        first, last = str(wins.starts[0])[:10], str(wins.starts[-1])[:10]
        raise DevicepipeError(
            f"none of the {ref.times.size} time(s) listed in {ref.source} (from {str(ref.times[0])[:10]}) falls in "
            f"a scored window of the series ({first} to {last})",
            fix="give the reference of this series.",
        )
    held, first_row = np.unique(pos[inside], return_index=True)
    if held.size == wins.starts.size > 1:
        raise DevicepipeError(
            f"{ref.source} lists every one of the series' {held.size:,} windows, so it tells no window from another",
            fix="give the list of anomalous days (a column 'day' and, optionally, 'kind'), not the series itself.",
        )
    times, kinds = ref.times[inside][first_row], ref.kinds[inside][first_row]
    return Listed(held, times, kinds, ref.times[~inside], int(ref.times.size), ref.source)


def reference_summary(
    listed: Listed, wins: Windows, scores: np.ndarray, flags: np.ndarray, dep: Departures
) -> dict[str, Any]:
    """``summary.json``'s ``window_reference``: the windows holding a listed time, their scores,
    ranks, flags and directions; how many were flagged, per kind; the flagged windows not listed.
    ``scores``, ``flags``: shape ``(n_windows,)``."""
    held, kinds = listed.windows, listed.kinds
    ranks = _ranks(scores)
    windows = [
        {
            "start": str(wins.starts[w])[:19],
            "listed": str(t)[:19],
            "kind": str(k),
            "score": float(scores[w]),
            "rank": int(ranks[w]),
            "flagged": bool(flags[w]),
            "direction": str(dep.direction[w]),
        }
        for w, t, k in zip(held, listed.times, kinds, strict=True)
    ]
    found, n_flagged = int(flags[held].sum()), int(flags.sum())
    top = int((ranks[held] <= held.size).sum())  # listed among as many of the highest scores
    by_kind = {}
    for kind in sorted(set(kinds.tolist())):
        mine = held[kinds == kind]
        by_kind[kind] = {
            "listed": int(mine.size),
            "flagged": int(flags[mine].sum()),
            "best_rank": int(ranks[mine].min()),
            "median_rank": float(np.median(ranks[mine])),
        }
    return {
        "source": listed.source,
        "rows": listed.rows,
        "outside": [str(t)[:19] for t in listed.outside],
        "listed_windows": int(held.size),
        "flagged_listed": found,
        "flagged_not_listed": n_flagged - found,
        "sensitivity": found / held.size,
        "ppv": found / n_flagged if n_flagged else None,
        "listed_in_top": top,
        "kinds": by_kind,
        "windows": windows,
    }
