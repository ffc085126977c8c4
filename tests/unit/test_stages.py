"""The stages the beat-scoring pipelines share (devicepipe.pipelines.scored), on small hand-made inputs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from devicepipe.artifacts import BeatPlaces, ScoredRows
from devicepipe.learning.score import Scores
from devicepipe.pipelines.scored import beat_counts, flagged_beats, score_views
from devicepipe.report import MAX_FLAGGED_ROWS


def _scores(values: list[float], threshold: float) -> Scores:
    s = torch.tensor(values)
    return Scores(torch.zeros(len(values), 2), s, torch.zeros(len(values)), threshold, s > threshold)


def test_score_views_pick_the_extremes_the_flagged_rows_and_the_median_row():
    values = [0.5, 3.0, 0.1, 2.0, 0.7, 0.2, 5.0, 0.3, 0.4, 0.6, 0.8, 0.9]
    data = torch.arange(12 * 3, dtype=torch.float32).reshape(12, 3)
    views = score_views(_scores(values, threshold=1.5), data)
    # by hand: ascending order of the scores is rows 2, 5, 7, 8, 0, 9, 4, 10, 11, 3, 1, 6
    assert views["extreme_idx"].tolist() == [10, 11, 3, 1, 6, 2, 5, 7, 8, 0]  # five highest, then five lowest
    assert views["top_flagged"].tolist() == [6, 1, 3]  # above 1.5, highest first
    assert torch.equal(views["flagged_rows"], data[[6, 1, 3]])
    assert torch.equal(views["typical"], data.median(0).values)


def test_score_views_show_at_most_the_report_s_rows():
    n = MAX_FLAGGED_ROWS + 7
    views = score_views(_scores(list(np.linspace(2, 3, n)), threshold=1.0), torch.ones(n, 4))
    assert views["top_flagged"].numel() == MAX_FLAGGED_ROWS and views["top_flagged"][0] == n - 1


def test_counts_and_flagged_beats_as_the_summary_lists_them():
    places = BeatPlaces(
        all_peaks=np.array([10, 250, 500, 760, 1000]), peaks=np.array([250, 500, 760]), kept=np.array([1, 2, 3])
    )
    scores = np.array([0.2, 4.0, 2.5])
    rows = ScoredRows(np.zeros((3, 2)), scores, np.zeros(3), np.array([False, True, True]))
    assert beat_counts(places, rows) == {"beats_found": 5, "beats_kept": 3, "flagged": 2}
    listed = flagged_beats(places, rows, 250.0)
    assert listed == [{"peak": 500, "time_s": 2.0, "score": 4.0}, {"peak": 760, "time_s": 3.04, "score": 2.5}]
    labelled = replace(places, truth=np.array(["N", "V", "N"]))
    with_tail = flagged_beats(labelled, replace(rows, tail=np.array([0.5, 0.001, 0.01])), 250.0)
    assert [list(b) for b in with_tail] == [["peak", "time_s", "score", "tail_probability", "reference"]] * 2
    assert [(b["tail_probability"], b["reference"]) for b in with_tail] == [(0.001, "V"), (0.01, "N")]


def test_every_pipeline_has_its_page_its_figures_and_the_folder_ones_their_group_run():
    from devicepipe.artifacts import ARTIFACTS
    from devicepipe.pipelines import DATASET_PIPELINES, PIPELINES
    from devicepipe.report.pages import PAGES

    declared = {a.name for a in ARTIFACTS}
    for name, pipeline in PIPELINES.items():
        assert pipeline.name == name and pipeline.page in PAGES, name
        assert set(pipeline.open_first) <= declared, name
    assert set(DATASET_PIPELINES) == {"beats", "ecg", "score"}


def test_what_the_command_line_says_of_training_by_hand():
    from devicepipe.artifacts.summaries import Epochs, FinalLoss, LabelCount, Reference, RunSummary, Threads
    from devicepipe.pipelines.says import final_loss, label_lines, training_line

    s = RunSummary(
        epochs=Epochs(run=[12, 14], kept=[9, 14], stopped_early=[True, False], limit=200),
        threads=Threads(threads=1, reason="a small model"),
        settings={"epochs": None},
        final_loss=FinalLoss(train=[1.0, 2.0], val=[1.5, 2.5]),
        reference=Reference(source="a.atr", labels={"V": LabelCount(beats=4, flagged=3)}, aami={}),
    )
    assert training_line(s) == (
        "trained 12-14 of at most 200 epochs (stopped when the validation loss no longer improved); "
        "kept the weights of epoch 9-14; 1 CPU thread (a small model)"
    )
    assert final_loss(s) == "final loss 1.5 (mean of 2 members)"
    assert label_lines(s) == ["flagged by reference label (a.atr): V 3 of 4"]
    assert label_lines(RunSummary()) == []


def test_every_figure_a_kind_of_run_makes_is_placed_on_its_page_by_the_artifact_list():
    # the pages name no figure: each asks the artifact list for a section's figures, so a figure a
    # kind of run makes must say where that kind's page shows it, and nothing else may
    import ast
    from pathlib import Path

    import devicepipe.report
    from devicepipe.artifacts import ARTIFACTS, REPORT_SECTIONS, figures_shown

    named = set()
    for path in Path(devicepipe.report.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".png"):
                named.add(node.value)
    assert named <= {".png"}, named  # (the benchmark's page shows whatever charts it wrote)
    for a in ARTIFACTS:
        if a.name.endswith(".png"):
            assert set(a.shown) == set(a.makes), (a.name, set(a.shown) ^ set(a.makes))
        else:
            assert not a.shown, a.name
        assert set(a.shown.values()) <= set(REPORT_SECTIONS), a.name
    assert figures_shown("ecg", "learned") == ["extremes.png", "latent.png"]
    assert figures_shown("score", "scores") == ["scores.png", "extremes.png", "latent.png"]
