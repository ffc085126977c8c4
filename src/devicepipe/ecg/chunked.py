"""R peaks of a recording read a chunk at a time: the same beats as the whole recording's, with
memory bounded by the chunk."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from devicepipe.core.device import all_finite
from devicepipe.core.errors import DevicepipeError
from devicepipe.core.spill import Spill
from devicepipe.core.threads import detection_threads, using_threads
from devicepipe.core.units import hertz, whole
from devicepipe.ecg import ricker
from devicepipe.ecg.fuse import fuse_leads, stretch_medians_of_correlations
from devicepipe.ecg.inputs import far_level, less_level, level_samples
from devicepipe.ecg.peaks import ecg_peaks, options_of
from devicepipe.ecg.quality import beat_correlation, template_rows, typical_beat
from devicepipe.ecg.ricker import (
    PACKED_KEYS,
    SELECT_HALO_BEATS,
    Held,
    Ricker,
    abs_max,
    samples,
)
from devicepipe.ecg.segment import ecg_segment_chunked, segment_kept_parts
from devicepipe.ecg.spikes import SPIKE_PASSES, without_spikes
from devicepipe.signal.blocks import (
    lower_median_of_parts,
)


def ecg_peaks_chunked(
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> torch.Tensor:
    """The R peaks of a recording too long for memory, read a chunk at a time: exactly the
    peaks :func:`ecg_peaks` (``method="ricker"``) finds in one call on the whole recording.

    One pass: each chunk is filtered, and gives per-block summaries of the response (its maximum
    and mean every ``block_s``, and a sparse subsample) and its candidates (local maxima, with
    their height, sign and refined position), both small next to the signal and both written to
    temporary files (:class:`~devicepipe.core.spill.Spill`), so that memory does not grow with
    the recording. The thresholds, which depend on the whole recording, come from the summaries
    of all chunks (the envelope's median by an exact selection over parts read back); then the
    candidates above them go through the T-wave and polarity rules, which compare candidates
    across the recording, a part at a time. Chunks are read with a halo of
    samples either side (what decides a candidate: the filter, the refractory period, the
    refinement window), and start at multiples of the blocks, so each sample is computed as in
    one call.

    Parameters
    ----------
    read : ``read(start, stop)`` returns samples ``[start, stop)`` of the recording as a tensor
        of shape ``(stop - start,)``, on the device to work on.
    n_samples : the recording's length.
    sampling_rate : Hz.
    chunk : samples per chunk (rounded up to a multiple of the block alignment); the memory
        needed is a few times ``chunk`` samples, whatever the recording's length, besides the
        peaks returned (8 bytes each); the temporary files take about 50 bytes a beat.
    progress : called with ``(samples done, n_samples)`` after each chunk.
    options : the ``"ricker"`` method's settings, as :func:`ecg_peaks` takes them.

    Returns
    -------
    int64 Tensor of shape ``(n_peaks,)``, sorted, on the device ``read`` returns.
    """
    with Spill() as out:
        device = _detect_into(out, "peaks", read, n_samples, sampling_rate, chunk=chunk, progress=progress, **options)
        return out.read("peaks", device=device)


def ecg_peaks_chunked_to(
    out: Spill,
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    name: str = "peaks",
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> int:
    """:func:`ecg_peaks_chunked` with the peaks left on disk, in ``out`` under ``name`` (int64,
    sorted): nothing that grows with the recording stays in memory. Returns their number."""
    _detect_into(out, name, read, n_samples, sampling_rate, chunk=chunk, progress=progress, **options)
    return out.size(name)


def ecg_peaks_fused_chunked_to(
    out: Spill,
    reads: list[Callable[[int, int], torch.Tensor]],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    name: str = "peaks",
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> int:
    """The R peaks :func:`ecg_peaks` finds with ``leads="fuse"`` on the leads ``reads`` read (one
    ``read(start, stop)`` each, as :func:`ecg_peaks_chunked` takes), each read a chunk at a time:
    the same peaks as one call on all of them, left in ``out`` under ``name``. Returns their number.

    Each lead's peaks are found as :func:`ecg_peaks_chunked` finds them; then each lead's beats
    are cut a chunk at a time twice (the rows of its typical beat, then every beat's correlation
    with it) for how clearly the lead shows them in each stretch; the fusion
    (:func:`~devicepipe.ecg.fuse.fuse_leads`) holds every lead's peaks in memory (8 bytes a beat).
    ``progress`` is called with ``(samples done, n_samples * leads)``."""
    fs, leads = hertz(sampling_rate, "ecg_peaks_chunked()"), len(reads)
    if leads == 1:
        return ecg_peaks_chunked_to(out, reads[0], n_samples, fs, chunk=chunk, name=name, progress=progress, **options)
    per_lead, medians = [], []
    r = Ricker(fs, **options)
    cut = _aligned(chunk, r.alignment)  # (the beats cut as many samples at a time as detection reads)
    for i, read in enumerate(reads):
        done = None if progress is None else (lambda d, _t, i=i: progress(i * n_samples + d, leads * n_samples))
        _detect_into(out, f"{name}_lead{i}", read, n_samples, fs, chunk=chunk, progress=done, **options)
        peaks = out.read(f"{name}_lead{i}")
        with torch.inference_mode():
            medians.append(_lead_medians_chunked(read, n_samples, peaks, fs, cut))
        per_lead.append(peaks.to(medians[-1].device))
    rows = torch.cat([torch.full_like(p, i) for i, p in enumerate(per_lead)])
    _, fused = fuse_leads(rows, torch.cat(per_lead), torch.stack(medians), 1, n_samples, fs, refractory=r.refractory)
    out.append(name, fused)
    return out.size(name)


def _lead_medians_chunked(
    read: Callable[[int, int], torch.Tensor], n_samples: int, peaks: torch.Tensor, fs: float, chunk: int
) -> torch.Tensor:
    """:func:`~devicepipe.ecg.fuse.lead_stretch_medians` of one lead read a chunk at a time: its
    beats cut twice (:func:`ecg_segment_chunked`), for the rows of its typical beat and then for
    every row's correlation with it."""
    kept = sum(int(k.sum()) for k in segment_kept_parts(peaks, n_samples, fs, part=1 << 16, mode="centered"))
    pick = template_rows(kept)
    rows, seen = [], 0
    for _, part in ecg_segment_chunked(read, n_samples, peaks, fs, chunk=chunk, mode="centered"):
        k = part.matrix.shape[0]
        mine = pick[(pick >= seen) & (pick < seen + k)] - seen
        rows.append(part.matrix[mine.to(part.matrix.device)])
        seen += k
    if not kept:
        empty = read(0, min(n_samples, 1)).new_zeros(0)
        return stretch_medians_of_correlations(empty, peaks[:0].to(empty.device), n_samples, fs)
    template = typical_beat(torch.cat(rows))
    corr, at = [], []
    for _, part in ecg_segment_chunked(read, n_samples, peaks, fs, chunk=chunk, mode="centered"):
        corr.append(beat_correlation(part.matrix, template))
        at.append(part.peaks)
    return stretch_medians_of_correlations(torch.cat(corr), torch.cat(at), n_samples, fs)


def _detect_into(
    out: Spill, name: str, read: Callable[[int, int], torch.Tensor], n_samples: int, sampling_rate: float, **kw: Any
) -> torch.device:
    """The chunked detection into ``out``'s ``name``; the device ``read`` returns."""
    sampling_rate = hertz(sampling_rate, "ecg_peaks_chunked()")
    for what, value in (("n_samples", n_samples), ("chunk", kw["chunk"])):
        whole(value, "ecg_peaks_chunked()", what, "samples")
    out.append(name, torch.zeros(0, dtype=torch.int64))  # (the name holds int64, even with no peak)
    threads = detection_threads(kw["chunk"])  # (on a GPU the kernels use none of the host's threads)
    with using_threads(threads), torch.inference_mode():  # no autograd bookkeeping
        return _peaks_chunked(read, n_samples, sampling_rate, out=(out, name), **kw)


def detection_chunk(chunk: int, sampling_rate: float, **options: Any) -> int:
    """The samples per chunk :func:`ecg_peaks_chunked` works in for ``chunk`` asked: rounded up to
    a multiple of the detector's block alignment (at least one; a few seconds), so that its
    blocks and sub-blocks fall on the same samples as in one call."""
    return _aligned(chunk, Ricker(float(sampling_rate), **options).alignment)


def _aligned(chunk: int, step: int) -> int:
    """``chunk`` rounded up to a multiple of ``step`` (at least one)."""
    return max(step, -(-int(chunk) // step) * step)


def _peaks_chunked(
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    sampling_rate: float,
    *,
    chunk: int,
    progress: Callable[[int, int], None] | None,
    out: tuple[Spill, str],
    **options: Any,
) -> torch.device:
    unknown = sorted(set(options) - set(options_of("ricker")))
    if unknown:
        raise DevicepipeError(f"ecg_peaks_chunked(): no option {unknown[0]!r}; the options are {options_of('ricker')}.")
    if n_samples < 2 * sampling_rate:
        peaks = ecg_peaks(_checked(read(0, n_samples), sampling_rate, 0), sampling_rate, **options)
        assert isinstance(peaks, torch.Tensor)  # (one lead's)
        out[0].append(out[1], peaks)
        return peaks.device
    read = _less_level(read, n_samples, sampling_rate)
    r = Ricker(float(sampling_rate), **options)
    step = r.alignment
    chunk = _aligned(chunk, step)  # (as detection_chunk says)
    halo = -(-r.reach // step) * step
    starts = range(0, n_samples, chunk)
    for passes in range(SPIKE_PASSES, 0, -1):  # (as in one call: spikes out, and again)
        means = _edge_means(r, read, n_samples)
        # the same for every chunk (the rate, the samples' dtype and device); made before the first
        # chunk's buffers, as a small tensor kept among them would keep the heap in pieces
        kernel = r.kernel(means[0])
        with Spill() as spill:  # what grows with the recording waits on disk, not in memory
            subsample, negative, magnitude, counts, spikes = _first_pass(
                r, read, n_samples, chunk, halo, kernel, means, spill, progress
            )
            may_retry = bool(r.spike_window) and passes > 1 and spikes[0].numel() > 0
            device = _rest(
                r, spill, n_samples, chunk, starts, means, (subsample, negative, magnitude), counts, out,
                (spikes[2], spikes[1], spikes[3]) if may_retry else None,
            )  # fmt: skip
            if device is not None:
                return device
            read = _spikes_out(read, (spikes[0], spikes[1]), r.spike_window, n_samples, sampling_rate)
    raise AssertionError("unreachable")


def _spikes_out(
    read: Callable[[int, int], torch.Tensor],
    spikes: tuple[torch.Tensor, torch.Tensor],
    spike: int,
    n_samples: int,
    sampling_rate: float,
) -> Callable[[int, int], torch.Tensor]:
    """``read`` with the ``spikes`` (their extrema, absolute columns, sorted, and polarity) taken
    out as :func:`~devicepipe.ecg.spikes.without_spikes` takes them out of the whole recording: each
    part read with the margin a spike's window and its reach need."""
    order = torch.argsort(spikes[0], stable=True)  # (refined extrema: a few samples off the candidates' order)
    cols, signs = spikes[0][order], spikes[1][order]
    margin = 2 * spike + 2

    def despiked(start: int, stop: int) -> torch.Tensor:
        lo, hi = max(0, start - margin), min(n_samples, stop + margin)
        x = _checked(read(lo, hi), sampling_rate, lo)
        i0, i1 = (int(v) for v in torch.searchsorted(cols, torch.tensor([lo, hi])))
        rows = torch.zeros(i1 - i0, dtype=torch.int64)
        at, sign = cols[i0:i1].to(x.device), signs[i0:i1].to(device=x.device, dtype=x.dtype)
        return without_spikes(x[None], rows.to(x.device), at, sign, spike, lo)[0, start - lo : stop - lo]

    return despiked


def _rest(
    r: Ricker,
    spill: Spill,
    n_samples: int,
    chunk: int,
    starts: range,
    means: tuple[torch.Tensor, torch.Tensor],
    sampled: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    counts: list[int],
    out: tuple[Spill, str],
    spikes: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
) -> torch.device | None:
    """The thresholds, the candidates' tests and the rules of a chunked detection, from what its
    first pass (:func:`_first_pass`) left in ``spill`` (and its subsample, where the response is
    negative there and the largest magnitude, ``sampled``); the peaks to ``out``. With ``spikes``
    (their columns, polarity and response), None, and nothing written, where one of them stands
    over the lowest threshold a beat passes (:meth:`~devicepipe.ecg.ricker.Ricker.hides_beats`):
    the recording is detected again without them, as in one call."""
    subsample, negative, magnitude = sampled
    device, dtype = means[0].device, means[0].dtype
    n_blocks = spill.size("block_max")
    reach = samples(r.envelope_s / r.block_s, 1.0)  # the envelope's window, in blocks

    def envelope(a: int, b: int) -> torch.Tensor:
        """Blocks ``[a, b)`` of the envelope, ``(1, b - a)``, from the block maxima around them."""
        lo, hi = max(0, a - reach), min(n_blocks, b + reach)
        return r.envelope(spill.read("block_max", lo, hi, device)[None])[:, a - lo : b - lo]

    def envelope_parts() -> Iterator[torch.Tensor]:
        return (envelope(a, min(n_blocks, a + ricker.MEDIAN_PART)) for a in range(0, n_blocks, ricker.MEDIAN_PART))

    typical = lower_median_of_parts(envelope_parts).reshape(1, 1).to(device)
    no_ecg, dense = r.no_ecg(typical, subsample, magnitude.reshape(1), r.subsample_stride(n_samples), negative)
    del subsample, negative
    first, around = 0, r.threshold_reach
    # each candidate's test is its own, its block's thresholds local: a stretch of chunks at a time
    # (at least THRESHOLD_BLOCKS blocks: the summaries and candidates, not the samples, are read)
    per = max(1, THRESHOLD_BLOCKS * r.block // chunk)
    for g in range(0, len(starts), per):
        c0, count = starts[g], sum(counts[g : g + per])
        b0, b1 = c0 // r.block, -(-min(n_samples, c0 + per * chunk) // r.block)
        a, b = max(0, b0 - around), min(n_blocks, b1 + around)
        block_mean = spill.read("block_mean", a, b, device)[None]
        signs = (spill.read("block_signed", a, b, device)[None], spill.read("block_height", a, b, device)[None])
        limits = r.local_thresholds(envelope(a, b), block_mean, typical, no_ecg, dense, signs)
        if spikes is not None:
            cols, _, heights = spikes
            i0, i1 = (int(v) for v in torch.searchsorted(cols, torch.tensor([c0, c0 + per * chunk])))
            blocks = (cols[i0:i1] // r.block - a).to(device)
            if bool(r.hides_beats(heights[i0:i1].to(device), limits, 0, blocks).any()):
                return None
        found = {key: spill.read(key, first, first + count, device) for key in PACKED_KEYS}
        first += count
        for name, values in r.accept(found, *limits, first_block=a).items():
            spill.append("kept_" + name, values)
    _select_in_parts(r, Held(spill, "kept_", device, dtype), n_samples, SELECT_BLOCK, out)
    return device


def _first_pass(
    r: Ricker,
    read: Callable[[int, int], torch.Tensor],
    n_samples: int,
    chunk: int,
    halo: int,
    kernel: torch.Tensor,
    means: tuple[torch.Tensor, torch.Tensor],
    spill: Spill,
    progress: Callable[[int, int], None] | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int], tuple[torch.Tensor, ...]]:
    """Read the recording a chunk at a time (with ``halo`` samples either side), spill each
    chunk's block summaries and packed candidates; return the subsample of the feature (about
    SUBSAMPLE values, ``(1, m)``), where the response is negative there, the largest magnitude
    over the same samples, the number of candidates of each chunk, and the spikes among the
    candidates, on the host: their extrema's columns, polarity, the candidates' columns and
    their response there."""
    sampling_rate, stride = r.fs, r.subsample_stride(n_samples)
    starts = range(0, n_samples, chunk)
    # the subsample (every stride-th sample: about SUBSAMPLE values, whatever the length) filled in
    # place: a small tensor kept from every chunk would lie among the chunks' large buffers and keep
    # the heap in pieces
    subsample, counts = means[0].new_empty((1, -(-n_samples // stride))), []
    negatives = torch.empty(subsample.shape, dtype=torch.bool, device=subsample.device)
    magnitude = torch.zeros((), device=means[0].device, dtype=means[0].dtype)  # over the same samples as one call
    spikes: list[tuple[torch.Tensor, ...]] = []
    for c0 in starts:
        c1 = min(n_samples, c0 + chunk)
        a, b = max(0, c0 - halo), min(n_samples, c1 + halo)
        x = _checked(read(a, b), sampling_rate, a)[None]
        feature, negative = r.feature(x, kernel, *means, start=a == 0, end=b == n_samples)
        core = feature[:, c0 - a : c1 - a]
        for name, summary in zip(("block_max", "block_mean"), r.summaries(core), strict=True):
            spill.append(name, summary)  # for the thresholds, which need the whole recording
        sub, at = core[:, (-c0) % stride :: stride], -(-c0 // stride)  # (at: the multiples of stride before c0)
        subsample[:, at : at + sub.shape[-1]] = sub
        negatives[:, at : at + sub.shape[-1]] = negative[:, c0 - a : c1 - a][:, (-c0) % stride :: stride]
        taken = x[:, c0 - a : c1 - a][:, (-c0) % stride :: stride]
        if taken.numel():
            torch.maximum(magnitude, abs_max(taken)[0], out=magnitude)
        found = r.candidates(x, feature, negative, a, (c0, c1))
        spikes.append(_spikes_among(found, feature, a))
        for name, summary in zip(
            ("block_signed", "block_height"), r.block_signs(found, 1, -(-(c1 - c0) // r.block), c0 // r.block),
            strict=True,
        ):  # fmt: skip
            spill.append(name, summary[0])
        found = _packed(found, r)
        for name, values in found.items():
            spill.append(name, values)
        counts.append(found["cols"].numel())
        del x, feature, negative, core, found
        if progress is not None:
            progress(c1, n_samples)
    joined = tuple(torch.cat(column) for column in zip(*spikes, strict=True)) if spikes else _spikes_among({}, None, 0)
    return subsample, negatives, magnitude, counts, joined


def _spikes_among(
    found: dict[str, torch.Tensor], feature: torch.Tensor | None, offset: int
) -> tuple[torch.Tensor, ...]:
    """The spikes among a part's candidates ``found`` (:meth:`Ricker.candidates`, its ``feature``
    starting at sample ``offset``), on the host: their extrema's columns, polarity, their columns
    and their response there (where it is read against the thresholds); none for no part."""
    if feature is None:
        none = torch.zeros(0, dtype=torch.int64)
        return none, torch.zeros(0), none, torch.zeros(0)
    spiky = found["height"] == 0
    cols = found["cols"][spiky]
    return found["refined"][spiky].cpu(), found["sign"][spiky].cpu(), cols.cpu(), feature[0, cols - offset].cpu()


#: Candidates per part when chunked detection applies the rules (memory a few times this many).
SELECT_BLOCK = 16_384

#: Blocks a chunked detection's second pass (the thresholds and the candidates' tests) takes at
#: least at a time: several small chunks together (their summaries and candidates, a few bytes a
#: block and a candidate), so that a pass of a few small operators is not made for every chunk.
THRESHOLD_BLOCKS = 1 << 15


def _select_in_parts(r: Ricker, held: Held, total: int, block: int, out: tuple[Spill, str]) -> None:
    """The peaks of :meth:`Ricker.select` on one row's candidates ``held`` (``(n_peaks,)``,
    sorted), ``block`` candidates at a time, so that its memory does not grow with the recording.

    The polarity rule's figures come from the whole recording first (:meth:`Ricker.polarity_of`).
    Each part then goes through the rules with candidates either side, and keeps the beats
    whose columns lie in its own stretch. The T-wave rule looks one beat back, and the
    search-back's decisions reach at most :data:`SELECT_HALO_BEATS` beats in from a part's edge
    (see its note), so the side candidates are widened until each side holds that many beats.
    The peaks go to ``out`` (a :class:`Spill` and a name), joined (:func:`_joined`).
    """
    n = held.n
    if n <= block:
        out[0].append(out[1], r.select(_unpacked(held.part(0, n)), 1, total)[1])
        return
    polarity = r.polarity_of(held, block)

    def parts() -> Iterator[torch.Tensor]:
        for s in range(0, n, block):
            e = min(n, s + block)
            lo = held.col(s) if s > 0 else -1
            hi = held.col(e) if e < n else total
            halo = max(1, block // 4)
            while True:
                a, b = max(0, s - halo), min(n, e + halo)
                _, cols, refined, plain = r.beats(_unpacked(held.part(a, b)), 1, total, polarity)
                left_ok = a == 0 or int((plain < lo).sum()) >= SELECT_HALO_BEATS
                right_ok = b == n or int((plain >= hi).sum()) >= SELECT_HALO_BEATS
                if left_ok and right_ok:
                    break
                halo *= 2
            yield torch.unique(refined[(cols >= lo) & (cols < hi)])

    _joined(parts(), *out, seam=2 * samples(r.refine_s, r.fs) + 2)


def _joined(parts: Iterable[torch.Tensor], spill: Spill, name: str, *, seam: int) -> None:
    """The ``parts`` (each sorted and unique, int64 ``(k,)``) appended to ``spill``'s ``name`` as
    ``torch.unique`` of all of them would give them. Parts follow each other in order but near
    their seams: a value may lie up to ``seam`` samples after values of the next part (a refined
    position moved over the seam), or repeat one there. So the last ``seam`` values wait, merged
    with the next part, before they are written (at most ``seam`` distinct values can be out of
    order)."""
    held = None
    last = None  # the last value written
    for part in parts:
        if held is None:
            held = part
        elif part.numel():
            disordered = held.numel() and int(part[0]) <= int(held[-1])
            held = torch.unique(torch.cat([held, part])) if disordered else torch.cat([held, part])
        if held.numel() > seam:
            done, held = held[:-seam], held[-seam:]
            _check_order(done, last)
            spill.append(name, done)
            last = int(done[-1])
    if held is not None and held.numel():
        _check_order(held, last)
        spill.append(name, held)


def _check_order(values: torch.Tensor, last: int | None) -> None:
    if last is not None and int(values[0]) <= last:
        raise RuntimeError("_joined(): a part reaches further back than its seam allows.")


def _packed(c: dict[str, torch.Tensor], r: Ricker) -> dict[str, torch.Tensor]:
    """One row's candidates (:meth:`Ricker.candidates`, :meth:`Ricker.accept`) held compactly
    while a chunked detection gathers those of the whole recording: no row numbers (all 0),
    the refined position as its shift from the column (within the refinement window), the
    sign as int8: 15 bytes a candidate where the plain form takes 32. :func:`_unpacked` undoes it."""
    shift_type = torch.int16 if samples(r.refine_s, r.fs) < 2**15 else torch.int32
    out = {k: v for k, v in c.items() if k not in ("rows", "refined", "sign")}
    out["shift"] = (c["refined"] - c["cols"]).to(shift_type)
    out["sign"] = c["sign"].to(torch.int8)
    return out


def _unpacked(p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The candidates :func:`_packed` holds, in the plain form the rules take."""
    out = {k: v for k, v in p.items() if k not in ("shift", "sign")}
    out["rows"] = torch.zeros_like(p["cols"])
    out["sign"] = p["sign"].to(p["height"].dtype)
    out["refined"] = p["cols"] + p["shift"]
    return out


def _edge_means(
    r: Ricker, read: Callable[[int, int], torch.Tensor], n_samples: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The detector's means of the recording's first and last :attr:`Ricker.edge_s` (read for it:
    what the filter's ends are padded with, as in one call)."""
    edge = min(n_samples, samples(r.edge_s, r.fs))
    first = _checked(read(0, edge), r.fs, 0)
    last = _checked(read(n_samples - edge, n_samples), r.fs, n_samples - edge)
    return r.edge_means(first[None], last[None])


def _less_level(
    read: Callable[[int, int], torch.Tensor], n_samples: int, sampling_rate: float
) -> Callable[[int, int], torch.Tensor]:
    """``read`` less the recording's level where it is far from its signal (:func:`far_level`, from
    its first :data:`~devicepipe.ecg.inputs.LEVEL_S`, as a call on the whole recording finds it);
    else ``read`` itself."""
    head = _checked(read(0, min(n_samples, level_samples(sampling_rate))), sampling_rate, 0)
    level = far_level(head)
    if level is None:
        return read

    def levelled(start: int, stop: int) -> torch.Tensor:
        return less_level(_checked(read(start, stop), sampling_rate, start), level)

    return levelled


def _checked(x: torch.Tensor, sampling_rate: float, offset: int) -> torch.Tensor:
    """One chunk as the detector takes it; a non-finite sample is named by its place in the recording."""
    if not isinstance(x, torch.Tensor):
        raise DevicepipeError(
            f"ecg_peaks_chunked(): read() must return a torch.Tensor, got {type(x).__name__}; "
            "e.g. torch.from_numpy(...) of the samples it reads."
        )
    if x.ndim != 1:
        raise DevicepipeError(f"ecg_peaks_chunked(): read() must return shape (time,), got {tuple(x.shape)}.")
    x = x.detach() if x.dtype.is_floating_point else x.detach().to(torch.float32)
    if not all_finite(x):
        first = offset + int(torch.nonzero(~torch.isfinite(x))[0])
        raise DevicepipeError(
            f"the recording holds a non-finite value (NaN or inf) at sample {first:,}; chunked detection needs "
            "finite samples (interpolate them first, or detect in one piece with nan='interpolate')."
        )
    return x
