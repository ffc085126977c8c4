"""The page of each kind of run, for :mod:`devicepipe.report` to render: its facts and sections
(:data:`PAGES`, one function per kind: a new kind of run is one function and one line there),
the captions of its figures, the flagged rows, the timing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import Markup

from devicepipe.report_parts import (
    Section,
    class_words,
    clinical_facts,
    figure_list,
    heart_rate_facts,
    holter_sections,
    number,
    sparkline,
)
from devicepipe.scorers import SCORER_KINDS
from devicepipe.summaries import ABSENT, DatasetSummary, RunSummary, flag_rule, held
from devicepipe.units import format_duration
from devicepipe.windows import DIRECTION_WORDS

REPORT_NAME = "report.html"
#: The most flagged rows a page lists.
MAX_FLAGGED_ROWS = 40


@dataclass(frozen=True)
class FlaggedRows:
    """The flagged rows a learning page lists, each drawn beside a typical row.

    ``names``: a label per row (time or date); ``scores``: ``(n,)``; ``rows``: ``(n, width)``
    host values as the model saw them; ``typical``: ``(width,)``, or ``(n, width)`` one per row,
    what ``typical_words`` calls it (default: the typical row); ``labels``: reference labels
    per row or None; ``reasons``: why each row differs, in words, or None; ``unit``: what the
    rows' values are in; ``one``/``many``: what a row is (``"beat"``/``"beats"``).
    """

    names: Sequence[str]
    scores: np.ndarray
    rows: np.ndarray
    typical: np.ndarray
    typical_words: str = ""
    labels: Sequence[str] | None = None
    reasons: Sequence[str] | None = None
    unit: str = ""
    total: int = 0
    one: str = "row"
    many: str = "rows"


def timing(summary: RunSummary) -> Section:
    seconds = summary.seconds or {}
    rows: list[list[Any]] = [[stage, round(float(s), 3)] for stage, s in seconds.items()]
    rows.append(["total", round(float(sum(seconds.values())), 3)])
    t = summary.transfers
    text = ""
    if t:
        text = (
            f"Host-to-device copies: {t.host_to_device:,} ({t.host_to_device_bytes:,} bytes); "
            f"device-to-host: {t.device_to_host:,} ({t.device_to_host_bytes:,} bytes); "
            f"counted in {t.counted_in or 'every stage'}."
        )
    return Section(
        "Run internals: seconds per stage and host-device transfers",
        text,
        {"header": ["stage", "seconds"], "rows": rows},
        collapsed=True,
    )


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


def input_facts(summary: RunSummary) -> list[tuple[str, str]]:
    fs, n = summary.sampling_rate_hz, summary.n_samples
    facts = [("device", str(summary.device or "-"))]
    if fs and n:
        rate = ("sampling rate (Hz)", number(float(fs))) if fs >= 1 else ("time step", format_duration(1 / fs))
        facts += [rate, ("length", format_duration(n / fs))]
    return facts


def _flagged_section(flagged: FlaggedRows, summary: RunSummary) -> Section:
    header = ["#", "where", "score"] + (["reference"] if flagged.labels is not None else [])
    header += ["what differs"] if flagged.reasons is not None else []
    header.append(f"{flagged.one} (red) and {flagged.typical_words or f'the typical {flagged.one}'}")
    rows = []
    for i in range(len(flagged.names)):
        row: list[Any] = [i + 1, flagged.names[i], round(float(flagged.scores[i]), 5)]
        if flagged.labels is not None:
            row.append(flagged.labels[i] or "none")
        if flagged.reasons is not None:
            row.append(flagged.reasons[i])
        typical = flagged.typical[i] if flagged.typical.ndim == 2 else flagged.typical
        row.append(sparkline(flagged.rows[i], typical))
        rows.append(row)
    shown = len(flagged.names)
    text = (
        f"{flagged.total:,} {flagged.one if flagged.total == 1 else flagged.many} flagged "
        f"({flag_rule(summary, flagged.one)}); "
        + (f"the {shown} highest scores are shown" if shown < flagged.total else "all are shown")
        + (f"; values in {flagged.unit}." if flagged.unit else ".")
    )
    return Section("Flagged", text, {"header": header, "rows": rows})


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


def _scorer_facts(summary: RunSummary) -> list[tuple[str, str]]:
    """The scorer line of a learning page: its name, and k for the nearest-neighbour ones."""
    scorer = summary.scorer
    if not scorer:
        return []
    kind = SCORER_KINDS.get(scorer.scorer)
    label = scorer.scorer if kind is None else kind.label(scorer.neighbours or None)
    return [("scored by", label)]


def _uses_model(summary: RunSummary) -> bool:
    """Whether the run's scores depend on its trained model (unknown scorers: assumed so)."""
    kind = SCORER_KINDS.get(summary.scorer.scorer) if summary.scorer else None
    return kind is None or kind.uses_model


