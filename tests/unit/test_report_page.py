"""What a run's page shows: the HRV measures its length supports, numbers in one format, the
classes in one wording, and the run's internals closed at the end."""

import re

import numpy as np
import pytest

from devicepipe.pipelines import run_beats
from devicepipe.report.parts import HRV_MIN_S, number
from devicepipe.simulate import Rhythm, simulate_ecg, write_simulated_ecg


def test_numbers_are_never_written_with_an_exponent():
    # VLF / LF / HF read "44,107 / 9.82e+03 / 2.52e+03" on one page
    assert [number(v, 3) for v in (44107.2, 9820.4, 2520.0, 12.345, 0.5)] == [
        "44,107",
        "9,820",
        "2,520",
        "12.3",
        "0.5",
    ]
    assert number(1234.5) == "1,234" and number(12_345.6) == "12,346" and number(7) == "7"


def _glance(page: str) -> str:
    """The page's "At a glance" tiles, as text."""
    block = page[page.index('<section id="facts">') : page.index("</section>", page.index('<section id="facts">'))]
    return " ".join(re.sub(r"<[^>]+>", " ", block).split())


@pytest.mark.parametrize(
    ("minutes", "shown", "left_out"),
    [
        (2.5, ["SDNN (ms)", "RMSSD (ms)", "LF / HF power", "LF/HF"], ["SDANN", "SDNN index", "VLF"]),
        (30, ["SDNN (ms)", "VLF / LF / HF power", "LF/HF"], ["SDANN", "SDNN index"]),
        (62, ["SDANN, 5 min (ms)", "SDNN index, 5 min (ms)", "VLF / LF / HF power"], []),
    ],
)
def test_the_hrv_measures_shown_are_those_the_recording_s_length_supports(tmp_path, minutes, shown, left_out):
    # Task Force 1996: SDANN and the SDNN index are long-term measures (shown from an hour on); VLF
    # wants 5 minutes; summary.json keeps every one
    assert HRV_MIN_S["sdann"] == 3600.0 and HRV_MIN_S["vlf"] == 300.0
    path, _ = write_simulated_ecg(simulate_ecg(60 * minutes, 250, seed=2), tmp_path / "e.parquet")
    run_beats(path, tmp_path / "out", device="cpu", figures=False)
    glance = _glance((tmp_path / "out" / "report.html").read_text())
    for label in shown:
        assert label in glance, label
    for label in left_out:
        assert label not in glance, label
    assert "e+0" not in glance


def test_the_run_s_internals_are_closed_at_the_end_and_the_classes_have_one_wording(tmp_path):
    from typer.testing import CliRunner

    from devicepipe.cli import app

    path, truth = write_simulated_ecg(simulate_ecg(120, 250, ectopic_rate=0.05, seed=3), tmp_path / "e.parquet")
    result = CliRunner().invoke(app, ["ecg", str(path), "--out", str(tmp_path / "r"), "--epochs", "2",
                                      "--reference", str(truth)])  # fmt: skip
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r" / "report.html").read_text()
    glance = _glance(page)
    assert "epoch kept" not in glance and "epochs trained" not in glance and "flagged as anomalous" in glance
    # the last two sections: training, then seconds and transfers, each inside a closed <details>
    sections = re.findall(r"<section(?: class=\"(\w+)\")?>\s*(?:<details><summary>)?<h2>([^<]+)</h2>", page)
    assert [title for _, title in sections[-2:]] == [
        "Run internals: training",
        "Run internals: seconds per stage and host-device transfers",
    ]
    assert all(kind == "internals" for kind, _ in sections[-2:]) and all(k != "internals" for k, _ in sections[:-2])
    assert page.count("<details><summary>") == 2 and "<details open" not in page
    # the classes are said the same way wherever a page names them; only what Q holds differs
    said = re.findall(r"Classes \(ANSI/AAMI EC57\): N normal and bundle-branch block, S supraventricular ectopic, "
                      r"V ventricular ectopic, F fusion, Q unclassifiable \(([^)]*)\)", page)  # fmt: skip
    assert len(said) == 2 and said[0] != said[1], said
    assert "paced or unclassifiable" not in page


