"""What the command line says of a finished run, as lines of text (the CLI prints them; warnings
are the run's own, printed apart): one function per kind of run, looked up in
:data:`devicepipe.pipelines.registry.PIPELINES`."""

from __future__ import annotations

from devicepipe.artifacts.summaries import ABSENT, HolterSummary, LabelCount, RunSummary, flag_rule, held
from devicepipe.core.units import format_duration
from devicepipe.ecg import EDGE_S, MATCH_TOLERANCE_S
from devicepipe.pipelines.results import BeatsResult, LearnResult
from devicepipe.signal.windows import DIRECTION_WORDS


def beats_lines(result: BeatsResult) -> list[str]:
    """The recording, its beats and heart rate, the seconds, the accuracy against a reference."""
    hr = result.mean_heart_rate_bpm
    kept = int(result.beats.kept.count_nonzero())  # (a count: no copy of the mask, as a sum would make)
    leads = result.leads
    channel = f"beats found on {' and '.join(leads)} together, cut from {result.channel}" if leads else result.channel
    lines = [
        f"{result.source} ({channel}, {result.sampling_rate:g} Hz, "
        f"{format_duration(result.n_samples / result.sampling_rate)}) on {result.device}",
        f"beats found: {result.peaks.size:,}; median heart rate: {'-' if hr is None else f'{hr:.0f} bpm'}; "
        f"kept by segmentation: {kept:,} ({100 * result.beats.share_kept:.1f} %), "
        f"matrix {tuple(result.beats.matrix.shape)}",
        "seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in result.seconds.items()),
    ]
    if result.score is not None:
        s = result.score
        lines.append(
            f"accuracy against {result.reference}, inside the scoring window (all but the first and last "
            f"{EDGE_S:g} s; {s.tp + s.fn:,} reference beats and {s.tp + s.fp:,} found beats in it; a match within "
            f"{1000 * MATCH_TOLERANCE_S:.0f} ms): {s}"
        )
    return lines + holter_lines(result.holter)  # the answer last, where the eye lands


def _clock(seconds: float) -> str:
    """``seconds`` into a recording as h:mm:ss."""
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def holter_lines(h: HolterSummary | None) -> list[str]:
    """The clinical answer, the same lines for every command that classes beats (none for a run
    without classes): the heart rate, the rhythm, the beats per class, the events, and what
    makes the classes less than they seem."""
    if not h:
        return []
    rate = f"mean {h.mean_hr_bpm:.0f} bpm" if h.mean_hr_bpm is not None else "too few beats for a rate"
    if h.min_hr_bpm is not None and h.max_hr_bpm is not None:
        rate = (
            f"{h.min_hr_bpm:.0f}-{h.max_hr_bpm:.0f} bpm by the minute (slowest at {_clock(h.min_hr_at_s or 0)}, "
            f"fastest at {_clock(h.max_hr_at_s or 0)}), " + rate
        )
    shares = ", ".join(
        f"{name} {h.counts[name]:,}" + (f" ({h.burden_pct[name]:.1f} %)" if name in "SV" and h.counts[name] else "")
        for name in h.counts
    )
    e = h.events
    runs = f" (longest {h.longest_run_beats} beats, fastest {h.fastest_run_bpm:.0f} bpm)" if e.get("run") else ""
    pauses = f" (longest {h.longest_pause_s:.2f} s)" if e.get("pause") else ""
    events = (
        f"events: {e.get('couplet', 0)} couplets, {e.get('run', 0)} runs{runs}, {e.get('bigeminy', 0)} bigeminy and "
        f"{e.get('trigeminy', 0)} trigeminy episodes, {e.get('pause', 0)} pauses over 2 s{pauses}"
    )
    return [f"heart rate: {rate}", f"rhythm: {_rhythm(h)}", f"beats by class: {shares}", events,
            *(f"classes: {w}" for w in h.warnings or [])]  # fmt: skip


def _rhythm(h: HolterSummary) -> str:
    """Whether and how much atrial fibrillation (irregularly irregular rhythm) was found."""
    n = h.events.get("afib", 0)
    if not n:
        return "no atrial fibrillation found (no stretch of irregularly irregular rhythm)"
    kind = h.af_kind if h.af_kind is not ABSENT else "atrial fibrillation"
    first = h.listed["afib"][0] if h.listed.get("afib") else None
    at = f", the first from {_clock(first['start_s'])} to {_clock(first['end_s'])}" if first else ""
    return f"{kind}, {n} episode{'s' if n != 1 else ''}, {100 * h.af_share:.1f} % of the recording{at}"


