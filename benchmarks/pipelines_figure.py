"""Draws the book's front-page figure: the four pipelines hapref implements, one column per paper.

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

# One column per paper, read top to bottom. Lines are short so the boxes fit a quarter of the text column at
# 10 pt: the figure is drawn at the column's width (6.8 in), so the page shows its text at 10 pt.
COLUMNS = [
    ("HAP-VR", "chapters 2-4", [
        ("input", "a video and its\naugmented views"),
        ("features", "CNN region\nfeatures per frame"),
        ("aggregate", "frame-to-frame\nsimilarity,\nψ network"),
        ("aggregate", "TopK-Chamfer\nvideo similarity"),
        ("loss", "QuadLinear-AP\n(video) + frame\nAP on teacher\npseudo labels"),
        ("use", "ranking by\nvideo similarity"),
    ]),
    ("Radial loss", "chapter 5", [
        ("input", "clip quadlet\n(q, p, i, n)"),
        ("features", "CNN per frame\n→ FC → LSTM"),
        ("aggregate", "unit-norm clip\nembedding"),
        ("loss", "Quadlet loss or\nRadial loss\n(ball of radius cR)\n+ triplet term"),
        ("use", "fine-grained\nretrieval, cut and\ncritical-clip\ndetection"),
    ]),
    ("TCA", "chapter 6", [
        ("input", "video (frame\nsequence)"),
        ("features", "iMAC / L3-iRMAC\nframe features"),
        ("aggregate", "Transformer\nself-attention →\none video vector"),
        ("loss", "InfoNCE or\nCircle loss,\nnegatives from a\nmemory bank"),
        ("use", "retrieval by one\ndot product"),
    ]),
    ("AutoSSVH", "chapter 7", [
        ("input", "unlabelled video\n(frame features)"),
        ("features", "Grade-Net scores\n+ Gumbel top-K\nsampler (gradient\nreversal)"),
        ("aggregate", "Transformer\nencoder →\nK-bit hash code"),
        ("loss", "frame recon-\nstruction + view\ncontrast + P2Set\n(voted centres)"),
        ("use", "Hamming-distance\nsearch"),
    ]),
]
FONT = 10.0  # points, at the size the page shows the figure
WIDTH = 6.8  # inches: the book's text column at 100 dpi


def draw(path: Path) -> None:
    columns = len(COLUMNS)
    stages = max(len(c[2]) for c in COLUMNS)
    gap, box_h, step, top, legend_h = 0.1, 0.82, 1.08, 0.62, 0.75
    box_w = (WIDTH - gap * (columns + 1)) / columns
    height = top + stages * step + legend_h
    fig = plt.figure(figsize=(WIDTH, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)       # data coordinates are inches
    ax.set_ylim(0, height)
    for c, (name, chapters, column) in enumerate(COLUMNS):
        x = gap + c * (box_w + gap)
        ax.text(x + box_w / 2, height - 0.08, f"{name}\n({chapters})", ha="center", va="top", fontsize=FONT,
                fontweight="bold")
        for s, (kind, label) in enumerate(column):
            y = height - top - s * step - box_h
            box = FancyBboxPatch((x, y), box_w, box_h, boxstyle="round,pad=0.0,rounding_size=0.06",
                                 facecolor=KINDS[kind][0], edgecolor="#555555", linewidth=1.0)
            ax.add_patch(box)
            ax.text(x + box_w / 2, y + box_h / 2, label, ha="center", va="center", fontsize=FONT,
                    linespacing=1.1)
            if s:
                ax.add_patch(FancyArrowPatch((x + box_w / 2, y + step - 0.01), (x + box_w / 2, y + box_h + 0.01),
                                             arrowstyle="-|>", mutation_scale=10, color="#333333", linewidth=1.0))
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="#555555") for c, _ in KINDS.values()]
    ax.legend(handles, [label for _, label in KINDS.values()], loc="lower center", ncol=3,
              bbox_to_anchor=(0.5, 0.0), frameon=False, fontsize=FONT, handlelength=1.2, columnspacing=1.0)
    ax.set_axis_off()
    path.parent.mkdir(parents=True, exist_ok=True)
    # 200 dpi: a sharp copy; the page shows it at the column's width, where its text is FONT points.
    fig.savefig(path, dpi=200, metadata={"Software": None})
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("book/figures/pipelines.png"), help="PNG to write")
    draw(parser.parse_args().out)
