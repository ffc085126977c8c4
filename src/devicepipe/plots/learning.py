"""Figures of a learned model and its scores: training, the latent map, generated rows, the
rows that score highest and lowest, the score distribution."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from devicepipe.plots.base import add_warning, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_extremes", "plot_generated", "plot_latent", "plot_score_distribution", "plot_training"]


def _project_2d(embeddings: np.ndarray) -> tuple[np.ndarray, tuple[str, str]]:
    """The first two latent dimensions, or the first two principal components when there are more.

    An axis whose spread (standard deviation) is under a tenth of the other's says so in its
    label, since the plot's own scaling hides it.
    """
    if embeddings.shape[1] == 1:
        return np.column_stack([embeddings[:, 0], np.zeros(len(embeddings))]), ("z0", "")
    if embeddings.shape[1] == 2:
        xy, names = embeddings, ["z0", "z1"]
    else:
        centred = embeddings - embeddings.mean(0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy, names = centred @ vt[:2].T, ["principal component 1", "principal component 2"]
    spread = xy.std(0) if len(xy) else np.ones(2)
    for j in range(2):
        if spread[j] == 0 and spread[1 - j] > 0:
            names[j] += " (no spread: every point has the same value)"
        elif spread[j] < 0.1 * spread[1 - j]:
            names[j] += f" (spread {spread[j]:.2g}, {spread[1 - j] / spread[j]:.0f}x less than along {names[1 - j]})"
    return xy, (names[0], names[1])


def plot_training(histories: list[dict[str, Any]], *, title: str = "Training", warning: str | None = None) -> Figure:
    """Train and validation loss per epoch (one pair of lines per ensemble member), and the epoch
    whose weights were kept (a dot on the validation line, or the training line without one): the
    best one where training stopped by itself, the last of a run of exact epochs.
    ``warning`` (e.g. not converged) is written under the plot."""
    fig = new_figure(figsize=(7, 4))
    ax = fig.add_subplot()
    members = len(histories)
    each = f" (each of {members} members)" if members > 1 else ""
    for i, h in enumerate(histories):
        epochs = np.arange(1, len(h["train"]) + 1)
        dots = "." if len(epochs) < 10 else None  # (one or two epochs: points, not an invisible line)
        train = np.asarray([np.nan if v is None else v for v in h["train"]], dtype=float)
        ax.plot(epochs, train, color="tab:blue", alpha=0.8, marker=dots, label="train" + each if i < 1 else None)
        val = np.asarray([np.nan if v is None else v for v in h.get("val", [])], dtype=float)
        if val.size and np.isfinite(val).any():
            ax.plot(
                epochs, val, color="tab:orange", alpha=0.8, ls="--", marker=dots,
                label="validation" + each if i < 1 else None,
            )  # fmt: skip
        if h.get("initial") is not None and np.isfinite(h["initial"]):  # the untrained model's loss, at epoch 0
            ax.plot([0], [h["initial"]], "s", color="tab:gray", label=None if i else "untrained")
        if h.get("diverged"):  # the epoch whose loss became NaN or infinite: no point to draw
            ax.axvline(len(epochs), color="tab:red", ls=":", label=None if i else f"loss NaN or infinite{each}")
        best = len(h["train"]) if h.get("best_epoch") is None else h["best_epoch"]  # exact epochs keep the last
        line = h["val"] if best and h.get("val") and np.isfinite(h["val"][best - 1]) else h["train"]
        if best and len(line) >= best:
            kept = f"kept: epoch {best}" if members == 1 else "kept: each member's kept epoch"
            ax.plot([best], [line[best - 1]], "o", color="tab:red", label=None if i else kept)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss per row (log scale)")
    ax.set_title(title + (f", {members} members" if members > 1 else ""))
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return add_warning(fig, warning)


def plot_latent(
    embeddings: np.ndarray,
    *,
    scores: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    threshold: float | None = None,
    flags: np.ndarray | None = None,
    truth: np.ndarray | None = None,
    normal: str = "N",
    colours: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = None,
    title: str = "Latent space",
    warning: str | None = None,
) -> Figure:
    """Scatter of the latent means, coloured by label when given, else by anomaly score.

    ``labels`` (str, per row; e.g. each beat's class) are drawn commonest first, so that a rare
    label lies on top, each in ``colours[label]`` where given and named ``names[label]`` in the
    legend. ``flags`` (bool, per row) rings the flagged rows (in red, in black over labels);
    ``truth`` (str, per row: reference
    labels, ``""`` for none) marks every row whose label is not ``normal`` with a black cross per
    label, so a reader sees whether the flags fall on the known abnormal beats.
    """
    xy, (xl, yl) = _project_2d(embeddings)
    fig = new_figure(figsize=(7.5, 6))
    ax = fig.add_subplot()
    if labels is not None:
        values, counts = np.unique(labels, return_counts=True)
        for k, value in enumerate(values[np.argsort(-counts, kind="stable")]):
            sel = labels == value
            word = value if names is None or value not in names else f"{value} {names[value]}"
            colour = None if colours is None else colours.get(str(value))
            size = 6 if k == 0 else 16  # the commonest small, the rarer ones larger, on top
            ax.scatter(xy[sel, 0], xy[sel, 1], s=size, alpha=0.6 if k == 0 else 0.9, color=colour,
                       label=f"{word} ({int(sel.sum()):,})")  # fmt: skip
    else:
        color = scores if scores is not None else np.zeros(len(xy))
        order = np.argsort(color)  # most anomalous drawn last, on top
        vmax = np.percentile(color, 99.5) if color.size else 1
        points = ax.scatter(xy[order, 0], xy[order, 1], c=color[order], s=6, cmap="viridis", vmax=vmax)
        above = color.size and float(color.max()) > vmax  # the few highest share the top colour: say how high
        bar = fig.colorbar(points, ax=ax, extend="max" if above else "neither")
        label = "anomaly score" + (f" (threshold {threshold:.3g})" if threshold is not None else "")
        bar.set_label(label + (f"; the arrow: {vmax:.3g} to {float(color.max()):.3g}" if above else ""))
    if flags is not None and flags.any():
        ax.scatter(
            xy[flags, 0],
            xy[flags, 1],
            s=40,
            facecolors="none",
            edgecolors="tab:red" if labels is None else "k",
            lw=1,
            label=f"flagged ({int(flags.sum()):,})",
        )
    if truth is not None:
        for marker, value in zip("x+1", sorted(set(truth.tolist()) - {normal, ""}), strict=False):
            sel = truth == value
            ax.scatter(
                xy[sel, 0],
                xy[sel, 1],
                s=22,
                marker=marker,
                color="k",
                lw=1,
                label=f"reference {value} ({int(sel.sum()):,})",
            )
    if ax.get_legend_handles_labels()[0]:
        ax.legend(markerscale=1.5, fontsize=8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return add_warning(fig, warning)


#: Generated beats whose mean change across the grid is under this share of their amplitude range
#: hardly differ (a figure says so, rather than showing 25 copies of one beat without a word).
HARDLY = 0.02


def plot_generated(
    decoded: np.ndarray,
    latents: np.ndarray,
    *,
    centre: np.ndarray | None = None,
    centre_name: str = "typical (the codes' mean)",
    columns: Sequence[str] | None = None,
    hardly: str = "the model's codes carry little beyond the typical beat, so it generates that beat wherever "
    "the codes of these beats lie",
    hardly_across: str | None = None,
    sampling_rate: float | None = None,
    title: str = "Beats generated from a grid of latent points",
    warning: str | None = None,
    columns_row: int = 0,
) -> Figure:
    """A grid of decoded samples (the notebook's 5 x 5 "fake heartbeats"), each labelled by its
    latent point, drawn in one panel (25 panels took most of an ECG run's figure time).

    ``decoded`` ``(k, width)``; ``latents`` ``(k, latent)``, in the grid's row-major order;
    ``centre`` (a typical code's decoding, ``(width,)``, named ``centre_name``) is drawn in grey
    in every cell, so that how each generated beat differs from the typical one shows even where
    the differences are small. ``columns``: words for the cells of row ``columns_row`` (what their
    codes are), in bold before their latent points (over the top row: above them). Every cell
    shares one amplitude scale; ``sampling_rate`` gives the cells' length. Where
    the beats hardly differ across the grid, the title adds ``hardly``; where they hardly differ
    from left to right only, ``hardly_across`` (when given).
    """
    n = int(np.ceil(np.sqrt(len(decoded))))
    fig = new_figure(figsize=(2.3 * n, 1.9 * n + 0.6))
    ax = fig.add_subplot()
    values = decoded if centre is None else np.concatenate([decoded, centre[None]])
    low, high = float(np.min(values)), float(np.max(values))
    height = (high - low) * 1.25 or 1.0
    t = np.linspace(0.0, 0.9, decoded.shape[1])
    for k in range(len(decoded)):
        row, col = divmod(k, n)
        y0 = -row * height - high
        if centre is not None:
            ax.plot(col + t, y0 + centre, lw=1.6, color="0.75", label=centre_name if k == 0 else None)
        ax.plot(col + t, y0 + decoded[k], lw=1, color="tab:blue", label="generated" if k == 0 else None)
        point = "(" + ", ".join(f"{v:.2g}" for v in latents[k][:2]) + ")"
        word = columns[col] if columns is not None and row == columns_row else ""
        if word and row > 0:  # (no room above a row below the first: the word leads its point)
            point, colour, weight = f"{word}: {point}", "k", "bold"
        else:
            colour, weight = "0.3", "normal"
        ax.text(col + 0.45, y0 + high + 0.05 * height, point, ha="center", va="bottom", fontsize=7, color=colour,
                weight=weight)  # fmt: skip
        if word and row == 0:
            ax.text(col + 0.45, y0 + high + 0.2 * height, word, ha="center", va="bottom", fontsize=8, weight="bold")
    top = 0.4 if columns is not None and columns_row == 0 else 0.2
    ax.set_xlim(-0.05, n)
    ax.set_ylim(-(n - 1) * height - high + low - 0.05 * height, top * height)
    ax.set_xticks([])
    ax.set_yticks([])
    length = f"{decoded.shape[1] / sampling_rate:.2g} s" if sampling_rate else f"{decoded.shape[1]} samples"
    ax.set_xlabel(f"each cell: one generated beat ({length}); cells share one amplitude scale", fontsize=8)
    if centre is not None:
        ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 1.0 + 0.35 / n))
    if len(decoded) == n * n and n > 1:
        grid = decoded.reshape(n, n, -1)
        across = np.abs(grid[:, -1] - grid[:, 0]).mean()  # left to right
        down = np.abs(grid[-1] - grid[0]).mean()  # top to bottom
        if max(across, down) < HARDLY * (high - low):
            title += f"\n(the beats hardly differ: {hardly})"
        elif hardly_across is not None and across < HARDLY * (high - low):
            title += f"\n(left and right hardly differ: {hardly_across})"
        elif down < 0.1 * across:
            title += "\n(the rows hardly differ: the model varies its beats along one direction only)"
    fig.suptitle(title)
    fig.tight_layout()
    return add_warning(fig, warning)


def _verdict(above: bool, flagged: bool | None) -> str:
    """A panel's word on a row: flagged, or above the threshold but too small a difference to flag."""
    if flagged is None:
        return " (flagged)" if above else ""
    return " (flagged)" if flagged else (" (above; too small to flag)" if above else "")


def plot_extremes(
    rows: np.ndarray,
    recon: np.ndarray,
    scores: np.ndarray,
    *,
    k: int = 5,
    sampling_rate: float | None = None,
    names: list[str] | None = None,
    title: str = "Most and least anomalous segments",
    x: np.ndarray | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    threshold: float | None = None,
    warning: str | None = None,
    flags: np.ndarray | None = None,
) -> Figure:
    """The ``k`` highest- and ``k`` lowest-scoring rows with their reconstructions.

    Each panel's title gives the row's name (``names``: time, reference label ...), its score and,
    with ``threshold``, whether it is flagged: by ``flags`` ``(n,)`` where given (a row above the
    threshold whose difference is too small to flag says so), else by its score.
    """
    order = np.argsort(scores)
    picks = [("most anomalous", order[::-1][:k]), ("least anomalous", order[:k])]
    fig = new_figure(figsize=(2.8 * k, 5.4))
    axes = fig.subplots(2, k, sharex=True, squeeze=False)
    if x is not None:
        t = x
    else:
        t = np.arange(rows.shape[1]) / sampling_rate if sampling_rate else np.arange(rows.shape[1])
    for r, (label, idx) in enumerate(picks):
        for c in range(k):
            ax = axes[r, c]
            if c >= len(idx):
                ax.axis("off")
                continue
            i = idx[c]
            ax.plot(t, rows[i], color="0.2", lw=1, label="data")
            ax.plot(t, recon[i], color="tab:red", lw=1, ls="--", label="reconstruction")
            name = names[i] if names is not None else f"#{i}"
            verdict = "" if threshold is None else _verdict(scores[i] > threshold, None if flags is None else flags[i])
            ax.set_title(f"{label}\n{name}, score {scores[i]:.3g}{verdict}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel or ("time (s)" if sampling_rate else "sample"), fontsize=8)
    if ylabel:
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel, fontsize=8)
    if threshold is not None:
        title += f"; flagged: score above {threshold:.3g}" + ("" if flags is None else " and a large enough difference")
    fig.suptitle(title)
    fig.tight_layout()
    return add_warning(fig, warning)


def plot_score_distribution(
    train_scores: np.ndarray,
    scores: np.ndarray,
    threshold: float,
    *,
    title: str = "Scores of this recording against the model's training beats",
    what: str = "beats",
    names: tuple[str, str] = ("training", "this recording"),
) -> Figure:
    """Histograms of ``scores`` ``(n,)`` and of the model's ``train_scores`` ``(m,)`` on a shared
    axis (each as a share of its rows, so different counts compare), logarithmic for positive
    scores (errors, distances) and linear where some are not (the combined scorer's z-scores),
    with the threshold marked and the share of each above it in the legend."""
    fig = new_figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    both = np.concatenate([train_scores, scores])
    positive = both[both > 0]
    log = positive.size == both.size and threshold > 0
    lo = float(positive.min()) if positive.size and log else (float(both.min()) if both.size else 1e-6)
    hi = max(float(both.max()), threshold) if both.size else 1.0
    bins: Any = np.geomspace(lo, hi * 1.01, 60) if log and hi > lo else 60
    for values, label, colour in ((train_scores, names[0], "0.55"), (scores, names[1], "tab:blue")):
        if values.size == 0:
            continue
        above = float(np.mean(values > threshold))
        weights = np.full(values.size, 1.0 / values.size)
        ax.hist(
            np.clip(values, lo, None),
            bins=bins,
            weights=weights,
            histtype="stepfilled" if label == names[0] else "step",
            color=colour,
            alpha=0.5 if label == names[0] else 1.0,
            linewidth=1.6,
            label=f"{label}: {values.size:,} {what}, {100 * above:.2f} % above the threshold",
        )
    ax.axvline(threshold, color="tab:red", linestyle="--", linewidth=1.2, label=f"threshold {threshold:.4g}")
    if log:
        ax.set_xscale("log")
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
    ax.set_xlabel("anomaly score, log scale" if log else "anomaly score")
    ax.set_ylabel(f"share of {what}")
    ax.set_title(title)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    return fig
