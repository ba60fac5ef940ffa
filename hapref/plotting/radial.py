"""Figures of the Radial chapter: loss gradients on a quadlet, Theorem 3.1's geometry, violation sweeps,
graded ranked lists with thumbnails (Radial Fig. 4), the sliding-window distance curve of the detection task."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Patch

from hapref.data.highlights import HighlightVideo
from hapref.losses.radial import QuadletLoss, RadialLoss, radial_centroid_and_radius
from hapref.plotting.training import readable_at_width
from hapref.radial_theory import ORDER_RELATIONS, order_relations

__all__ = ["ROLE_COLORS", "plot_quadlet_gradients", "plot_theorem_geometry", "plot_violation_sweep",
           "plot_ranked_lists", "plot_distance_curve"]

ROLE_COLORS = {"q": "#1565c0", "p": "#2e7d32", "i": "#f9a825", "n": "#c62828"}


def _points(points: Mapping[str, Sequence[float]]) -> list[torch.Tensor]:
    return [torch.tensor([points[k]], dtype=torch.float64, requires_grad=True) for k in "qpin"]


def _scatter(ax: Axes, tensors: Sequence[torch.Tensor]) -> None:
    for name, t in zip("qpin", tensors):
        x, y = t.detach()[0].tolist()
        ax.scatter([x], [y], s=90, color=ROLE_COLORS[name], zorder=3)
        ax.annotate(f"f({name})", (x, y), xytext=(6, 6), textcoords="offset points", fontsize=11)


def plot_quadlet_gradients(points: Mapping[str, Sequence[float]], axes: Sequence[Axes] | None = None,
                           c: float = 3.0) -> Sequence[Axes]:
    """Radial Fig. 1(ii)(a) style: where gradient descent moves each embedding under the Quadlet loss
    (left) and the Radial loss (right); arrows are ``-grad`` from autograd, the circles show ``R`` and ``cR``.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> axes = plot_quadlet_gradients({"q": [0, 0], "p": [1, 0], "i": [0, 1], "n": [0.5, 0.5]})
        >>> len(axes)
        2
        >>> plt.close(axes[0].figure)
    """
    own = axes is None
    if own:
        _, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    for ax, (title, loss) in zip(axes, (("Quadlet loss (Eq. 6)", QuadletLoss()),
                                        (f"Radial loss (Eq. 8 + 12), c = {c:g}", RadialLoss(c=c)))):
        tensors = _points(points)
        loss(*tensors).backward()
        _scatter(ax, tensors)
        for name, t in zip("qpin", tensors):
            (x, y), (gx, gy) = t.detach()[0].tolist(), (-t.grad[0]).tolist()
            if gx or gy:
                tip = (x + 0.25 * gx, y + 0.25 * gy)
                ax.annotate("", xy=tip, xytext=(x, y), arrowprops=dict(arrowstyle="->", color=ROLE_COLORS[name], lw=2))
                ax.update_datalim([tip])
        if isinstance(loss, RadialLoss):
            centroid, radius = radial_centroid_and_radius(*(t.detach() for t in tensors[:3]))
            cx, cy = centroid[0].tolist()
            ax.add_patch(Circle((cx, cy), radius.item(), fill=False, ls="--", color="grey"))
            ax.add_patch(Circle((cx, cy), c * radius.item(), fill=False, ls=":", color="grey"))
            ax.scatter([cx], [cy], marker="x", color="black")
            ax.annotate("$X_G$", (cx, cy), xytext=(6, -12), textcoords="offset points")
        ax.set_title(title)
        ax.set(xlabel="embedding coordinate 1", ylabel="embedding coordinate 2")
        ax.set_aspect("equal")
        ax.margins(0.15)
        ax.autoscale_view()
        ax.grid(alpha=0.3)
    if own:
        readable_at_width(axes[0].figure)
    return axes


def plot_theorem_geometry(c: float = 3.0, ax: Axes | None = None) -> Axes:
    """Theorem 3.1's construction on the worst case: the ball of radius R around ``X_G``, the radial
    projection ``n_perp`` of f(n) onto its sphere, and the orderings of Eq. 2 at this ``c``.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> ax = plot_theorem_geometry(c=2.0)
        >>> plt.close(ax.figure)
    """
    from hapref.radial_theory import worst_case_quadlet

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4.2))
    q, p, i, n = worst_case_quadlet(c)
    _scatter(ax, (q, p, i, n))
    centroid, radius = radial_centroid_and_radius(q, p, i)
    cx, cy = centroid[0].tolist()
    r = radius.item()
    ax.add_patch(Circle((cx, cy), r, fill=False, ls="--", color="grey"))
    ax.add_patch(Circle((cx, cy), c * r, fill=False, ls=":", color="grey"))
    n_perp = centroid + r * (n - centroid) / (n - centroid).norm()
    ax.scatter(*n_perp[0].tolist(), marker="s", color="black", zorder=3)
    ax.annotate(r"$n_\perp$", n_perp[0].tolist(), xytext=(-4, -16), textcoords="offset points")
    holds = order_relations(q, p, i, n)["d(p,i)<d(p,n)"].item()
    d_pi, d_pn = (p - i).norm().item(), (p - n).norm().item()
    ax.set_title(f"c = {c:.2f}: |p-i| = {d_pi:.2f}, |p-n| = {d_pn:.2f} -> Eq. 2 {'holds' if holds else 'fails'}")
    ax.set(xlabel="embedding coordinate 1", ylabel="embedding coordinate 2")
    ax.set_aspect("equal")
    ax.set_xlim(-1.5, 3.6)
    ax.set_ylim(-1.6, 1.6)
    ax.grid(alpha=0.3)
    return ax


def plot_violation_sweep(cs: Sequence[float], rates: Mapping[str, Mapping[str, Sequence[float]]],
                         ax: Axes | None = None) -> Axes:
    """Violation rate of each ordering of Eq. 1-2 against c; ``rates[setting][relation]`` is one curve.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> from hapref.radial_theory import violation_rates
        >>> cs = [1.0, 2.0, 3.0]
        >>> ax = plot_violation_sweep(cs, {"random": violation_rates(cs, dim=4, count=200)})
        >>> len(ax.lines)
        5
        >>> plt.close(ax.figure)
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    styles = dict(zip(ORDER_RELATIONS, ("-", "--", "-.", ":")))
    for k, (setting, curves) in enumerate(rates.items()):
        for relation, values in curves.items():
            ax.plot(cs, values, styles[relation], color=f"C{k}", label=f"{setting}: {relation}")
    ax.axvline(3.0, color="black", lw=1)
    ax.set_xlabel("c")
    ax.set_ylabel("fraction of quadlets violating")
    ax.legend(fontsize=10, ncol=2)
    ax.grid(alpha=0.3)
    return ax


