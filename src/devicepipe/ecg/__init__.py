"""ECG heartbeats: find R peaks, cut beats into a matrix, score detections against a reference.

One verb per step, as in NeuroKit2: :func:`ecg_peaks` (``method=`` dispatches through
``ECG_PEAK_METHODS``), :func:`ecg_segment`, :func:`evaluate_beats`. Everything runs on the
input's device; every width is given in seconds and scaled by the sampling rate.

The default method, ``"ricker"``:

1. a Ricker wavelet of width ``sigma_s`` (a band-pass centred near ``sqrt(2) / (2 pi sigma_s)``,
   about 15 Hz: QRS energy passes, baseline wander and most of the P and T waves do not), made
   exactly zero-sum so that no offset in the signal reaches the response;
2. its magnitude, so either polarity of QRS works;
3. candidates: the largest value within a refractory period either side;
4. an adaptive threshold, from the filtered signal's envelope in half-second blocks: a
   fraction of the weakest 2-second maximum over ``level_s`` seconds (so one artefact does
   not raise it), never below a fraction of the recording's typical QRS level nor a multiple
   of the local noise floor, the mean response of the quietest block nearby (so flat and
   noise-only stretches give no beats, and a tall ectopic beat does not hide its neighbours);
5. Pan and Tompkins' T-wave rule: a candidate within 0.36 s of the previous one, at under
   half the smaller of its height and the local beat level, is dropped;
6. polarity, where a T wave may lie: most QRS complexes of one lead show the filter one
   polarity, and a T wave often the other. A candidate of the recording's minority polarity
   within 0.36 s of the candidate before it, not standing ``polarity_ratio`` (1.5) times above
   its typical beat level, is not a beat on its own: it waits for step 7. Later than that it is
   a beat (ventricular ectopic beats often point the other way: MIT-BIH 200's, a third of its
   beats, in bigeminy, where the search-back cannot see them missing); a spike narrower than
   ``spike_ms`` (10 ms) at half its height, of either sign, is no candidate at all (a
   pacemaker's stimulus or a glitch: a QRS's main deflection lasts 20 ms or more); where such
   a spike stood over the lowest threshold a beat passes, it may have taken a beat's place as
   the candidate nearby (a paced ECG whose stimuli are taller than its QRS lost every beat so):
   its samples are taken out and the recording detected again (at most ``SPIKE_PASSES`` times);
7. Pan and Tompkins' search-back: where two beats lie more than ``searchback_rr`` (1.66) times
   the usual interval apart (the median of the neighbouring intervals), the highest candidate
   between them above ``searchback_ratio`` (half) of the threshold, and above the recording's
   floors, is a beat, at least 0.36 s after the first and a refractory period before the
   second; repeated while a gap gains a beat;
8. each beat refined to the extremum of the signal itself, with the polarity the filter saw.

``"seed"`` is the recipe of the zero-copy ECG notebook, kept as it was (30-tap Ricker over
``[-3, 3]``, causal convolution, window-180 non-maximum suppression at 250 Hz, no threshold),
with its sizes scaled from 250 Hz to the recording's rate.

Where each step lives: the registry of methods and :func:`ecg_peaks` in :mod:`.peaks`; the
methods in :mod:`.ricker` (the R-peak kernel), :mod:`.fuse` (every lead at once) and
:mod:`.seed`; ``"ricker"`` compiled with Numba for rows of up to 262,144 samples on the CPU in
:mod:`.compiled` (the same peaks; a short call costs what its samples do, not a thousand tensor
operators' fixed cost) and its loops in :mod:`.compiled_loops`; detection a chunk at a time in
:mod:`.chunked`; cutting beats in :mod:`.segment`; signal quality in :mod:`.quality`; each
beat's AAMI class in :mod:`.classes`; scoring against a reference in :mod:`.evaluate`. A new
peak method is one module plus one line in :data:`ECG_PEAK_METHODS`.
"""

from __future__ import annotations

from devicepipe.ecg.align import ALIGNED_WORDS, align_rows
from devicepipe.ecg.baseline import BASELINE_WORDS, baseline_rows, ecg_baseline
from devicepipe.ecg.chunked import detection_chunk, ecg_peaks_chunked, ecg_peaks_chunked_to, ecg_peaks_fused_chunked_to
from devicepipe.ecg.classes import BEAT_CLASSES, BeatClasses, ecg_classes
from devicepipe.ecg.evaluate import AAMI_CLASSES, BeatScore, aami_class, evaluate_beats, label_beats, share_text
from devicepipe.ecg.inputs import check_ecg
from devicepipe.ecg.peaks import ECG_PEAK_METHODS, PeakMethod, ecg_contrast, ecg_peaks, methods_that, ricker_defaults
from devicepipe.ecg.quality import (
    POOR_QUALITY,
    QUALITY_WINDOW_S,
    BeatQuality,
    beat_correlation,
    beat_quality,
    poor_stretches,
    poor_stretches_stored,
    stretch_medians,
    stretch_quality_stored,
    template_rows,
    typical_beat,
)
from devicepipe.ecg.ricker import EDGE_S, MATCH_TOLERANCE_S
from devicepipe.ecg.seed import seed_gates
from devicepipe.ecg.segment import (
    SEGMENT_MODES,
    Beats,
    ecg_segment,
    ecg_segment_chunked,
    neighbours_in_rows,
    segment_kept,
    segment_kept_parts,
)
from devicepipe.ecg.several_leads import ecg_classes_leads

__all__ = [
    "AAMI_CLASSES",
    "ALIGNED_WORDS",
    "BASELINE_WORDS",
    "BEAT_CLASSES",
    "BeatClasses",
    "BeatQuality",
    "BeatScore",
    "Beats",
    "ECG_PEAK_METHODS",
    "EDGE_S",
    "MATCH_TOLERANCE_S",
    "POOR_QUALITY",
    "PeakMethod",
    "QUALITY_WINDOW_S",
    "SEGMENT_MODES",
    "aami_class",
    "align_rows",
    "baseline_rows",
    "beat_correlation",
    "beat_quality",
    "check_ecg",
    "detection_chunk",
    "ecg_baseline",
    "ecg_classes",
    "ecg_classes_leads",
    "ecg_contrast",
    "ecg_peaks",
    "ecg_peaks_chunked",
    "ecg_peaks_chunked_to",
    "ecg_peaks_fused_chunked_to",
    "ecg_segment",
    "ecg_segment_chunked",
    "evaluate_beats",
    "label_beats",
    "methods_that",
    "neighbours_in_rows",
    "poor_stretches",
    "poor_stretches_stored",
    "ricker_defaults",
    "seed_gates",
    "segment_kept",
    "segment_kept_parts",
    "share_text",
    "stretch_medians",
    "stretch_quality_stored",
    "template_rows",
    "typical_beat",
]
