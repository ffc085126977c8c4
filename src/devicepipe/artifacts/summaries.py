"""What a run found, typed: :class:`RunSummary` (one recording, any pipeline) and
:class:`DatasetSummary` (many), frozen dataclasses of typed sections.

``summary.json`` is one of these serialised (:meth:`Record.to_dict`), with its ``schema``
version; the report, the command line's printers and the dataset index read their attributes.
A key a kind of run does not write is :data:`ABSENT` (false, and left out of the JSON; a key
written as ``null`` is None), and a key not declared here is kept in ``extra`` and written back
as it was, so that reading and writing a summary never loses a key.

Units are in the names: ``_s`` seconds, ``_ms`` milliseconds, ``_hz`` hertz, ``_bpm`` beats
per minute, ``_pct`` percent, ``_share`` a fraction of 1, ``_bytes`` bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union, cast


class _Absent:
    """The value of a key a summary does not hold: false, and left out when written."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


#: A key the summary does not hold (see the module).
ABSENT: Any = _Absent()

R = TypeVar("R", bound="Record")


def held(value: Any) -> Any:
    """A summary's value, None where the summary does not hold the key (:data:`ABSENT`)."""
    return None if value is ABSENT else value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(hint: Any, value: Any) -> Any:
    """``value`` as read from JSON, made into ``hint``'s type where that is a record."""
    if value is None or value is ABSENT:
        return value
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(kinds[0], value) if len(kinds) == 1 else value
    if isinstance(hint, type) and issubclass(hint, Record) and isinstance(value, Mapping):
        return hint.from_dict(value)
    if origin in (list, tuple) and isinstance(value, list):
        (item,) = typing.get_args(hint)[:1] or (Any,)
        return [_convert(item, v) for v in value]
    if origin in (dict, Mapping) and isinstance(value, Mapping):
        args = typing.get_args(hint)
        return {k: _convert(args[1] if args else Any, v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class Record:
    """A section of a summary: built from its JSON object, written back as it was.

    ``record["key"]`` and ``record.get("key")`` read the JSON form of a key (for code written
    against the dictionaries); new code reads the attributes."""

    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, kw_only=True, repr=False)

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record of a JSON object: the declared keys typed, the others kept in ``extra``."""
        hints = _hints(cast(type, cls))
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: _convert(hints[k], v) for k, v in data.items() if k in names}
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: every key held (none :data:`ABSENT`), then ``extra``."""
        out = {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "extra" and getattr(self, f.name) is not ABSENT
        }
        return {**out, **self.extra}

    def __getitem__(self, key: str) -> Any:
        value = self.to_dict()[key]
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def replace(self: R, **changes: Any) -> R:
        """A copy with ``changes`` (as :func:`dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)


def _section(cls: type[R]) -> type[R]:
    """A frozen dataclass whose every field defaults to :data:`ABSENT`."""
    for name in cls.__annotations__:
        if not hasattr(cls, name):
            setattr(cls, name, ABSENT)
    return dataclasses.dataclass(frozen=True)(cls)


@_section
class Counts(Record):
    """Beats (or training beats) found, kept by segmentation, flagged."""

    beats_found: int
    beats_kept: int
    flagged: int
    beats: int  # a population model's training beats


@_section
class SpectralHRV(Record):
    """Frequency-domain HRV (see :mod:`devicepipe.heart.spectral`): band powers in ms², LF/HF,
    LF and HF in percent of LF + HF; a power is None where the window resolves none of its band."""

    vlf_ms2: float | None
    lf_ms2: float | None
    hf_ms2: float | None
    total_ms2: float
    lf_hf: float | None
    lf_nu: float | None
    hf_nu: float | None
    window_s: float
    lowest_hz: float
    n_intervals: int
    method: str


@_section
class HeartRate(Record):
    """Time-domain HRV of the cleaned NN intervals (see :mod:`devicepipe.heart.rate`); SDANN and the
    SDNN index are None under three 5-minute segments."""

    nn_cleaning: str
    mean_nn_ms: float
    mean_hr_bpm: float
    sdnn_ms: float
    rmssd_ms: float
    pnn50_pct: float
    sdann_ms: float | None
    sdnn_index_ms: float | None
    n_intervals: int
    n_implausible: int
    n_ectopic: int
    frequency: SpectralHRV | None  # None under two minutes of NN intervals


@_section
class NonFinite(Record):
    count: int
    policy: str


@_section
class Quality(Record):
    """Signal quality: beats rated, those in stretches of poor signal, those in good signal unlike
    the typical beat, the unusable stretches (``[start_s, end_s]`` each)."""

    measure: str
    window_s: float
    poor_below: float
    beats_rated: int
    beats_poor: int
    beats_unlike_typical: int
    median: float | None
    unusable_s: float
    unusable_share: float
    unusable_stretches_s: list[list[float]]
    min_quality: float
    left_out_of_training: int
    left_out_of_training_and_flags: int


@_section
class Accuracy(Record):
    """Detected beats against reference beats (one recording's, or a dataset's counts added up)."""

    reference: str
    tolerance_s: float
    scoring_window_s: list[float]
    reference_beats_in_window: int
    beats_found_in_window: int
    records_scored: int
    tp: int
    fp: int
    fn: int
    sensitivity: float
    ppv: float
    f1: float


@_section
class LabelCount(Record):
    """A reference label's (or AAMI class's) beats among those scored, how many were flagged, and
    its reference beats that no detection matched (``missed``; absent in older runs)."""

    beats: int
    flagged: int
    flag_rate: float
    missed: int


@_section
class Reference(Record):
    """Flags per reference label and per AAMI class."""

    source: str
    tolerance_s: float
    labels: dict[str, LabelCount]
    aami: dict[str, LabelCount]


@_section
class Scorer(Record):
    """How rows were scored (see :data:`devicepipe.scorers.SCORER_KINDS`) and why."""

    scorer: str
    why: list[str]
    training_rows: int
    held_out_for_stopping: int
    model_learned_from_rows: int
    reference_rows: int
    neighbours: int | None
    local_neighbours: int
    local_past_nearest: int
    min_effect: float


@_section
class Epochs(Record):
    """Epochs run and kept, one entry per ensemble member."""

    run: list[int]
    kept: list[int]
    stopped_early: list[bool]
    limit: int


@_section
class FinalLoss(Record):
    train: list[float]
    val: list[float]


@_section
class Threads(Record):
    threads: int
    reason: str
    step_flops: float
    wait_policy: str


@_section
class Transfers(Record):
    """Host-device copies counted while the run ran."""

    counted_in: str
    host_to_device: int
    host_to_device_bytes: int
    device_to_host: int
    device_to_host_bytes: int
    other: int


@_section
class Flagged(Record):
    """A flagged beat (``peak``, ``time_s``, ``reference``) or window (``start``)."""

    peak: int
    time_s: float
    start: str
    score: float
    reference: str | None
    tail_probability: float
    why: str
    direction: str  # a window's: "low" or "high" against like windows (absent in older runs)
    departure_share: float  # its largest departure, a signed share of the like windows' value there
    departure_at: str  # the time of that departure


@_section
class ListedWindow(Record):
    """A window that holds a reference's listed time: its score, rank (1: the highest of the
    run), flag and direction against like windows."""

    start: str
    listed: str
    kind: str
    score: float
    rank: int
    flagged: bool
    direction: str


@_section
class KindCount(Record):
    """The listed windows of one kind, those flagged, and their ranks among every window's scores."""

    listed: int
    flagged: int
    best_rank: int
    median_rank: float