def plot_ranked_lists(query_image: np.ndarray, rows: Mapping[str, tuple[Sequence[np.ndarray], Sequence[int]]],
                      width: float = 6.8, fontsize: float = 10) -> Figure:
    """Radial Fig. 4: one query's ranked lists under several embeddings, thumbnails framed by relevance grade.

    The query's thumbnail sits in its own column left of the lists; each row's label (e.g. the loss and its
    NDCG) is written above the row, the ranks under the last row, and a legend names the three grades, so
    no text overlaps a thumbnail or another text at any number of rows.

    Args:
        query_image: the query's thumbnail, an ``(H, W, 3)`` array (uint8 or float in [0, 1]).
        rows: label -> (thumbnails of the retrieved items, top first; their grades, 2 = same sub-class,
            1 = same class, 0 = other class). Every row has the same number of items.
        width: figure width in inches (the book's column is 6.8 in); the height follows from the rows.
        fontsize: size of every text in points (at least 9 pt on the page for ``width`` <= 6.8).

    Returns:
        The figure.

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> thumb = np.zeros((8, 8, 3))
        >>> fig = plot_ranked_lists(thumb, {"triplet": ([thumb] * 4, [2, 1, 2, 0]),
        ...                                 "radial": ([thumb] * 4, [2, 2, 1, 0])})
        >>> len(fig.axes[0].images)  # the query and 2 x 4 thumbnails
        9
        >>> plt.close(fig)
    """
    if not rows:
        raise ValueError("rows: at least one ranked list is needed")
    lengths = {len(images) for images, _ in rows.values()} | {len(grades) for _, grades in rows.values()}
    if len(lengths) != 1:
        raise ValueError(f"rows: every row needs as many thumbnails as grades, all of one length; got {lengths}")
    from hapref.plotting.ranking import GRADE_COLORS, draw_ranked_list, grade_colors

    top, box = lengths.pop(), 0.86
    left, right = -1.25, top + 0.55
    line = 1.3 * fontsize / 72 * (right - left) / width  # one line of text, in data units
    pitch = box + 0.12 + line * max(label.count("\n") + 1 for label in rows)
    bottom = -pitch * (len(rows) - 1) - box / 2 - 0.1 - line
    height = width * (pitch - box / 2 - bottom) / (right - left) + 0.45  # + the legend's strip
    fig, ax = plt.subplots(figsize=(width, height))
    fig.subplots_adjust(left=0, right=1, top=1, bottom=0.45 / height)
    for r, (label, (images, grades)) in enumerate(rows.items()):
        y = -pitch * r
        draw_ranked_list(ax, ["white"] * top, edgecolors=grade_colors(grades), images=list(images), y=y,
                         fontsize=fontsize)
        ax.text(1 - box / 2, y + box / 2 + 0.07, label, ha="left", va="bottom", fontsize=fontsize)
    y_query = -pitch * (len(rows) - 1) / 2
    ax.imshow(query_image, extent=(left + 0.05, left + 0.05 + box, y_query - box / 2, y_query + box / 2))
    ax.text(left + 0.05 + box / 2, y_query + box / 2 + 0.07, "query", ha="center", va="bottom",
            fontsize=fontsize)
    y_rank = -pitch * (len(rows) - 1) - box / 2 - 0.08
    for k in range(top):
        ax.text(k + 1, y_rank, str(k + 1), ha="center", va="top", fontsize=fontsize)
    ax.text(left + 0.05 + box / 2, y_rank, "rank", ha="center", va="top", fontsize=fontsize)
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, pitch - box / 2)
    ax.set_aspect("equal")
    ax.set_axis_off()
    names = {2: "same sub-class", 1: "same class", 0: "other class"}
    handles = [Patch(facecolor="white", edgecolor=GRADE_COLORS[g], linewidth=3, label=names[g]) for g in (2, 1, 0)]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, fontsize=fontsize,
               bbox_to_anchor=(0.5, 0.0))
    return fig


