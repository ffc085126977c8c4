"""What the signal says of each beat's shape, for the classes (:mod:`devicepipe.ecg.classes`): its
QRS and P-wave windows centred on this lead's own R peak, the QRS less its linear trend, its
width, height and the roughness of the signal around it, the shape families of many beats, and
each QRS's likeness to the one before. Tensor operations on the signal's device but the greedy
families' few passes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from devicepipe.ecg.rhythm import WINDOW_ROWS
from devicepipe.signal.segment import rows_at

__all__ = [
    "CENTRE_S",
    "CLIPPED_S",
    "FAMILY_CORR",
    "MAINS_HZ",
    "MAINS_PEAK",
    "MAX_FAMILIES",
    "P_WINDOW_S",
    "QRS_S",
    "SAFE_HEIGHTS",
    "SLOPE_S",
    "SPIKE_MS",
    "PACED_FEWEST",
    "STIMULUS_HEIGHT",
    "STIMULUS_S",
    "STIMULUS_SPREAD_S",
    "BeatMeasures",
    "Clipping",
    "after_previous",
    "clipped_beats",
    "either_neighbour",
    "lead_gain",
    "lead_sign",
    "mains_hz",
    "levelled",
    "measure_beats",
    "reaches",
    "roughness",
    "shape_families",
    "paced_beats",
    "stimulus_before",
    "slope_width",
    "unit_rows",
    "wide_windows",
    "without_mains",
    "windows",
]

#: QRS window either side of the R peak, s.
QRS_S = 0.10
#: How far a beat's centre may move to this lead's own R peak, s.
CENTRE_S = 0.03
#: The P wave's window before the R peak, s (from, to).
P_WINDOW_S = (0.30, 0.10)
#: Correlation with a family's median shape that joins a beat to it.
FAMILY_CORR = 0.90
#: The most families gathered; the beats left over belong to none.
MAX_FAMILIES = 8
#: Half the span of the central difference that measures a QRS's slope, s.
SLOPE_S = 0.008


def windows(x: torch.Tensor, centres: torch.Tensor, before: int, after: int) -> torch.Tensor:
    """``(n, before + after)`` samples of ``x`` from ``centre - before`` (edges repeated)."""
    return rows_at(x, centres.to(torch.int64) - before, before + after, fill=None)


def unit_rows(rows: torch.Tensor) -> torch.Tensor:
    """Rows less their mean, scaled to unit length (a flat row stays zero)."""
    rows = rows - rows.mean(1, keepdim=True)
    return rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-12)


def shape_families(shapes: torch.Tensor) -> tuple[np.ndarray, torch.Tensor]:
    """Greedy shape families of ``shapes`` ``(n, w)`` (unit rows): each beat's family (-1 none)
    and the families' median shapes ``(k, w)`` (unit rows)."""
    n = shapes.shape[0]
    family = torch.full((n,), -1, dtype=torch.long, device=shapes.device)
    templates = []
    probe = shapes[torch.linspace(0, n - 1, min(n, 400), device=shapes.device).long()]
    for k in range(MAX_FAMILIES):
        free = family < 0
        if int(free.sum()) < max(3, int(0.002 * n)):
            break
        # the beat most like the most others among those left: its family's first shape
        left = shapes[free]
        typical = (left @ probe.T > FAMILY_CORR).sum(1)
        template = left[int(typical.argmax())]
        for _ in range(2):  # the median of its members, twice
            members = free & (shapes @ template > FAMILY_CORR)
            if int(members.sum()) == 0:
                break
            template = unit_rows(shapes[members].median(0).values[None])[0]
        members = free & (shapes @ template > FAMILY_CORR)
        if int(members.sum()) == 0:
            break
        family[members] = k
        templates.append(template)
    return family.cpu().numpy(), torch.stack(templates) if templates else shapes[:0]


def slope_width(qrs: torch.Tensor, fs: float) -> torch.Tensor:
    """Each row's width in ms: the span holding the middle 80 % of its squared slope (a central
    difference over :data:`SLOPE_S` either side, which passes the QRS and not the noise)."""
    lag = max(1, round(SLOPE_S * fs))
    energy = (qrs[:, 2 * lag :] - qrs[:, : -2 * lag]) ** 2
    cum = energy.cumsum(1) / energy.sum(1, keepdim=True).clamp_min(1e-20)
    lo = (cum < 0.1).sum(1)
    hi = (cum < 0.9).sum(1)
    return (hi - lo + 1).float() * (1000.0 / fs)


