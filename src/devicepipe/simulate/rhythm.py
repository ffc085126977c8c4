"""The beat-by-beat rhythm of a simulated ECG: sinus rhythm with ectopic beats, their patterns
(couplets, runs, bigeminy, trigeminy), pauses and stretches of atrial fibrillation, each with
its truth.

Timing follows the textbook account of each (Goldberger, "Clinical Electrocardiography", ch.
14-16): a premature ventricular beat (``V``) comes 40 % early and is followed by a
compensatory pause (the two intervals around it sum to two sinus intervals, since the sinus
node is not reset); an interpolated one falls between two sinus beats without disturbing them;
an atrial premature beat (MIT-BIH's ``A``, AAMI class S) comes 20-35 % early and resets the
sinus node, so the interval after it is one sinus interval (a non-compensatory pause); in
atrial fibrillation the intervals are irregularly irregular (independent, coefficient of
variation about 0.2) and there are no P waves; a sinus pause is an interval of 2.2-3.5 s.
Ventricular tachycardia (ch. 16) is a regular run of wide ventricular beats at 120-250 bpm
(intervals varying by about 2 %), sustained when it lasts 30 s or more; the sinus rhythm
resumes after it with a pause.

Every draw from the random generator happens here, in a fixed order, so a seed gives one rhythm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EVENT_KINDS", "Rhythm", "RhythmPlan", "plan_rhythm"]

#: The events a plan lists (the truth's ``events.csv``), in words.
EVENT_KINDS = {
    "couplet": "two ventricular beats in a row",
    "run": "three or more ventricular beats in a row (a run of ventricular tachycardia)",
    "bigeminy": "every other beat ventricular",
    "trigeminy": "every third beat ventricular",
    "pause": "an RR interval over 2 s",
    "afib": "atrial fibrillation",
    "interpolated": "a ventricular beat between two sinus beats, without a pause",
}


@dataclass(frozen=True)
class Rhythm:
    """What a simulated ECG's rhythm holds beyond sinus rhythm.

    ``ectopic_rate``: the chance that a sinus beat is followed by an isolated premature
    ventricular beat; ``atrial_rate``: by an atrial premature beat; ``couplets``, ``runs``,
    ``pauses``, ``interpolated``: how many of each, spread over the recording; ``bigeminy``,
    ``trigeminy``, ``afib``, ``vt``: the share of the recording's time in episodes of each (an
    episode lasts 20-90 s, atrial fibrillation 1-5 min, ventricular tachycardia 15-60 s; a share
    of 1 is one episode as long as the recording); ``vt_bpm``: the rate of ventricular
    tachycardia (0: each episode's drawn from 130-200 bpm)."""

    ectopic_rate: float = 0.0
    atrial_rate: float = 0.0
    couplets: int = 0
    runs: int = 0
    pauses: int = 0
    interpolated: int = 0
    bigeminy: float = 0.0
    trigeminy: float = 0.0
    afib: float = 0.0
    vt: float = 0.0
    vt_bpm: float = 0.0

    @property
    def counted(self) -> dict[str, int]:
        """The events asked for by number, by the kind the plan's events name them (``couplet``,
        ``run``, ``pause``, ``interpolated``)."""
        return {"couplet": self.couplets, "run": self.runs, "pause": self.pauses, "interpolated": self.interpolated}

    @property
    def patterned(self) -> bool:
        """Whether anything but isolated ventricular beats is asked for."""
        return bool(self.atrial_rate or self.couplets or self.runs or self.pauses or self.interpolated) or bool(
            self.bigeminy or self.trigeminy or self.afib or self.vt
        )


@dataclass(frozen=True)
class RhythmPlan:
    """Beat times (s), MIT-BIH symbols (``N``, ``A``, ``V``), each beat's rhythm (``N`` sinus,
    ``AFIB``, ``B`` bigeminy, ``T`` trigeminy, ``VT`` a run or ventricular tachycardia) and the
    events, each
    ``(kind, first beat, last beat)`` as indices into the beats."""

    times: np.ndarray
    symbols: np.ndarray
    rhythms: np.ndarray
    events: list[tuple[str, int, int]]


def _episodes(
    duration_s: float, shares: list[tuple[str, float, tuple[float, float]]], rng: np.random.Generator
) -> list[tuple[float, float, str]]:
    """Disjoint ``(start_s, end_s, kind)`` episodes covering about each kind's share of the time."""
    taken: list[tuple[float, float, str]] = []
    for kind, share, (shortest, longest) in shares:
        if share >= 1.0:  # the whole recording
            taken.append((0.0, duration_s + 1.0, kind))
            continue
        want = share * duration_s
        tries = 0
        while want > 1.0 and tries < 1000:
            tries += 1
            length = min(rng.uniform(shortest, longest), duration_s)  # (the last may pass the share)
            start = rng.uniform(0.0, max(duration_s - length, 0.0))
            end = start + length
            if any(start < e + 3.0 and end > s - 3.0 for s, e, _ in taken):  # sinus beats between episodes
                continue
            taken.append((start, end, kind))
            want -= length
    return sorted(taken)


def _moments(duration_s: float, counts: list[tuple[str, int]], rng: np.random.Generator) -> list[tuple[float, str]]:
    """``(time_s, kind)`` for each single event asked for, at random times."""
    moments = [(float(rng.uniform(5.0, max(duration_s - 5.0, 6.0))), kind) for kind, n in counts for _ in range(n)]
    return sorted(moments)


class _Planner:
    """The beats of :func:`plan_rhythm` as they are laid down: each beat's time, symbol and
    rhythm label, and the events (kind, first beat, last beat)."""

    def __init__(self, mean_rr: float, hrv: float, rng: np.random.Generator) -> None:
        self.mean_rr, self.hrv, self.rng = mean_rr, hrv, rng
        self.rsa, self.mayer = rng.uniform(0, 2 * np.pi, 2)
        self.times: list[float] = []
        self.symbols: list[str] = []
        self.rhythms: list[str] = []
        self.events: list[tuple[str, int, int]] = []

    def sinus(self, t: float) -> float:
        """A sinus interval at time ``t``, s (respiratory, 0.1 Hz and random variability)."""
        hrv = self.hrv
        rr = self.mean_rr * (
            1
            + hrv * np.sin(2 * np.pi * 0.25 * t + self.rsa)
            + 0.6 * hrv * np.sin(2 * np.pi * 0.1 * t + self.mayer)
            + 0.5 * hrv * self.rng.standard_normal()
        )
        return float(np.clip(rr, 0.6 * self.mean_rr, 1.6 * self.mean_rr))

    def beat(self, dt: float, symbol: str = "N", kind: str = "N") -> None:
        self.times.append(self.times[-1] + dt)
        self.symbols.append(symbol)
        self.rhythms.append(kind)

    def ectopic_pause(self, rr: float, coupled: float) -> None:
        """The sinus beat after a ventricular one: the compensatory pause."""
        self.beat(max(2 * rr - coupled, 0.35))

    def episode(self, stop: float, kind: str, end: float, vt_bpm: float = 0.0) -> None:
        """Atrial fibrillation, bigeminy, trigeminy or ventricular tachycardia (at ``vt_bpm``, 0:
        drawn) until ``stop`` (or ``end``), then sinus rhythm."""
        times, start_beat = self.times, len(self.times)
        if kind == "vt":
            vt_rr = 60.0 / (vt_bpm or float(self.rng.uniform(130.0, 200.0)))
            while times[-1] < min(stop, end):
                self.beat(vt_rr * (1 + 0.02 * float(self.rng.standard_normal())), "V", "VT")
            self.events.append(("run", start_beat, len(times) - 1))  # (an episode of tachycardia is a run)
            self.beat(max(1.3 * self.sinus(times[-1]), 1.5 * vt_rr))  # the sinus node, after a pause
            return
        if kind == "afib":
            while times[-1] < min(stop, end):
                self.beat(float(np.clip(self.rng.gamma(25.0, 0.8 * self.mean_rr / 25.0), 0.3, 2.0)), "N", "AFIB")
        else:
            every = 2 if kind == "bigeminy" else 3
            label = "B" if kind == "bigeminy" else "T"
            while times[-1] < min(stop, end):
                rr = self.sinus(times[-1])
                for _ in range(every - 2):
                    self.beat(rr, "N", label)
                coupled = max(0.6 * rr, min(0.3, 0.9 * rr))
                self.beat(coupled, "V", label)
                self.ectopic_pause(rr, coupled)
                self.rhythms[-1] = label
        first_v = next((i for i in range(start_beat, len(times)) if self.symbols[i] == "V"), start_beat)
        self.events.append((kind, start_beat if kind == "afib" else first_v, len(times) - 1))
        self.beat(self.sinus(times[-1]))  # back to sinus rhythm

    def moment(self, kind: str, rr: float) -> None:
        """A couplet, a run, a pause or an interpolated beat, where a sinus beat of ``rr`` was due."""
        first = len(self.times)
        if kind in ("couplet", "run"):
            n = 2 if kind == "couplet" else int(self.rng.integers(3, 9))
            label = "VT" if kind == "run" else "N"
            self.beat(max(0.55 * rr, 0.3), "V", label)
            fast = float(self.rng.uniform(0.32, 0.42))  # 140-190 bpm
            for _ in range(n - 1):
                self.beat(fast, "V", label)
            self.events.append((kind, first, len(self.times) - 1))
            self.beat(1.3 * rr)
        elif kind == "pause":
            self.beat(float(self.rng.uniform(2.2, 3.5)))
            self.events.append((kind, first, first))  # (the beat that ends it)
        elif rr - max(0.5 * rr, 0.3) >= 0.3:  # interpolated: where the sinus interval leaves room
            coupled = max(0.5 * rr, 0.3)
            self.beat(coupled, "V")
            self.events.append((kind, first, first))
            self.beat(rr - coupled + 0.04)  # the sinus beat after it, a little delayed
        else:
            self.beat(rr)

    def ordinary(self, rr: float, rhythm: Rhythm, near_episode: bool) -> None:
        """The next beat outside episodes and moments: sinus, or a lone ventricular or atrial one."""
        draw = self.rng.random()
        if near_episode:  # an episode's first beat is its own
            self.beat(rr)
        elif draw < rhythm.ectopic_rate and self.symbols[-1] == "N":
            coupled = max(0.6 * rr, min(0.3, 0.9 * rr))
            self.beat(coupled, "V")
            self.ectopic_pause(rr, coupled)
        elif draw < rhythm.ectopic_rate + rhythm.atrial_rate and self.symbols[-1] == "N":
            times = self.times
            last = times[-1] - times[-2] if len(times) > 1 else rr  # early against the interval before it
            self.beat(min(rr, last) * float(self.rng.uniform(0.65, 0.8)), "A")
            self.beat(rr * 1.02)  # the sinus node reset: one sinus interval after it
        else:
            self.beat(rr)


def plan_rhythm(
    duration_s: float, heart_rate_bpm: float, hrv: float, rhythm: Rhythm, rng: np.random.Generator
) -> RhythmPlan:
    """The beats of a recording of ``duration_s`` seconds at a mean sinus rate of ``heart_rate_bpm``
    with relative variability ``hrv`` (respiratory, 0.1 Hz and random, as the plain simulator)."""
    mean_rr = 60.0 / heart_rate_bpm
    plan = _Planner(mean_rr, hrv, rng)
    episodes = _episodes(
        duration_s,
        [("afib", rhythm.afib, (60.0, 300.0)), ("bigeminy", rhythm.bigeminy, (20.0, 90.0)),
         ("trigeminy", rhythm.trigeminy, (20.0, 90.0)), ("vt", rhythm.vt, (15.0, 60.0))],
        rng,
    )  # fmt: skip
    moments = _moments(duration_s, list(rhythm.counted.items()), rng)
    plan.times, plan.symbols, plan.rhythms = [float(rng.uniform(0.3, 0.3 + mean_rr))], ["N"], ["N"]
    end = duration_s + 1.0  # beats just past the end still shape the last samples
    while plan.times[-1] < end:
        t = plan.times[-1]
        episode = next((e for e in episodes if e[0] <= t < e[1]), None)
        rr = plan.sinus(t)
        if episode is not None:
            plan.episode(episode[1], episode[2], end, rhythm.vt_bpm)
            episodes.remove(episode)
        elif moments and moments[0][0] <= t:
            plan.moment(moments.pop(0)[1], rr)
        else:
            plan.ordinary(rr, rhythm, any(0 <= e[0] - t < 3 * mean_rr for e in episodes))
    return RhythmPlan(np.array(plan.times), np.array(plan.symbols), np.array(plan.rhythms), plan.events)
