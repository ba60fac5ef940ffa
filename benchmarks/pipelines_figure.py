"""Draws the book's front-page figure: the four pipelines hapref implements, one row per paper.

Run from the repository root: ``python benchmarks/pipelines_figure.py`` writes ``book/figures/pipelines.png``
(committed; the book shows the stored PNG, so building the book does not run this script).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

# One colour per kind of stage, shared by all four rows (the legend at the bottom names them).
KINDS = {
    "input": ("#eeeeee", "input"),
    "features": ("#cfe2f3", "frame features / encoder"),
    "aggregate": ("#d9ead3", "video similarity / embedding"),
    "loss": ("#f4cccc", "training objective"),
    "use": ("#fff2cc", "what it is used for"),
}

ROWS = [
    ("HAP-VR", "chapters 2-4", [
        ("input", "a video and its\naugmented views"),
        ("features", "CNN region features\nper frame"),
        ("aggregate", "frame-to-frame\nsimilarity, ψ network"),
        ("aggregate", "TopK-Chamfer\nvideo similarity"),
        ("loss", "QuadLinear-AP (video)\n+ frame-level AP on\nteacher pseudo labels"),
        ("use", "ranking by\nvideo similarity"),
    ]),
    ("Radial loss", "chapter 5", [
        ("input", "clip quadlet\n(q, p, i, n)"),
        ("features", "CNN per frame\n→ FC → LSTM"),
        ("aggregate", "unit-norm\nclip embedding"),
        ("loss", "Quadlet loss or\nRadial loss (c R ball)\n+ triplet term"),
        ("use", "fine-grained retrieval,\ncut and critical-clip\ndetection"),
    ]),
    ("TCA", "chapter 6", [
        ("input", "video\n(frame sequence)"),
        ("features", "iMAC / L3-iRMAC\nframe features"),
        ("aggregate", "Transformer\nself-attention → one\nvideo vector"),
        ("loss", "InfoNCE or Circle loss,\nnegatives from a\nmemory bank"),
        ("use", "retrieval by one\ndot product"),
    ]),
    ("AutoSSVH", "chapter 7", [
        ("input", "unlabelled video\n(frame features)"),
        ("features", "Grade-Net scores +\nGumbel top-K sampler\n(gradient reversal)"),
        ("aggregate", "Transformer encoder\n→ K-bit hash code"),
        ("loss", "frame reconstruction +\nview contrast + P2Set\n(voted hash centres)"),
        ("use", "Hamming-distance\nsearch"),
    ]),
]


def draw(path: Path) -> None:
    width, height, gap = 2.5, 0.95, 0.36
    fig, ax = plt.subplots(figsize=(16, 8.2))
    for r, (name, chapters, stages) in enumerate(ROWS):
        y = -1.25 * r
        ax.text(-0.15, y, f"{name}\n({chapters})", ha="right", va="center", fontsize=15, fontweight="bold")
        for s, (kind, label) in enumerate(stages):
            x = s * (width + gap)
            box = FancyBboxPatch((x, y - height / 2), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                                 facecolor=KINDS[kind][0], edgecolor="#555555", linewidth=1.0)
            ax.add_patch(box)
            ax.text(x + width / 2, y, label, ha="center", va="center", fontsize=11.5)
            if s:
                ax.add_patch(FancyArrowPatch((x - gap + 0.03, y), (x - 0.03, y), arrowstyle="-|>",
                                             mutation_scale=14, color="#333333", linewidth=1.2))
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="#555555") for c, _ in KINDS.values()]
    ax.legend(handles, [label for _, label in KINDS.values()], loc="lower center", ncol=len(KINDS),
              bbox_to_anchor=(0.5, -0.08), frameon=False, fontsize=13)
    ax.set_xlim(-2.1, 6 * (width + gap))
    ax.set_ylim(-1.25 * (len(ROWS) - 1) - 0.75, 0.6)
    ax.set_axis_off()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("book/figures/pipelines.png"), help="PNG to write")
    draw(parser.parse_args().out)