@_section
class WindowReference(Record):
    """A load series' flagged windows against a reference's listed days (``series --reference``)."""

    source: str
    rows: int
    outside: list[str]  # listed times in no scored window (outside the series, or in a window left out)
    listed_windows: int
    flagged_listed: int
    flagged_not_listed: int
    sensitivity: float
    ppv: float | None
    listed_in_top: int  # listed windows among the listed_windows highest scores (the ranking, threshold aside)
    kinds: dict[str, KindCount]
    windows: list[ListedWindow]


@_section
class Model(Record):
    """The model a ``score`` run applied."""

    path: str | None
    members: int
    trained_on_device: str | None
    training_beats: int
    training_windows: int
    geometry: dict[str, Any]
    versions: dict[str, Any]


@_section
class Windows(Record):
    used: int
    filled_slots: int
    windows_with_filled_slots: int
    dropped: list[Any]


@_section
class Skipped(Record):
    path: str
    error: str


@_section
class Recordings(Record):
    """The recordings a population model was trained on."""

    used: int
    skipped: list[Skipped]
    described: str


@_section
class Distributed(Record):
    backend: str
    world_size: int
    how: str


@_section
class HolterSummary(Record):
    """Each beat's AAMI class counted, and what a Holter report gives (see :mod:`devicepipe.heart.holter`):
    burden per class (count, percent, per hour), events of each kind counted (``events``) and
    listed (``listed``, up to 100 of each), the longest and fastest run, the longest pause, the
    lowest and highest one-minute heart rate and when, and the share in atrial fibrillation."""

    method: str
    classes: dict[str, str]
    duration_s: float
    beats: int
    counts: dict[str, int]
    burden_pct: dict[str, float]
    per_hour: dict[str, float]
    events: dict[str, int]
    longest_run_beats: int | None
    fastest_run_bpm: float | None
    longest_pause_s: float | None
    min_hr_bpm: float | None
    min_hr_at_s: float | None
    max_hr_bpm: float | None
    max_hr_at_s: float | None
    mean_hr_bpm: float | None
    af_share: float
    listed: dict[str, list[dict[str, Any]]]
    warnings: list[str]
    af_kind: str = ABSENT  # "no AF", "paroxysmal AF" or "persistent AF" (absent in older runs)


