"""Draws chapter 5's conceptual figure: a quadlet in embedding space and the two orders the losses ask for.

Run from the repository root: ``python benchmarks/quadlet_figure.py`` writes ``book/figures/quadlet.png``
(200 dpi, committed; the chapter shows the stored PNG, so building the book does not run this script).

Left: the query q, a positive p (same sub-class), an intermediate i (same class, other sub-class) and a
negative n (other class), with circles around q through p, i and n: the radial order of Radial Eq. 1
(d(q,p) < d(q,i) < d(q,n)). Right: the Radial loss's picture of the same quadlet: the centroid X_G of (q, p, i),
the smallest centred ball holding them (radius R) and the sphere of radius cR (c = 3) that n must leave.
Drawn at the text column's width (6.8 in) with every text at 10 pt or more.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Circle  # noqa: E402

# Roles: position in a 2-D embedding, colour, what the role means.
ROLES = {
    "q": ((0.0, 0.0), "tab:blue", "query"),
    "p": ((0.6, -0.3), "tab:green", "positive: same sub-class"),
    "i": ((-0.3, 0.9), "tab:orange", "intermediate: same class,\nother sub-class"),
    "n": ((2.45, -1.2), "tab:red", "negative: other class"),
}
# where each point's label sits (points of offset from the marker)
LABEL_AT = {"q": (-34, -18), "p": (8, -16), "i": (8, 6), "n": (-10, 10)}


def _points(ax: plt.Axes) -> None:
    for name, ((x, y), color, _) in ROLES.items():
        ax.plot(x, y, "o", ms=11, color=color, zorder=3)
        ax.annotate(f"f({name})", (x, y), xytext=LABEL_AT[name], textcoords="offset points", fontsize=11,
                    zorder=4)


def draw(path: Path) -> dict:
    """Writes the figure to ``path`` (PNG, 200 dpi); returns the drawn centroid ``X_G`` and radius ``R``."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.8, 4.6))
    q = np.array(ROLES["q"][0])
    # left: circles around q through p, i and n (the order of the distances from the query)
    for name, style in (("p", "-"), ("i", "--"), ("n", ":")):
        point, color, _ = ROLES[name]
        r = float(np.linalg.norm(np.array(point) - q))
        left.add_patch(Circle(q, r, fill=False, ls=style, lw=1.4, color=color))
    _points(left)
    left.set_title("what the quadlet asks:\nd(q,p) < d(q,i) < d(q,n)", fontsize=11)
    # right: centroid of (q, p, i), ball of radius R, sphere of radius cR
    tri = np.array([ROLES[k][0] for k in "qpi"])
    centre = tri.mean(0)
    radius = float(np.linalg.norm(tri - centre, axis=1).max())
    right.add_patch(Circle(centre, radius, fill=True, alpha=0.15, color="0.4", lw=0))
    right.add_patch(Circle(centre, radius, fill=False, ls="--", lw=1.4, color="0.3"))
    right.add_patch(Circle(centre, 3 * radius, fill=False, ls=":", lw=1.6, color="tab:red"))
    right.plot(*centre, "k+", ms=12, mew=2)
    right.annotate("$X_G$", centre, xytext=(-26, 4), textcoords="offset points", fontsize=11)
    right.annotate("", centre + np.array([radius, 0.0]), centre,
                   arrowprops=dict(arrowstyle="->", lw=1.2, color="0.2"))
    right.text(centre[0] + radius / 2, centre[1] + 0.12, "R", fontsize=11, ha="center")
    right.text(centre[0], centre[1] - 3 * radius - 0.45, "radius cR, c = 3", fontsize=10,
               color="tab:red", ha="center")
    # the direction the Radial loss pushes n: straight away from X_G
    n = np.array(ROLES["n"][0])
    away = (n - centre) / np.linalg.norm(n - centre)
    right.annotate("", n + 0.6 * away, n, arrowprops=dict(arrowstyle="->", lw=1.6, color="tab:red"))
    _points(right)
    right.set_title("what the Radial loss asks:\nf(n) outside the cR sphere", fontsize=11)
    for ax in (left, right):
        ax.set_aspect("equal")
        ax.set_xlim(-2.9, 3.4)
        ax.set_ylim(-2.9, 2.9)
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
    handles = [plt.Line2D([], [], marker="o", ls="", ms=9, color=c, label=f"{k}: {text}")
               for k, (_, c, text) in ROLES.items()]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.savefig(path, dpi=200)
    plt.close(fig)
    return {"centre": centre, "radius": radius}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="book/figures/quadlet.png")
    draw(Path(parser.parse_args().out))
