"""Beat classes and the Holter summary: against the truth of simulated rhythms and hand-made sequences."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from devicepipe.ecg import ecg_peaks
from devicepipe.ecg.classes import (
    CLIPPED,
    PACED,
    TOO_SMALL,
    BeatClasses,
    ecg_classes,
    ecg_classes_chunked,
)
from devicepipe.ecg.rhythm import beat_rhythm
from devicepipe.ecg.several_leads import agree_on_ventricular, ecg_classes_leads
from devicepipe.heart.holter import holter_summary
from devicepipe.simulate import Rhythm, simulate_ecg


def _classed(sim):
    """The classes of the beats found, each beside the truth's beat it matches (within 50 ms)."""
    fs = sim.sampling_rate
    peaks = ecg_peaks(sim.signal, fs)
    c = ecg_classes(sim.signal, peaks, fs)
    found, truth = peaks.numpy(), sim.r_peaks.numpy()
    nearest = np.abs(found[None, :] - truth[:, None]).argmin(1)
    matched = np.abs(found[nearest] - truth) <= 0.05 * fs
    return sim.classes[matched], c.labels[nearest[matched]], c, peaks


def _se_ppv(truth, got, k):
    tp = np.sum((truth == k) & (got == k))
    return tp / max(np.sum(truth == k), 1), tp / max(np.sum(got == k), 1)


@pytest.mark.parametrize(
    ("rhythm", "fs", "noise"),
    [
        (Rhythm(ectopic_rate=0.01), 250, 0.02),
        (Rhythm(ectopic_rate=0.12), 360, 0.08),
        (Rhythm(trigeminy=0.6, ectopic_rate=0.05), 500, 0.02),
        (Rhythm(bigeminy=1.0), 360, 0.08),  # half the beats ventricular: the normal family is not the larger
    ],
)
def test_ventricular_beats_are_found_whatever_their_burden(rhythm, fs, noise):
    sim = simulate_ecg(900, fs, noise_mV=noise, rhythm=rhythm, seed=fs)
    truth, got, _, _ = _classed(sim)
    se, ppv = _se_ppv(truth, got, "V")
    assert np.sum(truth == "V") >= 8 and se >= 0.95 and ppv >= 0.95, (se, ppv)
    assert np.mean(got[truth == "N"] == "V") <= 0.01


@pytest.mark.parametrize("share", [0.02, 0.15])
def test_atrial_premature_beats_are_s(share):
    sim = simulate_ecg(900, 360, rhythm=Rhythm(atrial_rate=share), seed=11)
    truth, got, c, _ = _classed(sim)
    se, ppv = _se_ppv(truth, got, "S")
    assert se >= 0.9 and ppv >= 0.8, (se, ppv)
    assert set(c.reasons[c.labels == "S"]) <= {"premature", "premature, P wave unlike"}
    # a beat's reason refers to one of a few shared strings: 8 bytes a beat, not a fixed-width copy
    # of the longest reason (148 bytes a beat: 418 MB of a 4-week recording's 2.8 M beats)
    assert c.reasons.nbytes == 8 * c.reasons.size and all(isinstance(r, str) for r in c.reasons)


@pytest.mark.parametrize(("fs", "noise"), [(250, 0.02), (360, 0.08)])
def test_atrial_premature_beats_stay_s_beside_ventricular_ones(fs, noise):
    # with a ventricular family in the recording, an early beat whose QRS is altered beyond the
    # normal beats' spread is V: the T wave before an early beat lies under its window as a slope,
    # which, compared as it was, left S Se at 0.71 on a clean simulated hour
    sim = simulate_ecg(3600, fs, noise_mV=noise, rhythm=Rhythm(ectopic_rate=0.03, atrial_rate=0.02, afib=0.05), seed=3)
    truth, got, _, _ = _classed(sim)
    for k, se_floor, ppv_floor in (("S", 0.9, 0.8), ("V", 0.95, 0.95)):
        se, ppv = _se_ppv(truth, got, k)
        assert np.sum(truth == k) >= 40 and se >= se_floor and ppv >= ppv_floor, (k, se, ppv)


def test_fibrillation_is_irregular_and_its_early_beats_are_not_s():
    sim = simulate_ecg(1200, 250, rhythm=Rhythm(afib=0.4), seed=3)
    _, got, c, peaks = _classed(sim)
    found, truth = peaks.numpy(), sim.r_peaks.numpy()
    afib = sim.rhythms[np.abs(truth[None, :] - found[:, None]).argmin(1)] == "AFIB"  # each found beat's truth
    assert np.mean(c.irregular[afib]) >= 0.85 and np.mean(c.irregular[~afib]) <= 0.1
    assert np.mean(c.labels[afib] == "S") <= 0.02  # random intervals are not premature beats


