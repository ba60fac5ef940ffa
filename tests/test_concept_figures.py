"""benchmarks/concept_figures.py: the diagrams of chapters 1 and 3 are 200-dpi PNGs whose numbers are the package's."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from hapref.metrics import average_precision
from hapref.similarity import chamfer_similarity, topk_chamfer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_book_conventions as conventions  # noqa: E402
from conftest import load_benchmark  # noqa: E402


def test_ap_area_shades_the_package_ap(tmp_path: Path) -> None:
    ap = load_benchmark("concept_figures").ap_area(tmp_path / "ap_area.png")
    relevance = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0, 0, 0], dtype=torch.bool)
    scores = torch.arange(10, 0, -1, dtype=torch.float64)
    assert abs(ap - average_precision(scores, relevance).item()) < 1e-12
    assert abs(ap - (1 + 2 / 3 + 3 / 4 + 4 / 7) / 4) < 1e-12
    assert conventions.png_dpi((tmp_path / "ap_area.png").read_bytes()) >= conventions.MIN_DPI


def test_frame_matrix_readings_are_the_package_ones(tmp_path: Path) -> None:
    readings = load_benchmark("concept_figures").frame_matrix(tmp_path / "frame_matrix.png")
    rng = np.random.default_rng(0)  # the script's matrix, rebuilt
    sim = rng.uniform(0.05, 0.35, size=(6, 8))
    for q in range(5):
        sim[q, q + 2] = 0.8 + 0.03 * (q % 3)
    sim[5, 0] = 0.75
    sim = torch.from_numpy(sim)
    assert abs(readings["chamfer"] - chamfer_similarity(sim).item()) < 1e-12
    assert abs(readings["topk"] - topk_chamfer(sim, 0.25).item()) < 1e-12  # K = round(0.25 * 8) = 2
    assert readings["chamfer"] > readings["topk"]
    assert conventions.png_dpi((tmp_path / "frame_matrix.png").read_bytes()) >= conventions.MIN_DPI


def test_stored_figures_are_200_dpi() -> None:
    for name in ("ap_area.png", "frame_matrix.png"):
        assert conventions.png_dpi((ROOT / "book" / "figures" / name).read_bytes()) >= conventions.MIN_DPI, name