@_section
class RunSummary(Record):
    """``summary.json`` of one run: ``beats``, ``ecg``, ``score``, ``train``, ``series`` or a
    ``score`` of a series; each holds the keys of its kind (see tests/contract)."""

    schema: int
    input: str
    input_files: list[dict[str, Any]]
    channel: str
    column: str
    device: str
    sampling_rate_hz: float | None
    stated_sampling_rate_hz: float  # the recording's own rate, where another was given (--override-rate)
    n_samples: int
    non_finite_values: NonFinite
    method: str
    segmentation: str
    beats_found_on_leads: list[str]
    chunked: dict[str, Any]
    counts: Counts
    beat_width: int
    heart_rate: HeartRate | None
    holter: HolterSummary
    quality: Quality
    accuracy: Accuracy | None
    reference: Reference
    window_reference: WindowReference
    flat_windows: list[str]  # a series' windows that hold one value throughout (absent in older runs)
    model: Model
    recordings: Recordings
    window: str
    window_s: float
    steps_per_window: int
    pointwise: bool
    time_column: str
    time: dict[str, Any]
    windows: Windows
    threshold: float
    threshold_means: str
    flag_rate: float
    flagged: list[Flagged]
    scorer: Scorer
    epochs: Epochs
    final_loss: FinalLoss
    converged: bool
    model_failed: str | None
    threads: Threads
    settings: dict[str, Any]
    distributed: Distributed | None
    streamed: dict[str, Any]
    seconds: dict[str, float]
    transfers: Transfers | None
    warnings: list[str]
    files: list[str]


@_section
class Failure(Record):
    path: str
    error: str


@_section
class Engine(Record):
    """Where a dataset ran: a plain loop, a local Dask cluster or a user's scheduler."""

    kind: str
    workers: int
    threads_per_worker: int
    devices: list[str]
    scheduler: str | None
    dashboard: str | None


@_section
class DatasetSummary(Record):
    """``summary.json`` of a run on many recordings: the counts of its index added up."""

    schema: int
    kind: str
    input: str
    recordings: int
    ok: int
    failed: int
    resumed: int
    beats: int | None
    flagged: int | None
    accuracy: Accuracy | None
    duration_s: float
    seconds: dict[str, float]
    engine: Engine
    settings: dict[str, Any]
    failures: list[Failure]
    files: list[str]


def flag_rule(s: RunSummary, what: str = "beat") -> str:
    """What a flag took, in words: a score above the run's threshold and, where its scorer measures
    it, a difference of at least ``min_effect`` of a typical ``what``'s shape."""
    scorer = held(s.scorer)
    least = None if scorer is None else held(scorer.min_effect)
    size = f" and a difference of at least {100 * least:g} % of a typical {what}" if least else ""
    return f"score above {s.threshold:.4g}{size}"


def read_summary(data: Mapping[str, Any]) -> RunSummary | DatasetSummary:
    """The typed summary of a ``summary.json`` object: a dataset's (it has ``kind``) or a run's."""
    return DatasetSummary.from_dict(data) if "kind" in data else RunSummary.from_dict(data)