def test_with_a_reference_the_class_tables_count_the_beats_never_detected(tmp_path):
    # "V 0 of 312" flagged read as if every V beat had been seen while 514 were never found: the
    # reference's beats that no beat found matches are counted beside each label and class
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from devicepipe.cli import app

    sim = simulate_ecg(120, 250, ectopic_rate=0.05, seed=3)
    path, truth = write_simulated_ecg(sim, tmp_path / "e.parquet")
    table = pd.read_csv(truth)
    middles = ((table["sample"].to_numpy()[40:43] + table["sample"].to_numpy()[41:44]) // 2).tolist()
    ghosts = pd.DataFrame({"sample": middles, "time_s": [m / 250 for m in middles], "symbol": ["V", "V", "A"],
                           "class": ["V", "V", "S"], "rhythm": "N"})  # fmt: skip
    doctored = tmp_path / "ref.csv"  # three beats between beats: no detection lies within 150 ms of them
    pd.concat([table, ghosts]).sort_values("sample").to_csv(doctored, index=False)
    result = CliRunner().invoke(app, ["ecg", str(path), "--out", str(tmp_path / "r"), "--epochs", "1",
                                      "--reference", str(doctored)])  # fmt: skip
    assert result.exit_code == 0, result.output
    ref = json.loads((tmp_path / "r" / "summary.json").read_text())["reference"]
    assert ref["labels"]["V"]["missed"] == 2 and ref["labels"]["A"]["missed"] == 1 and ref["labels"]["N"]["missed"] == 0
    assert ref["aami"]["V"]["missed"] == 2 and ref["aami"]["S"]["missed"] == 1
    # the beats scored, as before (those whose window lies inside the recording), and the missed: at
    # most the reference's V beats, and all of them but one near an end
    assert int((sim.symbols == "V").sum()) - 1 <= ref["labels"]["V"]["beats"] <= int((sim.symbols == "V").sum())
    said = " ".join(result.stdout.split())
    assert "(and 2 never detected)" in said and "; 2 never detected)" in said and "; 1 never detected)" in said
    page = (tmp_path / "r" / "report.html").read_text()
    assert page.count("<th>never detected</th>") == 2


def _events_text(page: str) -> str:
    start = page.index("<h2>Events</h2>")
    return " ".join(re.sub(r"<[^>]+>", " ", page[start : page.index("</p>", start)]).split())


def test_the_events_text_says_none_in_words_and_gives_the_longest_run_and_pause(tmp_path):
    # no run and no pause: said in words ("Longest run: - beats, fastest - bpm; longest pause - s" before)
    path, _ = write_simulated_ecg(simulate_ecg(120, 250, seed=2), tmp_path / "e.parquet")
    run_beats(path, tmp_path / "quiet", device="cpu", figures=False)
    said = _events_text((tmp_path / "quiet" / "report.html").read_text())
    assert "No run of three or more ventricular beats; no pause over 2 s;" in said and " - " not in said
    # runs and pauses: the longest of each, against the simulator's own events
    sim = simulate_ecg(300, 250, seed=4, rhythm=Rhythm(runs=2, pauses=2))
    path, _ = write_simulated_ecg(sim, tmp_path / "r.parquet")
    run_beats(path, tmp_path / "busy", device="cpu", figures=False)
    said = _events_text((tmp_path / "busy" / "report.html").read_text())
    longest = max(last - first + 1 for kind, first, last in sim.events if kind == "run")
    pause = max(np.diff(sim.r_peaks.numpy()).max() / 250, 2.0)
    assert f"Longest run: {longest} beats, fastest" in said, said
    assert f"longest pause {pause:.3g} s" in said or f"longest pause {pause:.2f}" in said, said


def test_a_reference_with_no_beat_in_the_window_shows_a_dash_not_nan(tmp_path):
    # a reference whose only annotations lie outside the scoring window (its first 0.5 s): the
    # sensitivity has nothing to divide by, and the terminal and the page had both said "nan"
    import pandas as pd

    sim = simulate_ecg(60, 250, seed=3)
    path, _ = write_simulated_ecg(sim, tmp_path / "e.parquet")
    pd.DataFrame({"sample": [50]}).to_csv(tmp_path / "ref.csv", index=False)
    result = run_beats(path, tmp_path / "b", reference=tmp_path / "ref.csv")
    assert result.score is not None and result.score.tp + result.score.fn == 0
    assert "sensitivity - (no reference beat)" in str(result.score)
    page = (tmp_path / "b" / "report.html").read_text()
    assert "- / 0.0000" in page and not re.search(r">\s*nan|nan\s*/|/\s*nan", page)  # (figures: base64 text)
