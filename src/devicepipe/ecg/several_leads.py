"""The classes of a recording of several leads: each lead classed alone (:mod:`devicepipe.ecg.classes`),
then agreed beat by beat (step 6 of that module's account): V only where most leads that read the
beat call it V, a beat one lead cannot read classed on another, irregular rhythm where any lead
reads it, paced where any lead shows the stimulus."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from devicepipe.ecg.classes import CLIPPED, PACED, TOO_SMALL, BeatClasses, ecg_classes

__all__ = ["agree_on_ventricular", "ecg_classes_leads"]


def ecg_classes_leads(signals: torch.Tensor, peaks: torch.Tensor, sampling_rate: float) -> BeatClasses:
    """The AAMI class of every beat of a recording of several leads (step 6 of the module's account).

    ``signals``: ``(leads, time)`` (or ``(time,)``: one lead, :func:`ecg_classes`); ``peaks``:
    ``(n,)`` the R peaks found on them. Returns :class:`BeatClasses` as the first lead has them
    but for the V calls the leads do not agree on (:func:`agree_on_ventricular`).
    """
    if signals.ndim == 1 or signals.shape[0] == 1:
        return ecg_classes(signals.reshape(-1), peaks, sampling_rate)
    return agree_on_ventricular([ecg_classes(lead, peaks, sampling_rate) for lead in signals])


def agree_on_ventricular(per_lead: list[BeatClasses]) -> BeatClasses:
    """One lead's classes from the classes of the same beats on several leads: the first lead's,
    but V only where more than half of the leads that read the beat (class not Q, or Q as
    :data:`TOO_SMALL`: a lead that reads no QRS there) call it V too. A beat the first lead calls V
    and fewer leads do takes the class of the first lead that reads it as N, S or F, its reason
    saying on how many leads it was V; where no lead does, it is no beat (Q, :data:`TOO_SMALL`: a
    T wave or a bump one lead shows tall and wide; on CPSC 2021's data_92_4 two T waves carrying
    blocked atrial P waves were called V so). A beat the first lead cannot
    read (Q) takes the class of the first lead that reads it as N, S or F (a lead off or in noise
    for a while: the beats there are classed on the others). (No beat becomes V that the first
    lead, the one the beats are cut from, does not call V: where it cannot read a beat, the other
    leads of a noisy recording are seldom better, and on the CPSC 2021 records every such call was
    false; but where the first lead's QRS is cut flat at its limit, :data:`CLIPPED`, which is no
    noise, the V of the first lead that reads it stands.) A beat any lead shows a pacemaker's
    stimulus before is paced (Q, :data:`PACED`)."""
    first = per_lead[0]
    labels = np.stack([c.labels for c in per_lead])  # (leads, n)
    # a lead where the detection is too small for a QRS reads it too: as no beat (a T wave or a
    # bump of noise that one lead shows tall and wide; a ventricular beat changes every lead's QRS)
    no_beat = np.stack([c.not_beats for c in per_lead])
    votes = (labels == "V").sum(0)
    readable = ((labels != "Q") | no_beat).sum(0)
    alone = (first.labels == "V") & (2 * votes <= readable)
    # the rhythm is the beats' times: a lead reads it where its beats have the normal shape, and a
    # stretch that any lead reads as irregularly irregular is (another lead's poor signal or
    # aberrant beats leave it too few intervals to read)
    if len(per_lead) > 1:
        first = replace(first, irregular=np.logical_or.reduce([c.irregular for c in per_lead]))
    # a beat the first lead cannot read (Q: its signal flat, noisy or off there) takes the class of
    # the first lead that reads it
    # (a QRS the first lead shows cut flat at its limit is no noise there: another lead's V stands)
    reads = np.isin(labels, ("N", "S", "F")) | ((labels == "V") & (first.reasons == CLIPPED)[None])
    unread = (first.labels == "Q") & (first.reasons != PACED) & reads.any(0)
    paced_elsewhere = any((c.reasons == PACED).any() for c in per_lead[1:])
    if not (
        alone.any() or unread.any() or paced_elsewhere or _early_in_fibrillation(first.labels, first.irregular).any()
    ):
        return first
    other = np.argmax(reads, axis=0)  # the first lead reading it otherwise
    out_labels, out_reasons = first.labels.copy(), first.reasons.astype(object)
    for i in np.flatnonzero(alone):
        if not np.isin(labels[:, i], ("N", "S", "F")).any():  # no lead reads a beat but the first
            out_labels[i], out_reasons[i] = "Q", TOO_SMALL
            continue
        lead = per_lead[other[i]]
        out_labels[i] = lead.labels[i]
        out_reasons[i] = f"{lead.reasons[i]} (V on {votes[i]} of {readable[i]} leads)"
    for i in np.flatnonzero(unread):
        out_labels[i] = labels[other[i], i]
        out_reasons[i] = f"{per_lead[other[i]].reasons[i]} (lead {other[i] + 1}: the first cannot read it)"
    early = _early_in_fibrillation(out_labels, first.irregular)  # (a lead's S inside what another read as AF)
    out_labels[early], out_reasons[early] = "N", "irregular rhythm"
    paced = np.logical_or.reduce([c.reasons == PACED for c in per_lead])  # (a stimulus any lead shows)
    out_labels[paced], out_reasons[paced] = "Q", PACED
    return replace(first, labels=out_labels, reasons=out_reasons)


def _early_in_fibrillation(labels: np.ndarray, irregular: np.ndarray) -> np.ndarray:
    """Beats called S inside irregularly irregular rhythm: in fibrillation every beat comes at a
    random time, so none is early (``(n,)`` bool)."""
    return (labels == "S") & irregular
