"""benchmarks/hapvr_figure.py: chapter 4's diagram is a 200-dpi PNG whose readings are the package's."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from hapref.similarity import chamfer_similarity

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_book_conventions as conventions  # noqa: E402
from conftest import load_benchmark  # noqa: E402


def test_copy_and_reshoot_share_chamfer_but_not_the_diagonal(tmp_path: Path) -> None:
    script = load_benchmark("hapvr_figure")
    scores = script.draw(tmp_path / "reads.png")
    copy, reshoot = script.matrices()
    for name, sim in (("copy", copy), ("reshoot", reshoot)):
        assert abs(scores[name] - chamfer_similarity(torch.from_numpy(sim)).item()) < 1e-12
    assert abs(scores["copy"] - scores["reshoot"]) < 1e-12      # a column permutation
    assert len(script.longest_diagonal_run(copy)) == script.FRAMES
    assert len(script.longest_diagonal_run(reshoot)) == script.SHOT
    order = script.SHOT_ORDER                                   # no shot in place, none after its predecessor
    assert all(s != i for i, s in enumerate(order))
    assert all(b != a + 1 for a, b in zip(order, order[1:]))
    assert conventions.png_dpi((tmp_path / "reads.png").read_bytes()) >= conventions.MIN_DPI