def ecg_lines(result: LearnResult) -> list[str]:
    s = result.summary
    c = s.counts
    lines = [
        f"{c.beats_found:,} beats found, {c.beats_kept:,} kept (their window lies inside the recording), "
        f"{c.flagged:,} flagged as anomalous ({flag_rule(s)}); {final_loss(s)}"
    ]
    left = held(s.quality.left_out_of_training_and_flags) if s.quality else None
    if left is not None:
        lines.append(
            f"{left:,} beats of poor signal quality (under {s.quality.poor_below:g}) left out of training "
            "and out of the flags"
        )
    lines += label_lines(s)
    lines += [training_line(s), "seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in s.seconds.items())]
    return lines + holter_lines(s.holter)  # the answer last, where the eye lands


def score_lines(result: LearnResult) -> list[str]:
    s = result.summary
    c = s.counts
    return [
        f"{c.beats_found:,} beats found, {c.beats_kept:,} scored, {c.flagged:,} flagged as anomalous "
        f"({100 * s.flag_rate:.2f} %; the model's threshold {s.threshold:.4g}, "
        f"trained on {s.model.training_beats:,} beats)",
        *label_lines(s),
        *holter_lines(s.holter),  # the answer last, where the eye lands
    ]


def score_series_lines(result: LearnResult) -> list[str]:
    s = result.summary
    return [
        f"{s.windows.used:,} windows of {s.window} scored, {len(s.flagged):,} flagged as anomalous "
        f"({100 * s.flag_rate:.2f} %; the model's threshold {s.threshold:.4g}, trained on "
        f"{s.model.training_windows:,} windows)",
        *window_lines(s),  # the answer last, where the eye lands
    ]


def series_lines(result: LearnResult) -> list[str]:
    s = result.summary
    w = s.windows
    return [
        f"{w.used:,} windows of {s.window} ({s.steps_per_window} steps); {w.windows_with_filled_slots} "
        f"had gaps filled ({w.filled_slots} slots), {len(w.dropped)} dropped; duplicates averaged: "
        f"{s.time['n_duplicates']}",
        training_line(s),
        f"{len(s.flagged)} windows flagged ({flag_rule(s, 'window')})",
        *window_lines(s),  # the answer last, where the eye lands
    ]


#: Flagged windows named per direction on the terminal, highest scores first.
WINDOWS_NAMED = 8


def window_lines(s: RunSummary) -> list[str]:
    """The flagged windows, low (outage-like) and high (demand extremes), and, with a reference,
    how many of its listed days were flagged, per kind."""
    lines = []
    for direction, words in DIRECTION_WORDS.items():
        named = [f.start[:10] for f in s.flagged if f.direction == direction]
        if named:
            more = f" and {len(named) - WINDOWS_NAMED:,} more" if len(named) > WINDOWS_NAMED else ""
            lines.append(f"flagged {words}: {len(named):,}: {', '.join(named[:WINDOWS_NAMED])}{more}")
    flat = s.flat_windows or []
    if flat:
        more = f" and {len(flat) - WINDOWS_NAMED:,} more" if len(flat) > WINDOWS_NAMED else ""
        lines.append(
            f"{len(flat):,} window(s) hold one value throughout (a stuck meter, or a constant fill), flagged or not: "
            + ", ".join(f[:10] for f in flat[:WINDOWS_NAMED])
            + more
        )
    ref = s.window_reference
    if ref:
        ppv = "-" if ref.ppv is None else f"{100 * ref.ppv:.1f} %"
        kinds = ", ".join(f"{kind} {k.flagged} of {k.listed}" for kind, k in ref.kinds.items())
        outside = f"; {len(ref.outside)} listed time(s) in no scored window" if ref.outside else ""
        lines.append(
            f"against {ref.source}: {ref.flagged_listed} of {ref.listed_windows} listed windows flagged "
            f"(sensitivity {100 * ref.sensitivity:.1f} %, positive predictivity {ppv}): {kinds}; "
            f"{ref.flagged_not_listed} flagged window(s) not listed{outside}; the {ref.listed_windows} highest "
            f"scores hold {ref.listed_in_top} of the listed windows"
        )
    return lines


def train_lines(result: LearnResult) -> list[str]:
    s = result.summary
    r = s.recordings
    lines = [
        f"{s.counts.beats:,} beats of {r.used:,} recordings trained one model"
        + (f"; {len(r.skipped)} left out, the first: {r.skipped[0].path}: {r.skipped[0].error}" if r.skipped else "")
    ]
    if s.quality:
        q = s.quality
        lines.append(f"{q.left_out_of_training:,} beats under --min-quality {q.min_quality:g} left out of training")
    return [*lines, training_line(s)]


def training_line(s: RunSummary) -> str:
    """How long training ran, whose weights were kept, on how many threads."""
    e, t = s.epochs, s.threads
    runs, kept = sorted(set(e.run)), sorted(set(e.kept))
    span = "-".join(map(str, runs[:: max(1, len(runs) - 1)]))
    if s.settings.get("epochs") is not None:
        trained = f"trained {span} epochs (as asked)"
    elif any(e.stopped_early):
        trained = f"trained {span} of at most {e.limit} epochs (stopped when the validation loss no longer improved)"
    else:
        trained = f"trained {span} of at most {e.limit} epochs (ran to the limit)"
    return (
        f"{trained}; kept the weights of epoch {'-'.join(map(str, kept[:: max(1, len(kept) - 1)]))}; "
        f"{t.threads} CPU thread{'s' if t.threads > 1 else ''} ({t.reason})"
    )


def final_loss(s: RunSummary) -> str:
    losses = s.final_loss.train
    if len(losses) == 1:
        return f"final loss {losses[0]:.4g}"
    return f"final loss {sum(losses) / len(losses):.4g} (mean of {len(losses)} members)"


def _never(count: LabelCount, words: str = " (and {} never detected)") -> str:
    """Words for a label's reference beats that no beat found matched (none where there are none)."""
    return words.format(f"{count.missed:,}") if count.missed is not ABSENT and count.missed else ""


def label_lines(s: RunSummary) -> list[str]:
    """How many beats of each reference label and AAMI class were flagged, when the run had a reference."""
    if not s.reference:
        return []
    lines = [
        f"flagged by reference label ({s.reference.source}): "
        + ", ".join(f"{name} {v.flagged:,} of {v.beats:,}{_never(v)}" for name, v in s.reference.labels.items())
    ]
    if s.reference.aami:
        lines.append(
            "flag rate by AAMI class: "
            + ", ".join(
                f"{k} {100 * v.flag_rate:.1f} % ({v.flagged:,} of {v.beats:,}{_never(v, '; {} never detected')})"
                for k, v in s.reference.aami.items()
            )
        )
    return lines
