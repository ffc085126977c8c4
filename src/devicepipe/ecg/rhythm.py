"""The rhythm around each beat, for the beat classes (:mod:`devicepipe.ecg.classes`): each beat's
interval before it against the local one (its prematurity), and whether it lies in irregularly
irregular rhythm (suspected atrial fibrillation): intervals with no typical one, in beats that have
lost the normal P wave. Host arrays of shape ``(n_beats,)`` throughout; the windows of beats either
side are measured a block of beats at a time, so memory stays flat in the recording's length.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from devicepipe.signal.runs import true_runs

__all__ = [
    "AF_P_SHARE",
    "IRREGULAR",
    "IRREGULAR_BEATS",
    "IRREGULAR_GAP",
    "RHYTHM_BEATS",
    "TYPICAL_SHARE",
    "WINDOW_ROWS",
    "beat_rhythm",
    "irregular_rhythm",
    "local_rhythm",
    "without_p_waves",
]

#: Beats either side whose intervals make the local rhythm (and the irregularity measure).
RHYTHM_BEATS = 8
#: Normal-to-normal intervals either side whose spread says whether a rhythm is irregular: 8,
#: the window of Petrenas et al.'s low-complexity AF detector (Comput Biol Med 65, 2015), short
#: enough for the 10-s paroxysms that CPSC 2021 annotates (20 either side missed every one of
#: patient 92's; 8 finds all three records' and calls no AF on MIT-BIH 100, 105, 106, 200, CPSC
#: 2021's patient 21 or the simulator's sinus rhythm with 1-50 % ectopy).
IRREGULAR_BEATS = 8
#: Gaps of fewer beats than this between two stretches of irregular rhythm are closed.
IRREGULAR_GAP = 8
#: A rhythm is irregularly irregular where fewer than this share of the normal-to-normal
#: intervals around a beat lie within :data:`TYPICAL_SHARE` of their median (sinus rhythm,
#: even with frequent early beats: most; atrial fibrillation, intervals spread about 20 %: a third).
IRREGULAR = 0.55
TYPICAL_SHARE = 0.10
#: A stretch of irregular rhythm is fibrillation where fewer than this share of its beats have a
#: normal P wave (:func:`without_p_waves`): a third of the share sinus rhythm has by definition
#: (three in four). Between frequent atrial premature beats half the beats or more keep theirs
#: (the simulator at 25 %); in CPSC 2021 patient 92's paroxysms the median P-wave correlation is
#: 0.07, 0.05 and -0.33, against 0.73, 0.98 and 0.99 in the same records' sinus rhythm.
AF_P_SHARE = 0.25
#: The fewest on-time normal beats whose P waves make a reference for :func:`without_p_waves`.
MIN_REFERENCE = 8
#: Beats whose rhythm windows (:func:`local_rhythm`, :func:`irregular_rhythm`) are measured at once: the
#: temporary ``(rows, window)`` arrays then take a few MiB whatever the recording's length.
WINDOW_ROWS = 16_384


def beat_rhythm(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each beat's interval before it (s) and that over the local interval (its prematurity)."""
    rr = np.diff(t)
    rr_prev = np.concatenate([[rr[0]], rr])
    rr_next = np.concatenate([rr, [rr[-1]]])
    return rr_prev, rr_prev / local_rhythm(rr_prev, rr_next)


