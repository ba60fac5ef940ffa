"""Draws the conceptual diagrams of chapters 1 and 3 (no data, no training; a second to run).

Run from the repository root: ``python benchmarks/concept_figures.py`` writes

- ``book/figures/ap_area.png`` (chapter 1): the precision-recall step curve of a ranked list of ten items,
  with AP as the shaded area under it, and the ranked list beneath it, each relevant item linked to the
  strip of area it contributes;
- ``book/figures/frame_matrix.png`` (chapter 3): a frame-to-frame similarity matrix and what Chamfer (the
  row maxima), TopK-Chamfer (the mean of each row's K largest entries) and the similarity network ψ (a small
  CNN reading whole neighbourhoods of the matrix, so a diagonal run of high values counts more than scattered
  peaks) read from it.

The figures are drawn at the text column's width (6.8 in) and saved at 200 dpi, so the page shows their
text at the size set here (9 pt and above). The book shows the stored PNGs; building it does not run this.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import ConnectionPatch, Rectangle  # noqa: E402

GREEN, GREY, BLUE, ORANGE = "#6aa84f", "#cccccc", "#3d85c6", "#e69138"
plt.rcParams.update({"font.size": 10})


def ap_area(path: Path) -> float:
    """The PR step curve of a ten-item list with AP as its area; returns the AP it shades."""
    relevance = np.array([1, 0, 1, 1, 0, 0, 1, 0, 0, 0], dtype=bool)
    ranks = np.flatnonzero(relevance) + 1
    n_rel = len(ranks)
    precision_at_rel = np.arange(1, n_rel + 1) / ranks
    fig = plt.figure(figsize=(6.8, 4.6))
    top = fig.add_axes([0.1, 0.42, 0.86, 0.51])
    bottom = fig.add_axes([0.1, 0.02, 0.86, 0.2])
    # precision at each relevant item's rank, over the recall interval that item adds: the step curve
    top.step(np.arange(n_rel + 1) / n_rel, np.r_[precision_at_rel, precision_at_rel[-1]], where="post",
             color="black", lw=1.2, label="precision at each recall level (the PR step curve)")
    for i, (r, p) in enumerate(zip(ranks, precision_at_rel)):
        top.add_patch(Rectangle((i / n_rel, 0), 1 / n_rel, p, facecolor=GREEN, alpha=0.45, edgecolor=GREEN))
        top.text((i + 0.5) / n_rel, p / 2, f"{i + 1}/{r}\n= {p:.3f}", ha="center", va="center", fontsize=10)
    ap = precision_at_rel.mean()
    top.set_xlim(0, 1)
    top.set_ylim(0, 1.08)
    top.set_xlabel("recall (each relevant item adds 1/R = 1/4)", labelpad=2)
    top.set_ylabel("precision")
    top.set_title(f"AP = shaded area = mean of the four precisions = {ap:.4f}")
    top.legend(loc="upper right", fontsize=9)
    # the ranked list beneath
    bottom.set_xlim(-0.5, len(relevance) - 0.5)
    bottom.set_ylim(-1.0, 0.6)
    bottom.set_axis_off()
    for j, rel in enumerate(relevance):
        bottom.add_patch(Rectangle((j - 0.4, -0.4), 0.8, 0.8, facecolor=GREEN if rel else GREY,
                                   edgecolor="black"))
        bottom.text(j, 0, str(j + 1), ha="center", va="center", fontsize=10)
    bottom.text(-0.5, -0.75, "the ranked list, top first (green = relevant, number = rank)", fontsize=10)
    for i, r in enumerate(ranks):
        arrow = fig.add_artist(ConnectionPatch((r - 1, 0.4), ((i + 0.5) / n_rel, -0.19), "data", "data",
                                       axesA=bottom, axesB=top, color=GREEN, arrowstyle="->", lw=1.2))
        arrow.set_annotation_clip(False)
    fig.savefig(path, dpi=200)
    plt.close(fig)
    return float(ap)


def frame_matrix(path: Path) -> dict[str, float]:
    """A 6 x 8 frame-similarity matrix and the three readings of it; returns Chamfer and TopK-Chamfer."""
    rng = np.random.default_rng(0)
    sim = rng.uniform(0.05, 0.35, size=(6, 8))
    for q in range(5):  # a copied segment: a diagonal run of high similarities
        sim[q, q + 2] = 0.8 + 0.03 * (q % 3)
    sim[5, 0] = 0.75  # one isolated peak: an unrelated frame that happens to look alike
    fig, axes = plt.subplots(1, 3, figsize=(6.8, 2.9), gridspec_kw={"width_ratios": [1, 1, 1]})
    titles = ["Chamfer: row maxima", "TopK-Chamfer (K = 2):\nthe 2 largest per row", "ψ: a CNN reads\n3 × 3 neighbourhoods"]
    k = 2
    for ax, title in zip(axes, titles):
        ax.imshow(sim, cmap="Greys", vmin=0, vmax=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("target frame")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].set_ylabel("query frame")
    for q in range(sim.shape[0]):
        axes[0].add_patch(Rectangle((sim[q].argmax() - 0.5, q - 0.5), 1, 1, fill=False, edgecolor=ORANGE, lw=2))
        for t in np.argsort(sim[q])[-k:]:
            axes[1].add_patch(Rectangle((t - 0.5, q - 0.5), 1, 1, fill=False, edgecolor=BLUE, lw=2))
    # psi: one window on the diagonal run (kept) and one on the isolated peak (suppressed)
    axes[2].add_patch(Rectangle((1.5, 0.5), 3, 3, fill=False, edgecolor=GREEN, lw=2))
    axes[2].add_patch(Rectangle((-0.5, 3.5), 2, 2, fill=False, edgecolor="#cc0000", lw=2, ls="--"))
    axes[2].set_xlabel("green: a diagonal run, kept\nred: a lone peak, damped", fontsize=9)
    chamfer = float(sim.max(axis=1).mean())
    topk = float(np.sort(sim, axis=1)[:, -k:].mean())
    fig.tight_layout()
    fig.savefig(path, dpi=200, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    return {"chamfer": chamfer, "topk": topk}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("book/figures"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print("AP", ap_area(args.out / "ap_area.png"))
    print(frame_matrix(args.out / "frame_matrix.png"))


if __name__ == "__main__":
    main()