def _model_use(summary: RunSummary, what: str) -> str:
    """What the trained model gives the run, in words: whether the scores (and so the flags) of
    ``what`` use it, and what an unsettled model leaves unreliable."""
    name = summary.scorer.scorer if summary.scorer else "?"
    failed = held(summary.model_failed)
    if failed:
        return f"Training failed, so the figures below are drawn from a broken model: {failed[0].upper()}{failed[1:]}."
    if _uses_model(summary):
        text = f"The scores and flags use the model's reconstruction errors (scorer {name})."
        return text + ("" if summary.converged else " The model had not settled, so read them with care.")
    text = (
        f"The scores and flags come from the {what} themselves (scorer {name}), not from the model: the "
        f"model gives the map of codes, the reconstructions and each row's code in embeddings.parquet."
    )
    return text + ("" if summary.converged else " It had not settled: those figures may still change; the flags stand.")


def _converged_words(summary: RunSummary) -> str:
    if held(summary.model_failed):
        return "no: training failed" + ("" if _uses_model(summary) else " (flags do not use it)")
    return number(summary.converged) + ("" if _uses_model(summary) else " (flags do not use it)")


def _learning_facts(summary: RunSummary, what: str) -> list[tuple[str, str]]:
    counts = summary.counts
    flagged = counts.flagged if counts and counts.flagged is not ABSENT else len(summary.flagged or [])
    return [
        (f"{what} flagged as anomalous", number(flagged)),
        ("threshold (score)", number(summary.threshold)),
        *_scorer_facts(summary),
    ]


def _training_section(summary: RunSummary, files: dict[str, Path], collapsed: bool = True) -> Section:
    """How the model trained (epochs run and kept, whether it converged, the loss figure): with
    ``collapsed``, the run's internals, closed until opened, near the end of the page (a ``train``
    run's page shows it open: training is what it is for)."""
    e = summary.epochs
    rows = [
        ["epochs trained", "-".join(str(v) for v in sorted(set(e.run)))],
        ["epoch kept", "-".join(str(v) for v in sorted(set(e.kept)))],
        ["converged", _converged_words(summary)],
    ]
    return Section(
        "Run internals: training" if collapsed else "Training",
        table={"header": ["", ""], "rows": rows},
        figures=figure_list(files, ["training.png"]),
        collapsed=collapsed,
    )


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
    sections.extend(holter_sections(summary, scored=False, files=files))
    names = ["excerpt.png", "heart_rate.png", "intervals.png", "quality.png"]
    sections.append(Section("Beats", figures=figure_list(files, names)))
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
        ("F1 against the reference", f"{acc.f1:.4f}"),
        ("sensitivity / positive predictivity", f"{acc.sensitivity:.4f} / {acc.ppv:.4f}"),
    ]


def _accuracy_sections(summary: RunSummary) -> list[Section]:
    """The beats found against the reference's, inside the scoring window (none without a reference)."""
    acc = summary.accuracy
    if not acc:
        return []
    window = acc.scoring_window_s
    row = [acc.reference_beats_in_window, acc.beats_found_in_window, acc.tp, acc.fp, acc.fn, f"{acc.f1:.4f}"]
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
        *_learning_facts(summary, "beats"),
    ]
    sections.extend(holter_sections(summary, scored=True, files=files))
    sections.extend(_reference_sections(summary) + _accuracy_sections(summary))
    if flagged is not None:
        sections.append(_flagged_section(flagged, summary))
    learned = figure_list(files, ["extremes.png", "latent.png"])
    sections.append(Section("What the model learned", _model_use(summary, "beats"), figures=learned))
    sections.append(Section("Generated beats", figures=figure_list(files, ["generated.png"])))
    names = ["heart_rate.png", "excerpt.png", "quality.png"]
    sections.append(Section("Heart rate and beats", figures=figure_list(files, names)))
    sections.append(_training_section(summary, files))
    return facts, sections


