"""Figures of training runs: loss curves, ablation bars, similarity distributions (HAP-VR Fig. 5) and heatmaps (Fig. 6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure


def plot_history(histories: Mapping[str, Sequence[Mapping[str, float]]], key: str = "loss", smooth: int = 1,
                 ax: Axes | None = None) -> Axes:
    """One curve of ``key`` against the step per run (a moving average over ``smooth`` steps).

    Without ``ax`` the figure is new and laid out (constrained layout), so ``ax.figure.savefig(path)`` keeps
    the axis labels inside the image; with ``ax`` the caller's figure keeps its own layout.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_history({"run": [{"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.7}]})
        >>> len(ax.lines), ax.figure.get_layout_engine() is not None
        (1, True)
        >>> plt.close(ax.figure)
    """
    ax = ax or plt.subplots(figsize=(5, 3), layout="constrained")[1]
    for name, history in histories.items():
        steps = np.array([h["step"] for h in history if key in h])
        values = np.array([h[key] for h in history if key in h], dtype=float)
        if smooth > 1 and len(values) >= smooth:
            values = np.convolve(values, np.ones(smooth) / smooth, mode="valid")
            steps = steps[smooth - 1:]
        ax.plot(steps, values, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel(key)
    ax.legend(fontsize=10)
    return ax


def plot_metric_bars(results: Mapping[str, Mapping[str, Sequence[float]]], metrics: Sequence[str] = ("mAP", "uAP"),
                     baseline: Mapping[str, float] | None = None, baseline_label: str = "baseline",
                     title: str = "", stack: bool = False) -> Figure:
    """Mean ± spread (min–max over seeds) of each metric per configuration, one panel per metric (side by side,
    or one above the other with ``stack``, 6.8 in wide: the book's text column).

    ``results[config][metric]`` holds one value per seed; ``baseline`` draws a dashed reference line.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_metric_bars({"QuadLinear-AP": {"mAP": [0.8, 0.82], "uAP": [0.7, 0.72]}},
        ...                        baseline={"mAP": 0.75, "uAP": 0.6})
        >>> len(fig.axes)
        2
        >>> plt.close(fig)
    """
    height = 0.45 * len(results) + 1.2
    shape, size = ((len(metrics), 1), (6.8, height * len(metrics))) if stack else \
        ((1, len(metrics)), (4.2 * len(metrics), height))
    fig, axes = plt.subplots(*shape, figsize=size, squeeze=False)
    names = list(results)
    y = np.arange(len(names))
    for ax, metric in zip(axes.flat, metrics):
        values = [np.asarray(results[n][metric], dtype=float) for n in names]
        means = np.array([v.mean() for v in values])
        err = np.array([[m - v.min() for v, m in zip(values, means)], [v.max() - m for v, m in zip(values, means)]])
        ax.barh(y, means, xerr=err, color="tab:blue", alpha=0.75, capsize=3)
        if baseline is not None and metric in baseline:
            ax.axvline(baseline[metric], color="k", ls="--", lw=1, label=baseline_label)
            ax.legend(fontsize=10, loc="lower right")
        extra = [baseline[metric]] if baseline is not None and metric in baseline else []
        low = min([v.min() for v in values] + extra)
        high = max([v.max() for v in values] + extra)
        pad = max(0.02, 0.15 * (high - low))
        ax.set_xlim(0.0, min(1.0, high + pad))         # bars start at zero: lengths compare honestly
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        ax.set_xlabel(metric)
    if title:
        fig.suptitle(title)
    readable_at_width(fig)
    fig.tight_layout()
    return fig


def plot_scale_curves(curves: Mapping[str, Sequence[Sequence[Sequence[float]]]], baseline: float | None = None,
                      baseline_label: str = "best training-free", xlabel: str = "training step",
                      ylabel: str = "DSVR mAP (held-out)", ax: Axes | None = None) -> Axes:
    """Metric against training scale, one line per method: the mean over runs and their min–max band.

    ``curves[name]`` holds one curve per run, each a list of ``(x, value)`` points at the same ``x`` values
    (e.g. the ``curve`` of a stored sweep row: mAP every 25 steps); ``baseline`` draws a dashed line.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_scale_curves({"trained": [[(25, 0.5), (50, 0.7)], [(25, 0.55), (50, 0.72)]]}, baseline=0.5)
        >>> [line.get_label() for line in ax.get_lines()]
        ['trained', 'best training-free']
        >>> plt.close(ax.figure)
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.6))
    for name, runs in curves.items():
        points = np.asarray(runs, dtype=float)                 # [runs, points, 2]
        if points.ndim != 3 or points.shape[-1] != 2:
            raise ValueError(f"curves[{name!r}] must be runs of (x, value) points at the same x, got shape "
                             f"{points.shape}")
        x, values = points[0, :, 0], points[..., 1]
        line, = ax.plot(x, values.mean(axis=0), marker="o", ms=3, label=name)
        ax.fill_between(x, values.min(axis=0), values.max(axis=0), color=line.get_color(), alpha=0.2, lw=0)
    if baseline is not None:
        ax.axhline(baseline, color="k", ls="--", lw=1, label=baseline_label)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.legend(loc="lower right")
    return ax


