"""Figures of the TCA chapter: the pooling regions of iMAC / L3-iRMAC and the weight each negative receives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from hapref.features.pooling import region_windows
from hapref.losses.contrastive_gradients import negative_weights
from hapref.losses.memory_bank import MemoryBankCircle, MemoryBankInfoNCE
from hapref.plotting.training import readable_at_width
from hapref.validation import renamed_keywords

__all__ = ["plot_pooling_regions", "plot_negative_weights", "plot_run_dots"]


def plot_pooling_regions(size: int = 7, grid: int = 3, axes: Sequence[Axes] | None = None) -> Sequence[Axes]:
    """One ``size × size`` feature map: iMAC pools it whole (TCA Eq. 1), L3-iRMAC max-pools ``grid²``
    overlapping regions, L2-normalises and sums them (TCA §3.2).

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> axes = plot_pooling_regions()
        >>> len(axes)
        2
        >>> plt.close(axes[0].figure)
    """
    own = axes is None
    if own:
        _, axes = plt.subplots(1, 2, figsize=(8, 4))
    colors = plt.cm.tab10.colors
    for ax, title in zip(axes, ("iMAC: one global max per channel", f"L3-iRMAC: {grid}×{grid} regions, summed")):
        ax.set_xlim(0, size)
        ax.set_ylim(size, 0)
        ax.set_xticks(range(size + 1))
        ax.set_yticks(range(size + 1))
        ax.grid(True, color="0.85")
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=10)
        ax.set(xlabel="feature-map column", ylabel="feature-map row")
    axes[0].add_patch(Rectangle((0.08, 0.08), size - 0.16, size - 0.16, fill=True, alpha=0.25, color=colors[0],
                                hatch="//", lw=2))
    axes[0].add_patch(Rectangle((0.08, 0.08), size - 0.16, size - 0.16, fill=False, color=colors[0], lw=2.5))
    axes[0].text(size / 2, size / 2, f"one window:\nmax over all\n{size * size} cells", ha="center", va="center",
                 fontsize=11, bbox={"facecolor": "white", "alpha": 0.9, "edgecolor": "none"})
    windows = region_windows(size, grid)
    for k, ((r0, r1), (c0, c1)) in enumerate((r, c) for r in windows for c in windows):
        inset = 0.06 * (k % 3)
        axes[1].add_patch(Rectangle((c0 + inset, r0 + inset), c1 - c0 - 2 * inset, r1 - r0 - 2 * inset,
                                    fill=False, lw=2, color=colors[k % 10]))
    if own:
        readable_at_width(axes[0].figure)
    return axes


@renamed_keywords(tau="temperature", m="margin", gamma="scale")
def plot_negative_weights(temperature: float = 0.07, margin: float = 0.25, scale: float = 256.0, s_pos: float = 0.6,
                          background: int = 127, s_background: float = 0.0, ax: Axes | None = None) -> Axes:
    """Push of one negative on the anchor, ``|∂L/∂s_n|·√(1 − s_n²)`` (TCA Eq. 7), vs its similarity ``s_n``,
    for InfoNCE (``temperature`` τ) and Circle (``margin`` m, ``scale`` γ), each curve scaled to a maximum of 1.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_negative_weights()
        >>> len(ax.lines)
        3
        >>> plt.close(ax.figure)
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    s = torch.linspace(-0.999, 0.999, 401, dtype=torch.float64)
    for name, loss in ((f"InfoNCE (τ={temperature:.3f})", MemoryBankInfoNCE(temperature)),
                       (f"Circle (m={margin:.2f}, γ={scale:.0f})", MemoryBankCircle(margin, scale))):
        w = negative_weights(loss, s, s_pos, background, s_background)
        ax.plot(s.numpy(), (w / w.max().clamp_min(1e-300)).numpy(), lw=2, label=name)
    ax.axvline(s_pos, color="0.5", ls="--", lw=1, label=f"positive s_p = {s_pos}")
    ax.set_xlabel("similarity of the negative to the anchor, $s_n$")
    ax.set_ylabel("relative gradient weight")
    ax.set_title(f"{background} other negatives at s = {s_background}", fontsize=10)
    ax.legend(fontsize=9)
    return ax


def plot_run_dots(rows: Mapping[str, Sequence[float]], references: Mapping[str, float] | None = None,
                  xlabel: str = "DSVR mAP (held-out)", ax: Axes | None = None) -> Axes:
    """One row per configuration: every run as a dot and the mean as a bar tick; ``references`` as dashed lines.

    ``rows[name]`` holds one value per (seed, data seed) run (e.g. a stored sweep variant's ``mAP``);
    ``references[name]`` a single value, drawn across all rows (e.g. the best training-free similarity). Rows
    are drawn top to bottom in the given order; the figure is sized for the book's text column.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_run_dots({"trained": [0.50, 0.52], "untrained": [0.44, 0.45]}, {"Chamfer": 0.46})
        >>> [t.get_text() for t in ax.get_yticklabels()], ax.get_xlabel()
        (['trained', 'untrained'], 'DSVR mAP (held-out)')
        >>> plt.close(ax.figure)
    """
    if not rows:
        raise ValueError("rows must name at least one configuration with its run values")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.8, 0.45 * len(rows) + 1.2))
    names = list(rows)
    for i, name in enumerate(names):
        values = np.asarray(rows[name], dtype=float)
        if values.ndim != 1 or values.size == 0:
            raise ValueError(f"rows[{name!r}] must be a non-empty sequence of numbers, got {rows[name]!r}")
        ax.plot(values, np.full(values.shape, i), "o", ms=4, color="C0", alpha=0.6)
        ax.plot([values.mean()] * 2, [i - 0.3, i + 0.3], color="k", lw=2)
    for k, (name, value) in enumerate((references or {}).items()):
        ax.axvline(value, color=f"C{k + 1}", ls="--", lw=1.2, label=name)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_ylabel("configuration")
    if references:
        ax.legend(loc="best", fontsize=10)
    ax.tick_params(labelsize=10)
    ax.xaxis.label.set_size(10)
    ax.yaxis.label.set_size(10)
    return ax
