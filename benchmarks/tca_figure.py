"""Draws chapter 6's conceptual figure: TCA's encoder turning a video's frames into one vector, and the
memory bank that supplies the contrastive loss with negatives.

Run from the repository root: ``python benchmarks/tca_figure.py`` writes ``book/figures/tca.png``
(200 dpi, committed; the chapter shows the stored PNG, so building the book does not run this script).

Left: the frame descriptors of one view, one Transformer encoder layer in which every frame attends to every
frame (a few attention lines drawn), the refined frames (TCA_f) and their normalised mean (TCA_c), the anchor.
Right: the anchor is compared with the key of another view of the same clip (the positive) and with the keys of
a FIFO memory bank (the negatives); the loss is a softmax over those similarities; after the step the keys of
this batch's distractors enter the bank and the oldest keys leave. Drawn at the text column's width (6.8 in)
with every text at 10 pt.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

FONT = 10
FRAMES = 6
SHOT = ["#9ecae1", "#9ecae1", "#fdae6b", "#fdae6b", "#fdae6b", "#a1d99b"]   # three shots of one view
BANK = 7


def _box(ax, x, y, w, h, text, color, **kw):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04", fc=color, ec="0.3", lw=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=FONT, **kw)


def _arrow(ax, a, b, color="0.25", style="-|>", **kw):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=12, color=color, lw=1.2, **kw))


def _vector(ax, x, y, color, size=0.42, edge="0.3"):
    ax.add_patch(Rectangle((x, y), size, size, fc=color, ec=edge, lw=1))


def draw(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.8, 4.3))
    ax.set(xlim=(0, 10.6), ylim=(-0.2, 6.1), aspect="equal")
    ax.axis("off")
    xs = 0.35 + 0.68 * np.arange(FRAMES)
    # the frames of one view
    for x, c in zip(xs, SHOT):
        _vector(ax, x, 0.35, c)
    ax.text(xs.mean() + 0.21, -0.05, "frame descriptors $x_1, \\dots, x_T$", ha="center", va="center",
            fontsize=FONT)
    # the encoder layer: every frame attends to every frame
    _box(ax, 0.2, 1.35, 4.05, 1.1, "", "#cfe2f3")
    ax.text(2.22, 2.2, "self-attention over all frames", ha="center", va="center", fontsize=FONT)
    ax.text(2.22, 1.6, "+ feed-forward, per frame", ha="center", va="center", fontsize=FONT)
    for x in xs:
        _arrow(ax, (x + 0.21, 0.8), (x + 0.21, 1.3), style="-")
    for i in (1, 4):   # two frames' attention to every frame
        for j in range(FRAMES):
            ax.plot([xs[j] + 0.21, xs[i] + 0.21], [0.8, 1.3], color="C3" if i == 1 else "C2", lw=0.8, alpha=0.8)
    # the refined frames: each now carries some of the clip
    mixed = ["#b9c4a6", "#b9c4a6", "#d9b98f", "#d9b98f", "#d9b98f", "#b4cfa0"]
    for x, c in zip(xs, mixed):
        _arrow(ax, (x + 0.21, 2.5), (x + 0.21, 2.95))
        _vector(ax, x, 3.0, c)
    ax.text(4.35, 3.21, "TCA$_f$:\nrefined frames", ha="left", va="center", fontsize=FONT)
    # their mean: one vector per video
    for x in xs:
        _arrow(ax, (x + 0.21, 3.45), (2.22, 4.25), style="-", alpha=0.6)
    _vector(ax, 2.01, 4.3, "#c8bf95", size=0.45)
    ax.text(2.22, 5.05, "TCA$_c$: mean, unit length\n= the anchor $z_a$", ha="center", va="center",
            fontsize=FONT)
    # right: the contrastive loss against the memory bank
    _vector(ax, 6.0, 5.55, "#c8bf95", size=0.4)
    ax.text(6.55, 5.75, "anchor $z_a$ (gradient)", ha="left", va="center", fontsize=FONT)
    _arrow(ax, (2.55, 4.45), (5.9, 5.7), connectionstyle="arc3,rad=0.15")
    _vector(ax, 6.0, 4.75, "#a1d99b", size=0.4)
    ax.text(6.55, 4.95, "key $z_p$ of another view\nof the clip: the positive", ha="left", va="center", fontsize=FONT)
    _arrow(ax, (5.95, 5.75), (5.85, 4.15), connectionstyle="arc3,rad=0.5")
    _arrow(ax, (6.2, 4.7), (6.2, 4.15))
    _box(ax, 5.75, 3.25, 4.65, 0.85, "softmax over $[s_p, s_n^1, \\dots, s_n^N]$\n"
         "pulls $z_a$ to the positive, pushes it\naway from the bank", "#f4cccc")
    bank_x = 6.05 + 0.52 * np.arange(BANK)
    for k, x in enumerate(bank_x):
        _vector(ax, x, 1.9, "0.75" if k < BANK - 2 else "0.55", size=0.4)
        _arrow(ax, (x + 0.2, 2.35), (x + 0.2, 3.2), style="-", color="0.6", alpha=0.7)
    ax.text(7.8, 1.45, "memory bank: keys of earlier\nbatches, the negatives", ha="center", va="center",
            fontsize=FONT)
    _arrow(ax, (10.55, 0.55), (bank_x[-1] + 0.25, 1.85), connectionstyle="arc3,rad=0.3")
    ax.text(10.5, 0.25, "this step's keys enter\n(no gradient)", ha="right", va="center", fontsize=FONT)
    _arrow(ax, (bank_x[0] + 0.05, 2.1), (5.2, 2.1), color="0.45")
    ax.text(5.2, 2.5, "oldest\nleave", ha="center", va="center", fontsize=FONT)
    fig.tight_layout(pad=0.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="book/figures/tca.png")
    draw(Path(parser.parse_args().out))
