"""The simulator's rhythms, checked against the textbook timing of each (from the truth it writes)."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from devicepipe.cli import app
from devicepipe.core.errors import DevicepipeError
from devicepipe.io.discover import find_recordings
from devicepipe.simulate import Rhythm, simulate_ecg

RICH = Rhythm(ectopic_rate=0.02, atrial_rate=0.03, couplets=3, runs=2, pauses=2, interpolated=2, bigeminy=0.1, afib=0.1)


@pytest.fixture(scope="module")
def sim():
    return simulate_ecg(1800, 250, rhythm=RICH, seed=4)


def _rr(sim):
    t = sim.r_peaks.numpy() / sim.sampling_rate
    return t, np.diff(t)


def test_every_beat_has_a_class_and_a_rhythm(sim):
    n = sim.r_peaks.numel()
    assert sim.symbols.shape == sim.rhythms.shape == sim.classes.shape == (n,)
    assert set(sim.symbols) == {"N", "A", "V"}
    assert set(sim.classes) == {"N", "S", "V"} and (sim.classes[sim.symbols == "A"] == "S").all()
    assert {"N", "AFIB", "B", "VT"} <= set(sim.rhythms)


def test_ventricular_beats_have_a_compensatory_pause_and_atrial_ones_do_not(sim):
    _, rr = _rr(sim)
    sym = sim.symbols
    isolated = [i for i in range(2, len(sym) - 2) if sym[i] in "AV" and sym[i - 1] == sym[i + 1] == "N"
                and sim.rhythms[i] == "N" and sym[i - 2] == "N"]  # fmt: skip
    v = [i for i in isolated if sym[i] == "V" and rr[i] > 0.45]  # (not interpolated)
    a = [i for i in isolated if sym[i] == "A"]
    assert len(v) >= 10 and len(a) >= 20
    # rr[i - 1] leads to beat i; the interval before the one leading to i is a sinus one
    around = lambda i: (rr[i - 1] + rr[i]) / rr[i - 2]  # noqa: E731 - the two intervals around, in sinus ones
    assert np.all([rr[i - 1] / rr[i - 2] < 0.75 for i in v]) and np.median([around(i) for i in v]) > 1.9
    assert np.all([rr[i - 1] / rr[i - 2] < 0.85 for i in a]) and np.median([around(i) for i in a]) < 1.85


def test_events_are_what_they_say(sim):
    t, rr = _rr(sim)
    kinds = {kind for kind, _, _ in sim.events}
    assert kinds == {"couplet", "run", "pause", "interpolated", "bigeminy", "afib"}
    for kind, a, b in sim.events:
        beats = sim.symbols[a : b + 1]
        if kind == "couplet":
            assert list(beats) == ["V", "V"] and sim.symbols[a - 1] != "V" and sim.symbols[b + 1] != "V"
        elif kind == "run":
            assert 3 <= len(beats) <= 8 and (beats == "V").all() and (sim.rhythms[a : b + 1] == "VT").all()
        elif kind == "pause":
            assert rr[a - 1] > 2.0
        elif kind == "interpolated":
            assert beats[0] == "V" and rr[a - 1] + rr[a] < 1.2 * rr[a - 2]  # no pause: one sinus interval
        elif kind == "bigeminy":
            assert (beats[::2] == "V").all() and (beats[1::2] == "N").all() and len(beats) >= 10
        elif kind == "afib":
            assert (sim.rhythms[a : b + 1] == "AFIB").all()
            within = rr[a:b]
            assert np.std(within) / np.mean(within) > 0.12  # irregularly irregular
            assert np.abs(np.corrcoef(within[:-1], within[1:])[0, 1]) < 0.3  # each interval on its own


def test_no_two_events_overlap_and_sinus_rhythm_separates_episodes(sim):
    spans = sorted((a, b) for kind, a, b in sim.events if kind in ("bigeminy", "afib"))
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False))


@pytest.mark.parametrize("bpm", [0.0, 140.0, 230.0])
def test_ventricular_tachycardia_is_a_regular_fast_run_of_wide_beats_then_a_pause(bpm):
    # Goldberger ch. 16: three or more ventricular beats at 100-250 bpm, regular; sinus after it
    sim = simulate_ecg(600, 250, rhythm=Rhythm(vt=0.3), seed=5) if not bpm else None
    sim = sim or simulate_ecg(600, 250, rhythm=Rhythm(vt=0.3, vt_bpm=bpm), seed=5)
    t, rr = _rr(sim)
    episodes = [(a, b) for kind, a, b in sim.events if kind == "run"]
    inside = sim.rhythms == "VT"
    assert episodes and inside.sum() == sum(b - a + 1 for a, b in episodes)
    share = sum(t[b] - t[a] for a, b in episodes) / sim.duration_s
    assert 0.25 <= share <= 0.45  # about the share of the time asked for (an episode lasts 15-60 s)
    for a, b in episodes:
        assert (sim.symbols[a : b + 1] == "V").all() and t[b] - t[a] >= 10
        within = rr[a:b]  # (rr[i] leads to beat i + 1)
        rate = 60 / np.median(within)
        assert (abs(rate - bpm) < 3 if bpm else 125 <= rate <= 205) and np.std(within) / np.mean(within) < 0.04
        if b + 1 < len(rr):
            assert rr[b] > 1.4 * np.median(within) and sim.symbols[b + 1] == "N"  # a pause, then sinus rhythm
    assert (sim.symbols[~inside] == "N").all()


def test_a_share_of_one_is_the_whole_recording():
    sim = simulate_ecg(60, 360, rhythm=Rhythm(vt=1.0, vt_bpm=150), seed=2)
    assert (sim.symbols[1:] == "V").all() and [kind for kind, _, _ in sim.events] == ["run"]
    assert 145 <= sim.r_peaks.numel() <= 151


def test_a_plain_recording_is_unchanged_by_the_new_rhythms():
    # the plain simulator's draws: a seed gives the recording it always gave (the pinned count)
    plain = simulate_ecg(600, 250, ectopic_rate=0.05, seed=0)
    assert plain.events == () and set(plain.rhythms) == {"N"}
    assert plain.r_peaks.numel() == simulate_ecg(600, 250, ectopic_rate=0.05, seed=0, rhythm=Rhythm()).r_peaks.numel()


@pytest.mark.parametrize(
    ("rhythm", "message"),
    [
        (Rhythm(bigeminy=0.7, afib=0.5), "together at most 1"),
        (Rhythm(couplets=-1), "couplets"),
        (Rhythm(atrial_rate=0.3, ectopic_rate=0.3), "under 0.5"),
        (Rhythm(vt=0.5, afib=0.6), "together at most 1"),
        (Rhythm(vt=0.2, vt_bpm=90), "ventricular tachycardia of 90 bpm is out of range"),
    ],
)
def test_impossible_rhythms_are_refused(rhythm, message):
    with pytest.raises(DevicepipeError, match=message):
        simulate_ecg(60, 250, rhythm=rhythm)


def test_the_command_writes_each_beat_s_class_and_each_event(tmp_path):
    out = tmp_path / "holter.parquet"
    args = ["simulate", "ecg", "--out", str(out), "--duration", "20min", "--bigeminy", "0.2", "--couplets", "2",
            "--atrial-rate", "0.05", "--afib", "0.2", "--seed", "1"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    truth = pd.read_csv(tmp_path / "holter.truth.csv")
    events = pd.read_csv(tmp_path / "holter.events.csv")
    assert list(truth.columns) == ["sample", "time_s", "symbol", "class", "rhythm"]
    assert set(events.kind) == {"bigeminy", "couplet", "afib"} and "2 couplet" in result.output
    assert "warning" not in result.output  # every event asked for fits
    for row in events.itertuples():
        assert truth.time_s[row.first_beat] == row.start_s and row.beats == row.last_beat - row.first_beat + 1
    assert [p.name for p in find_recordings(tmp_path).paths] == ["holter.parquet"]  # the sidecars are not recordings
    assert json.dumps(truth["class"].value_counts().to_dict())  # (readable as a table of classes)


def test_events_asked_for_beyond_what_fits_are_said_not_dropped_in_silence(tmp_path):
    # a minute holds a few dozen couplets: it had written 25 of 1,000 and said only "25 couplet"
    args = ["simulate", "ecg", "--out", str(tmp_path / "e.csv"), "--duration", "1min", "--couplets", "1000",
            "--pauses", "1"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    made = pd.read_csv(tmp_path / "e.events.csv").kind.value_counts().to_dict()
    assert 0 < made["couplet"] < 1000 and made.get("pause", 0) <= 1
    said = " ".join(result.stderr.split())
    assert f"{made['couplet']} of the 1,000 couplet events asked for fit in 1.0 min" in said
    assert ("of the 1 pause events" in said) == (made.get("pause", 0) < 1)