def test_an_inverted_lead_and_a_short_recording():
    sim = simulate_ecg(300, 250, rhythm=Rhythm(ectopic_rate=0.1), inverted=True, seed=5)
    truth, got, _, _ = _classed(sim)
    assert _se_ppv(truth, got, "V") >= (0.95, 0.95)
    two = ecg_classes(sim.signal, torch.tensor([100, 300]), 250.0)
    assert list(two.labels) == ["Q", "Q"] and set(two.reasons) == {"too few beats"}


def test_beats_in_noise_that_hides_their_shape_are_q_not_v():
    sim = simulate_ecg(120, 250, noise_mV=0.01, seed=2)
    x = sim.signal.clone()
    rng = np.random.default_rng(0)
    x[7500:10000] += torch.as_tensor(rng.normal(0, 0.6, 2500), dtype=x.dtype)  # 10 s of motion noise
    peaks = sim.r_peaks
    c = ecg_classes(x, peaks, 250.0)
    inside = (peaks.numpy() >= 7500) & (peaks.numpy() < 10000)
    assert not np.any(c.labels == "V")
    assert np.all(c.labels[~inside] == "N") and np.mean(c.labels[inside] == "Q") >= 0.5


def test_holter_events_of_a_hand_made_sequence():
    labels = np.array(list("NNVVNNNVVVVNNVNVNVNVNNNVNNVNNVNNNN"))
    t = np.arange(labels.size) * 0.8
    t[-1] += 2.5  # one pause of 3.3 s before the last beat
    h = holter_summary(t, labels, np.zeros(labels.size, bool), duration_s=float(t[-1] + 1))
    kinds = [(e.kind, e.first_beat, e.last_beat) for e in h.events]
    assert ("couplet", 2, 3) in kinds and ("run", 7, 10) in kinds
    assert ("bigeminy", 13, 19) in kinds and ("trigeminy", 23, 29) in kinds
    assert [e.seconds for e in h.of("pause")] == [pytest.approx(3.3)]
    assert h.counts["V"] == int((labels == "V").sum()) and h.counts["N"] == int((labels == "N").sum())
    assert h.of("run")[0].rate_bpm == pytest.approx(75.0)  # four beats 0.8 s apart
    assert list(h.rhythms[7:11]) == ["(VT"] * 4 and h.rhythms[0] == "(N"


def test_every_simulated_couplet_run_pause_and_bigeminy_is_found_within_a_beat():
    sim = simulate_ecg(1800, 250, rhythm=Rhythm(couplets=4, runs=3, pauses=3, bigeminy=0.1, ectopic_rate=0.01),
                       seed=21)  # fmt: skip
    _, _, c, peaks = _classed(sim)
    found, truth = peaks.numpy(), sim.r_peaks.numpy()
    h = holter_summary(found / 250.0, c.labels, c.irregular, sim.duration_s, c.not_beats)
    index = np.abs(found[None, :] - truth[:, None]).argmin(1)  # each true beat's found one
    for kind, a, _ in sim.events:
        start = index[a - 1 if kind == "pause" else a]  # (ours: a pause from the beat before it)
        assert any(abs(e.first_beat - start) <= 1 for e in h.of(kind)), (kind, a)
    assert len(h.of("couplet")) == 4 and len(h.of("run")) == 3 and len(h.of("pause")) == 3


