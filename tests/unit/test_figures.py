"""Figures answer a user's question: checked on the artists they draw, against hand-built inputs."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgba
from matplotlib.patches import StepPatch

from devicepipe.ecg import label_beats
from devicepipe.learning.learn import convergence_warning, recent_fall
from devicepipe.learning.score import latent_axes, latent_grid
from devicepipe.plots import (
    plot_days,
    plot_extremes,
    plot_generated,
    plot_intervals,
    plot_latent,
    plot_score_distribution,
    plot_training,
)


def test_interval_bins_are_whole_samples_so_no_comb_of_empty_bins():
    rng = np.random.default_rng(0)
    rr = rng.integers(250, 330, size=3000)  # every whole sample from 250 to 329 occurs
    fig = plot_intervals(rr, 360.0)
    bars = []
    for ax in fig.axes:
        (steps,) = [p for p in ax.patches if isinstance(p, StepPatch)]  # the bars, drawn as one outline
        heights, edges = steps.get_data().values, steps.get_data().edges
        bars.append((heights, np.diff(edges)))
        assert heights.sum() == rr.size  # every interval counted once
        assert (heights > 0).all()  # no empty teeth between occupied bins
        # against NumPy's histogram over the same edges
        scale = 360.0 if ax is fig.axes[0] else 1.0
        np.testing.assert_array_equal(heights, np.histogram(rr / scale, bins=edges)[0])
    assert bars[1][1].min() >= 1  # no bin narrower than one sample
    np.testing.assert_allclose(bars[0][1], bars[1][1] / 360.0)


def test_latent_grid_follows_the_directions_the_codes_spread_along():
    rng = np.random.default_rng(1)
    # codes spread along (1, 1)/sqrt(2) mostly and (1, -1)/sqrt(2) a little
    main = rng.normal(size=(2000, 1)) * np.array([[1.0, 1.0]]) / np.sqrt(2)
    minor = 0.1 * rng.normal(size=(2000, 1)) * np.array([[1.0, -1.0]]) / np.sqrt(2)
    codes = torch.tensor(main + minor + np.array([3.0, -2.0]), dtype=torch.float32)
    mean, axes = latent_axes(codes)
    # against NumPy's SVD of the same codes (up to sign)
    _, _, vt = np.linalg.svd(codes.numpy() - codes.numpy().mean(0), full_matrices=False)
    np.testing.assert_allclose(np.abs(axes.numpy()), np.abs(vt[:2]), atol=1e-4)
    np.testing.assert_allclose(mean.numpy(), [3.0, -2.0], atol=0.1)
    grid = latent_grid(codes, 5).numpy().reshape(5, 5, 2)
    across, down = grid[:, -1] - grid[:, 0], grid[-1] - grid[0]
    assert np.allclose(np.abs(across[0]) / np.linalg.norm(across[0]), [0.7071, 0.7071], atol=0.01)
    assert np.linalg.norm(across[0]) > 5 * np.linalg.norm(down[0])  # the grid is as long as the spread
    # spanning the 0.2-99.8 % range of the projections on the first direction
    proj = (codes.numpy() - mean.numpy()) @ axes.numpy()[0]
    assert np.linalg.norm(across[0]) == pytest.approx(np.quantile(proj, 0.998) - np.quantile(proj, 0.002), rel=1e-3)
    # a family of 1 % of the codes off to one side of the second direction is inside the grid's range
    family = torch.tensor([3.0, -2.0]) + 2.0 * axes[1]
    with_family = torch.cat([codes, family + 0.01 * torch.randn(20, 2)])
    grid = latent_grid(with_family, 5).numpy().reshape(5, 5, 2)
    mean2, axes2 = latent_axes(with_family)
    reach = np.abs((grid[:, 2] - mean2.numpy()) @ axes2.numpy()[1]).max()
    assert reach > 1.5  # the grid reaches the family (the 2-98 % range stopped at about 0.2)


def test_generated_grid_draws_the_typical_beat_and_says_when_rows_do_not_differ():
    t = np.linspace(0, 1, 32)
    base = np.sin(2 * np.pi * t)
    decoded = np.stack([base * (1 + 0.5 * c) for _ in range(3) for c in range(3)])  # columns differ, rows do not
    fig = plot_generated(decoded, np.zeros((9, 2)), centre=base)
    lines = fig.axes[0].get_lines()  # one panel: per cell the typical beat (grey), then the generated one
    assert len(lines) == 18 and [line.get_color() for line in lines[::2]] == ["0.75"] * 9
    height = 1.25 * (decoded.max() - decoded.min())
    for k, line in enumerate(lines[1::2]):  # each cell's beat as decoded, shifted down by its row only
        row, col = divmod(k, 3)
        np.testing.assert_allclose(line.get_ydata(), decoded[k] - row * height - decoded.max())
        assert line.get_xdata()[0] == pytest.approx(col)
    assert "rows hardly differ" in fig._suptitle.get_text()
    varied = np.stack([base * (1 + 0.5 * r + 0.5 * c) for r in range(3) for c in range(3)])
    assert "hardly differ" not in plot_generated(varied, np.zeros((9, 2)))._suptitle.get_text()
    # a model whose codes carry nothing: 9 copies of one beat, give or take 1 % of its range, are said to be so
    same = np.stack([base * (1 + 0.005 * (r + c)) for r in range(3) for c in range(3)])
    said = plot_generated(same, np.zeros((9, 2)))._suptitle.get_text()
    assert "the beats hardly differ" in said and "rows hardly differ" not in said


def test_latent_figure_rings_flags_marks_reference_labels_and_names_a_narrow_axis():
    rng = np.random.default_rng(2)
    emb = np.column_stack([0.01 * rng.normal(size=300), rng.normal(size=300)])
    flags = np.zeros(300, bool)
    flags[:7] = True
    truth = np.array(["N"] * 290 + ["V"] * 6 + ["A"] * 3 + [""])
    fig = plot_latent(emb, scores=rng.random(300), flags=flags, truth=truth, threshold=0.9)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["flagged (7)", "reference A (3)", "reference V (6)"]
    ratio = emb[:, 1].std() / emb[:, 0].std()
    assert ax.get_xlabel() == f"z0 (spread {emb[:, 0].std():.2g}, {ratio:.0f}x less than along z1)"
    assert "less than" not in ax.get_ylabel()
    flat = emb.copy()
    flat[:, 0] = 0.5  # every point alike along z0: said so, with no division by its zero spread
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        labels = plot_latent(flat, scores=rng.random(300), flags=flags).axes[0]
    assert labels.get_xlabel() == "z0 (no spread: every point has the same value)" and labels.get_ylabel() == "z1"


def test_extremes_name_the_threshold_the_units_and_the_flags():
    rows = np.ones((6, 10)) * np.arange(6)[:, None]
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 2.0])
    fig = plot_extremes(rows, rows, scores, k=2, threshold=1.0, ylabel="load (MW)", names=list("abcdef"))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].endswith("f, score 2 (flagged)") and "(flagged)" not in titles[1]
    assert fig.axes[0].get_ylabel() == "load (MW)" and "score above 1" in fig._suptitle.get_text()


def test_days_get_colours_no_two_alike():
    days = np.vstack([np.ones((30, 24)), np.arange(12)[:, None] + np.zeros((12, 24))])
    flagged = np.arange(30, 42)
    dates = [f"2020-01-{d:02d}" for d in range(1, 31)] + [f"2020-02-{d:02d}" for d in range(1, 13)]
    fig = plot_days(days, flagged, dates, scores=np.linspace(0, 1, 42))
    lines = fig.axes[0].get_lines()[1:]  # after the typical day
    colours = {to_rgba(line.get_color()) for line in lines}
    assert len(lines) == 8 == len(colours)
    assert lines[0].get_label() == "2020-02-01 Sat, score 0.732"  # 1 February 2020 was a Saturday


def test_training_ticks_are_whole_epochs_and_the_warning_is_on_the_figure():
    h = {"train": [3.0, 2.0, 1.0], "val": [3.0, 2.0, 1.2], "seconds": [0.0] * 3}
    fig = plot_training([h, h], warning="not converged: ...")
    ax = fig.axes[0]
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)
    assert [t.get_text() for t in fig.texts] == ["not converged: ..."]
    assert ax.get_legend().get_texts()[0].get_text() == "train (each of 2 members)"


def test_convergence_is_judged_on_the_last_epochs():
    assert recent_fall([1.0, 0.5, 0.3, 0.2, 0.15]) == pytest.approx((0.5 - 0.15) / 0.5)
    assert recent_fall([1.0, 0.5] + [0.3] * 20) == 0.0
    falling = {"train": [1.0, 0.8, 0.6, 0.5, 0.4], "val": [1.0, 0.8, 0.6, 0.5, 0.4]}
    level = {"train": [1.0] + [0.5] * 19, "val": [1.0] + [0.5] * 19}
    assert "not converged" in convergence_warning([falling])
    assert convergence_warning([level]) is None
    assert convergence_warning([{**falling, "stopped_early": True}]) is None
    assert "after one epoch" in convergence_warning([{"train": [1.0], "val": [1.0]}])


def test_label_beats_takes_the_nearest_reference_within_the_tolerance():
    labels = label_beats([300, 100, 200], ["A", "N", "V"], [95, 205, 250, 290, 1000, 0], 100, tolerance_s=0.1)
    assert labels.tolist() == ["N", "V", "", "A", "", ""]
    assert label_beats([], [], [5], 100).tolist() == [""]


def test_score_distribution_is_logarithmic_only_for_positive_scores():
    rng = np.random.default_rng(0)
    train, new = rng.lognormal(0, 0.5, 500), rng.lognormal(0.2, 0.5, 300)
    fig = plot_score_distribution(train, new, float(np.quantile(train, 0.99)))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "anomaly score, log scale"
    # the combined scorer's robust z-scores go below zero: a log axis would pile them at its left edge
    z_train, z_new = rng.normal(0, 1, 500), rng.normal(1, 1, 300)
    fig = plot_score_distribution(z_train, z_new, 2.3)
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlabel() == "anomaly score"
    assert ax.get_xlim()[0] <= z_train.min() and ax.get_xlim()[1] >= z_new.max()
    assert "above the threshold" in ax.get_legend().get_texts()[0].get_text()


@pytest.mark.parametrize(("hours", "unit", "end"), [(0.25, "min", 15.0), (2.0, "min", 120.0), (24.0, "h", 24.0)])
def test_heart_rate_and_quality_axes_are_in_a_unit_a_day_reads_in(hours, unit, end):
    # a day's heart rate against minutes reads 0-1440; past 3 hours the axes are in hours
    from devicepipe.ecg import POOR_QUALITY
    from devicepipe.plots import plot_heart_rate, plot_quality

    fs = 100.0
    peaks = np.arange(0, int(hours * 3600 * fs), 80)  # 75 bpm throughout
    rate = plot_heart_rate(peaks, fs).axes[0]
    assert rate.get_xlabel() == f"time ({unit})"
    beats_x = rate.lines[0].get_xdata()
    assert beats_x[-1] == pytest.approx(end, rel=1e-3)  # the last beat at the recording's end, in that unit
    assert np.allclose(rate.lines[0].get_ydata(), 75.0)
    times = peaks / fs
    stretches = np.full(int(np.ceil(times[-1] / 10)), 0.9)
    quality = plot_quality(times, np.full(times.size, 0.9), stretches, 10.0, np.zeros((0, 2)), threshold=POOR_QUALITY)
    ax = quality.axes[0]
    assert ax.get_xlabel() == f"time ({unit})" and ax.get_xlim()[1] == pytest.approx(end, rel=1e-2)


def test_runs_without_figures_do_not_load_matplotlib(tmp_path):
    # matplotlib costs a few tenths of a second to import: the command line's start, each Dask
    # worker's, and every run with figures=False; it is loaded at the first figure only
    code = (
        "import sys\n"
        "import devicepipe.cli, devicepipe.pipelines\n"
        "from devicepipe.simulate import simulate_ecg\n"
        "from devicepipe.io import write_parquet\n"
        "sim = simulate_ecg(20, 250, seed=1)\n"
        f"write_parquet({{'ecg': sim.signal}}, {str(tmp_path / 'e.parquet')!r}, sampling_rate=250)\n"
        f"devicepipe.pipelines.run_beats({str(tmp_path / 'e.parquet')!r}, {str(tmp_path / 'out')!r}, "
        "device='cpu', figures=False)\n"
        "print('matplotlib' in sys.modules)\n"
        "from devicepipe.plots import plot_heart_rate\n"
        "plot_heart_rate(sim.r_peaks.numpy(), 250.0)\n"
        "print('matplotlib.figure' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_scores_above_the_colour_bar_s_range_are_said():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(400, 2))
    scores = rng.random(400)
    scores[:3] = [7.25, 6.0, 5.5]  # a few far above the rest: past the 99.5th percentile
    fig = plot_latent(emb, scores=scores, threshold=0.9)
    bar = fig.axes[1]  # the colour bar's axes
    label = bar.get_ylabel()
    top = np.percentile(scores, 99.5)
    assert f"the arrow: {top:.3g} to 7.25" in label
    plain = plot_latent(emb, scores=rng.random(400) * 0 + 1.0).axes[1].get_ylabel()  # nothing above: nothing said
    assert "arrow" not in plain


def test_class_grid_runs_from_the_normal_codes_to_the_class_the_model_sets_farthest_apart():
    from devicepipe.learning.score import class_grid

    rng = np.random.default_rng(3)
    normal = rng.normal(size=(500, 2)) * np.array([0.1, 1.0])  # normal codes spread along z1
    near = np.array([0.3, 0.0]) + 0.05 * rng.normal(size=(40, 2))  # S: many, but close to normal
    far = np.array([4.0, 2.0]) + 0.05 * rng.normal(size=(5, 2))  # V: few, far off
    codes = torch.tensor(np.vstack([normal, near, far]), dtype=torch.float64)
    which = np.array(["N"] * 500 + ["S"] * 40 + ["V"] * 5)
    masks = {c: torch.from_numpy(which == c) for c in ("S", "V", "F")}
    grid, name = class_grid(codes, torch.from_numpy(which == "N"), masks, 5)
    assert name == "V"
    g = grid.numpy().reshape(5, 5, 2)
    mid = g[2]  # the middle row lies on the line from the normal mean to the V mean
    np.testing.assert_allclose(mid[0], normal.mean(0), atol=1e-9)
    np.testing.assert_allclose(mid[-1], far.mean(0), atol=1e-9)
    step = (far.mean(0) - normal.mean(0)) / np.linalg.norm(far.mean(0) - normal.mean(0))
    down = g[-1, 0] - g[0, 0]
    assert abs(down @ step) < 1e-9  # rows move square to the line
    rest = (normal - normal.mean(0)) @ (down / np.linalg.norm(down))  # over the normal codes' spread that way
    reach = max(abs(np.quantile(rest, 0.998)), abs(np.quantile(rest, 0.002)))
    assert np.linalg.norm(down) == pytest.approx(2 * reach, rel=1e-6)
    # too few rows of any other class, or too few normal ones: no such grid
    assert class_grid(codes, torch.from_numpy(which == "N"), {"V": torch.zeros(545, dtype=torch.bool)}, 5) is None
    assert class_grid(codes, torch.zeros(545, dtype=torch.bool), masks, 5) is None


def test_latent_coloured_by_class_draws_the_rare_class_on_top_and_names_each():
    from devicepipe.artifacts.figures import CLASS_WORDS
    from devicepipe.plots.events import CLASS_COLOURS

    rng = np.random.default_rng(4)
    emb = rng.normal(size=(120, 2))
    labels = np.array(["V"] * 5 + ["N"] * 110 + ["S"] * 5)
    flags = np.zeros(120, bool)
    flags[:3] = True
    ax = plot_latent(emb, labels=labels, colours=CLASS_COLOURS, names=CLASS_WORDS, flags=flags).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["N normal (110)", "S supraventricular ectopic (5)", "V ventricular ectopic (5)", "flagged (3)"]
    drawn = ax.collections
    assert to_rgba(drawn[2].get_facecolor()[0], 1) == to_rgba(CLASS_COLOURS["V"], 1)
    np.testing.assert_allclose(drawn[2].get_offsets(), emb[:5])
    assert to_rgba(drawn[3].get_edgecolor()[0]) == to_rgba("k")  # flags ringed in black over the class colours


def test_event_strips_mark_the_reference_s_beats_that_were_never_detected(tmp_path):
    # a strip said "every beat lettered with its class" while beats the run missed were drawn
    # unlettered: they are marked "missed", where they are, and only they
    from devicepipe.plots.events import plot_event_strips

    fs = 250.0
    peaks = np.arange(1, 40) * 250  # a beat a second
    labels = np.array(["N"] * peaks.size)
    labels[10:13] = "V"
    signal = np.zeros(41 * 250)
    signal[peaks] = 1.0
    missed = np.array([10 * 250 + 125, 30 * 250 + 125])  # the second lies outside the strip
    fig = plot_event_strips(signal, fs, peaks, labels, [("run", 9, 11, 1)], missed=missed)
    texts = [(t.get_text(), round(t.get_position()[0], 2)) for t in fig.axes[0].texts]
    assert [x for text, x in texts if text == "missed"] == [10.5]
    assert sum(text in "NV" for text, _ in texts) >= 7  # (the beats found, lettered)
    plain = plot_event_strips(signal, fs, peaks, labels, [("run", 9, 11, 1)])
    assert not [t for t in plain.axes[0].texts if t.get_text() == "missed"]


def test_the_class_grid_marks_its_ends_on_the_middle_row_as_its_title_says():
    # the title says the middle row runs from N to the class, but "N" and "V" were printed over
    # the top row
    decoded = np.random.default_rng(0).normal(size=(25, 50))
    latents = np.arange(50, dtype=float).reshape(25, 2)
    fig = plot_generated(decoded, latents, columns=["N", "", "", "", "V"], columns_row=2)
    texts = {t.get_text(): t.get_position() for t in fig.axes[0].texts}
    marked = [text for text in texts if text.startswith(("N:", "V:"))]
    assert sorted(marked) == ["N: (20, 21)", "V: (28, 29)"]  # cells 10 and 14: the middle row's ends
    assert "N" not in texts and "V" not in texts  # nothing over the top row
    top = plot_generated(decoded, latents, columns=["N", "", "", "", "V"])  # (the top row's words: above it)
    assert {"N", "V"} <= {t.get_text() for t in top.axes[0].texts}
