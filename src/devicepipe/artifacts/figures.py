"""The figures of each kind of run, drawn from what the run made (:class:`Made`); each returns
a matplotlib figure, or None when the run has nothing to draw."""

from __future__ import annotations

from typing import Any

import numpy as np

from devicepipe.artifacts.made import Made
from devicepipe.ecg import BEAT_CLASSES, POOR_QUALITY, label_beats, poor_stretches, stretch_medians
from devicepipe.heart.rate import minute_rates
from devicepipe.plots import (
    plot_beats_excerpt,
    plot_days,
    plot_extremes,
    plot_generated,
    plot_heart_rate,
    plot_intervals,
    plot_latent,
    plot_quality,
    plot_score_distribution,
    plot_training,
)
from devicepipe.plots.events import CLASS_COLOURS, plot_event_strips

#: Each beat class in a word or two, for legends and titles.
CLASS_WORDS = {name: words.split(" (")[0] for name, words in BEAT_CLASSES.items()}


def excerpt(m: Made) -> Any:
    """Ten seconds of the signal (which starts at ``rec.start_sample`` of the recording) with the
    detected beats, and the reference beats where the run was given them."""
    if m.rec is None or m.signal is None:
        return None
    rec = m.rec
    return plot_beats_excerpt(
        m.signal,
        m.fs,
        m.beat_places.all_peaks if m.peaks is None else m.peaks,
        reference=m.reference,
        unit=rec.units[0],
        title=f"{rec.source} ({rec.channels[0]}): detected beats",
        offset=rec.start_sample,
        start_s=0.0 if rec.start_sample else None,
    )


#: The events a strip is drawn of, in the order of the figure, and what each strip is called.
EVENT_STRIPS = {"run": "run", "couplet": "couplet", "bigeminy": "bigeminy", "trigeminy": "trigeminy",
                "pause": "pause", "afib": "irregularly irregular rhythm"}  # fmt: skip


def event_strips(m: Made) -> Any:
    """Eight seconds around the first event of each kind, every beat lettered with its class."""
    if m.rec is None or m.signal is None or m.classes is None or not m.events:
        return None
    peaks = m.beat_places.all_peaks if m.peaks is None else m.peaks
    strips = []
    for kind, title in EVENT_STRIPS.items():
        found = [e for e in m.events if e.kind == kind]
        if found:
            strips.append((title, found[0].first_beat, min(found[0].last_beat, found[0].first_beat + 8), len(found)))
    missed = None
    if m.reference is not None:  # the reference's beats that no beat found lies within 150 ms of
        ref = np.asarray(m.reference, dtype=np.int64)
        missed = ref[label_beats(peaks, np.full(len(peaks), "x"), ref, m.fs) == ""]
    return plot_event_strips(m.signal, m.fs, peaks, m.classes, strips, offset=m.rec.start_sample,
                             unit=m.rec.units[0], missed=missed)  # fmt: skip


def heart_rate(m: Made) -> Any:
    """Each beat's heart rate and the median of each minute."""
    if m.rec is None or m.signal is None:
        return None
    peaks = m.beat_places.all_peaks if m.peaks is None else m.peaks
    minutes = minute_rates(peaks, m.fs)
    return plot_heart_rate(peaks, m.fs, minutes=(minutes.minute, minutes.median_bpm))


def intervals(m: Made) -> Any:
    if m.rec is None or m.signal is None or m.peaks is None or m.beats is None:
        return None
    return plot_intervals(np.diff(m.peaks), m.fs, keep_range=m.beats.length_range)


def quality(m: Made) -> Any:
    """Each beat's and each stretch's signal quality over the recording, the unusable stretches shaded."""
    if m.quality is None or m.rec is None or (m.kind == "beats" and m.signal is None):
        return None
    rated, kept_peaks, n_samples = m.quality
    fs = m.fs
    medians = stretch_medians(rated, kept_peaks, n_samples, fs).cpu().numpy()
    poor = poor_stretches(rated, kept_peaks, n_samples, fs).cpu().numpy() / fs
    times = kept_peaks.cpu().numpy() / fs
    return plot_quality(times, rated.beat.cpu().numpy(), medians, rated.window_s, poor, threshold=POOR_QUALITY)


def training(title: str) -> Any:
    """The loss curves of a learning run, titled ``title`` (``{n}``: its rows, ``{recordings}``)."""

    def draw(m: Made) -> Any:
        words = title.format(n=_rows(m), recordings=m.n_recordings, kind=_series_kind(m))
        assert m.histories is not None  # (a learning run's)
        return plot_training(m.histories, title=words, warning=m.warning)

    return draw


def row_classes(m: Made) -> np.ndarray | None:
    """Each row's beat class ``(rows,)``, for a run of beats that were classed (else None)."""
    if m.classes is None or m.places is None:
        return None
    kept = m.places.kept
    if len(m.classes) != len(kept):
        return None
    return m.classes[kept]


def latent(title: str) -> Any:
    """The rows' codes coloured by class where the rows are classed beats, else by score; flagged
    rows ringed, reference labels marked. ``title`` as :func:`training`'s, without what colours it."""

    def draw(m: Made) -> Any:
        rows = m.scored
        classes = row_classes(m)
        coloured = "anomaly score" if classes is None else "class"
        return plot_latent(
            rows.emb,
            scores=rows.scores,
            labels=classes,
            colours=CLASS_COLOURS,
            names=CLASS_WORDS,
            threshold=m.threshold,
            flags=rows.flags,
            truth=None if m.places is None else m.places.truth,
            title=title.format(n=_rows(m), recordings=m.n_recordings) + f", coloured by {coloured}",
            warning=m.warning,
        )

    return draw


