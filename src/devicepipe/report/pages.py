"""The page of each kind of run, for :mod:`devicepipe.report` to render: its facts and sections
(:data:`PAGES`, one function per kind: a new kind of run is one function and one line there),
the captions of its figures, the flagged rows, the timing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from markupsafe import Markup

from devicepipe.artifacts.summaries import ABSENT, DatasetSummary, RunSummary
from devicepipe.core.units import format_duration
from devicepipe.ecg import share_text
from devicepipe.report.common import (
    MAX_FLAGGED_ROWS,
    REPORT_NAME,
    FlaggedRows,
    flagged_section,
    input_facts,
    learning_facts,
    model_facts,
    model_use,
    scorer_facts,
    timing,
    training_section,
)
from devicepipe.report.parts import (
    Section,
    class_words,
    clinical_facts,
    figure_list,
    heart_rate_facts,
    holter_sections,
    number,
    shown_figures,
)
from devicepipe.report.series_pages import score_series_page, series_page

__all__ = ["MAX_FLAGGED_ROWS", "PAGES", "REPORT_NAME", "FlaggedRows", "input_facts", "timing"]


def _quality_facts(summary: RunSummary) -> list[tuple[str, str]]:
    q = summary.quality
    if not q or q.unusable_share is ABSENT:
        return []
    return [
        ("beats in poor signal", f"{number(q.beats_poor)} of {number(q.beats_rated)}"),
        *(
            []
            if q.beats_unlike_typical is ABSENT
            else [("beats unlike the typical one", number(q.beats_unlike_typical))]
        ),
        ("recording unusable", f"{100 * q.unusable_share:.1f} % ({q.unusable_s:,.0f} s)"),
    ]


def _reference_sections(summary: RunSummary) -> list[Section]:
    """The flagged beats per reference label and per AAMI class, when the run had a reference."""
    ref = summary.reference
    if not ref:
        return []
    rows = [[name, v.beats, v.flagged, _missed(v)] for name, v in ref.labels.items()]
    never = "; never detected: the reference's beats that no beat found lies within that of"
    sections = [
        Section(
            "Flagged beats by reference label",
            f"Each beat takes the label of the reference beat within {1000 * ref.tolerance_s:.0f} ms ({ref.source})"
            f"{never} (no class, no score).",
            {"header": ["label", "beats scored", "flagged", "never detected"], "rows": rows},
        )
    ]
    if ref.aami:
        sections.append(
            Section(
                "Flag rate by AAMI class",
                class_words("in the reference: its paced beats too"),
                {
                    "header": ["class", "beats scored", "flagged", "flag rate", "never detected"],
                    "rows": [
                        [k, v.beats, v.flagged, f"{100 * v.flag_rate:.1f} %", _missed(v)] for k, v in ref.aami.items()
                    ],
                },
            )
        )
    return sections


def _missed(count: Any) -> Any:
    """A label's reference beats never detected ("-" in a run written before they were counted)."""
    return "-" if count.missed is ABSENT else count.missed


def _beats_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``beats`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    c = summary.counts
    facts = [  # the clinical answer first
        ("beats found", number(c.beats_found)),
        *clinical_facts(summary),
        *_accuracy_facts(summary),
        ("beats kept", number(c.beats_kept)),
        *facts,
        *heart_rate_facts(summary),
        *_quality_facts(summary),
    ]
    sections.extend(holter_sections(summary, scored=False, files=files, kind="beats"))
    sections.append(Section("Beats", figures=shown_figures(files, "beats", "beats")))
    sections.extend(_accuracy_sections(summary))
    return facts, sections


def _wall_time(summary: DatasetSummary) -> tuple[str, str]:
    """The dataset run's wall time, said as this run's alone where it kept earlier runs' recordings."""
    wall = format_duration(summary.seconds["wall"])
    kept = summary.resumed or 0
    if not kept:
        return ("wall time", wall)
    return (f"wall time of this run ({kept:,} recording{'s' if kept != 1 else ''} kept from an earlier one)", wall)


def _accuracy_facts(summary: RunSummary) -> list[tuple[str, str]]:
    """F1, sensitivity and positive predictivity of the R peaks found, against the reference."""
    acc = summary.accuracy
    if not acc:
        return []
    return [
        ("F1 against the reference", share_text(acc.f1)),
        ("sensitivity / positive predictivity", f"{share_text(acc.sensitivity)} / {share_text(acc.ppv)}"),
    ]


def _accuracy_sections(summary: RunSummary) -> list[Section]:
    """The beats found against the reference's, inside the scoring window (none without a reference)."""
    acc = summary.accuracy
    if not acc:
        return []
    window = acc.scoring_window_s
    row = [acc.reference_beats_in_window, acc.beats_found_in_window, acc.tp, acc.fp, acc.fn, share_text(acc.f1)]
    return [
        Section(
            "Accuracy against the reference",
            f"Reference {acc.reference}; beats inside the scoring window {window[0]:g}-{window[1]:.1f} s, "
            f"matched within {1000 * acc.tolerance_s:.0f} ms.",
            {"header": ["reference beats", "beats found", "TP", "FP", "FN", "F1"], "rows": [row]},
        )
    ]


def _ecg_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``ecg`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    c = summary.counts
    facts = [  # the clinical answer first; the model's flags and training after it
        ("beats found", number(c.beats_found)),
        *clinical_facts(summary),
        *_accuracy_facts(summary),
        ("beats kept", number(c.beats_kept)),
        *facts,
        *heart_rate_facts(summary),
        *_quality_facts(summary),
        *learning_facts(summary, "beats"),
    ]
    sections.extend(holter_sections(summary, scored=True, files=files, kind="ecg"))
    sections.extend(_reference_sections(summary) + _accuracy_sections(summary))
    if flagged is not None:
        sections.append(flagged_section(flagged, summary))
    learned = shown_figures(files, "ecg", "learned")
    sections.append(Section("What the model learned", model_use(summary, "beats"), figures=learned))
    sections.append(Section("Generated beats", figures=shown_figures(files, "ecg", "generated")))
    sections.append(Section("Heart rate and beats", figures=shown_figures(files, "ecg", "heart")))
    sections.append(training_section(summary, files, "ecg"))
    return facts, sections