def _model_facts(summary: RunSummary, rows: int, what: str) -> list[tuple[str, str]]:
    """Which model scored the rows, and what it was trained on (``rows`` of ``what``)."""
    m = summary.model
    return [
        ("model", "/".join(Path(m.path).parts[-2:]) if m.path else "given in Python"),
        ("model trained on", f"{number(rows)} {what}, on {m.trained_on_device or None}"),
    ]


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
        *_scorer_facts(summary),
        *_model_facts(summary, summary.model.training_beats, "beats"),
        *facts,
        *_accuracy_facts(summary),
        *heart_rate_facts(summary),
    ]
    sections.extend(holter_sections(summary, scored=True, files=files))
    sections.extend(_reference_sections(summary) + _accuracy_sections(summary))
    if flagged is not None:
        sections.append(_flagged_section(flagged, summary))
    sections.append(
        Section(
            "Scores against the model's training beats",
            "A recording like the training beats has its histogram over theirs; a shift to the right is a "
            "recording the model finds unusual as a whole.",
            figures=figure_list(files, ["scores.png", "extremes.png", "latent.png"]),
        )
    )
    sections.append(Section("Heart rate and beats", figures=figure_list(files, ["heart_rate.png", "excerpt.png"])))
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
        *_learning_facts(summary, "beats"),
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
    sections.append(_training_section(summary, files, collapsed=False))
    sections.append(Section("What the model learned", figures=figure_list(files, ["scores.png", "latent.png"])))
    return facts, sections


#: Listed windows shown in the report's table against a reference, best ranks first.
MAX_LISTED_ROWS = 200


def _window_facts(summary: RunSummary) -> list[tuple[str, str]]:
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


def _window_reference_sections(summary: RunSummary) -> list[Section]:
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


def _series_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``series`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    w = summary.windows
    facts = [
        *_learning_facts(summary, "windows"),
        *_window_facts(summary),
        ("windows", number(w.used)),
        ("window", str(summary.window or "")),
        ("windows with gaps filled", number(w.windows_with_filled_slots)),
        *facts,
    ]
    if flagged is not None:
        sections.append(_flagged_section(flagged, summary))
    sections.extend(_window_reference_sections(summary))
    sections.append(Section("Anomalous windows", figures=figure_list(files, ["days.png", "extremes.png"])))
    codes = figure_list(files, ["latent.png"])
    sections.append(Section("Codes", _model_use(summary, "windows"), figures=codes))
    sections.append(_training_section(summary, files))
    return facts, sections


def _score_series_page(
    summary: RunSummary,
    files: dict[str, Path],
    facts: list[tuple[str, str]],
    flagged: FlaggedRows | None,
    extra_html: Markup | None,
) -> tuple[list[tuple[str, str]], list[Section]]:
    """The facts and sections of a ``score-series`` run's page (``facts``: what was read, where)."""
    sections: list[Section] = []
    w = summary.windows
    facts = [
        ("windows flagged as anomalous", number(len(summary.flagged))),
        *_window_facts(summary),
        ("share flagged", f"{100 * summary.flag_rate:.2f} %"),
        ("windows scored", number(w.used)),
        ("window", str(summary.window or "")),
        ("threshold (score, the model's)", number(summary.threshold)),
        *_scorer_facts(summary),
        *_model_facts(summary, summary.model.training_windows, "windows"),
        ("windows with gaps filled", number(w.windows_with_filled_slots)),
        *facts,
    ]
    if flagged is not None:
        sections.append(_flagged_section(flagged, summary))
    sections.extend(_window_reference_sections(summary))
    sections.append(Section("Anomalous windows", figures=figure_list(files, ["days.png", "extremes.png"])))
    sections.append(
        Section(
            "Scores against the model's training windows",
            "A period like the training one has its histogram over theirs; a shift to the right is a "
            "period the model finds unusual as a whole.",
            figures=figure_list(files, ["scores.png", "latent.png"]),
        )
    )
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
    "series": _series_page,
    "score-series": _score_series_page,
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
        facts.append(("F1 against the references", f"{summary.accuracy.f1:.4f}"))
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