@dataclass(frozen=True)
class BeatMeasures:
    """What the signal says of some beats: unit QRS shapes ``(m, w)``, the same less their linear
    trend (:func:`levelled`) and P waves ``(m, wp)`` (tensors), QRS widths ``(m,)`` in ms and
    heights ``(m,)`` (peak to trough, the signal's unit), roughness ``(m,)``, ``extremes``
    ``(m, 4)``: each QRS window's highest value, how many of its samples hold it, its lowest,
    and how many hold that (:func:`clipped_beats`), and ``paced`` ``(m,)``, how many samples
    before the beat's R peak a pacemaker's stimulus stands (-1: none; :func:`stimulus_before`)
    (host)."""

    shapes: torch.Tensor
    levelled: torch.Tensor
    p_waves: torch.Tensor
    width: np.ndarray
    height: np.ndarray
    rough: np.ndarray
    extremes: np.ndarray
    paced: np.ndarray


def reaches(fs: float) -> tuple[int, int, int, int, int]:
    """Samples: how far a centre may move, the QRS half-window, the P window's start and end
    before the R peak, and how far before and after a peak a beat's wide window reaches."""
    reach, half = max(1, round(CENTRE_S * fs)), max(2, round(QRS_S * fs))
    p_from, p_to = (round(s * fs) for s in P_WINDOW_S)
    return reach, half, p_from, p_to, max(p_from, half) + reach


def wide_windows(x: torch.Tensor, peaks: torch.Tensor, fs: float) -> torch.Tensor:
    """Each beat's wide window of the signal ``x`` (peaks as indices into ``x``)."""
    wide = reaches(fs)[4]
    return windows(x, peaks, wide, wide + 1)


def measure_beats(
    wide: torch.Tensor, sign: float, fs: float, gain: float = 1.0, mains: float | None = None
) -> BeatMeasures:
    """The QRS and P windows of beats from their wide windows (:func:`wide_windows`), each centred first
    on this lead's own extremum within :data:`CENTRE_S` in the direction ``sign`` of its typical
    QRS (beats found on another lead, or on all of them, are a few ms off this one's); the windows
    taken times ``gain`` first (:func:`lead_gain`: heights are compared with each other only), and
    less the lead's ``mains`` interference (Hz, :func:`mains_hz`; None: none), but for where the
    signal reaches its limit (``extremes``), read as recorded."""
    if gain != 1.0:
        wide = wide * gain
    raw = wide
    if mains is not None:
        wide = without_mains(wide, mains, fs)
    reach, half, p_from, p_to, w = reaches(fs)
    near = wide[:, w - reach : w + reach + 1]
    centre = w + (sign * near).argmax(1) - reach  # column of each beat's own R peak
    qrs = wide.gather(1, centre[:, None] + torch.arange(-half, half, device=wide.device))
    p_waves = wide.gather(1, centre[:, None] + torch.arange(-p_from, -p_to, device=wide.device))
    recorded = qrs if mains is None else raw.gather(1, centre[:, None] + torch.arange(-half, half, device=wide.device))
    top, bottom = recorded.max(1, keepdim=True).values, recorded.min(1, keepdim=True).values
    extremes = torch.cat(
        [top, (recorded == top).sum(1, keepdim=True), bottom, (recorded == bottom).sum(1, keepdim=True)], 1
    )
    height = (qrs.max(1).values - qrs.min(1).values).cpu().numpy()
    width = slope_width(qrs, fs).cpu().numpy()
    paced = stimulus_before(wide, w, torch.as_tensor(height, device=wide.device), fs)
    return BeatMeasures(unit_rows(qrs), levelled(qrs), unit_rows(p_waves), width, height, roughness(wide, half, fs),
                        extremes.double().cpu().numpy(), paced)  # fmt: skip


