"""Every beat labelled with its AAMI EC57 class, from rhythm and morphology, at any burden of ectopy.

A cardiologist reads rhythm first (is the beat early? is the pause after it compensatory?) and
shape second (is the QRS wide, unlike the others, without its P wave?). So does
:func:`ecg_classes`:

1. **Shape families.** Each beat's QRS (0.1 s either side of its R peak) is compared with the
   others by correlation (which no offset under the beat changes, so the baseline need not be
   removed first); families are gathered greedily (the beat most like the most others, and
   every beat within :data:`FAMILY_CORR` of its family's median shape), largest first.
2. **The rhythm around each beat.** The interval before it and after it, against the local
   rhythm (:mod:`devicepipe.ecg.rhythm`): the median, over ``RHYTHM_BEATS`` beats either side,
   of the mean of each beat's two intervals. That mean is one sinus interval around an isolated ectopic beat, and in
   bigeminy too, so the reference holds whether ectopy is rare or every other beat.
3. **The normal family** is not simply the largest: at 50 % ventricular beats it may not be.
   It is the largest family that is not early as a family (its median beat comes at least
   :data:`ON_TIME` of the local interval after the one before) nor wide (:data:`WIDE` times the
   narrowest such family's QRS or more: a run of ventricular tachycardia is on time, being
   regular, and may hold most beats), else the largest.
4. **Each beat:** *V* where its QRS is wide against the normal family's (the span holding the
   middle 80 % of its slope energy, :data:`WIDE` times the normal one's or more), or unlike the
   normal shape (under :data:`SAME_SHAPE`) and early, or where it belongs to a ventricular
   family (a family other than the normal one most of whose beats are V by those tests: a
   cardiologist reads the family's shape, not one beat's noisy width or timing; on MIT-BIH 106
   and its several ventricular families this lifted V sensitivity from 0.887 to 0.977, on 200
   from 0.857 to 0.903, +P 1.0 and 0.992); *F* where its shape lies between the
   normal one and a ventricular family's, in neither family, while on time (a member of a
   ventricular family has that family's shape: read as F, 21 of 200's on-time ventricular beats
   were lost so); *S* where its shape is normal but it
   comes early (under :data:`EARLY`, or under :data:`ON_TIME` with a P wave unlike the normal
   one, beyond the spread of the on-time normal beats' own outside irregular rhythm), outside
   stretches of irregularly irregular rhythm, but *V* where such an early beat's QRS
   is more like a ventricular family's shape than the normal one's (an early beat is one or the
   other, and the recording's own ventricular beats say which: on MIT-BIH 200 V sensitivity
   went from 0.925 to 0.935, on noisy 105 from 0.073 to 0.171, on 106 from 0.977 to 0.981, and
   no other shared record changed), and *V* too where, in a recording with a ventricular family,
   such a beat's QRS, less its linear trend (the T wave before an early beat lies under its window
   as a slope), is less like the normal shape than all but :data:`ALTERED_QUANTILE` of the on-time
   normal beats are, with no P wave unlike the normal one before it (a supraventricular beat goes
   down the normal pathway, so its QRS is the normal one within the normal beats' own spread, or,
   conducted aberrantly, follows an ectopic P wave: gross V sensitivity over MIT-BIH 105, 106 and
   200 went from 0.929 to 0.974, +P 0.984 to 0.983, 105's from 0.171 to 1.000; CPSC 2021's S as
   before, Se 0.500, +P 0.733); *Q* where its shape is not the
   normal one and the signal around it is too poor to tell why (in a 10-s stretch where even
   the upper quartile of the beats is unlike both the normal shape and the shape of the beat
   next to them: noise and motion make shapes that are neither, where a run of tachycardia is
   beat after beat of one shape), or where it is of another shape and under :data:`SMALL` of the normal
   QRS's height (noise or a T wave taken for a beat), or where a beat called V has a shape no
   family shares and the signal outside its QRS is rougher
   (:func:`~devicepipe.ecg.beat_shapes.roughness`) than all but the roughest 5 % of the normal
   beats (muscle noise or motion made it: on MIT-BIH 105 this took the share of its other beats
   called V from 1.3 % to 0.6 %; it costs the lone ectopic beats of noisy stretches, 4 of 200's
   826 and both of CPSC 2021 patient 84's 2); *Q* too where the QRS is cut flat at the signal's
   limit (:data:`CLIPPED`: its shape lost), or a pacemaker's stimulus comes before the beat
   (:data:`PACED`, as EC57 classes paced beats: a spike of a third of the QRS's height or more, at
   the lead most of the spikes before beats share, before five beats or more); else *N*. (Where
   the beats' spectrum shows mains interference, 50 or 60 Hz, the shapes are measured without it:
   :func:`~devicepipe.ecg.beat_shapes.mains_hz`.)
5. **Irregularly irregular rhythm** (suspected atrial fibrillation, :mod:`devicepipe.ecg.rhythm`):
   where under ``IRREGULAR`` of the normal-to-normal intervals around a beat (``IRREGULAR_BEATS``
   either side) lie within ``TYPICAL_SHARE`` of their median (gaps under
   ``IRREGULAR_GAP`` beats between two such stretches, or between one and the recording's
   end, closed; where poor signal leaves too few such intervals to read, the rhythm is taken to
   go on as on both sides; a stretch's ends are drawn back by half a window, but not at the
   recording's ends, so AF over a whole record is persistent AF). Sinus rhythm keeps most of
   its intervals near the typical one, early beats or not (ventricular ones are left out of the
   intervals); fibrillation has no typical interval. A stretch is fibrillation only where its
   beats have lost the normal P wave (``without_p_waves``): frequent atrial premature beats make
   the intervals irregular too, but the beats between them keep theirs. Early beats in
   fibrillation are not called S (every beat of it comes at a random time).

6. **Several leads** (:func:`devicepipe.ecg.several_leads.ecg_classes_leads`): each lead is
   classed alone, and a beat the first lead calls V stays V only where more than half of the
   leads on which it can be read (not Q, or too small for a QRS there) call it V too. A wide or
   odd shape that the other leads do not show is noise on one lead (motion, electrode contact)
   or a T wave, not a ventricular beat, which changes the QRS on every lead; such a beat takes
   the class of the first lead that reads it otherwise (no beat where none reads it as one). A
   beat the first lead cannot read (Q: its signal flat, off or noisy there) takes the class of
   the first lead that can. The other classes are the first lead's. The rhythm is the beats'
   times, so a beat is in irregular rhythm where any lead reads it so (another lead's poor
   signal or aberrant beats may leave it too few normal-to-normal intervals to read).

What each beat's shape is (its windows, width, height, roughness and shape family) is measured
in :mod:`devicepipe.ecg.beat_shapes`. Every step is a tensor operation on the signal's device but
the greedy families (a few passes over the beats) and the rules (a few comparisons per beat),
which run on the host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.core.units import check_peaks, hertz
from devicepipe.ecg.beat_shapes import (
    FAMILY_CORR,
    BeatMeasures,
    Clipping,
    after_previous,
    clipped_beats,
    either_neighbour,
    lead_gain,
    lead_sign,
    mains_hz,
    measure_beats,
    paced_beats,
    shape_families,
    unit_rows,
    wide_windows,
)
from devicepipe.ecg.rhythm import beat_rhythm, irregular_rhythm, without_p_waves

__all__ = [
    "BEAT_CLASSES",
    "CLIPPED",
    "PACED",
    "TOO_SMALL",
    "BeatClasses",
    "ecg_classes",
    "ecg_classes_chunked",
]

#: The AAMI EC57 classes, in words.
BEAT_CLASSES = {
    "N": "normal (and bundle-branch block)",
    "S": "supraventricular ectopic",
    "V": "ventricular ectopic",
    "F": "fusion of ventricular and normal",
    "Q": "unclassifiable",
}
#: The fewest beats whose shapes can say which is normal.
MIN_BEATS = 8
#: Beats whose shapes the families are gathered from (evenly spaced; every one of fewer).
SAMPLE_BEATS = 4000
#: Signal read either side of a part of a recording read in parts, s (a beat's windows reach
#: well under this).
MARGIN_S = 1.0
#: A family smaller than this share of the beats is not a candidate for the normal one.
NORMAL_MIN_SHARE = 0.05
#: Correlation with the normal shape at and above which a QRS has the normal shape.
SAME_SHAPE = 0.85
#: A QRS this many times the normal one's width is wide.
WIDE = 1.35
#: A beat whose interval before is under this share of the local one is early.
EARLY = 0.82
#: ... and one under this share is early enough to be S when its P wave is unlike the normal one.
ON_TIME = 0.90
#: P wave correlation with the normal one under which a P wave is unlike it.
OTHER_P = 0.5
#: An early beat's QRS is altered where it is less like the normal shape than all but this share
#: of the on-time normal beats are (the spread that noise, breathing and position give the normal
#: QRS: each recording's own).
ALTERED_QUANTILE = 0.05
#: A beat of another shape under a third of the normal QRS's height is too small to be one.
SMALL = 1 / 3
#: A beat whose roughness outside the QRS (:func:`~devicepipe.ecg.beat_shapes.roughness`) exceeds
#: this quantile of the normal beats' is in noise.
NOISY_QUANTILE = 0.95
#: The reason given to such a beat.
TOO_SMALL = "too small for a QRS"
#: The reason given to a beat whose QRS is cut flat at the signal's limit.
CLIPPED = "QRS cut flat at the signal's limit"
#: The reason given to a beat a pacemaker's stimulus comes before (Q in AAMI EC57, as paced).
PACED = "paced: a pacemaker's stimulus before it"
#: Stretch (s) whose beats' likeness to the normal shape says whether its signal is good.
STRETCH_S = 10.0
#: A stretch where a quarter of the beats or more are not this much like the normal shape (the
#: upper quartile of their correlation is lower) has poor signal: a clean one's is about 0.98,
#: even in bigeminy, where half its beats have another shape.
CLEAN_CORR = 0.90


@dataclass(frozen=True)
class BeatClasses:
    """Each beat's class and why, and what the classes were read from.

    Attributes
    ----------
    labels : ``(n,)`` str array: ``"N"``, ``"S"``, ``"V"``, ``"F"`` or ``"Q"`` per R peak.
    reasons : ``(n,)`` array of str (object dtype: each beat refers to one of a few shared
        strings, 8 bytes a beat, where a fixed-width str array took 148): a few words each
        (``"premature"``, ``"wide QRS"``, ...).
    family : ``(n,)`` int array: each beat's shape family (0 the largest; -1 none).
    normal_family : the family read as normal.
    prematurity : ``(n,)``: the interval before each beat over the local interval.
    width_ms : ``(n,)``: each QRS's width (the middle 80 % of its slope energy), ms.
    irregular : ``(n,)`` bool: the beat lies in a stretch of irregularly irregular rhythm.
    """

    labels: np.ndarray
    reasons: np.ndarray
    family: np.ndarray
    normal_family: int
    prematurity: np.ndarray
    width_ms: np.ndarray
    irregular: np.ndarray

    @property
    def not_beats(self) -> np.ndarray:
        """``(n,)`` bool: detections too small to be a QRS (classed Q), which end no interval."""
        return self.reasons == TOO_SMALL

    def counts(self) -> dict[str, int]:
        """Beats per class, every class named."""
        return {name: int((self.labels == name).sum()) for name in BEAT_CLASSES}


@dataclass(frozen=True)
class _Fit:
    """The shape families and the normal one, from a sample of the beats."""

    templates: torch.Tensor  # (k, w) unit rows, the families in the order gathered
    normal: int  # -1: none
    normal_width: float
    p_template: torch.Tensor | None
    normal_height: float = float("nan")
    rough_limit: float = float("inf")  # the normal beats' roughness at its upper NOISY_QUANTILE
    levelled: torch.Tensor | None = None  # (w,) the normal family's levelled QRS, a unit row


def _sample(n: int) -> np.ndarray:
    """The beats whose shapes make the families: every one, or :data:`SAMPLE_BEATS` evenly spaced."""
    return np.arange(n) if n <= SAMPLE_BEATS else np.unique(np.linspace(0, n - 1, SAMPLE_BEATS).round().astype(int))


def _fit(sample: BeatMeasures, early: np.ndarray) -> _Fit:
    """Families of the sampled beats, and the normal one (see the module's steps 1 and 3);
    ``early``: the sampled beats' prematurity."""
    family, templates = shape_families(sample.shapes)
    m = family.size
    sizes = np.bincount(family[family >= 0], minlength=len(templates))
    candidates = [k for k in np.argsort(-sizes, kind="stable") if sizes[k] >= NORMAL_MIN_SHARE * m]
    on_time = [k for k in candidates if np.median(early[family == k]) >= ON_TIME]
    if on_time:  # a wide family is not the normal one beside a narrower one (a run of tachycardia)
        widths = {k: float(np.median(sample.width[family == k])) for k in on_time}
        on_time = [k for k in on_time if widths[k] < WIDE * min(widths.values())]
    normal = int(on_time[0] if on_time else candidates[0] if candidates else np.argmax(sizes) if sizes.size else -1)
    if normal < 0:
        return _Fit(templates, -1, float(np.median(sample.width)), None, float(np.median(sample.height)))
    members = torch.as_tensor(family == normal, device=sample.p_waves.device)
    p_template = unit_rows(sample.p_waves[members].median(0).values[None])[0]
    levelled = unit_rows(sample.levelled[members].median(0).values[None])[0]
    own = family == normal
    return _Fit(
        templates, normal, float(np.median(sample.width[own])), p_template, float(np.median(sample.height[own])),
        float(np.quantile(sample.rough[own], NOISY_QUANTILE)), levelled,
    )  # fmt: skip


def _against(measured: BeatMeasures, fit: _Fit) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each beat's family (the first whose shape it is within :data:`FAMILY_CORR` of; -1 none),
    its correlation with every family's shape ``(m, k)``, its P wave's with the normal one's, and
    its levelled QRS's with the normal one's (:func:`~devicepipe.ecg.beat_shapes.levelled`; 0 where
    there is no normal family)."""
    m = measured.shapes.shape[0]
    if not len(fit.templates):
        return np.full(m, -1), np.zeros((m, 0)), np.zeros(m), np.zeros(m)
    corr = (measured.shapes[:, None, :] * fit.templates[None]).sum(2).cpu().numpy()  # (row by row, exact)
    inside = corr > FAMILY_CORR
    family = np.where(inside.any(1), inside.argmax(1), -1)
    corr_p = np.zeros(m) if fit.p_template is None else (measured.p_waves * fit.p_template).sum(1).cpu().numpy()
    corr_l = np.zeros(m) if fit.levelled is None else (measured.levelled * fit.levelled).sum(1).cpu().numpy()
    return family, corr, corr_p, corr_l


def _texts(n: int, text: str) -> np.ndarray:
    """``(n,)`` object array whose every element is the one string ``text``: 8 bytes an element
    (``np.full(n, text, dtype=object)`` makes a string of each: 63 bytes a beat for "normal")."""
    out = np.empty(n, dtype=object)
    out.fill(text)
    return out


def _too_few(n: int) -> BeatClasses:
    empty = np.zeros(n)
    return BeatClasses(np.full(n, "Q"), _texts(n, "too few beats"), np.full(n, -1), -1, empty, empty,
                       np.zeros(n, bool))  # fmt: skip


def ecg_classes(signal: torch.Tensor, peaks: torch.Tensor, sampling_rate: float) -> BeatClasses:
    """The AAMI class of every beat of one lead (see the module's account of how).

    Parameters
    ----------
    signal : ``(time,)`` ECG, any unit, on any device.
    peaks : ``(n,)`` int R-peak sample indices, increasing.
    sampling_rate : Hz.

    Returns
    -------
    :class:`BeatClasses`, its arrays of shape ``(n,)`` on the host. Fewer than :data:`MIN_BEATS`
    beats: all Q ("too few beats": no shape is typical of so few).
    """
    if signal.ndim != 1:
        raise DevicepipeError(
            f"ecg_classes(): signal must have shape (time,), got {tuple(signal.shape)}",
            fix="pass one lead.",
            param="signal",
        )
    check_peaks(peaks, "ecg_classes()", int(signal.shape[0]))
    n, fs = int(peaks.numel()), hertz(sampling_rate, "ecg_classes()")
    on_host = peaks.detach().cpu().numpy()
    if n < MIN_BEATS:
        return _too_few(n)
    x = signal.float()
    at = peaks.to(x.device).long()
    t = on_host.astype(np.float64) / fs
    rr_prev, early = beat_rhythm(t)
    pick = _sample(n)
    chosen = torch.as_tensor(pick, device=x.device)
    sampled = wide_windows(x, at[chosen], fs)
    sign, gain, mains = lead_sign(sampled), lead_gain(sampled), mains_hz(sampled, fs)
    fit = _fit(measure_beats(sampled, sign, fs, gain, mains), early[pick])
    every = measure_beats(wide_windows(x, at, fs), sign, fs, gain, mains)
    family, corr, corr_p, corr_l = _against(every, fit)
    after_prev, _ = after_previous(every.shapes)
    clipped = clipped_beats(every.extremes, fs)
    return _decide(fit, t, rr_prev, early, every.width, every.height, family, corr, corr_p, corr_l, every.rough,
                   after_prev, clipped, paced_beats(every.paced, fs))  # fmt: skip


def ecg_classes_chunked(
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    peaks: np.ndarray | Any,
    sampling_rate: float,
    *,
    chunk: int,
) -> BeatClasses:
    """:func:`ecg_classes` of a recording too long for memory, read ``chunk`` samples at a time
    (with :data:`MARGIN_S` either side): the same classes as in one piece. ``read(start, stop)``
    gives samples ``[start, stop)`` of the lead; ``peaks``: ``(n,)`` R-peak samples, an array or
    any sequence read in slices (peaks held on disk). Two passes over the recording: the sampled
    beats' windows, then every beat's measures (a few numbers each)."""
    n, fs = len(peaks), hertz(sampling_rate, "ecg_classes_chunked()")
    if n < MIN_BEATS:
        return _too_few(n)
    all_peaks = np.asarray(peaks[:], dtype=np.int64)  # (8 bytes a beat: a week's are 6 MB)
    check_peaks(all_peaks, "ecg_classes_chunked()", arrays=True)
    t = all_peaks.astype(np.float64) / fs
    rr_prev, early = beat_rhythm(t)
    pick = _sample(n)
    picked = np.zeros(n, bool)
    picked[pick] = True

    def parts() -> Iterator[tuple[slice, torch.Tensor, torch.Tensor]]:
        return _parts(read, n_samples, all_peaks, max(1, chunk), fs)

    wide = []
    for beats, x, at in parts():  # the sampled beats' wide windows
        wide.append(wide_windows(x, at[torch.as_tensor(picked[beats], device=x.device)], fs))
    sampled = torch.cat(wide)
    sign, gain, mains = lead_sign(sampled), lead_gain(sampled), mains_hz(sampled, fs)
    fit = _fit(measure_beats(sampled, sign, fs, gain, mains), early[pick])
    family, corr_p, corr_l = np.full(n, -1), np.zeros(n), np.zeros(n)
    width, height, rough = np.zeros(n), np.zeros(n), np.zeros(n)
    corr, after_prev, last = np.zeros((n, len(fit.templates))), np.zeros(n), None
    clipping, ahead = Clipping(fs), np.full(n, -1)
    for beats, x, at in parts():  # every beat's measures against the families
        measured = measure_beats(wide_windows(x, at, fs), sign, fs, gain, mains)
        family[beats], corr[beats], corr_p[beats], corr_l[beats] = _against(measured, fit)
        width[beats], height[beats], rough[beats] = measured.width, measured.height, measured.rough
        clipping.add(beats.start, measured.extremes)
        ahead[beats] = measured.paced
        after_prev[beats], last = after_previous(measured.shapes, last)
    return _decide(fit, t, rr_prev, early, width, height, family, corr, corr_p, corr_l, rough, after_prev,
                   clipping.clipped(n), paced_beats(ahead, fs))  # fmt: skip


def _parts(
    read: Callable[[int, int], torch.Tensor], n_samples: int, peaks: np.ndarray, chunk: int, fs: float
) -> Iterator[tuple[slice, torch.Tensor, torch.Tensor]]:
    """A recording read ``chunk`` samples at a time with :data:`MARGIN_S` either side: each part's
    beats (a slice of ``peaks``), its signal and their peaks as indices into it."""
    margin = round(MARGIN_S * fs)
    for start in range(0, n_samples, chunk):
        first, last = np.searchsorted(peaks, [start, start + chunk])
        if first == last:
            continue
        a, b = max(0, start - margin), min(n_samples, start + chunk + margin)
        x = read(a, b).float()
        yield slice(first, last), x, torch.as_tensor(peaks[first:last] - a, device=x.device)


def _ventricular(
    fit: _Fit,
    unlike: np.ndarray,
    width: np.ndarray,
    early: np.ndarray,
    family: np.ndarray,
    corr: np.ndarray,
    corr_n: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The V and F calls of the module's step 4 (every other beat N so far): each beat's label
    (``<U1``) and reason (object, shared strings), and whether its QRS is more like a ventricular
    family's shape than the normal one's (False where there is no ventricular family), ``(n,)`` each;
    and whether the recording has a ventricular family."""
    n, normal = early.size, fit.normal
    wide = unlike & (width >= WIDE * fit.normal_width)  # (a normal shape is never wide: noise widens it)
    ventricular_shape = wide | (unlike & (early < ON_TIME))
    labels = np.full(n, "N", dtype="<U1")
    reasons = _texts(n, "normal")
    labels[ventricular_shape] = "V"
    reasons[ventricular_shape & wide] = "wide QRS"
    reasons[ventricular_shape & ~wide] = "other shape, premature"
    # a ventricular family's shape: where most of its beats were called V
    v_families = [k for k in range(corr.shape[1]) if k != normal and np.mean(labels[family == k] == "V") > 0.5]
    more_like_v = np.zeros(n, bool)
    if v_families and normal >= 0:
        # the family's other members have its shape whatever one beat's width or timing says
        member = np.isin(family, v_families)
        joins = member & (labels == "N")
        labels[joins], reasons[joins] = "V", "ventricular family's shape"
        corr_v = corr[:, v_families].max(1)
        more_like_v = corr_v > corr_n
        # fusion: a shape between the two, of neither family
        fusion = unlike & ~ventricular_shape & ~member & (corr_v > 0.5) & (corr_n > 0.5)
        fusion &= early >= ON_TIME
        labels[fusion], reasons[fusion] = "F", "between normal and ventricular shapes"
    return labels, reasons, more_like_v, bool(v_families) and normal >= 0


def _decide(
    fit: _Fit,
    t: np.ndarray,
    rr_prev: np.ndarray,
    early: np.ndarray,
    width: np.ndarray,
    height: np.ndarray,
    family: np.ndarray,
    corr: np.ndarray,
    corr_p: np.ndarray,
    corr_l: np.ndarray,
    rough: np.ndarray,
    after_prev: np.ndarray,
    clipped: np.ndarray,
    paced: np.ndarray | None = None,
) -> BeatClasses:
    """The classes from each beat's measures (see the module's steps 4 and 5), host arrays ``(n,)``
    (``corr_l``: each levelled QRS's correlation with the normal one,
    :func:`~devicepipe.ecg.beat_shapes.levelled`; ``after_prev``: each QRS's correlation with the
    one before, :func:`~devicepipe.ecg.beat_shapes.after_previous`; ``clipped``: each QRS cut flat
    at the recording's limit, :func:`~devicepipe.ecg.beat_shapes.clipped_beats`; ``paced``: a
    pacemaker's stimulus before each beat, :func:`~devicepipe.ecg.beat_shapes.stimulus_before`)."""
    n = t.size
    normal = fit.normal
    corr_n = corr[:, normal] if normal >= 0 else np.zeros(n)
    unlike = corr_n < SAME_SHAPE
    labels, reasons, more_like_v, has_ventricular = _ventricular(fit, unlike, width, early, family, corr, corr_n)
    nn = np.zeros(n, bool)
    normal_shaped = labels == "N"
    nn[1:] = normal_shaped[1:] & normal_shaped[:-1]
    # a stretch's signal is good where its beats have the normal shape, or the shape of the beat
    # next to them (a run of tachycardia: beat after beat of one shape; noise makes shapes that
    # are neither)
    poor = unlike & _poor_stretch(t, np.maximum(corr_n, either_neighbour(after_prev)))
    near_irregular, irregular = irregular_rhythm(rr_prev, nn, poor)
    near_irregular, irregular = without_p_waves(near_irregular, irregular, corr_p, normal_shaped & (early >= ON_TIME))
    on_time_normal = normal_shaped & (early >= ON_TIME)
    p_unlike = _p_wave_unlike(corr_p, on_time_normal & ~near_irregular)
    altered = _altered_qrs(corr_l, on_time_normal) if has_ventricular else np.zeros(n, bool)
    _early_beats(labels, reasons, early, normal_shaped & ~near_irregular, p_unlike, more_like_v, altered)
    reasons[(labels == "N") & irregular] = "irregular rhythm"

    labels[poor], reasons[poor] = "Q", "poor signal"
    # a shape no other beat shares, in noise rougher than all but the noisiest normal beats: noise
    # or motion made it (an ectopic family repeats its shape; a lone ectopic beat in clean signal
    # stays V)
    lone = (labels == "V") & (family < 0) & (rough > fit.rough_limit)
    labels[lone], reasons[lone] = "Q", "a lone shape in noise"
    # a "beat" a fraction of the normal QRS's height and of another shape: a bump of noise or a T
    # wave that detection took in (ventricular beats are larger than normal ones, not smaller)
    small = unlike & (height < SMALL * fit.normal_height)
    labels[small], reasons[small] = "Q", TOO_SMALL
    # a QRS cut flat at the signal's limit has lost its shape: neither its form nor its width can
    # be read (on another lead that did not saturate it can: see several_leads.agree_on_ventricular)
    labels[clipped], reasons[clipped] = "Q", CLIPPED
    # a paced beat is Q in AAMI EC57: the stimulus, not the heart's own pathway, started it
    if paced is not None:
        labels[paced], reasons[paced] = "Q", PACED
    return BeatClasses(labels, reasons, family, normal, early, width, irregular)


def _p_wave_unlike(corr_p: np.ndarray, sinus_normal: np.ndarray) -> np.ndarray:
    """Whether each beat's P wave is unlike the normal one: its correlation ``corr_p`` under
    :data:`OTHER_P` and beyond what noise does to the normal beats' own in sinus rhythm
    (``sinus_normal``: their 2 % quantile; normal-shaped beats in fibrillation have no P wave to
    compare: with them, the floor fell so low in a record with episodes of it that no P wave was
    unlike)."""
    noise_floor = np.quantile(corr_p[sinus_normal], 0.02) if sinus_normal.any() else OTHER_P
    return corr_p < min(OTHER_P, noise_floor)


def _altered_qrs(corr_l: np.ndarray, on_time_normal: np.ndarray) -> np.ndarray:
    """Whether each beat's levelled QRS (its correlation ``corr_l`` with the normal one's) is less
    like the normal shape than all but :data:`ALTERED_QUANTILE` of the on-time normal beats' are."""
    if not on_time_normal.any():
        return np.zeros(corr_l.size, bool)
    return corr_l < np.quantile(corr_l[on_time_normal], ALTERED_QUANTILE)


def _early_beats(
    labels: np.ndarray,
    reasons: np.ndarray,
    early: np.ndarray,
    candidates: np.ndarray,
    p_unlike: np.ndarray,
    more_like_v: np.ndarray,
    altered: np.ndarray,
) -> None:
    """Label, in place, the early beats among the normal-shaped ``candidates`` (outside irregular
    rhythm): S where early (under :data:`EARLY`, or under :data:`ON_TIME` with a P wave unlike the
    normal one), but V where their QRS is more like the recording's own ventricular beats, or
    ``altered`` (:func:`_altered_qrs`, only where the recording has a ventricular family) with no P
    wave unlike the normal one. All ``(n,)`` host arrays."""
    premature = candidates & ((early < EARLY) | ((early < ON_TIME) & p_unlike))
    labels[premature] = "S"
    reasons[premature & (early < EARLY)] = "premature"
    reasons[premature & (early >= EARLY)] = "premature, P wave unlike"
    # an early beat is supraventricular or ventricular: one whose QRS, near the normal shape as it
    # is, is more like the recording's own ventricular beats (a ventricular family's shape) is V
    like_v = premature & more_like_v
    labels[like_v], reasons[like_v] = "V", "premature, more like the ventricular beats"
    # a supraventricular beat goes down the normal pathway, so its QRS is the normal one within the
    # normal beats' own spread, or, conducted aberrantly, follows an ectopic P wave: an early beat
    # whose QRS is altered beyond that spread, with no P wave unlike the normal one before it, is V
    altered_v = premature & ~like_v & altered & ~p_unlike
    labels[altered_v], reasons[altered_v] = "V", "premature, QRS altered, no ectopic P wave"


def _poor_stretch(t: np.ndarray, corr_n: np.ndarray) -> np.ndarray:
    """Whether each beat (at ``t`` s) lies in a :data:`STRETCH_S` stretch of poor signal: the
    upper quartile of its beats' ``corr_n`` (the normal shape's correlation with it, or a
    neighbour's) under :data:`CLEAN_CORR`."""
    stretch = np.floor(t / STRETCH_S).astype(np.int64)
    stretch -= stretch.min()
    order = np.lexsort((corr_n, stretch))
    sizes = np.bincount(stretch)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    upper = corr_n[order][np.minimum(starts + (3 * sizes) // 4, starts + sizes - 1)]
    return upper[stretch] < CLEAN_CORR
