"""Figures for HAP-VR's frame-level pseudo labels (Eq. 13–14) and its similarity distributions (Fig. 5)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from torch import Tensor

__all__ = ["LABEL_COLORS", "minmax_rescale", "plot_pseudo_labels"]

#: Colours of the three pseudo-label states (HAP-VR Eq. 14): negative, ignored, positive.
LABEL_COLORS = {"negative (-1)": "#d7301f", "ignored (0)": "#f0f0f0", "positive (+1)": "#2b8cbe"}


def minmax_rescale(scores: Tensor | np.ndarray) -> np.ndarray:
    """Scores mapped affinely onto [0, 1] by their own minimum and maximum, as HAP-VR does for its Fig. 5.

    The rescaling keeps every ordering (and so AP, μAP and how much relevant and irrelevant pairs overlap) and
    makes the spreads of different models comparable. ``scores`` is any float array; returns a float64 array of
    the same shape. Raises ValueError for constant or non-finite scores.

    Examples:
        >>> minmax_rescale(np.array([0.5, 0.6, 0.9]))
        array([0.  , 0.25, 1.  ])
    """
    values = scores.detach().cpu().double().numpy() if isinstance(scores, Tensor) else np.asarray(scores, float)
    if values.size < 2 or not np.isfinite(values).all():
        raise ValueError("scores must hold at least two finite values")
    low, high = values.min(), values.max()
    if high == low:
        raise ValueError("scores are constant: there is no range to rescale to [0, 1]")
    return (values - low) / (high - low)


def plot_pseudo_labels(similarities: Mapping[str, Tensor], labels: Mapping[str, tuple[Tensor, Tensor]],
                       stack: bool = False, matches: Tensor | None = None) -> Figure:
    """Teacher frame similarities (Eq. 13) next to the pseudo labels they induce (Eq. 14), with a colour legend.

    ``similarities[title] = [Ti, Tj]`` float matrices (one panel each, viridis with a colour bar) and
    ``labels[title] = (positive, negative)`` bool ``[Ti, Tj]`` masks of :func:`hapref.losses.frame_pseudo_labels`
    (one panel each: positive / ignored / negative, see :data:`LABEL_COLORS`). Rows are query frames, columns
    target frames. ``stack=True`` puts the panels one above the other (for a narrow text column).
    ``matches``, where the true frame correspondences are known (e.g. a copy that keeps the query's timing),
    is a bool ``[Ti, Tj]`` mask of them: each true match is outlined in black on every panel.

    Examples:
        >>> from hapref.losses import frame_pseudo_labels
        >>> sim = torch.rand(6, 6, generator=torch.Generator().manual_seed(0))
        >>> fig = plot_pseudo_labels({"teacher": sim}, {"labels": frame_pseudo_labels(sim, 0.35, 0.35)})
        >>> len(fig.axes)  # two panels and a colour bar
        3
        >>> plt.close(fig)
        >>> fig = plot_pseudo_labels({"teacher": sim}, {}, matches=torch.eye(6, dtype=torch.bool))
        >>> len(fig.axes[0].patches)  # one outline per true match
        6
        >>> plt.close(fig)
    """
    if not similarities and not labels:
        raise ValueError("nothing to draw: pass at least one similarity matrix or one pair of label masks")
    shapes = [tuple(torch.as_tensor(s).shape) for s in similarities.values()]
    shapes += [tuple(pos.shape) for pos, _ in labels.values()]
    if matches is not None and (not isinstance(matches, Tensor) or matches.dtype != torch.bool
                                or any(tuple(matches.shape) != shape for shape in shapes)):
        raise ValueError(f"matches must be a bool mask of the panels' shape {shapes[0]}, got "
                         f"{getattr(matches, 'dtype', type(matches).__name__)} {tuple(getattr(matches, 'shape', ()))}")
    panels = len(similarities) + len(labels)
    shape, size = ((panels, 1), (4.6, 3.3 * panels + 0.5)) if stack else ((1, panels), (3.6 * panels, 3.6))
    fig, axes = plt.subplots(*shape, figsize=size, squeeze=False)
    axes = list(axes.flat)
    for ax, (title, sim) in zip(axes, similarities.items()):
        image = ax.imshow(torch.as_tensor(sim).float().numpy(), cmap="viridis")
        fig.colorbar(image, ax=ax, shrink=0.75)
        ax.set(title=title, xlabel="target frame", ylabel="query frame")
    cmap = ListedColormap(list(LABEL_COLORS.values()))
    for ax, (title, (positive, negative)) in zip(axes[len(similarities):], labels.items()):
        if positive.shape != negative.shape or positive.dtype != torch.bool or negative.dtype != torch.bool:
            raise ValueError(f"labels[{title!r}] must be two bool masks of one shape")
        state = positive.int() - negative.int() + 1     # 0 negative, 1 ignored, 2 positive
        ax.imshow(state.numpy(), cmap=cmap, vmin=-0.5, vmax=2.5)
        ax.set(title=title, xlabel="target frame", ylabel="query frame")
    handles = [Patch(facecolor=c, edgecolor="#777777", label=name) for name, c in LABEL_COLORS.items()]
    if matches is not None:
        for ax in axes[:panels]:
            for i, j in matches.nonzero().tolist():
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.3))
        handles.append(Patch(facecolor="none", edgecolor="black", linewidth=1.3, label="true match"))
    ncol = 2 if stack and len(handles) > 3 else len(handles)      # a narrow stacked figure: two rows
    fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False, bbox_to_anchor=(0.5, -0.02))
    legend_rows = -(-len(handles) // ncol)
    fig.tight_layout(rect=(0, (0.2 + 0.3 * legend_rows) / size[1] if stack else 0.07, 1, 1))
    return fig
