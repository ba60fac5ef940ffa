"""Figures for ranked lists: coloured boxes per retrieved item, mis-ordered pairs, PR curves, AP sweeps.

The drawing primitive :func:`draw_ranked_list` takes per-item colours, borders, texts and optional
thumbnails, so the same function shows a binary ranking (relevant / irrelevant), a graded one
(positive / intermediate / negative borders, Radial loss) or a retrieval list of video frames.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Arc, Rectangle

from hapref.metrics import average_precision, triplet_precision

RELEVANT = "#2e7d32"
IRRELEVANT = "#c62828"
INTERMEDIATE = "#f9a825"
NEUTRAL = "#eceff1"
GRADE_COLORS = {2: RELEVANT, 1: INTERMEDIATE, 0: IRRELEVANT}


def relevance_colors(relevance: Sequence[int | bool]) -> list[str]:
    """Green for relevant, red for irrelevant items.

    Examples:
        >>> relevance_colors([1, 0])
        ['#2e7d32', '#c62828']
    """
    return [RELEVANT if r else IRRELEVANT for r in relevance]


def grade_colors(grades: Sequence[int]) -> list[str]:
    """Graded relevance 2 / 1 / 0 (positive / intermediate / negative) to green / amber / red.

    Examples:
        >>> grade_colors([2, 1, 0])
        ['#2e7d32', '#f9a825', '#c62828']
    """
    return [GRADE_COLORS[int(g)] for g in grades]


def draw_ranked_list(ax: Axes, facecolors: Sequence[str], *, edgecolors: Sequence[str] | None = None,
                     texts: Sequence[str] | None = None, captions: Sequence[str] | None = None,
                     images: Sequence[np.ndarray] | None = None, y: float = 0.0, row_label: str | None = None,
                     box: float = 0.86, linewidth: float = 3.0, fontsize: float = 11) -> None:
    """Draw one ranked list as a row of boxes, rank 1 on the left, item k centred at x = k.

    Args:
        ax: target axes (limits are widened to fit; call ``ax.set_axis_off()`` for a clean look).
        facecolors: one fill colour per item (e.g. :func:`relevance_colors`).
        edgecolors: optional border colour per item (e.g. :func:`grade_colors` around thumbnails).
        texts: optional text inside each box; captions: optional text under each box.
        images: optional thumbnail per item (H×W×3 array), drawn inside the box.
        y: vertical centre of the row (stack several lists with different y).
        row_label: optional label left of the row.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> draw_ranked_list(ax, relevance_colors([1, 0, 1]), texts=["a", "b", "c"])
        >>> len(ax.patches)
        3
        >>> plt.close(fig)
    """
    n = len(facecolors)
    for k in range(n):
        x0, y0 = k + 1 - box / 2, y - box / 2
        edge = edgecolors[k] if edgecolors is not None else "white"
        ax.add_patch(Rectangle((x0, y0), box, box, facecolor=facecolors[k], edgecolor=edge,
                               linewidth=linewidth if edgecolors is not None else 1.0, zorder=2))
        if images is not None:
            ax.imshow(images[k], extent=(x0 + 0.06, x0 + box - 0.06, y0 + 0.06, y0 + box - 0.06), zorder=3)
        if texts is not None:
            ax.text(k + 1, y, texts[k], ha="center", va="center", color="white", fontsize=fontsize,
                    fontweight="bold", zorder=4)
        if captions is not None:
            ax.text(k + 1, y - box / 2 - 0.12, captions[k], ha="center", va="top", fontsize=fontsize - 2, zorder=4)
    if row_label is not None:
        ax.text(0.3, y, row_label, ha="right", va="center", fontsize=fontsize)
    ax.update_datalim([(0.4, y - box / 2 - (0.9 if captions is not None else 0.1)), (n + 0.6, y + box / 2 + 0.1)])
    ax.autoscale_view()
    ax.set_aspect("equal")


def misordered_pairs(relevance: Sequence[int | bool]) -> list[tuple[int, int]]:
    """0-based (negative rank, positive rank) pairs where a negative is ranked above a positive.

    Examples:
        >>> misordered_pairs([1, 0, 1, 0, 1])  # (negative, positive) 0-based ranks
        [(1, 2), (1, 4), (3, 4)]
    """
    return [(j, i) for i, r_i in enumerate(relevance) if r_i for j in range(i) if not relevance[j]]


def ranking_summary(relevance: Sequence[int | bool]) -> tuple[float, float]:
    """(AP, fraction of correctly ordered positive-negative pairs) of a ranking given top to bottom.

    Examples:
        >>> ranking_summary([1, 0, 1])  # AP = (1 + 2/3) / 2, one of two pairs misordered
        (0.8333333333333333, 0.5)
    """
    rel = torch.tensor([bool(r) for r in relevance])
    scores = torch.arange(len(rel), 0, -1, dtype=torch.float64)
    pos, neg = scores[rel], scores[~rel]
    pair_acc = triplet_precision(pos[:, None].expand(-1, len(neg)).flatten(), neg[None, :].expand(len(pos), -1).flatten())
    return average_precision(scores, rel).item(), pair_acc.item()


def plot_pairwise_vs_listwise(rankings: dict[str, Sequence[int | bool]], figsize: tuple[float, float] = (8.5, 3.8),
                              ) -> Figure:
    """HAP-VR Fig. 1 in spirit: the same rankings seen pair-wise (arcs = mis-ordered pairs) and list-wise (P@k, AP).

    Args:
        rankings: name -> relevance of the ranked items, top first.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_pairwise_vs_listwise({"A": [1, 0, 1, 0], "B": [0, 1, 1, 0]})
        >>> len(fig.axes) > 0
        True
        >>> plt.close(fig)
    """
    fig, ax = plt.subplots(figsize=figsize)
    for row, (name, relevance) in enumerate(rankings.items()):
        y = -2.6 * row
        ap, pair_acc = ranking_summary(relevance)
        hits = np.cumsum(relevance)
        captions = [f"P@{k + 1}\n={hits[k]}/{k + 1}" if r else "" for k, r in enumerate(relevance)]
        draw_ranked_list(ax, relevance_colors(relevance), texts=["+" if r else "−" for r in relevance],
                         captions=captions, y=y)
        for j, i in misordered_pairs(relevance):
            ax.add_patch(Arc(((i + j) / 2 + 1, y + 0.43), i - j, 0.5 + 0.12 * (i - j), theta1=0, theta2=180,
                             color="0.35", linewidth=1.2, zorder=1))
        n_pairs = int(sum(relevance)) * (len(relevance) - int(sum(relevance)))
        ax.text(len(relevance) + 0.8, y, f"{name}\npairs in order: {round(pair_acc * n_pairs)}/{n_pairs}"
                f" = {pair_acc:.2f}\nAP = {ap:.3f}", va="center", fontsize=11)
    ax.set_xlim(0.3, len(next(iter(rankings.values()))) + 4.5)
    ax.set_ylim(-2.6 * (len(rankings) - 1) - 1.5, 1.6)
    ax.set_axis_off()
    ax.set_title("arcs: mis-ordered pairs (negative above positive); captions: precision at each positive",
                 fontsize=10)
    fig.tight_layout()
    return fig


def plot_rank_sweep(n_items: int, other_positives: Sequence[int], rank: int) -> Figure:
    """Move one positive through the free ranks of a list; show the list and AP vs pair-wise accuracy.

    Args:
        n_items: list length.
        other_positives: 1-based ranks of the positives that stay put.
        rank: 1-based rank of the moving positive; any rank not in ``other_positives``.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_rank_sweep(6, [1], rank=4)
        >>> len(fig.axes) > 0
        True
        >>> plt.close(fig)
    """
    fixed = set(other_positives)
    free = [k for k in range(1, n_items + 1) if k not in fixed]
    if rank not in free:
        raise ValueError(f"rank must be one of the free ranks {free}, got {rank}")

    def relevance_with(moving: int) -> list[int]:
        return [int(k in fixed or k == moving) for k in range(1, n_items + 1)]

    sweep = np.array([ranking_summary(relevance_with(k)) for k in free])
    fig, (ax_list, ax_curve) = plt.subplots(2, 1, figsize=(7, 4.6), height_ratios=[1, 2.2])
    current = relevance_with(rank)
    edge = ["black" if k + 1 == rank else "white" for k in range(n_items)]
    draw_ranked_list(ax_list, relevance_colors(current), edgecolors=edge, texts=["+" if r else "−" for r in current])
    ax_list.set_axis_off()
    ax_list.set_title("black border: the moving positive")
    ax_curve.plot(free, sweep[:, 0], "o-", label="AP (list-wise)")
    ax_curve.plot(free, sweep[:, 1], "s--", label="pairs in order (pair-wise)")
    ax_curve.axvline(rank, color="black", linewidth=1)
    ax_curve.set_xlabel("rank of the moving positive")
    ax_curve.set_ylabel("metric")
    ax_curve.set_ylim(0, 1.05)
    ax_curve.legend(loc="lower left")
    ax_curve.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_pr_curves(ax: Axes, curves: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Step-wise precision-recall curves; ``curves`` maps a label to (precision, recall) from
    :func:`hapref.metrics.precision_recall_curve`.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> from hapref.metrics import precision_recall_curve
        >>> precision, recall, _ = precision_recall_curve(torch.tensor([0.9, 0.5, 0.1]), torch.tensor([1, 0, 1]))
        >>> fig, ax = plt.subplots()
        >>> plot_pr_curves(ax, {"model": (precision, recall)})
        >>> len(ax.lines)
        1
        >>> plt.close(fig)
    """
    for label, (precision, recall) in curves.items():
        ax.step(recall.cpu().numpy(), precision.cpu().numpy(), where="post", label=label)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