def _score_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``score`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    c = summary.counts
    facts = [
        ("beats found", number(c.beats_found)),
        ("beats scored", number(c.beats_kept)),
        ("beats flagged as anomalous", number(c.flagged)),
        ("share flagged", f"{100 * summary.flag_rate:.2f} %"),
        ("threshold (score, the model's)", number(summary.threshold)),
        *scorer_facts(summary),
        *model_facts(summary, summary.model.training_beats, "beats"),
        *facts,
        *_accuracy_facts(summary),
        *heart_rate_facts(summary),
    ]
    sections.extend(holter_sections(summary, scored=True, files=files, kind="score"))
    sections.extend(_reference_sections(summary) + _accuracy_sections(summary))
    if flagged is not None:
        sections.append(flagged_section(flagged, summary))
    sections.append(
        Section(
            "Scores against the model's training beats",
            "A recording like the training beats has its histogram over theirs; a shift to the right is a "
            "recording the model finds unusual as a whole.",
            figures=shown_figures(files, "score", "scores"),
        )
    )
    sections.append(Section("Heart rate and beats", figures=shown_figures(files, "score", "heart")))
    return facts, sections


def _train_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``train`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    r, dist = summary.recordings, summary.distributed
    facts = [
        ("recordings", number(r.used)),
        ("recordings left out", number(len(r.skipped))),
        ("training beats", number(summary.counts.beats)),
        ("beat window", f"{summary.window_s:.3g} s, resampled to {summary.settings['width']} samples"),
        *learning_facts(summary, "beats"),
        ("device", str(summary.device or None)),
        ("processes", "1" if not dist else f"{dist.world_size} ({dist.how}, {dist.backend})"),
    ]
    if r.skipped:
        sections.append(
            Section(
                "Recordings left out",
                "These could not be read or held no whole beat; the model was trained without them.",
                {"header": ["recording", "why"], "rows": [[x.path, x.error] for x in r.skipped]},
            )
        )
    sections.append(training_section(summary, files, "train", collapsed=False))
    sections.append(Section("What the model learned", figures=shown_figures(files, "train", "learned")))
    return facts, sections


def _dataset_page(
    summary: DatasetSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``dataset`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    facts = _dataset_facts(summary)
    acc = summary.accuracy
    if acc:
        sections.append(
            Section(
                "Accuracy against the references",
                f"Each WFDB record against its own .{acc.reference} file, {acc.records_scored} record(s); "
                "the counts of every record added up.",
                {
                    "header": ["TP", "FP", "FN", "sensitivity", "positive predictivity", "F1"],
                    "rows": [[acc.tp, acc.fp, acc.fn, acc.sensitivity, acc.ppv, acc.f1]],
                },
            )
        )
    sections.append(
        Section(
            "Recordings",
            "Failures first; click a column's name to sort by it, a recording's name to open its own report.",
            html=extra_html,
        )
    )
    return facts, sections


def _bench_page(
    summary: Any,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``bench`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    sections.append(Section("Results", html=extra_html))
    charts = sorted(name for name in files if name.endswith(".png"))
    sections.append(Section("Charts", figures=figure_list(files, charts)))
    return facts, sections


#: The page of each kind of run: its facts and sections (a new kind of run: one function, one line).
PAGES: dict[str, Callable[..., tuple[list[tuple[str, str]], list[Section]]]] = {
    "beats": _beats_page,
    "ecg": _ecg_page,
    "score": _score_page,
    "train": _train_page,
    "series": series_page,
    "score-series": score_series_page,
    "dataset": _dataset_page,
    "bench": _bench_page,
}


def _dataset_facts(summary: DatasetSummary) -> list[tuple[str, str]]:
    engine = summary.engine
    facts = [
        ("recordings", number(summary.recordings)),
        ("ok", number(summary.ok)),
        ("failed", number(summary.failed)),
        ("from an earlier run", number(summary.resumed)),
    ]
    if summary.beats is not None:
        facts.append(("beats found", number(summary.beats)))
    if summary.flagged is not None:
        facts.append(("beats flagged", number(summary.flagged)))
    if summary.accuracy:
        facts.append(("F1 against the references", share_text(summary.accuracy.f1)))
    facts += [
        ("recorded time", format_duration(summary.duration_s)),
        _wall_time(summary),
        (
            "engine",
            "one process, no Dask"
            if engine.kind == "loop"
            else f"{engine.kind}, {engine.workers} worker{'s' if engine.workers != 1 else ''}",
        ),
    ]
    return facts