def _by_rows(view: np.ndarray, measure: Callable[[np.ndarray], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """``measure`` of the rows of ``view`` (a beat's window each: a strided view, no copy),
    :data:`WINDOW_ROWS` rows at a time, joined: each row's result depends on that row alone, so
    the answer is that of one call, while the temporary ``(rows, window)`` arrays stay small (all
    rows at once: about 1 GB for a week's 705,530 beats). Each block's results go straight into
    the answer's arrays (joining a list of parts would hold every result twice)."""
    n = view.shape[0]
    out: tuple[np.ndarray, ...] = ()
    for a in range(0, max(1, n), WINDOW_ROWS):
        part = measure(view[a : a + WINDOW_ROWS])
        out = out or tuple(np.empty((n, *c.shape[1:]), dtype=c.dtype) for c in part)
        for whole, c in zip(out, part, strict=True):
            whole[a : a + len(c)] = c
    return out


def local_rhythm(rr_prev: np.ndarray, rr_next: np.ndarray) -> np.ndarray:
    """The local interval at each beat: the median over :data:`RHYTHM_BEATS` beats either side
    of the mean of each beat's two intervals."""
    pad = np.pad((rr_prev + rr_next) / 2, RHYTHM_BEATS, mode="edge")
    view = np.lib.stride_tricks.sliding_window_view(pad, 2 * RHYTHM_BEATS + 1)
    return _by_rows(view, lambda rows: (np.median(rows, axis=1),))[0]


def _irregular_counts(view: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of interval windows (NaN: not an interval between normal-shaped beats): how
    many intervals it holds, and how many of them lie within :data:`TYPICAL_SHARE` of its median
    (where it holds at least :data:`IRREGULAR_BEATS`)."""
    counted = np.sum(~np.isnan(view), axis=1)
    enough = counted >= IRREGULAR_BEATS
    with np.errstate(all="ignore"):
        median = np.nanmedian(np.where(enough[:, None], view, 1.0), axis=1)
        typical = np.nansum(np.abs(view - median[:, None]) <= TYPICAL_SHARE * median[:, None], axis=1)
    return counted.astype(np.int32), typical.astype(np.int32)  # (counts of a window's few intervals)


def without_p_waves(
    near: np.ndarray, drawn: np.ndarray, corr_p: np.ndarray, on_time: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The stretches of irregular rhythm (``near``: as found; ``drawn``: their ends drawn back) kept
    where their beats have no normal P wave: fibrillation has none, while frequent atrial premature
    beats leave the beats between them their sinus P wave. A beat has a normal P wave where its
    P wave's correlation with the normal one (``corr_p``) reaches the lower quartile of the on-time
    normal-shaped beats' outside every stretch (``on_time``): three in four sinus beats do. A
    stretch is kept where fewer than :data:`AF_P_SHARE` of its beats do; all are kept where the
    recording has no such sinus beats to compare with (fibrillation throughout)."""
    reference = corr_p[on_time & ~near]
    if reference.size < MIN_REFERENCE:
        return near, drawn
    limit = np.quantile(reference, 0.25)
    near, drawn = near.copy(), drawn.copy()
    for a, b in true_runs(near):
        if np.mean(corr_p[a:b] >= limit) >= AF_P_SHARE:  # P waves as in sinus rhythm: ectopy, not fibrillation
            near[a:b] = False
            drawn[a:b] = False
    return near, drawn


def irregular_rhythm(rr_prev: np.ndarray, nn: np.ndarray, poor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each beat lies in irregularly irregular rhythm (see :mod:`devicepipe.ecg.classes`, step 5; ``nn``:
    the interval before each beat joins two normal-shaped beats): as found (where no beat is
    called S), and with each stretch's ends drawn back to where the rhythm changes."""
    pad = np.full(nn.size + 2 * IRREGULAR_BEATS, np.nan)  # NaN but the intervals between normal beats
    np.copyto(pad[IRREGULAR_BEATS : IRREGULAR_BEATS + nn.size], rr_prev, where=nn)
    view = np.lib.stride_tricks.sliding_window_view(pad, 2 * IRREGULAR_BEATS + 1)
    counted, typical = _by_rows(view, _irregular_counts)
    enough = counted >= IRREGULAR_BEATS
    irregular = enough & (typical < IRREGULAR * np.maximum(counted, 1))
    # where too few intervals join normal-shaped beats to read the rhythm because the signal is
    # poor (``poor``: most of the stretch's beats), the rhythm is taken to go on as it was on both
    # sides: irregular between two irregular stretches, or between one and the recording's end
    # (where ectopic beats leave too few, as in bigeminy, the rhythm is not read as irregular)
    for a, b in true_runs(~enough):
        left = irregular[a - 1] if a > 0 else None
        right = irregular[b] if b < irregular.size else None
        if left is not False and right is not False and (left or right) and 2 * poor[a:b].sum() > b - a:
            irregular[a:b] = True
    runs = true_runs(irregular)
    for (_, end), (start, _) in zip(runs[:-1], runs[1:], strict=True):  # (a gap between two stretches)
        if start - end < IRREGULAR_GAP:
            irregular[end:start] = True
    if runs:  # so too between a stretch and the recording's end: too few beats to read as regular
        if 0 < runs[0][0] < IRREGULAR_GAP:
            irregular[: runs[0][0]] = True
        if 0 < irregular.size - runs[-1][1] < IRREGULAR_GAP:
            irregular[runs[-1][1] :] = True
    # a window half in fibrillation already reads as irregular: a stretch found reaches about half a
    # window past each end of the true one, so each end is drawn back by that much
    trim, drawn = IRREGULAR_BEATS // 2, irregular.copy()
    for start, end in true_runs(irregular):  # (a recording's ends are no change of rhythm)
        if start > 0:
            drawn[start : min(end, start + trim)] = False
        if end < irregular.size:
            drawn[max(start, end - trim) : end] = False
    return irregular, drawn
