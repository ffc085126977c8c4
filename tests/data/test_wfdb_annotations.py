"""Beats out as WFDB annotations: read back by wfdb, scored the same way as wfdb's own comparison."""

import numpy as np
from wfdb import processing, rdann

from conftest import require_data
from devicepipe.ecg import MATCH_TOLERANCE_S, ecg_peaks, evaluate_beats
from devicepipe.io import read_reference, read_series
from devicepipe.pipelines import run_beats


def test_beats_writes_annotations_wfdb_reads_back(tmp_path):
    record = require_data("mitdb/100")
    result = run_beats(record, tmp_path / "r", device="cpu", figures=False)
    ann = rdann(str(tmp_path / "r" / "100"), "qrs")
    beats = np.array(ann.symbol) != "+"  # a rhythm annotation before the first beat: "(N"
    assert list(np.array(ann.symbol)[~beats]) == ["+"] and ann.aux_note[0] == "(N" and ann.sample[0] == result.peaks[0]
    np.testing.assert_array_equal(ann.sample[beats], result.peaks)
    assert ann.fs == 360
    # each beat's symbol is its class; against the cardiologists' annotations of the same record
    reference = rdann(str(record), "atr")
    ours = dict(zip(ann.sample[beats].tolist(), np.array(ann.symbol)[beats], strict=True))
    near = {s: next((ours[p] for p in range(s - 20, s + 21) if p in ours), None) for s in reference.sample}
    classed = [(sym, near[s]) for s, sym in zip(reference.sample, reference.symbol, strict=True) if sym in "NAV"]
    assert sum(ref == "A" and got == "S" for ref, got in classed) >= 0.8 * 33  # MIT-BIH 100's 33 atrial premature
    assert sum(ref == "V" and got == "V" for ref, got in classed) == 1  # ... and its one ventricular beat
    assert sum(ref == "N" and got != "N" for ref, got in classed) <= 0.01 * 2239
    csv = np.loadtxt(tmp_path / "r" / "beats.csv", delimiter=",", skiprows=1, usecols=0)
    np.testing.assert_array_equal(csv, result.peaks)


def test_evaluate_beats_agrees_with_wfdb_compare_annotations_on_mitdb_100():
    record = require_data("mitdb/100")
    rec = read_series(record, "MLII")
    detected = ecg_peaks(rec.samples, rec.sampling_rate).numpy()
    reference = read_reference(record.with_suffix(".atr")).samples
    window = int(MATCH_TOLERANCE_S * rec.sampling_rate)
    theirs = processing.compare_annotations(reference, detected, window)
    ours = evaluate_beats(reference, detected, rec.sampling_rate, tolerance_s=window / rec.sampling_rate, edge_s=0)
    assert (ours.tp, ours.fp, ours.fn) == (theirs.tp, theirs.fp, theirs.fn)
    # and when detections are missing or moved: drop every tenth, move others by up to 40 ms
    rng = np.random.default_rng(0)
    kept = np.delete(detected, np.arange(0, detected.size, 10))
    moved = kept + rng.integers(-14, 15, kept.size)
    theirs = processing.compare_annotations(reference, np.sort(moved), window)
    ours = evaluate_beats(reference, moved, rec.sampling_rate, tolerance_s=window / rec.sampling_rate, edge_s=0)
    assert (ours.tp, ours.fp, ours.fn) == (theirs.tp, theirs.fp, theirs.fn)
