"""Figures for comparing videos: frame strips, region grids, similarity heatmaps, TopK curves, score bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle
from torch import Tensor

from hapref.features import region_windows
from hapref.plotting.training import readable_at_width


def show_frames(videos: Mapping[str, Tensor], num_frames: int = 6, size: float = 1.4) -> plt.Figure:
    """One row per video: ``num_frames`` evenly spaced uint8 frames ``[T, H, W, 3]``, titled by the key.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = show_frames({"query": torch.zeros(8, 16, 16, 3, dtype=torch.uint8)}, num_frames=4)
        >>> len(fig.axes)
        4
        >>> plt.close(fig)
    """
    fig, axes = plt.subplots(len(videos), num_frames, figsize=(size * num_frames, size * len(videos)),
                             squeeze=False)
    for row, (name, frames) in zip(axes, videos.items()):
        picks = torch.linspace(0, frames.shape[0] - 1, num_frames).round().long().tolist()
        for ax, t in zip(row, picks):
            ax.imshow(frames[t].cpu().numpy())
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel(f"t={t}", fontsize=10)
        row[0].set_ylabel(name, fontsize=10)
    readable_at_width(fig)  # 10 pt on the page, however many frames wide
    fig.tight_layout()
    return fig


def plot_region_grid(frame: Tensor, grid: int = 3, ax: plt.Axes | None = None) -> plt.Axes:
    """A frame with the ``grid × grid`` overlapping pooling windows of L3-iMAC drawn on top.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_region_grid(torch.zeros(32, 32, 3, dtype=torch.uint8))
        >>> len(ax.patches)
        9
        >>> plt.close(ax.figure)
    """
    ax = ax or plt.subplots(figsize=(3, 3))[1]
    ax.imshow(frame.cpu().numpy())
    colours = plt.cm.tab10.colors
    rows, cols = region_windows(frame.shape[0], grid), region_windows(frame.shape[1], grid)
    for n, ((r0, r1), (c0, c1)) in enumerate((r, c) for r in rows for c in cols):
        inset = 0.8 * (n % 3)
        ax.add_patch(Rectangle((c0 - 0.5 + inset, r0 - 0.5 + inset), c1 - c0 - 2 * inset, r1 - r0 - 2 * inset,
                               fill=False, lw=1.2, ec=colours[n % len(colours)]))
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def plot_similarity_matrices(matrices: Sequence[Tensor], titles: Sequence[str], vmin: float | None = None,
                             vmax: float | None = None, xlabel: str = "target frame",
                             ylabel: str = "query frame", size: float = 3.0, ncols: int | None = None,
                             fontsize: float | None = None) -> plt.Figure:
    """Heatmaps of frame-to-frame (or any 2-D) similarity matrices with one shared colour bar.

    By default the panels sit side by side in one row; ``ncols`` wraps them into rows of ``ncols`` panels
    (every panel then gets both axis labels), e.g. ``ncols=2`` with ``size=3.0`` fits four panels in a
    6.8-in text column. ``fontsize`` sets titles and axis labels (default 10 pt, scaled up by
    ``width / 6.8`` when the figure is wider than the book's text column).

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_similarity_matrices([torch.eye(4), torch.rand(4, 5)], ["copy", "other"])
        >>> len(fig.axes)  # two panels and the colour bar
        3
        >>> plt.close(fig)
        >>> fig = plot_similarity_matrices([torch.eye(4)] * 4, list("abcd"), ncols=2)
        >>> fig.get_size_inches().tolist(), len(fig.axes)
        ([6.8, 6.0], 5)
        >>> plt.close(fig)
    """
    title_size = label_size = 10 if fontsize is None else fontsize
    if ncols is None:
        fig, axes = plt.subplots(1, len(matrices), figsize=(size * len(matrices) + 0.8, size), squeeze=False)
    else:
        nrows = -(-len(matrices) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 0.8, size * nrows), squeeze=False,
                                 layout="constrained")
    lo = min(float(m.min()) for m in matrices) if vmin is None else vmin
    hi = max(float(m.max()) for m in matrices) if vmax is None else vmax
    for ax, matrix, title in zip(axes.flat, matrices, titles):
        image = ax.imshow(matrix.detach().cpu().numpy(), vmin=lo, vmax=hi, cmap="viridis", aspect="auto")
        ax.set_title(title, fontsize=title_size)
        ax.set_xlabel(xlabel, fontsize=label_size)
        if ncols is not None:
            ax.set_ylabel(ylabel, fontsize=label_size)
    for ax in list(axes.flat)[len(matrices):]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel(ylabel, fontsize=label_size)
    fig.colorbar(image, ax=axes.ravel().tolist() if ncols is not None else axes[0].tolist(), shrink=0.85,
                 label="similarity")
    return readable_at_width(fig, title_size)


def plot_topk_curves(ks: Tensor, curves: Mapping[str, Tensor], ax: plt.Axes | None = None) -> plt.Axes:
    """Similarity as a function of the TopK rate k (k = 0 is Chamfer, k = 1 the mean), one line per candidate.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ks = torch.linspace(0, 1, 5)
        >>> ax = plot_topk_curves(ks, {"copy": 1 - ks / 2})
        >>> len(ax.lines)
        1
        >>> plt.close(ax.figure)
    """
    own = ax is None
    ax = ax or plt.subplots(figsize=(5, 3.2))[1]
    for name, values in curves.items():
        ax.plot(ks.cpu().numpy(), values.detach().cpu().numpy(), marker="o", ms=3, label=name)
    ax.set_xlabel("TopK rate k  (0 = Chamfer, 1 = mean)")
    ax.set_ylabel("video similarity")
    ax.legend(fontsize=10)
    ax.grid(alpha=0.3)
    if own:
        readable_at_width(ax.figure)
    return ax


def plot_score_bars(results: Mapping[str, Mapping[str, float]], ax: plt.Axes | None = None,
                    ylabel: str = "metric value") -> plt.Axes:
    """Grouped bars: ``results[method][metric]`` (e.g. mAP and μAP per similarity measure), the value axis
    labelled ``ylabel``.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_score_bars({"chamfer": {"mAP": 0.8, "uAP": 0.7}, "mean": {"mAP": 0.6, "uAP": 0.5}})
        >>> len(ax.patches)
        4
        >>> plt.close(ax.figure)
    """
    own = ax is None
    ax = ax or plt.subplots(figsize=(6.5, 3.2))[1]
    methods = list(results)
    metrics = list(next(iter(results.values())))
    width = 0.8 / len(metrics)
    for i, metric in enumerate(metrics):
        xs = [m + (i - (len(metrics) - 1) / 2) * width for m in range(len(methods))]
        bars = ax.bar(xs, [results[m][metric] for m in methods], width, label=metric)
        ax.bar_label(bars, fmt="%.2f", fontsize=9)
    ax.set_xticks(range(len(methods)), methods, fontsize=10)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=10, loc="lower right")
    if own:
        readable_at_width(ax.figure)
    return ax
