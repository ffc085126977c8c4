"""What the pages of learning runs share: the flagged rows and their section, how the model was
trained and what it gives the run, the scorer and the model in facts, the timing, what was read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from devicepipe.artifacts.summaries import ABSENT, RunSummary, flag_rule, held
from devicepipe.core.units import format_duration
from devicepipe.report.parts import Section, number, shown_figures, sparkline
from devicepipe.scorers import SCORER_KINDS

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


def input_facts(summary: RunSummary) -> list[tuple[str, str]]:
    fs, n = summary.sampling_rate_hz, summary.n_samples
    facts = [("device", str(summary.device or "-"))]
    if fs and n:
        rate = ("sampling rate (Hz)", number(float(fs))) if fs >= 1 else ("time step", format_duration(1 / fs))
        facts += [rate, ("length", format_duration(n / fs))]
    return facts


def flagged_section(flagged: FlaggedRows, summary: RunSummary) -> Section:
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


def scorer_facts(summary: RunSummary) -> list[tuple[str, str]]:
    """The scorer line of a learning page: its name, and k for the nearest-neighbour ones."""
    scorer = summary.scorer
    if not scorer:
        return []
    kind = SCORER_KINDS.get(scorer.scorer)
    label = scorer.scorer if kind is None else kind.label(scorer.neighbours or None)
    return [("scored by", label)]


def uses_model(summary: RunSummary) -> bool:
    """Whether the run's scores depend on its trained model (unknown scorers: assumed so)."""
    kind = SCORER_KINDS.get(summary.scorer.scorer) if summary.scorer else None
    return kind is None or kind.uses_model


def model_use(summary: RunSummary, what: str) -> str:
    """What the trained model gives the run, in words: whether the scores (and so the flags) of
    ``what`` use it, and what an unsettled model leaves unreliable."""
    name = summary.scorer.scorer if summary.scorer else "?"
    failed = held(summary.model_failed)
    if failed:
        return f"Training failed, so the figures below are drawn from a broken model: {failed[0].upper()}{failed[1:]}."
    if uses_model(summary):
        text = f"The scores and flags use the model's reconstruction errors (scorer {name})."
        return text + ("" if summary.converged else " The model had not settled, so read them with care.")
    text = (
        f"The scores and flags come from the {what} themselves (scorer {name}), not from the model: the "
        f"model gives the map of codes, the reconstructions and each row's code in embeddings.parquet."
    )
    return text + ("" if summary.converged else " It had not settled: those figures may still change; the flags stand.")


def converged_words(summary: RunSummary) -> str:
    if held(summary.model_failed):
        return "no: training failed" + ("" if uses_model(summary) else " (flags do not use it)")
    return number(summary.converged) + ("" if uses_model(summary) else " (flags do not use it)")


def learning_facts(summary: RunSummary, what: str) -> list[tuple[str, str]]:
    counts = summary.counts
    flagged = counts.flagged if counts and counts.flagged is not ABSENT else len(summary.flagged or [])
    return [
        (f"{what} flagged as anomalous", number(flagged)),
        ("threshold (score)", number(summary.threshold)),
        *scorer_facts(summary),
    ]


def training_section(summary: RunSummary, files: dict[str, Path], kind: str, collapsed: bool = True) -> Section:
    """How the model trained (epochs run and kept, whether it converged, the loss figure): with
    ``collapsed``, the run's internals, closed until opened, near the end of the page (a ``train``
    run's page shows it open: training is what it is for)."""
    e = summary.epochs
    rows = [
        ["epochs trained", "-".join(str(v) for v in sorted(set(e.run)))],
        ["epoch kept", "-".join(str(v) for v in sorted(set(e.kept)))],
        ["converged", converged_words(summary)],
    ]
    return Section(
        "Run internals: training" if collapsed else "Training",
        table={"header": ["", ""], "rows": rows},
        figures=shown_figures(files, kind, "training"),
        collapsed=collapsed,
    )


def model_facts(summary: RunSummary, rows: int, what: str) -> list[tuple[str, str]]:
    """Which model scored the rows, and what it was trained on (``rows`` of ``what``)."""
    m = summary.model
    return [
        ("model", "/".join(Path(m.path).parts[-2:]) if m.path else "given in Python"),
        ("model trained on", f"{number(rows)} {what}, on {m.trained_on_device or None}"),
    ]