def plot_similarity_distributions(scores: Mapping[str, tuple[np.ndarray, np.ndarray]], bins: int = 30) -> Figure:
    """Histograms of relevant vs irrelevant pair similarities per model (the analogue of HAP-VR Fig. 5).

    ``scores[name] = (relevant, irrelevant)`` similarities; each model gets its own panel.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> rng = np.random.default_rng(0)
        >>> fig = plot_similarity_distributions({"model": (rng.uniform(0.5, 1, 50), rng.uniform(0, 0.6, 200))})
        >>> len(fig.axes)
        1
        >>> plt.close(fig)
    """
    fig, axes = plt.subplots(1, len(scores), figsize=(3.6 * len(scores), 2.8), squeeze=False, sharey=True)
    for ax, (name, (relevant, irrelevant)) in zip(axes[0], scores.items()):
        edges = np.linspace(min(relevant.min(), irrelevant.min()), max(relevant.max(), irrelevant.max()), bins + 1)
        ax.hist(irrelevant, bins=edges, density=True, alpha=0.6, color="tab:red", label="irrelevant")
        ax.hist(relevant, bins=edges, density=True, alpha=0.6, color="tab:green", label="relevant")
        ax.set_title(name)
        ax.set_xlabel("similarity")
    axes[0][0].set_ylabel("density")
    axes[0][0].legend(fontsize=10)
    fig.tight_layout()
    return fig


def plot_similarity_heatmaps(matrices: Mapping[str, np.ndarray], vmin: float | None = None, vmax: float | None = None,
                             ncols: int = 5) -> Figure:
    """Heatmaps of similarity matrices side by side with a shared colour scale (the analogue of HAP-VR Fig. 6).

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_similarity_heatmaps({"a": np.eye(4), "b": np.ones((4, 4)) / 2})
        >>> len(fig.axes) >= 2
        True
        >>> plt.close(fig)
    """
    n = len(matrices)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.3 * ncols, 2.4 * nrows), squeeze=False)
    vmin = min(float(m.min()) for m in matrices.values()) if vmin is None else vmin
    vmax = max(float(m.max()) for m in matrices.values()) if vmax is None else vmax
    image = None
    for ax, (name, matrix) in zip(axes.flat, matrices.items()):
        image = ax.imshow(matrix, vmin=vmin, vmax=vmax, cmap="viridis", aspect="auto")
        ax.set_title(name, fontsize="small")
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="similarity")
    return readable_at_width(fig)


def readable(fig: Figure, points: float = 10.0) -> Figure:
    """Raise every text of ``fig`` (titles, axis labels, tick labels, legends, colour bars) to ``points`` or more.

    The book's rule for a figure shown at its natural width (at most 6.8 in at 100 dpi, the text column): no text
    below 10 pt. Larger texts are left as they are. Returns ``fig``.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(figsize=(4, 3))
        >>> _ = ax.plot([0, 1], [0, 1], label="a")
        >>> _ = ax.legend(fontsize=6); _ = ax.set_title("t", fontsize=14); ax.tick_params(labelsize=7)
        >>> _ = readable(fig)
        >>> ax.get_legend().get_texts()[0].get_fontsize(), ax.title.get_fontsize()
        (10.0, 14.0)
        >>> min(t.get_fontsize() for t in ax.get_xticklabels())
        10.0
        >>> plt.close(fig)
    """
    from matplotlib.text import Text

    fig.canvas.draw()                       # creates the tick labels
    for ax in fig.axes:
        ax.tick_params(axis="both", which="both", labelsize=max(points, _tick_size(ax)))
    for text in fig.findobj(Text):
        if text.get_text() and text.get_fontsize() < points:
            text.set_fontsize(points)
    return fig


COLUMN_INCHES = 6.8  # the book's text column at matplotlib's 100 dpi (676 px at a 1280-px window)


def readable_at_width(fig: Figure, points: float = 10.0) -> Figure:
    """:func:`readable` at the size the book shows ``fig``: ``points`` for a figure up to the 6.8-in text
    column, scaled by ``width / 6.8`` for a wider one (the page shrinks it to the column). Returns ``fig``.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(figsize=(10.2, 3))
        >>> _ = ax.set_xlabel("x", fontsize=8)
        >>> _ = readable_at_width(fig)
        >>> ax.xaxis.label.get_fontsize()  # shown at 6.8 / 10.2 of its size: 10 pt on the page
        15.0
        >>> plt.close(fig)
    """
    return readable(fig, points * max(1.0, fig.get_size_inches()[0] / COLUMN_INCHES))


def _tick_size(ax: Axes) -> float:
    labels = ax.get_xticklabels() + ax.get_yticklabels()
    return min((t.get_fontsize() for t in labels), default=0.0)