#: The mains frequencies (Hz) whose interference the shapes are measured without.
MAINS_HZ = (50.0, 60.0)
#: Mains interference is present where the beats' mean spectrum peaks at one of :data:`MAINS_HZ`
#: this many times over its neighbours 4-8 Hz away: on the shared records the most is 3.9 (MIT-BIH's
#: own 60 Hz residue, which the classes read through), a simulated 0.05 mV of mains makes 51.
MAINS_PEAK = 10.0


def mains_hz(wide: torch.Tensor, fs: float) -> float | None:
    """The mains frequency whose interference stands out in the beats' wide windows ``(m, w)``
    (:data:`MAINS_PEAK`), or None."""
    if not wide.shape[0]:
        return None
    rows = wide.double() - wide.double().mean(1, keepdim=True)
    power = (torch.fft.rfft(rows, dim=1).abs() ** 2).mean(0).cpu().numpy()
    f = np.fft.rfftfreq(wide.shape[1], 1.0 / fs)
    best, most = None, MAINS_PEAK
    for f0 in MAINS_HZ:
        side = (np.abs(f - f0) >= 4) & (np.abs(f - f0) <= 8)
        if f0 + 8 >= fs / 2 or not side.any():
            continue
        ratio = power[int(np.argmin(np.abs(f - f0)))] / max(float(power[side].mean()), 1e-300)
        if ratio >= most:
            best, most = f0, ratio
    return best