def plot_distance_curve(curve: torch.Tensor, video: HighlightVideo, detected_cuts: Sequence[int], window: int,
                        ax: Axes | None = None) -> Axes:
    """Radial Fig. 3: ``||f_1 - f_n||`` per window, true cuts (grey), detected cuts (red dots) and critical events (shaded).

    Examples:
        >>> import matplotlib.pyplot as plt
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=2, clip_frames=(12, 12), size=16)
        >>> ax = plot_distance_curve(torch.rand(17), video, detected_cuts=[12], window=8)
        >>> plt.close(ax.figure)
    """
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(11, 3.2))
    ax.plot(torch.arange(len(curve)).tolist(), curve.tolist(), lw=1.2, color="C0")
    for cut in video.cuts:
        ax.axvline(cut - window + 1, color="grey", lw=0.8, ls="--")
    for cut in detected_cuts:
        w = cut - window + 1
        if 0 <= w < len(curve):
            ax.scatter([w], [curve[w].item()], color="red", zorder=3, s=18)
    for (start, end), critical in zip(video.clips, video.critical):
        if critical:
            ax.axvspan(end - window - 8, end - window, color="#f9a825", alpha=0.3)
    ax.set_xlabel("window id (first frame)")
    ax.set_ylabel(r"$\|f_1 - f_n\|_2$")
    if own:
        readable_at_width(ax.figure)
    return ax
