"""Draws chapter 4's conceptual diagram (no data, no training; a second to run).

Run from the repository root: ``python benchmarks/hapvr_figure.py`` writes ``book/figures/hapvr_reads.png``:
the frame-to-frame similarity matrix of a query against a copy (its matches on one diagonal) and against a
reshoot (the same frames cut into 2-frame shots put in another order: the columns of the copy's matrix
permuted), and what three readers take from each:

- Chamfer, the mean of the row maxima (dots): the maxima are the same values in other columns, so the two
  scores are equal;
- an alignment (the temporal network with window 1): the longest run of matches on one diagonal (line),
  16 frames for the copy, 2 for the reshoot;
- ψ: 3×3 convolutions (the box) see the local shape of the matches before two 2×2 poolings reduce the matrix
  to 4×4 cells (the dashed grid).

The matrices are synthetic (a seeded draw). The figure is drawn at the text column's width (6.8 in) and saved at
200 dpi, so its text appears at the size set here (9 pt and above). The book shows the stored PNG.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

plt.rcParams.update({"font.size": 10})
FRAMES, SHOT = 16, 2
SHOT_ORDER = [3, 0, 6, 1, 7, 4, 2, 5]  # no 2-frame shot in its place or after its predecessor


def matrices(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A copy's matrix (0.85-0.95 on the diagonal, 0.2-0.45 elsewhere) and the reshoot's (its columns in
    the order of ``SHOT_ORDER``)."""
    rng = np.random.default_rng(seed)
    copy = rng.uniform(0.2, 0.45, (FRAMES, FRAMES))
    np.fill_diagonal(copy, rng.uniform(0.85, 0.95, FRAMES))
    columns = np.concatenate([np.arange(s * SHOT, (s + 1) * SHOT) for s in SHOT_ORDER])
    return copy, copy[:, columns]


def longest_diagonal_run(sim: np.ndarray) -> list[tuple[int, int]]:
    """The longest run of cells (i, j), (i + 1, j + 1), ... that are each their row's maximum."""
    best = sim.argmax(1)
    runs, run = [], [(0, int(best[0]))]
    for i in range(1, len(best)):
        if best[i] == best[i - 1] + 1:
            run.append((i, int(best[i])))
        else:
            runs.append(run)
            run = [(i, int(best[i]))]
    runs.append(run)
    return max(runs, key=len)


def draw(path: Path) -> dict[str, float]:
    copy, reshoot = matrices()
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 3.9), constrained_layout=True)
    scores = {}
    for ax, (name, sim) in zip(axes, (("copy", copy), ("reshoot", reshoot))):
        image = ax.imshow(sim, cmap="viridis", vmin=0, vmax=1)
        rows = np.arange(FRAMES)
        ax.plot(sim.argmax(1), rows, "o", ms=4.5, mfc="white", mec="black", mew=0.6,
                label="row maximum (Chamfer)")
        run = np.array(longest_diagonal_run(sim))
        ax.plot(run[:, 1], run[:, 0], "-", color="#e69138", lw=3, alpha=0.9,
                label="longest diagonal run (alignment)")
        for k in range(4, FRAMES, 4):  # psi's output cells after two 2x2 poolings
            ax.axhline(k - 0.5, color="white", lw=0.8, ls="--")
            ax.axvline(k - 0.5, color="white", lw=0.8, ls="--")
        ax.add_patch(Rectangle((8.5, 8.5), 3, 3, fill=False, ec="#cc0000", lw=1.6,
                               label="a 3×3 filter of ψ"))
        chamfer = float(sim.max(1).mean())
        scores[name] = chamfer
        ax.set_title(f"{name}: Chamfer {chamfer:.3f},\ndiagonal run of {len(run)} frames", fontsize=10)
        ax.set_xlabel("target frame")
        ax.set_ylabel("query frame")
        ax.set_xticks([0, 4, 8, 12, 15])
        ax.set_yticks([0, 4, 8, 12, 15])
    fig.colorbar(image, ax=axes, shrink=0.8, label="frame similarity")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="book/figures/hapvr_reads.png")
    scores = draw(Path(parser.parse_args().out))
    assert abs(scores["copy"] - scores["reshoot"]) < 1e-12  # the column permutation keeps every row maximum
    print(scores)


if __name__ == "__main__":
    main()
