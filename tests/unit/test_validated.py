"""The figures a report quotes for how far to trust its classes are those of the committed EC57-style
evaluation (benchmarks/results/ec57.json, written by benchmarks/ec57.py), not numbers typed apart."""

import json
from pathlib import Path

import pytest

from devicepipe.ecg.validated import VALIDATED

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "ec57.json"


def _measured() -> dict[str, tuple[int, float, float]]:
    g = json.loads(RESULTS.read_text())["gross"]
    beats, v, s = g["beats (every labelled record)"], g["V (mitdb_v 105, 106, 200)"], g["S (mitdb 100, cpsc2021)"]
    af = g["AF (cpsc2021 beats; kinds over every record)"]
    return {
        "beats found": (beats["tp"] + beats["fn"], beats["sensitivity"], beats["ppv"]),
        "V (ventricular ectopic)": (v["truth"], v["sensitivity"], v["ppv"]),
        "S (supraventricular ectopic)": (s["truth"], s["sensitivity"], s["ppv"]),
        "atrial fibrillation, per beat": (
            af["truth_af_beats"] + af["truth_other_beats"],
            af["sensitivity"],
            af["specificity"],
        ),
    }


@pytest.mark.parametrize("quoted", VALIDATED, ids=lambda v: v.what)
def test_the_report_quotes_the_committed_evaluation(quoted):
    reference, se, second = _measured()[quoted.what]
    assert quoted.reference == reference
    assert quoted.se == pytest.approx(se, abs=0.0006)
    assert quoted.ppv == pytest.approx(second, abs=0.0006)


def test_the_rhythm_tile_names_the_kind_of_fibrillation():
    from types import SimpleNamespace

    from devicepipe.artifacts.summaries import ABSENT
    from devicepipe.report.parts import _af_words

    def h(episodes, share, kind):
        return SimpleNamespace(events={"afib": episodes}, af_share=share, af_kind=kind)

    assert _af_words(h(0, 0.0, "no AF")) == "no atrial fibrillation"
    assert _af_words(h(1, 0.999, "persistent AF")) == "atrial fibrillation throughout (persistent)"
    assert _af_words(h(2, 0.093, "paroxysmal AF")) == "paroxysmal atrial fibrillation: 2 episodes, 9.3 % of the time"
    # a summary.json written before the kind was recorded: the episodes, without a kind made up
    assert _af_words(h(1, 0.5, ABSENT)) == "atrial fibrillation: 1 episode, 50.0 % of the time"
