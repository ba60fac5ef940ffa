"""Draws chapter 7's conceptual diagram of AutoSSVH's learned view (no data, no training; a second to run).

Run from the repository root: ``python benchmarks/autossvh_diagram.py`` writes ``book/figures/autossvh_sampler.png``:
the frames of one video, the Grade-Net's score of each frame, the Gumbel-perturbed scores whose top M are hidden,
the kept frames the hashing encoder turns into per-frame codes, their mean and its sign (the video's binary
code), and the decoder that reconstructs the hidden frames. The numbers are illustrative (a fixed draw), not a
trained model's. Drawn at the text column's width (6.8 in), text at 9 pt and above, saved at 200 dpi.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "book" / "figures" / "autossvh_sampler.png"
T, M, BITS = 8, 5, 6


def draw(path: Path = OUT) -> Path:
    """Draw the diagram to ``path`` (PNG, 200 dpi) and return it."""
    rng = np.random.default_rng(3)
    scores = rng.uniform(0.2, 0.9, T)                                  # Grade-Net S in (0, 1)
    perturbed = scores + rng.gumbel(size=T)                            # S + δ·G at δ = 1
    hidden = np.sort(np.argsort(-perturbed)[:M])
    kept = np.setdiff1d(np.arange(T), hidden)
    codes = np.tanh(rng.normal(0.0, 1.2, (len(kept), BITS)))          # per-frame codes H in (-1, 1)
    fig, ax = plt.subplots(figsize=(6.8, 5.2))
    ax.set(xlim=(-1.6, T + 0.2), ylim=(-6.6, 1.1))
    ax.set_axis_off()
    rows = {"frames": 0.6, "scores": -0.9, "gumbel": -2.9}
    for j in range(T):
        shade = plt.cm.Blues(0.35 + 0.5 * (j % 3) / 2)
        ax.add_patch(Rectangle((j + 0.1, rows["frames"] - 0.35), 0.8, 0.7, color=shade))
        ax.add_patch(Rectangle((j + 0.2, rows["scores"] - 0.5), 0.6, scores[j], color="0.55"))
        colour = "#cc4125" if j in hidden else "#6aa84f"
        ax.add_patch(Rectangle((j + 0.2, rows["gumbel"] - 0.5), 0.6, 0.2 + 0.25 * (perturbed[j] - perturbed.min()),
                               color=colour))
        if j in hidden:
            ax.plot([j + 0.15, j + 0.85], [rows["frames"] - 0.3, rows["frames"] + 0.3], color="#cc4125", lw=2)
    labels = {"frames": "frames $x_1..x_T$", "scores": "Grade-Net\nscores $S$",
              "gumbel": "$S + \\delta G$:\ntop $M$ hidden"}
    for key, y in rows.items():
        ax.text(-0.1, y, labels[key], ha="right", va="center", fontsize=10)
    ax.text(5.2, rows["gumbel"] - 0.85, f"red: the {M} hidden frames; green: the {T - M} kept ones",
            ha="center", fontsize=9)
    box = dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="0.3")
    ax.text(1.3, -4.5, "hashing encoder\n(kept frames)", ha="center", va="center", fontsize=10, bbox=box)
    ax.text(6.3, -4.5, "decoder: rebuild\nhidden frames (FR)", ha="center", va="center", fontsize=10,
            bbox=box)
    for i, c in enumerate(np.sign(codes.mean(0))):
        ax.add_patch(Rectangle((0.2 + 0.45 * i, -6.2), 0.4, 0.4, color="0.15" if c > 0 else "0.85"))
    ax.text(0.2 + 0.45 * BITS + 0.15, -6.0, "sgn(mean of per-frame codes):\nthe video's binary code (VC loss)",
            va="center", fontsize=9)
    for start, end in (((1.3, rows["gumbel"] - 0.55), (1.3, -4.0)), ((1.3, -5.0), (1.3, -5.75)),
                       ((2.55, -4.5), (5.0, -4.5))):
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="0.3"))
    ax.text(3.8, -4.35, "per-frame codes $H$", ha="center", fontsize=9)
    fig.savefig(path, dpi=200, bbox_inches="tight")
    plt.close(fig)
    return path


if __name__ == "__main__":
    print(draw())
