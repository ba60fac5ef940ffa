"""Figures for Chapter 2: the step surrogates of Smooth-AP and QuadLinear-AP (HAP-VR Fig. 4), the gradient a
mis-ranked negative receives under each loss, and AP-against-iteration curves of the loss comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hapref.losses import QuadLinearAP, RankingLoss, SmoothAP, quad_linear, sigmoid_step
from hapref.validation import renamed_keywords

SMOOTH_COLOR = "#1565c0"
QUAD_COLOR = "#c62828"
FAMILY_STYLES = {"point-wise": ":", "pair-wise": "--", "list-wise": "-"}


def _step_and_slope(fn, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    x = x.clone().requires_grad_(True)
    y = fn(x)
    (slope,) = torch.autograd.grad(y.sum(), x)
    return y.detach().numpy(), slope.numpy()


def _shade_misranked(ax: Axes) -> None:
    ax.axvspan(0, ax.get_xlim()[1], color="0.92", zorder=0)
    ax.axvline(0, color="0.5", linewidth=0.8, zorder=1)


@renamed_keywords(tau="temperature")
def plot_surrogates(temperature: float = 0.03, delta: float = 0.18, x_range: tuple[float, float] = (-0.3, 0.3),
                    axes: Sequence[Axes] | None = None) -> Figure:
    """HAP-VR Fig. 4: G(x; τ) of Smooth-AP (Eq. 7, ``temperature`` τ), R⁻(x; δ) of QuadLinear-AP (Eq. 10) and
    their slopes.

    The grey half-plane x > 0 is where a negative outranks a positive. Without ``axes`` the four panels
    form a 2 × 2 grid 6.8 in wide (the book's text column).

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_surrogates()
        >>> len(fig.axes)
        4
        >>> plt.close(fig)
    """
    if axes is None:
        _, grid = plt.subplots(2, 2, figsize=(6.8, 5.0), constrained_layout=True)
        axes = list(grid.flat)
    fig = axes[0].figure
    x = torch.linspace(*x_range, 1201, dtype=torch.float64)
    g, dg = _step_and_slope(lambda v: sigmoid_step(v, temperature), x)
    r, dr = _step_and_slope(lambda v: quad_linear(v, delta), x)
    panels = [(g, SMOOTH_COLOR, f"(a) G(x; τ={temperature:g})"), (dg, SMOOTH_COLOR, "(b) G′(x)"),
              (r, QUAD_COLOR, f"(c) R⁻(x; δ={delta:g})"), (dr, QUAD_COLOR, "(d) R⁻′(x)")]
    for ax, (y, color, title) in zip(axes, panels):
        ax.set_xlim(*x_range)
        _shade_misranked(ax)
        ax.plot(x.numpy(), y, color=color, linewidth=2)
        if "′" in title:
            ax.fill_between(x.numpy(), 0, y, color=color, alpha=0.2)
        if "′" not in title:
            ax.plot(x.numpy(), (x > 0).double().numpy(), color="0.3", linewidth=0.8, linestyle=":")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("x = s(negative) − s(positive)")
        ax.set_ylabel(title.split(" ", 1)[1].split(";")[0].rstrip(")").replace("(x", "(x)"))
    return fig


def misranked_gradient(loss: RankingLoss, d: torch.Tensor, positives: Sequence[float] = (0.4,),
                       easy_negatives: Sequence[float] = (-0.5, -0.55, -0.6, -0.65)) -> torch.Tensor:
    """∂loss/∂s_n for one query whose negative sits at s_n = positives[0] + d, for every d.

    The query also ranks ``positives`` and some well-ranked ``easy_negatives``. Each d is its own
    query row and the per-query losses are summed (not averaged), so every row gets its own gradient.

    Examples:
        >>> from hapref.losses import QuadLinearAP, SmoothAP
        >>> d = torch.tensor([-0.3, 0.2])
        >>> misranked_gradient(SmoothAP(0.01), d)  # Smooth-AP: no push once the negative leads by 0.2
        tensor([9.3576e-12, 5.1529e-08], dtype=torch.float64)
        >>> misranked_gradient(QuadLinearAP(0.18), d)
        tensor([0.0000, 0.6233], dtype=torch.float64)
    """
    d = d.to(torch.float64)
    fixed = torch.tensor([*positives, *easy_negatives], dtype=torch.float64)
    scores = torch.cat([fixed.expand(len(d), -1), (positives[0] + d).unsqueeze(1)], dim=1)
    scores.requires_grad_(True)
    relevance = torch.zeros_like(scores, dtype=torch.bool)
    relevance[:, :len(positives)] = True
    (grad,) = torch.autograd.grad(loss.per_query(scores, relevance, ~relevance).sum(), scores)
    return grad[:, -1]


def plot_misranked_gradients(losses: Mapping[str, RankingLoss], d_range: tuple[float, float] = (-0.4, 0.55),
                             ncols: int = 2) -> Figure:
    """One small panel per loss: the gradient pushing a single negative down, against its lead d over the positive.

    ``ncols`` panels per row, each 3.4 in wide (two fill the book's 6.8-in text column).

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> from hapref.losses import QuadLinearAP, SmoothAP
        >>> fig = plot_misranked_gradients({"Smooth-AP": SmoothAP(), "QuadLinear-AP": QuadLinearAP()}, ncols=2)
        >>> len(fig.axes)
        2
        >>> plt.close(fig)
    """
    d = torch.linspace(*d_range, 381, dtype=torch.float64)
    nrows = -(-len(losses) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 1.9 * nrows), sharex=True,
                             constrained_layout=True, squeeze=False)
    for ax, (name, loss) in zip(axes.flat, losses.items()):
        grad = misranked_gradient(loss, d).numpy()
        ax.set_xlim(*d_range)
        _shade_misranked(ax)
        ax.plot(d.numpy(), grad, color=QUAD_COLOR if "QuadLinear" in name else SMOOTH_COLOR, linewidth=1.8)
        ax.axhline(0, color="0.6", linewidth=0.6)
        ax.set_title(name, fontsize=10)
    for ax in axes.flat[len(losses):]:
        ax.set_axis_off()
    for ax in axes[-1]:
        ax.set_xlabel("d = s(neg) − s(pos)")
    for ax in axes[:, 0]:
        ax.set_ylabel("∂L/∂s(neg)")
    return fig


@renamed_keywords(tau="temperature")
def plot_surrogate_explorer(temperature: float = 0.01, delta: float = 0.18, p: float = 1.0) -> Figure:
    """The widget figure: G vs R⁻, their slopes, and ∂L/∂s_n for Smooth-AP(τ = ``temperature``) and
    QuadLinear-AP(δ, p).

    The query of panel (c) has a second positive at 0.6, so ``p`` (the weight of positive–positive
    steps, Eq. 11) visibly rescales QuadLinear-AP's gradient. The three panels are stacked, 6.8 in wide.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_surrogate_explorer(temperature=0.02)
        >>> len(fig.axes)
        3
        >>> plt.close(fig)
    """
    fig, axes = plt.subplots(3, 1, figsize=(6.8, 8.0), constrained_layout=True)
    x = torch.linspace(-0.4, 0.4, 801, dtype=torch.float64)
    g, dg = _step_and_slope(lambda v: sigmoid_step(v, temperature), x)
    r, dr = _step_and_slope(lambda v: quad_linear(v, delta), x)
    for ax in axes:
        ax.set_xlim(-0.4, 0.4)
        _shade_misranked(ax)
    axes[0].plot(x.numpy(), g, color=SMOOTH_COLOR, label=f"G, τ={temperature:g}")
    axes[0].plot(x.numpy(), r, color=QUAD_COLOR, label=f"R⁻, δ={delta:g}")
    axes[0].set_ylim(-0.1, 4)
    axes[0].set_title("(a) step surrogates", fontsize=10)
    axes[1].plot(x.numpy(), dg, color=SMOOTH_COLOR, label="G′")
    axes[1].plot(x.numpy(), dr, color=QUAD_COLOR, label="R⁻′")
    axes[1].set_yscale("symlog", linthresh=1e-2)
    axes[1].set_title("(b) slopes (symlog)", fontsize=10)
    d = x
    axes[2].plot(d.numpy(), misranked_gradient(SmoothAP(temperature), d, positives=(0.0, 0.6)).numpy(),
                 color=SMOOTH_COLOR, label="Smooth-AP")
    axes[2].plot(d.numpy(), misranked_gradient(QuadLinearAP(delta, p), d, positives=(0.0, 0.6)).numpy(),
                 color=QUAD_COLOR, label=f"QuadLinear-AP, p={p:g}")
    axes[2].set_title("(c) ∂L/∂s(neg), positives at 0 and 0.6", fontsize=10)
    for ax, ylabel in zip(axes, ("surrogate", "slope", "∂L/∂s(neg)")):
        ax.set_xlabel("x = s(neg) − s(pos)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=10, loc="upper left")
    return fig


def plot_ap_curves(curves: Mapping[str, Sequence[float]], families: Mapping[str, str], title: str,
                   ax: Axes | None = None) -> Figure:
    """mAP against iteration per loss; line style by family (point-, pair-, list-wise).

    Without ``ax`` the figure is 6.8 in wide (the book's text column) with the legend below the axes.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> fig = plot_ap_curves({"QuadLinear-AP": [0.5, 0.6]}, {"QuadLinear-AP": "list-wise"}, "mAP")
        >>> len(fig.axes[0].lines)
        1
        >>> plt.close(fig)
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6.8, 5.4), constrained_layout=True)
    cmap = plt.get_cmap("tab10")
    for i, (name, curve) in enumerate(curves.items()):
        ax.plot(np.arange(len(curve)), curve, color=QUAD_COLOR if "QuadLinear" in name else cmap(i % 10),
                linestyle=FAMILY_STYLES[families[name]], linewidth=2.4 if "QuadLinear" in name else 1.5,
                label=f"{name} ({families[name]})")
    ax.set_xlabel("iteration")
    ax.set_ylabel("mAP")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    return ax.figure
