"""How the default detector's accuracy moves with each of its settings, on every annotated set.

Each setting of the ``"ricker"`` method in turn at 0.5, 0.75, 1.25 and 1.5 times its default
(the others at theirs), then the defaults: pooled F1 of MIT-BIH 100, the nine CPSC 2021
records and the CPSC 2019 records (first channel, 150 ms, 0.5 s edges not scored). A method
fitted to these records shows here as a sharp peak at the defaults.

Also the contrast (typical QRS response over median response, which decides whether a
recording holds an ECG at all) of noise without any ECG: Gaussian noise, white and coloured
(moving averages, pink, brown), and heavy-tailed (Laplace, Student's t with 3 degrees of
freedom), at 125-1000 Hz, 10 s to 10 min, several seeds; and of the annotated records.

    python benchmarks/ecg_robustness.py [--data DIR] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from ecg_accuracy import DEFAULT_DATA, records  # beside this script
from evaluation import DETECTION_SETS

from devicepipe.bench.results import source_commit
from devicepipe.core.device import device_report
from devicepipe.ecg import BeatScore, ecg_contrast, ecg_peaks, evaluate_beats, ricker_defaults
from devicepipe.io import read_beat_annotations, read_series

#: The settings moved (seconds, ratios and factors of the method; see ``devicepipe.ecg``).
SETTINGS = (
    "sigma_s",
    "refractory_s",
    "threshold",
    "global_floor",
    "noise_factor",
    "envelope_s",
    "level_s",
    "close_s",
    "close_ratio",
    "min_contrast",
    "polarity_ratio",
    "searchback_rr",
    "searchback_ratio",
)
FACTORS = (0.5, 0.75, 1.25, 1.5)
TITLES = {"mitdb": "MIT-BIH 100", "cpsc2021": "CPSC 2021 pooled", "cpsc2019": "CPSC 2019 pooled"}
TARGETS = {"mitdb": 0.999, "cpsc2021": 0.99, "cpsc2019": 0.97}


def defaults() -> dict[str, float]:
    return {name: value for name, value in ricker_defaults().items() if name in SETTINGS}


def pooled_f1(loaded: list, options: dict[str, float]) -> dict[str, float]:
    pooled = {g: BeatScore(0, 0, 0) for g in DETECTION_SETS}
    for group, x, fs, ref in loaded:
        peaks = ecg_peaks(x, fs, **options)
        pooled[group] = pooled[group] + evaluate_beats(ref, peaks, fs, n_samples=x.numel())
    return {g: round(s.f1, 4) for g, s in pooled.items()}


def _contrast(x: torch.Tensor, fs: float) -> float:
    return float(ecg_contrast(x.double(), fs))


def _noises(n: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    white = torch.randn(n, generator=g, dtype=torch.float64)
    u = torch.rand(n, generator=g, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
    chi2 = (torch.randn(3, n, generator=g, dtype=torch.float64) ** 2).sum(0)
    return {
        "white": white,
        "moving average of 3": torch.nn.functional.avg_pool1d(white[None, None], 3, 1)[0, 0],
        "moving average of 9": torch.nn.functional.avg_pool1d(white[None, None], 9, 1)[0, 0],
        "pink": torch.fft.irfft(torch.fft.rfft(white) / torch.arange(n // 2 + 1).clamp(min=1).sqrt(), n),
        "brown": torch.cumsum(white, 0),
        "Laplace": -torch.sign(u - 0.5) * torch.log1p(-2 * (u - 0.5).abs()),
        "Student t, 3 dof": white / (chi2 / 3).sqrt(),
    }


def noise_contrast(seeds: int = 6) -> dict[str, dict]:
    """The contrast of noise alone, per kind: median and maximum over rates, lengths and seeds."""
    g = torch.Generator().manual_seed(0)
    found: dict[str, list[float]] = {}
    for fs in (125, 250, 360, 500, 1000):
        for seconds in (10, 60, 600):
            for _ in range(seeds if seconds < 600 else 2):
                for kind, x in _noises(seconds * fs, g).items():
                    found.setdefault(kind, []).append(_contrast(x, fs))
    return {
        k: {"runs": len(v), "median": round(statistics.median(v), 2), "max": round(max(v), 2)} for k, v in found.items()
    }


def markdown(result: dict) -> str:
    sets = list(TITLES)
    lines = [
        "| setting | value | " + " | ".join(TITLES[g] for g in sets) + " |",
        "|---|---|" + "---|" * len(sets),
        "| (defaults) | | " + " | ".join(f"{result['defaults_f1'][g]:.4f}" for g in sets) + " |",
    ]
    for row in result["rows"]:
        cells = [f"**{row['f1'][g]:.4f}**" if row["f1"][g] < TARGETS[g] else f"{row['f1'][g]:.4f}" for g in sets]
        lines.append(f"| `{row['setting']}` | {row['value']:g} ({row['factor']:g}x) | " + " | ".join(cells) + " |")
    lines += ["", "| noise alone | runs | contrast, median | contrast, max |", "|---|---|---|---|"]
    lines += [
        f"| {k} | {v['runs']} | {v['median']:.2f} | {v['max']:.2f} |" for k, v in result["noise_contrast"].items()
    ]
    rec = result["record_contrast"]
    lines += ["", "| records | contrast, min | contrast, max |", "|---|---|---|"]
    lines += [f"| {TITLES[g]} | {min(v):.1f} | {max(v):.1f} |" for g, v in rec.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if not (args.data / "mitdb" / "100.hea").exists():
        print(f"no recordings under {args.data}; pass --data DIR", file=sys.stderr)
        return 2
    loaded, record_contrast = [], {}
    for group, _name, path in records(args.data):
        rec = read_series(path, channel=0)
        loaded.append((group, rec.samples, rec.sampling_rate, read_beat_annotations(path).samples))
        record_contrast.setdefault(group, []).append(round(_contrast(rec.samples, rec.sampling_rate), 1))
    started = time.perf_counter()
    base = defaults()
    result = {
        "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "commit": source_commit(),
        "machine": {"cpu": device_report()["cpu"], "platform": platform.platform()},
        "torch_threads": torch.get_num_threads(),
        "defaults": base,
        "targets": TARGETS,
        "defaults_f1": pooled_f1(loaded, {}),
        "rows": [],
    }
    print("defaults", result["defaults_f1"])
    for name in SETTINGS:
        for factor in FACTORS:
            value = base[name] * factor
            f1 = pooled_f1(loaded, {name: value})
            result["rows"].append({"setting": name, "factor": factor, "value": value, "f1": f1})
            print(f"{name:<18}{value:>9.4g} ({factor:g}x)  " + "  ".join(f"{g} {f1[g]:.4f}" for g in DETECTION_SETS))
    result["record_contrast"] = record_contrast
    result["noise_contrast"] = noise_contrast()
    print("contrast of the records:", {g: (min(v), max(v)) for g, v in record_contrast.items()})
    print("contrast of noise alone:", result["noise_contrast"])
    result["seconds"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ecg_robustness.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "ecg_robustness.md").write_text(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