def extreme_beats(whose: str) -> Any:
    """The five highest- and lowest-scoring beats (``RowViews.extreme_idx``) with ``whose``
    reconstructions, each titled by its time and reference label (where the run has them)."""

    def draw(m: Made) -> Any:
        rows, views, places, fs = m.scored, m.row_views, m.beat_places, m.fs
        truth = places.truth

        def name(i: int) -> str:
            label = "" if truth is None else f", reference {truth[i] or 'none'}"
            return f"t={places.peaks[i] / fs:.1f} s{label}"

        return plot_extremes(
            m.need(views.extreme_rows, "extreme rows"),
            m.need(views.extreme_recon, "reconstructions"),
            rows.scores[views.extreme_idx],
            sampling_rate=m.beat_rate,
            names=[name(i) for i in views.extreme_idx],
            title=f"Most and least anomalous beats with {whose} reconstructions",
            ylabel="standardised amplitude",
            threshold=m.threshold,
            warning=m.warning,
            flags=rows.flags[views.extreme_idx],
        )

    return draw


def generated(m: Made) -> Any:
    h = m.row_views
    code, grid = h.grid_towards, m.need(h.grid, "latent grid")
    if code < 0:  # no class to run to: the directions the codes spread most along
        return plot_generated(
            m.need(h.generated, "generated beats"),
            grid,
            centre=h.centre,
            sampling_rate=m.beat_rate,
            title="Beats generated across the latent space (left to right: the direction in which the beats' "
            "codes spread most;\ntop to bottom: the next) with the typical beat in grey; above each: its latent point",
            warning=m.warning,
        )
    other = list(BEAT_CLASSES)[code]
    words = CLASS_WORDS[other]
    return plot_generated(
        m.need(h.generated, "generated beats"),
        grid,
        centre=h.centre,
        centre_name="typical normal beat (the N beats' mean code)",
        columns=["N"] + [""] * (round(np.sqrt(len(grid))) - 2) + [other],
        columns_row=round(np.sqrt(len(grid))) // 2,  # the middle row: the path from N to the class
        hardly=f"the model decodes every code here, the {other} beats' mean included,\ninto nearly the typical beat: "
        "its codes carry little of the beats' shapes, though latent.png may still set them apart",
        hardly_across=f"the model decodes the {words} beats' mean code into nearly the normal beat: it does not "
        "tell their shape from the normal one",
        sampling_rate=m.beat_rate,
        title=f"What the model learned: the middle row runs from the normal (N) beats' mean code to the {words} "
        f"({other}) beats' (marked);\nup and down: how normal beats' codes vary most; above each beat: its latent "
        "point",
        warning=m.warning,
    )


def scores(title: str | None = None, what: str = "beats", names: tuple[str, str] | None = None) -> Any:
    """The rows' scores against the model's training rows', the threshold dashed."""

    def draw(m: Made) -> Any:
        more: dict[str, Any] = {} if title is None else {"title": title}
        if names is not None:
            more["names"] = names
        if what != "beats":
            more["what"] = what
        return plot_score_distribution(
            m.need(m.scored.train_scores, "training scores"), m.scored.scores, m.threshold, **more
        )

    return draw


def window_extremes(m: Made) -> Any:
    """The most and least anomalous windows of a load series with their reconstructions."""
    unit = _unit(m.unit_name)
    return plot_extremes(
        m.window_rows,
        m.need(m.recon, "reconstructions"),
        m.scored.scores,
        names=_window_names(m),
        title="Most and least anomalous windows with reconstructions",
        x=_hours(m),
        xlabel="hours from the window's start",
        ylabel=f"load ({unit})" if unit == "MW" else m.unit_name,
        threshold=m.threshold,
        warning=m.warning,
        flags=m.scored.flags,
    )


def days(m: Made) -> Any:
    """The flagged windows against a typical one."""
    unit = _unit(m.unit_name)
    directions = None if m.leading is None else m.leading.get("direction")
    days = m.window_rows  # (a KeyError where the run made none)
    assert m.flagged is not None  # (a series run's)
    return plot_days(
        days, m.flagged, _window_names(m), unit=unit, hours=_hours(m), scores=m.scored.scores,
        directions=directions,
    )  # fmt: skip


def _rows(m: Made) -> str:
    """How many rows the model trained on: "2,000 of 100,000" where it learned from a sample."""
    n = m.wins.values.shape[0] if m.wins is not None else m.scored.scores.size
    fitted = getattr(m.detector, "fit_rows_", None) or {}
    rows, learned = fitted.get("rows", n), fitted.get("model", n)
    return f"{n:,}" if learned >= rows else f"{learned:,} of {rows:,}"


def _series_kind(m: Made) -> str:
    return "per-sample autoencoder" if m.pointwise else "autoencoder"


def _unit(unit_name: str) -> str:
    return "MW" if "MW" in unit_name.upper() else "value"


def _window_names(m: Made) -> list[str]:
    return [str(s)[:10] for s in m.windows.starts]


def _hours(m: Made) -> np.ndarray:
    return np.arange(m.window_rows.shape[1]) * m.windows.step_s / 3600