def test_a_flat_lead_and_a_short_recording_say_why_their_beats_are_q(tmp_path):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from devicepipe.cli import app

    x = simulate_ecg(120, 250, seed=1).signal.numpy()
    pd.DataFrame({"II": np.zeros_like(x), "V5": x}).to_csv(tmp_path / "flat.csv", index=False)  # beats on V5
    pd.DataFrame({"ecg": x[: 5 * 250]}).to_csv(tmp_path / "short.csv", index=False)
    pd.DataFrame({"ecg": np.zeros_like(x)}).to_csv(tmp_path / "off.csv", index=False)  # one lead, off
    said = {}
    for name in ("flat", "short", "off"):
        out = tmp_path / name
        args = ["beats", str(tmp_path / f"{name}.csv"), "--sampling-rate", "250", "--out", str(out), "--no-figures"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        h = json.loads((out / "summary.json").read_text())["holter"]
        said[name] = (h, result.output)
    # a flat first lead: the beats are classed on the lead that reads them (V5), not Q
    flat = said["flat"][0]
    assert flat["beats"] > 100 and flat["counts"]["Q"] == 0 and flat["counts"]["N"] >= 0.95 * flat["beats"]
    # too few beats: every one Q, no burden made up, and the reason said
    short = said["short"][0]
    assert short["counts"]["Q"] == short["beats"] > 0 and short["burden_pct"]["V"] == 0
    assert "too few to tell which shape is normal" in short["warnings"][-1]
    # nothing recorded at all: said so, and no two-minute "pause"
    off = said["off"][0]
    assert off["beats"] == 0 and off["events"]["pause"] == 0
    assert "no signal for 120 s" in off["warnings"][0] and "no signal" in said["off"][1]


def test_the_event_strips_show_the_first_event_of_each_kind(tmp_path):
    from PIL import Image
    from typer.testing import CliRunner

    from devicepipe.cli import app
    from devicepipe.simulate import write_simulated_ecg

    runner = CliRunner()
    with_events, clean = tmp_path / "events.parquet", tmp_path / "clean.parquet"
    write_simulated_ecg(simulate_ecg(300, 250, rhythm=Rhythm(couplets=1, runs=1, pauses=1), seed=6), with_events)
    write_simulated_ecg(simulate_ecg(300, 250, seed=6), clean)
    for source in (with_events, clean):
        result = runner.invoke(app, ["beats", str(source), "--out", str(tmp_path / source.stem)])
        assert result.exit_code == 0, result.output
    strips = Image.open(tmp_path / "events" / "events.png")
    assert strips.size[1] / strips.size[0] > 0.45  # three strips (a couplet, a run, a pause); one is 0.2
    assert "events.png" in (tmp_path / "events" / "report.html").read_text()
    assert not (tmp_path / "clean" / "events.png").exists()  # nothing to show: no figure


@pytest.mark.parametrize("sample", [4000, 150])
def test_a_recording_read_in_parts_gets_the_classes_of_one_piece(monkeypatch, sample):
    from devicepipe.ecg import classes

    monkeypatch.setattr(classes, "SAMPLE_BEATS", sample)  # 150: families from a sample of the beats
    sim = simulate_ecg(600, 360, noise_mV=0.05, rhythm=Rhythm(ectopic_rate=0.05, atrial_rate=0.03, afib=0.2), seed=3)
    x, fs = sim.signal, sim.sampling_rate
    peaks = ecg_peaks(x, fs)
    whole = ecg_classes(x, peaks, fs)
    read = []
    parts = classes.ecg_classes_chunked(lambda s, e: read.append(e - s) or x[s:e], x.numel(), peaks.numpy(), fs,
                                        chunk=3600)  # fmt: skip
    assert max(read) < 3600 + 2 * 720 + 50 and len(read) >= 2 * 60  # ten seconds (and margins) at a time, twice
    for name in ("labels", "reasons", "family", "width_ms", "irregular"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(parts, name), err_msg=name)
    assert whole.counts()["V"] > 10 and whole.counts()["S"] > 5


def test_a_bump_of_noise_taken_for_a_beat_in_a_pause_does_not_end_it():
    # white noise of 0.08 mV in a 2.9-s pause: detection takes a bump of it for a beat
    sim = simulate_ecg(1800, 250.0, noise_mV=0.08, rhythm=Rhythm(couplets=4, runs=3, pauses=3, bigeminy=0.1,
                                                                 ectopic_rate=0.01), seed=43)  # fmt: skip
    _, _, c, peaks = _classed(sim)
    found, truth = peaks.numpy(), sim.r_peaks.numpy()
    pauses = [(truth[a - 1], truth[a]) for kind, a, _ in sim.events if kind == "pause"]
    inside = [i for lo, hi in pauses for i in np.flatnonzero((found > lo + 10) & (found < hi - 10))]
    assert inside and all(c.reasons[i] == "too small for a QRS" and c.labels[i] == "Q" for i in inside)
    h = holter_summary(found / 250.0, c.labels, c.irregular, sim.duration_s, c.not_beats)
    assert len(h.of("pause")) == 3 and all(e.seconds > 2.8 for e in h.of("pause"))
    assert len(holter_summary(found / 250.0, c.labels, c.irregular, sim.duration_s).of("pause")) < 3  # (without)


def _hand_classes(labels: str, reasons: str | None = None) -> BeatClasses:
    n = len(labels)
    return BeatClasses(
        np.array(list(labels)), np.array([f"{reasons or 'why'} {i}" for i in range(n)]),
        np.zeros(n, int), 0, np.ones(n), np.full(n, 90.0), np.zeros(n, bool),
    )  # fmt: skip


def test_v_needs_more_than_half_of_the_leads_that_read_the_beat():
    leads = [_hand_classes("VVVVVNNS", "a"), _hand_classes("VNQSQVVN", "b"), _hand_classes("NNQVSVNV", "c")]
    c = agree_on_ventricular(leads)
    #                      2/3 1/3 1/1 2/3 1/2 2/3 1/3 1/3 of the leads that read it (not Q) say V
    assert list(c.labels) == ["V", "N", "V", "V", "S", "N", "N", "S"]  # (the first lead's N stays N)
    assert list(c.reasons) == ["a 0", "b 1 (V on 1 of 3 leads)", "a 2", "a 3", "c 4 (V on 1 of 2 leads)"] + [
        f"a {i}" for i in (5, 6, 7)
    ]
    assert agree_on_ventricular(leads[:1]) is leads[0]  # one lead: its own classes


def test_a_qrs_cut_flat_at_the_signal_s_limit_is_q_and_said():
    # a saturated amplifier: every QRS clipped at 0.3 mV had 47 of 140 beats called V (their flat
    # tops read as wide QRS); clipped beats are Q now, another lead that did not saturate classes
    # them, and the run says why
    from devicepipe.pipelines.classes import Labelled

    sim = simulate_ecg(120, 250, rhythm=Rhythm(ectopic_rate=0.05), seed=2)
    x = sim.signal.float()
    peaks = ecg_peaks(x, 250.0)
    base = ecg_classes(x, peaks, 250.0)
    clipped = ecg_classes(x.clamp(-0.3, 0.3), peaks, 250.0)
    assert set(clipped.labels) == {"Q"} and set(clipped.reasons) == {CLIPPED}
    # only the tallest beats reach a limit at 90 % of the highest R peak: those are Q, the rest as before
    tall = ecg_classes(x.clamp(max=0.9 * float(x.max())), peaks, 250.0)
    cut = tall.reasons == CLIPPED
    assert 0 < cut.sum() < 10 and (tall.labels[~cut] == base.labels[~cut]).all()
    y = x.clamp(max=0.9 * float(x.max()))  # (the same read a part at a time)
    parts = ecg_classes_chunked(lambda a, b: y[a:b], y.numel(), peaks.numpy(), 250.0, chunk=3000)
    assert list(parts.labels) == list(tall.labels) and list(parts.reasons) == list(tall.reasons)
    # the other lead reads them
    both = ecg_classes_leads(torch.stack([x.clamp(-0.3, 0.3), x]), peaks, 250.0)
    assert list(both.labels) == list(base.labels)
    h = holter_summary(peaks.numpy() / 250.0, clipped.labels, clipped.irregular, 120.0, clipped.not_beats)
    said = Labelled(clipped, h, None).warnings
    assert len(said) == 1 and said[0].startswith("140 of 140 beats have their QRS cut flat at the signal's limit")
    assert not any(r == CLIPPED for r in base.reasons)  # (an unclipped recording: none)


@pytest.mark.parametrize(("fs", "hz"), [(250, 50.0), (360, 60.0)])
def test_mains_interference_changes_no_class(fs, hz):
    # 0.3 mV of mains (a loose electrode) had 21 % of the normal beats called F at 250 Hz: their
    # shapes, each with its own phase of the hum, fell out of the normal family. Where the beats'
    # spectrum peaks at 50 or 60 Hz, the shapes are measured without it: the classes of the
    # recording without the hum, whole and in chunks
    from devicepipe.ecg.beat_shapes import mains_hz

    rhythm = Rhythm(ectopic_rate=0.05)
    clean = simulate_ecg(300, fs, rhythm=rhythm, seed=3)
    hum = simulate_ecg(300, fs, rhythm=rhythm, seed=3, powerline_mV=0.3, powerline_hz=hz)
    x, y = clean.signal.float(), hum.signal.float()
    peaks = ecg_peaks(y, float(fs))  # (a sample or two off the clean recording's: the same beats)
    base, with_hum = ecg_classes(x, peaks, float(fs)), ecg_classes(y, peaks, float(fs))
    assert base.counts()["V"] >= 10 and list(with_hum.labels) == list(base.labels)
    parts = ecg_classes_chunked(lambda a, b: y[a:b], y.numel(), peaks.numpy(), float(fs), chunk=5000)
    assert list(parts.labels) == list(with_hum.labels)
    from devicepipe.ecg.beat_shapes import wide_windows

    assert mains_hz(wide_windows(y, peaks, float(fs)), float(fs)) == hz
    assert mains_hz(wide_windows(x, peaks, float(fs)), float(fs)) is None


def _paced(x: np.ndarray, r_peaks: np.ndarray, fs: int, amp: float, ahead_s: float, every: int = 1) -> torch.Tensor:
    y = x.copy()
    for k, r in enumerate(r_peaks):
        at = r - round(ahead_s * fs)
        if k % every == 0 and at > 0:
            y[at] += amp
    return torch.as_tensor(y).float()


@pytest.mark.parametrize("fs", [250, 500])
def test_a_beat_after_a_pacemaker_s_stimulus_is_paced_q_and_said(fs):
    # AAMI EC57 classes paced beats Q; they had been N (one shape, on time). A spike a fixed lead
    # before the beats, of a third of the QRS's height or more, makes them paced; a pacemaker that
    # paces every other beat, those; another lead that shows the stimulus, the first's beats too
    from devicepipe.pipelines.classes import Labelled

    sim = simulate_ecg(120, fs, seed=3)
    x, truth = sim.signal.double().numpy(), sim.r_peaks.numpy()
    for amp, ahead_s in ((3.0, 0.04), (-3.0, 0.16), (0.7, 0.08)):
        y = _paced(x, truth, fs, amp, ahead_s)
        peaks = ecg_peaks(y, float(fs))
        c = ecg_classes(y, peaks, float(fs))
        assert (c.reasons == PACED).mean() >= 0.95, (amp, ahead_s, c.counts())
        parts = ecg_classes_chunked(lambda a, b, y=y: y[a:b], y.numel(), peaks.numpy(), float(fs), chunk=4000)
        assert list(parts.reasons) == list(c.reasons)
    half = _paced(x, truth, fs, 3.0, 0.04, every=2)
    peaks = ecg_peaks(half, float(fs))
    c = ecg_classes(half, peaks, float(fs))
    paced = c.reasons == PACED
    assert 0.45 <= paced.mean() <= 0.55 and set(c.labels[~paced]) == {"N"}
    plain = torch.as_tensor(x).float()
    both = ecg_classes_leads(torch.stack([plain, half]), peaks, float(fs))
    assert list(both.reasons == PACED) == list(paced)
    h = holter_summary(peaks.numpy() / fs, c.labels, c.irregular, 120.0, c.not_beats)
    said = Labelled(c, h, None).warnings
    assert said == [f"{int(paced.sum())} of {len(peaks)} beats follow a pacemaker's stimulus: they are paced, and Q "
                    "(unclassifiable) as AAMI EC57 classes paced beats; their times still give the heart rate and the "
                    "rhythm"]  # fmt: skip
    assert not (ecg_classes(plain, ecg_peaks(plain, float(fs)), float(fs)).reasons == PACED).any()


@pytest.mark.parametrize("scale", [1e-30, 1e-9, 1e9, 1e20])
def test_the_classes_are_the_same_in_any_unit(scale):
    # a recording scaled far from millivolts: the sums of squares of the shapes' measures left
    # float32's range (under 1e-38, over 3e38), and every beat was Q; heights are compared with
    # each other only, so a lead so scaled is measured scaled back
    sim = simulate_ecg(120, 250, rhythm=Rhythm(ectopic_rate=0.1), seed=1)
    x = sim.signal.double()
    peaks = ecg_peaks(x.float(), 250.0)
    base = ecg_classes(x.float(), peaks, 250.0)
    assert base.counts()["V"] >= 10 and base.counts()["Q"] == 0  # (the simulator's ectopic beats)
    scaled = ecg_classes((x * scale).float(), peaks, 250.0)
    assert list(scaled.labels) == list(base.labels)


def test_a_detection_another_lead_reads_as_no_qrs_is_no_ventricular_beat():
    # a T wave one lead shows tall and wide (V there) and the other too small for a QRS: no beat
    first = _hand_classes("VVVN", "a")
    second = replace(
        _hand_classes("QVQN", "b"), reasons=np.array([TOO_SMALL, "b 1", "poor signal", "b 3"], dtype=object)
    )
    c = agree_on_ventricular([first, second])
    assert list(c.labels) == ["Q", "V", "V", "N"]  # (a lead that cannot read a beat does not vote)
    assert list(c.not_beats) == [True, False, False, False]
    third = _hand_classes("NVNN", "c")  # a lead reading it as a beat: its class, as before
    assert agree_on_ventricular([first, second, third]).labels[0] == "N"


def test_the_rhythm_is_irregular_where_any_lead_reads_it_so():
    # the rhythm is the beats' times: a lead whose poor signal leaves too few normal intervals to
    # read it does not hide the fibrillation the other lead reads
    a, b = _hand_classes("NNNNNNNN", "a"), _hand_classes("NNNNNNNN", "b")
    a = replace(a, irregular=np.array([0, 0, 1, 1, 0, 0, 0, 0], bool))
    b = replace(b, irregular=np.array([0, 0, 0, 1, 1, 1, 0, 0], bool))
    assert list(agree_on_ventricular([a, b]).irregular) == [0, 0, 1, 1, 1, 1, 0, 0]
    assert list(agree_on_ventricular([b, a]).labels) == list(b.labels)
    # and no beat inside it is S: in fibrillation every beat comes at a random time
    s = replace(_hand_classes("NSNNSNSN", "s"), irregular=np.zeros(8, bool))
    agreed = agree_on_ventricular([s, b])
    assert list(agreed.labels) == list("NSNNNNSN") and agreed.reasons[4] == "irregular rhythm"


def test_a_wide_shape_on_one_lead_only_is_not_v_and_a_ventricular_beat_stays_v():
    sim = simulate_ecg(300, 250, rhythm=Rhythm(ectopic_rate=0.05), noise_mV=0.02, seed=7)
    peaks = sim.r_peaks
    normal = np.flatnonzero(sim.classes == "N")[10:200:40]  # five normal beats
    t = torch.arange(sim.signal.numel(), dtype=torch.float32)
    first = sim.signal.clone()
    for p in peaks[normal].tolist():  # an electrode artefact: a wide wave right after the R peak
        first += 0.9 * torch.exp(-(((t - p - 0.05 * 250) / (0.03 * 250)) ** 2))
    second = -0.7 * sim.signal + 0.02 * torch.randn(sim.signal.numel(), generator=torch.Generator().manual_seed(1))
    alone = ecg_classes(first, peaks, 250.0)
    assert np.all(alone.labels[normal] == "V")  # (else this test would prove nothing)
    both = ecg_classes_leads(torch.stack([first, second]), peaks, 250.0)
    assert np.all(both.labels[normal] == "N") and all("V on 1 of 2 leads" in r for r in both.reasons[normal])
    v = sim.classes == "V"
    assert np.all(both.labels[v] == "V") and np.all(both.labels[~v & ~np.isin(np.arange(v.size), normal)] != "V")


def test_the_rhythm_windows_are_measured_a_block_of_beats_at_a_time(monkeypatch):
    # each beat's rhythm is read from a window of beats either side; all windows at once took
    # (beats, window) float64 arrays several times over: 421 MB for 300,000 beats, 1.1 GB of a
    # week's run. A block of beats at a time gives the same values with a few MB.
    import tracemalloc

    from devicepipe.ecg import rhythm

    rng = np.random.default_rng(3)
    n = 3000
    rr = rng.uniform(0.4, 1.4, n)
    rr[1000:1600] = 0.8  # a regular stretch inside an irregular one, and gaps of not-normal beats
    nn = rng.random(n) < 0.85
    pair = (rr + np.r_[rr[1:], rr[-1]]) / 2
    window = np.lib.stride_tricks.sliding_window_view(np.pad(pair, rhythm.RHYTHM_BEATS, mode="edge"),
                                                      2 * rhythm.RHYTHM_BEATS + 1)  # fmt: skip
    whole_irregular = rhythm.irregular_rhythm(rr, nn, ~nn)
    monkeypatch.setattr(rhythm, "WINDOW_ROWS", 7)  # many blocks, and a last one of another size
    assert np.array_equal(rhythm.local_rhythm(rr, np.r_[rr[1:], rr[-1]]), np.median(window, axis=1))
    for whole, blocked in zip(whole_irregular, rhythm.irregular_rhythm(rr, nn, ~nn), strict=True):
        assert np.array_equal(whole, blocked)
    assert whole_irregular[0].any() and not whole_irregular[0].all()  # both answers occur
    monkeypatch.undo()
    n = 300_000
    rr, nn = rng.uniform(0.6, 1.2, n), rng.random(n) < 0.9
    tracemalloc.start()
    try:
        rhythm.irregular_rhythm(rr, nn, ~nn)
        rhythm.beat_rhythm(np.cumsum(rr))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60 * 2**20, f"{peak / 2**20:.0f} MiB"  # the arrays of n beats are about 2.4 MiB each


def _decision_and_summary_peaks(n: int) -> tuple[float, float, BeatClasses]:
    """Peak NumPy allocations (bytes) of the classes' decision and the Holter summary over ``n``
    synthetic beats' measures (as ``benchmarks/classes_memory.py`` makes them)."""
    import tracemalloc

    from devicepipe.ecg import classes

    rng = np.random.default_rng(0)
    k = 4
    t = np.cumsum(rng.normal(0.857, 0.05, n))
    fit = classes._Fit(torch.randn(k, 50), 0, 90.0, torch.randn(30), 1.0)
    family, corr = rng.integers(-1, k, n), rng.uniform(0.5, 1, (n, k))
    corr_p, width, height = rng.uniform(0, 1, n), rng.normal(90, 5, n), rng.normal(1, 0.1, n)
    rough, corr_l = rng.uniform(0, 1, n), rng.uniform(0.5, 1, n)
    rr_prev, early = beat_rhythm(t)
    after_prev = rng.uniform(-1, 1, n)
    tracemalloc.start()
    try:
        decided = classes._decide(
            fit, t, rr_prev, early, width, height, family, corr, corr_p, corr_l, rough, after_prev, np.zeros(n, bool)
        )
        decide_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        h = holter_summary(t, decided.labels, decided.irregular, t[-1] + 1, decided.not_beats)
        holter_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert set(np.unique(decided.labels)) >= {"N", "V"} and h.rhythms.shape == (n,)
    return decide_peak, holter_peak, decided


def test_the_decision_and_the_holter_summary_hold_a_few_dozen_bytes_a_beat():
    # a 4-week recording has about 2.8 million beats: every byte a beat held at once is 2.8 MB.
    # The reasons were made one string a beat (np.full of a str into an object array: 63 bytes
    # each) and the summary's rhythms too (59): 120 and 108 bytes a beat then. What each beat
    # adds is the growth from n to 2n beats (the blocks of rhythm windows cost the same in both).
    n = 200_000
    decide_n, holter_n, decided = _decision_and_summary_peaks(n)
    decide_2n, holter_2n, _ = _decision_and_summary_peaks(2 * n)
    assert sum(decided.reasons == "normal") > n // 10 and len({id(r) for r in decided.reasons}) < 20
    per_beat = ((decide_2n - decide_n) / n, (holter_2n - holter_n) / n)
    assert max(per_beat) < 80, per_beat


def test_a_flat_stretch_is_no_signal_and_no_pause():
    from devicepipe.ecg.flat import flat_stretches, flat_stretches_read

    sim = simulate_ecg(300, 250, seed=5, noise_mV=0.02)
    x = sim.signal.clone()
    x[100 * 250 : 160 * 250] = x[100 * 250 - 1]  # a lead off for a minute: the last value held
    x[200 * 250 : 200 * 250 + 250] = 0.0  # a second of zeros: shorter than a pause, not reported
    flat = flat_stretches(x, 250)
    assert flat.shape == (1, 2) and abs(flat[0, 0] - 100) <= 0.25 and abs(flat[0, 1] - 160) <= 0.25
    for chunk in (1000, 7777, 250 * 61):
        assert np.array_equal(flat_stretches_read(lambda a, b: x[a:b], x.numel(), 250, chunk=chunk), flat)
    # with two leads, a stretch is flat only where both are
    other = sim.signal + 0.01
    assert flat_stretches(torch.stack([x, other]), 250).shape == (0, 2)
    assert flat_stretches(torch.stack([x, x]), 250).shape == (1, 2)
    # the minute without beats is no pause where it has no signal; a real pause still is
    peaks = ecg_peaks(x, 250)
    t = peaks.numpy() / 250
    c = ecg_classes(x, peaks, 250.0)
    blind = holter_summary(t, c.labels, c.irregular, 300.0, c.not_beats)
    seen = holter_summary(t, c.labels, c.irregular, 300.0, c.not_beats, flat)
    assert [round(e.start_s) for e in blind.of("pause")] == [round(t[t < 100][-1])]
    assert seen.of("pause") == []
    late = np.concatenate([t[t < 250], t[t >= 253] + 0.0])  # beats missing from 250 s to 253 s: a pause
    c2 = ecg_classes(x, torch.as_tensor(np.rint(late * 250).astype(np.int64)), 250.0)
    assert len(holter_summary(late, c2.labels, c2.irregular, 300.0, c2.not_beats, flat).of("pause")) == 1


def test_frequent_atrial_premature_beats_are_s_not_fibrillation():
    # a quarter of the beats atrial premature: the intervals are irregular over a few beats, but
    # the beats between the premature ones keep their sinus P wave, so it is no fibrillation
    # and the premature beats are S; fibrillation (no P wave) in the same recorder is found
    for seed in (10, 11):
        sim = simulate_ecg(600, 360, noise_mV=0.02, rhythm=Rhythm(atrial_rate=0.25), seed=seed)
        peaks = ecg_peaks(sim.signal, 360)
        c = ecg_classes(sim.signal, peaks, 360.0)
        h = holter_summary(peaks.numpy() / 360, c.labels, c.irregular, 600.0, c.not_beats)
        assert h.of("afib") == [], seed
        truth, found = sim.r_peaks.numpy(), peaks.numpy()
        at = np.abs(found[:, None] - truth[sim.classes == "S"][None]).argmin(0)
        assert np.mean(c.labels[at] == "S") >= 0.9, seed
    sim = simulate_ecg(600, 360, noise_mV=0.02, rhythm=Rhythm(afib=0.4, atrial_rate=0.1), seed=3)
    peaks = ecg_peaks(sim.signal, 360)
    c = ecg_classes(sim.signal, peaks, 360.0)
    h = holter_summary(peaks.numpy() / 360, c.labels, c.irregular, 600.0, c.not_beats)
    assert h.of("afib") and not (c.labels[c.irregular] == "S").any()


def test_an_irregular_stretch_with_sinus_p_waves_is_not_fibrillation():
    from devicepipe.ecg.rhythm import without_p_waves as _without_p_waves

    near = np.zeros(60, bool)
    near[10:20] = near[30:40] = True
    drawn = near.copy()
    corr_p = np.full(60, 0.9)  # the on-time beats' P waves like the normal one
    corr_p[30:40] = 0.1  # no P wave: fibrillation
    kept_near, kept_drawn = _without_p_waves(near, drawn, corr_p, np.ones(60, bool))
    assert not kept_near[10:20].any() and kept_near[30:40].all() and np.array_equal(kept_near, kept_drawn)
    # fibrillation throughout: no sinus beat to compare with, every stretch kept
    assert _without_p_waves(near, drawn, corr_p, np.zeros(60, bool))[0] is near


def _runs_against_truth(sim, c, peaks):
    """Each simulated run of tachycardia (first, last beat) beside the Holter's run holding its
    middle beat: (truth's beats, found run's beats or 0)."""
    h = holter_summary(peaks.numpy() / sim.sampling_rate, c.labels, c.irregular, sim.duration_s, c.not_beats)
    t = sim.r_peaks.numpy() / sim.sampling_rate
    out = []
    for kind, a, b in sim.events:
        if kind == "run":
            middle = t[(a + b) // 2]
            found = [e.beats for e in h.of("run") if e.start_s <= middle <= e.end_s]
            out.append((b - a + 1, found[0] if found else 0))
    return out


def test_tachycardia_longer_than_the_sinus_rhythm_around_it_is_v_and_the_sinus_beats_n():
    # a minute of ventricular tachycardia in two minutes: its wide family holds most beats and
    # is on time (regular), but the normal family is the narrow one; the run was classed N and
    # the sinus beats Q (in stretches unlike "normal")
    sim = simulate_ecg(120, 250, rhythm=Rhythm(vt=0.45, vt_bpm=150), noise_mV=0.03, seed=4)
    truth, got, c, peaks = _classed(sim)
    assert np.sum(truth == "V") > np.sum(truth == "N")
    assert np.mean(got[truth == "V"] == "V") >= 0.99 and np.mean(got[truth == "N"] == "N") >= 0.98
    assert [found >= 0.95 * beats for beats, found in _runs_against_truth(sim, c, peaks)] == [True]


@pytest.mark.parametrize("sample", [4000, 150])
def test_runs_of_tachycardia_are_v_not_poor_signal(monkeypatch, sample):
    # a 10-s stretch of beat after beat of one shape unlike the normal one is a run, not noise:
    # its beats were classed Q ("poor signal") and each run reported as a few short ones
    from devicepipe.ecg import classes

    monkeypatch.setattr(classes, "SAMPLE_BEATS", sample)
    sim = simulate_ecg(900, 360, rhythm=Rhythm(vt=0.15, ectopic_rate=0.01), noise_mV=0.05, seed=12)
    truth, got, c, peaks = _classed(sim)
    in_runs = sim.rhythms[np.isin(sim.classes, ("N", "V"))] == "VT"
    assert in_runs.sum() > 100 and np.mean(got[truth == "V"] == "V") >= 0.98
    assert np.mean(got[truth == "N"] == "N") >= 0.98
    runs = _runs_against_truth(sim, c, peaks)
    assert runs and all(found >= 0.95 * beats for beats, found in runs), runs


def test_a_recording_with_tachycardia_read_in_parts_gets_the_classes_of_one_piece():
    from devicepipe.ecg import classes

    sim = simulate_ecg(300, 250, rhythm=Rhythm(vt=0.3, vt_bpm=170, ectopic_rate=0.02), noise_mV=0.05, seed=9)
    x, fs = sim.signal, sim.sampling_rate
    peaks = ecg_peaks(x, fs)
    whole = ecg_classes(x, peaks, fs)
    parts = classes.ecg_classes_chunked(lambda s, e: x[s:e], x.numel(), peaks.numpy(), fs, chunk=1999)
    for name in ("labels", "reasons", "family"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(parts, name), err_msg=name)
    assert whole.counts()["V"] > 100


@pytest.mark.parametrize(
    ("kind", "warned"),
    [("vt", True), ("sinus tachycardia", True), ("sinus", False), ("vt episode", False)],
)
def test_a_fast_recording_of_one_shape_says_that_its_classes_cannot_tell_a_ventricular_rhythm(kind, warned):
    # a recording that is tachycardia throughout is one QRS family: nothing narrower to compare it
    # with, so its beats are N, as a fast supraventricular rhythm's would be; the summary says so
    from devicepipe.pipelines.classes import Labelled

    sim = {
        "vt": lambda: simulate_ecg(120, 250, rhythm=Rhythm(vt=1.0, vt_bpm=150), seed=3),
        "sinus tachycardia": lambda: simulate_ecg(120, 250, heart_rate_bpm=130, seed=3),
        "sinus": lambda: simulate_ecg(120, 250, seed=3),
        "vt episode": lambda: simulate_ecg(120, 250, rhythm=Rhythm(vt=0.45, vt_bpm=150), seed=4),
    }[kind]()
    peaks = ecg_peaks(sim.signal, 250)
    c = ecg_classes(sim.signal, peaks, 250)
    h = holter_summary(peaks.numpy() / 250, c.labels, c.irregular, sim.duration_s, c.not_beats)
    said = [w for w in Labelled(c, h).warnings if "cannot be told from a fast supraventricular" in w]
    assert bool(said) == warned, Labelled(c, h).warnings
    if kind == "vt":
        assert np.mean(c.labels == "N") > 0.95  # (what the warning warns of)
