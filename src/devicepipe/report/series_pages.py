"""The pages of load-series runs (``series``, ``score-series``): the flagged windows low and
high, the windows holding one value, and the flags against a reference's listed days."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup

from devicepipe.artifacts.summaries import ABSENT, RunSummary
from devicepipe.report.common import (
    FlaggedRows,
    flagged_section,
    learning_facts,
    model_facts,
    model_use,
    scorer_facts,
    training_section,
)
from devicepipe.report.parts import Section, number, shown_figures
from devicepipe.signal.windows import DIRECTION_WORDS

__all__ = ["score_series_page", "series_page"]

#: Listed windows shown in the report's table against a reference, best ranks first.
MAX_LISTED_ROWS = 200


def window_facts(summary: RunSummary) -> list[tuple[str, str]]:
    """The answer of a series run: its flagged windows low and high (none in runs that did not
    say) and, with a reference, the listed windows flagged and the flags it does not list."""
    directions = [f.direction for f in summary.flagged or [] if f.direction is not ABSENT]
    facts = [
        (f"windows flagged {words}", number(directions.count(d))) for d, words in DIRECTION_WORDS.items() if directions
    ]
    if summary.flat_windows is not ABSENT:
        facts.append(("windows holding one value", number(len(summary.flat_windows))))
    ref = summary.window_reference
    if ref:
        facts += [
            ("listed windows flagged", f"{number(ref.flagged_listed)} of {number(ref.listed_windows)}"),
            ("flagged windows not listed", number(ref.flagged_not_listed)),
        ]
    return facts


def window_reference_sections(summary: RunSummary) -> list[Section]:
    """The flags against a reference's listed days, per kind and per listed window (none without one)."""
    ref = summary.window_reference
    if not ref:
        return []
    n = summary.windows.used
    outside = (
        f" {len(ref.outside):,} listed time(s) fall in no scored window (outside the series, or in a window "
        f"left out for gaps), first {ref.outside[0][:10]}."
        if ref.outside
        else ""
    )
    text = (
        f"Each time listed in {ref.source} ({ref.rows:,} rows) is matched to the window that holds it: "
        f"{ref.flagged_listed:,} of the {ref.listed_windows:,} listed windows were flagged, and "
        f"{ref.flagged_not_listed:,} flagged windows are not listed.{outside} A window's rank is its place among "
        f"the {n:,} windows' scores (1: the highest); the {ref.listed_windows:,} highest scores hold "
        f"{ref.listed_in_top:,} of the listed windows, which is how well the scores rank them, the threshold aside."
    )
    kinds = [
        [kind, k.listed, k.flagged, f"{100 * k.flagged / k.listed:.0f} %", k.best_rank, number(k.median_rank)]
        for kind, k in ref.kinds.items()
    ]
    listed = sorted(ref.windows, key=lambda w: w.rank)
    rows = [
        [w.start[:10], w.kind, round(w.score, 5), w.rank, "yes" if w.flagged else "no", w.direction]
        for w in listed[:MAX_LISTED_ROWS]
    ]
    more = f"; the {MAX_LISTED_ROWS} best ranked of {len(listed):,} are shown" if len(listed) > MAX_LISTED_ROWS else ""
    return [
        Section(
            "Flags against the reference, by kind",
            text,
            {"header": ["kind", "listed", "flagged", "share flagged", "best rank", "median rank"], "rows": kinds},
        ),
        Section(
            "The listed windows",
            f"Each listed window's score, rank and flag, and whether it is low or high against like windows{more}.",
            {"header": ["window", "kind", "score", "rank", "flagged", "against like windows"], "rows": rows},
        ),
    ]


def _window_sections(
    summary: RunSummary, files: dict[str, Path], flagged: FlaggedRows | None, kind: str
) -> list[Section]:
    """What both series pages open with: the flagged windows, the flags against a reference, and
    the anomalous windows' figures."""
    sections = [] if flagged is None else [flagged_section(flagged, summary)]
    sections.extend(window_reference_sections(summary))
    sections.append(Section("Anomalous windows", figures=shown_figures(files, kind, "windows")))
    return sections


def series_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``series`` run's page (``facts``: what was read, where)."""
    w = summary.windows
    facts = [
        *learning_facts(summary, "windows"),
        *window_facts(summary),
        ("windows", number(w.used)),
        ("window", str(summary.window or "")),
        ("windows with gaps filled", number(w.windows_with_filled_slots)),
        *facts,
    ]
    sections = _window_sections(summary, files, flagged, "series")
    codes = shown_figures(files, "series", "codes")
    sections.append(Section("Codes", model_use(summary, "windows"), figures=codes))
    sections.append(training_section(summary, files, "series"))
    return facts, sections


def score_series_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``score-series`` run's page (``facts``: what was read, where)."""
    w = summary.windows
    facts = [
        ("windows flagged as anomalous", number(len(summary.flagged))),
        *window_facts(summary),
        ("share flagged", f"{100 * summary.flag_rate:.2f} %"),
        ("windows scored", number(w.used)),
        ("window", str(summary.window or "")),
        ("threshold (score, the model's)", number(summary.threshold)),
        *scorer_facts(summary),
        *model_facts(summary, summary.model.training_windows, "windows"),
        ("windows with gaps filled", number(w.windows_with_filled_slots)),
        *facts,
    ]
    sections = _window_sections(summary, files, flagged, "score-series")
    sections.append(
        Section(
            "Scores against the model's training windows",
            "A period like the training one has its histogram over theirs; a shift to the right is a "
            "period the model finds unusual as a whole.",
            figures=shown_figures(files, "score-series", "scores"),
        )
    )
    return facts, sections
