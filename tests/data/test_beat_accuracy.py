"""Regression floors of the default detector on the real recordings (first channel).

Floors, as measured when set (benchmarks/ecg_accuracy.py prints the table): MIT-BIH 100
F1 1.0000; the nine CPSC 2021 records pooled F1 0.9906 (3496 TP, 25 FP, 41 FN), against
targets of 0.999 and 0.99.
"""

import pytest
from evaluation import ANNOTATED_RECORDS, score_record

from conftest import require_data
from devicepipe.ecg import BeatScore
from devicepipe.io import read_beat_annotations


def _score(path):
    return score_record(path)[0]


def test_reference_annotations_as_documented():
    ann = read_beat_annotations(require_data("mitdb/100"))
    assert ann.samples.size == 2273 and ann.sampling_rate == 360
    assert {s: int((ann.symbols == s).sum()) for s in "NAV"} == {"N": 2239, "A": 33, "V": 1}


def test_mitdb_100_floor():
    score = _score(require_data("mitdb/100"))
    assert score.f1 >= 0.999, score


def test_cpsc2021_pooled_floor():
    pooled = BeatScore(0, 0, 0)
    for group, name in ANNOTATED_RECORDS:
        if group == "cpsc2021":
            pooled = pooled + _score(require_data(f"cpsc2021/{name}"))
    assert pooled.tp + pooled.fn == 3537  # the scored reference beats the data README counts
    assert pooled.f1 >= 0.99, pooled
    assert pooled.sensitivity >= 0.988 and pooled.ppv >= 0.992, pooled


@pytest.mark.parametrize("name", ["data_21_7", "data_21_8", "data_84_2"])
def test_clean_cpsc_records_are_perfect(name):
    assert _score(require_data(f"cpsc2021/{name}")).f1 == 1.0