def without_mains(wide: torch.Tensor, f0: float, fs: float) -> torch.Tensor:
    """The wide windows ``(m, w)`` less their least-squares sinusoids at ``f0`` Hz and its harmonics
    under the Nyquist frequency: the mains interference, each window's own phase and amplitude."""
    t = torch.arange(wide.shape[1], dtype=torch.float64) / fs
    waves = []
    for k in range(1, int((fs / 2 - 1) // f0) + 1):
        waves += [torch.cos(2 * math.pi * k * f0 * t), torch.sin(2 * math.pi * k * f0 * t)]
    basis = torch.stack(waves, 1)  # (w, 2 harmonics)
    project = torch.linalg.pinv(basis).T  # (w, 2 harmonics): each window's coefficients
    basis, project = basis.to(wide), project.to(wide)
    return wide - (wide @ project) @ basis.T


#: Where a pacemaker's stimulus is looked for before a beat's R peak, s (from, to): a ventricular
#: stimulus comes just before the QRS it starts, an atrial one before the P wave.
STIMULUS_S = (0.25, 0.01)
#: A deflection narrower than this at half its height is a spike (the detector's ``spike_ms``).
SPIKE_MS = 10.0
#: A stimulus is at least this share of its beat's QRS height (a blip of noise is less; on the
#: shared records, a quarter let one beat of CPSC 2021 data_84_1, in motion, through).
STIMULUS_HEIGHT = 0.3


def stimulus_before(wide: torch.Tensor, centre: int, height: torch.Tensor, fs: float) -> np.ndarray:
    """How many samples before each beat's R peak a spike stands, within :data:`STIMULUS_S`
    (``wide``: the beats' wide windows ``(m, w)``, their R peaks at column ``centre``; ``height``:
    each QRS's height): the tallest deflection of at least :data:`STIMULUS_HEIGHT` of the QRS's height that is back
    within :data:`SPIKE_MS` on both sides by more than twice as much as the signal moves just
    outside it (a pacemaker's stimulus; the QRS's own upstroke, the P wave and noise are wider or
    smaller); -1 where there is none, ``(m,)`` int (see :func:`paced_beats`)."""
    first, last = (round(s * fs) for s in STIMULUS_S)
    d = max(1, math.ceil(SPIKE_MS * fs / 1000) - 1) + 1  # (a spike is back within d samples)
    lo, hi = centre - first - 2 * d, centre - last + 2 * d
    out = torch.full((wide.shape[0],), -1, dtype=torch.int64, device=wide.device)
    if lo < 0 or hi > wide.shape[1] or hi - lo <= 4 * d:
        return out.cpu().numpy()
    for a in range(0, wide.shape[0], WINDOW_ROWS):  # (temporaries of a block of rows: a few MiB)
        seg = wide[a : a + WINDOW_ROWS, lo:hi]
        mid, before, after = seg[:, 2 * d : -2 * d], seg[:, d : -3 * d], seg[:, 3 * d : seg.shape[1] - d]
        rise = torch.maximum(mid - torch.maximum(before, after), torch.minimum(before, after) - mid)
        flank = torch.maximum((before - seg[:, : -4 * d]).abs(), (after - seg[:, 4 * d :]).abs())
        spike = (rise > 2 * flank) & (rise >= STIMULUS_HEIGHT * height[a : a + WINDOW_ROWS, None])
        tallest = torch.where(spike, rise, torch.zeros_like(rise)).argmax(1)
        ahead = centre - (lo + 2 * d + tallest)
        out[a : a + len(seg)] = torch.where(spike.any(1), ahead, torch.full_like(ahead, -1))
    return out.cpu().numpy()


#: A pacemaker paces at its own fixed delay before the QRS it starts: the stimuli of paced beats
#: lie within this (s) of their median lead, and they are at least :data:`PACED_FEWEST` and most
#: of the spikes found before beats (a blip of noise before a beat comes at any time, so a tenth
#: of such blips would lie that near any one lead).
STIMULUS_SPREAD_S = 0.012
PACED_FEWEST = 5


def paced_beats(ahead: np.ndarray, fs: float) -> np.ndarray:
    """Which beats are paced, from each one's stimulus lead (:func:`stimulus_before`, samples;
    -1 none): those whose stimulus lies within :data:`STIMULUS_SPREAD_S` of the median lead, where
    they are at least :data:`PACED_FEWEST` and more than half of the beats with a spike before
    them; else none. ``(n,)`` bool."""
    found = ahead >= 0
    none = np.zeros(ahead.shape, bool)
    if int(found.sum()) < PACED_FEWEST:
        return none
    usual = np.median(ahead[found])
    paced = found & (np.abs(ahead - usual) <= STIMULUS_SPREAD_S * fs)
    return paced if int(paced.sum()) >= max(PACED_FEWEST, int(found.sum()) // 2 + 1) else none


#: A QRS that holds its window's highest (or lowest) value for this long (s) or more, where that
#: value is the highest (lowest) of every beat's, is cut flat there: the signal at its limit, an
#: amplifier or converter that saturated. A QRS's own peak holds its value a sample or two (in
#: every shared recording, at most 2 samples at a record's extreme value).
CLIPPED_S = 0.012


class Clipping:
    """Which beats' QRS is cut flat at the recording's limit (:data:`CLIPPED_S`), from the beats'
    ``extremes`` (:class:`BeatMeasures`) given a part at a time (:meth:`add`): only the few that
    hold their window's extreme that long are kept, with the recording's highest and lowest values
    so far, so a recording of millions of beats holds no more than those."""

    def __init__(self, fs: float) -> None:
        self.least = max(3, round(CLIPPED_S * fs))
        self.top, self.bottom = -np.inf, np.inf
        self.held: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # beat, its top, its bottom (NaN: short)

    def add(self, first: int, extremes: np.ndarray) -> Clipping:
        """The ``extremes`` ``(m, 4)`` of beats ``first`` to ``first + m - 1``."""
        if not extremes.shape[0]:
            return self
        top, at_top, bottom, at_bottom = extremes.T
        self.top, self.bottom = max(self.top, float(top.max())), min(self.bottom, float(bottom.min()))
        long_top, long_bottom = at_top >= self.least, at_bottom >= self.least
        some = np.flatnonzero(long_top | long_bottom)
        if some.size:
            self.held.append(
                (first + some, np.where(long_top, top, np.nan)[some], np.where(long_bottom, bottom, np.nan)[some])
            )
        return self

    def clipped(self, n: int) -> np.ndarray:
        """``(n,)`` bool: each beat's QRS cut flat at the recording's highest or lowest value."""
        out = np.zeros(n, bool)
        for beats, top, bottom in self.held:
            out[beats] = (top == self.top) | (bottom == self.bottom)
        return out


def clipped_beats(extremes: np.ndarray, fs: float) -> np.ndarray:
    """:class:`Clipping` of every beat's ``extremes`` at once, ``(n,)`` bool."""
    return Clipping(fs).add(0, extremes).clipped(extremes.shape[0])


def levelled(qrs: torch.Tensor) -> torch.Tensor:
    """QRS windows ``(m, w)`` less their least-squares line, as unit rows. The T wave of the beat
    before lies under an early beat's window as a slope, which moves its correlation with the
    normal shape as much as the normal beats' own spread does in clean signal; a QRS of another
    form is not a slope."""
    x = torch.linspace(-1.0, 1.0, qrs.shape[1], dtype=qrs.dtype, device=qrs.device)
    centred = qrs - qrs.mean(1, keepdim=True)
    return unit_rows(centred - ((centred @ x) / (x @ x))[:, None] * x[None])


def roughness(wide: torch.Tensor, half: int, fs: float) -> np.ndarray:
    """Each beat's high-frequency activity outside its QRS: the RMS of the signal's second
    difference (over :data:`SLOPE_S`) in its wide window, the QRS (``half`` samples either side of
    the window's centre) left out, ``(m,)``. P and T waves and an ectopic beat's broad T wave are
    smooth; muscle noise and motion are not."""
    lag = max(1, round(SLOPE_S * fs))
    out = torch.empty(wide.shape[0], dtype=wide.dtype, device=wide.device)
    for a in range(0, wide.shape[0], WINDOW_ROWS):  # (temporaries of a block of rows: a few MiB)
        w = wide[a : a + WINDOW_ROWS]
        d2 = (w[:, 2 * lag :] - 2 * w[:, lag:-lag] + w[:, : -2 * lag]).square_()
        centre = wide.shape[1] // 2 - lag  # (column j of d2 is centred on column j + lag of the window)
        lo, hi = max(0, centre - half), min(d2.shape[1], centre + half + 1)
        total = d2[:, :lo].sum(1) + d2[:, hi:].sum(1)
        out[a : a + len(w)] = (total / max(1, lo + d2.shape[1] - hi)).sqrt()
    return out.cpu().numpy()


def lead_sign(wide: torch.Tensor) -> float:
    """The direction of a lead's typical QRS: of its beats' R peaks against their windows' medians
    (wide windows, :func:`wide_windows`)."""
    middle = wide.shape[1] // 2
    return 1.0 if float((wide[:, middle] - wide.median(1).values).median()) >= 0 else -1.0


#: QRS heights (in any unit) within which every sum of squares the measures take stays inside
#: float32's range with room to spare; a lead whose typical QRS is outside it (a recording in
#: volts times 1e-30, or scaled by 1e20) is measured scaled to a height of 1.
SAFE_HEIGHTS = (1e-6, 1e6)


def lead_gain(wide: torch.Tensor) -> float:
    """1.0, or where the median height of the beats' wide windows (:func:`wide_windows`, ``(m, w)``)
    lies outside :data:`SAFE_HEIGHTS`, the factor that makes it 1 (1.0 for a flat lead)."""
    height = float((wide.double().amax(1) - wide.double().amin(1)).median()) if wide.shape[0] else 0.0
    low, high = SAFE_HEIGHTS
    return 1.0 / height if height > 0 and not low <= height <= high else 1.0


def after_previous(shapes: torch.Tensor, before: torch.Tensor | None = None) -> tuple[np.ndarray, torch.Tensor]:
    """Each QRS's correlation with the one before (unit rows ``shapes``, ``(m, w)``; ``before``:
    the ``(1, w)`` shape of the beat before the first, None: there is none, -1), ``(m,)`` on the
    host; and the last shape, ``(1, w)``, for the part after these beats."""
    previous = torch.cat([before if before is not None else torch.zeros_like(shapes[:1]), shapes[:-1]])
    corr = (shapes * previous).sum(1).cpu().numpy().astype(np.float64)
    if before is None and corr.size:
        corr[0] = -1.0
    return corr, shapes[-1:]


def either_neighbour(after_prev: np.ndarray) -> np.ndarray:
    """Each beat's QRS correlation with the more alike of the beats either side, from each one's
    with the beat before (:func:`after_previous`), ``(n,)``."""
    after_next = np.concatenate([after_prev[1:], [-1.0]])
    return np.maximum(after_prev, after_next)
