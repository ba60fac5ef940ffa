"""benchmarks/quadlet_figure.py: chapter 5's diagram is a 200-dpi PNG of a quadlet that the package's Radial loss
accepts (every ordering of Radial Eq. 1-2 holds, both terms zero), with the package's centroid and radius."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from hapref.losses.radial import RadialLoss
from hapref.radial_theory import order_relations, radial_centroid_and_radius

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_book_conventions as conventions  # noqa: E402
from conftest import load_benchmark  # noqa: E402


def test_drawn_quadlet_is_the_packages(tmp_path: Path) -> None:
    script = load_benchmark("quadlet_figure")
    drawn = script.draw(tmp_path / "quadlet.png")
    q, p, i, n = (torch.tensor([script.ROLES[k][0]], dtype=torch.float64) for k in "qpin")
    centre, radius = radial_centroid_and_radius(q, p, i)
    assert torch.allclose(centre[0], torch.as_tensor(drawn["centre"], dtype=torch.float64))
    assert abs(radius.item() - drawn["radius"]) < 1e-12
    assert all(v.item() for v in order_relations(q, p, i, n).values())
    radial, triplet = RadialLoss(c=3.0, margin=0.3).terms(q, p, i, n)
    assert radial.item() == 0 and triplet.item() == 0
    assert conventions.png_dpi((tmp_path / "quadlet.png").read_bytes()) >= conventions.MIN_DPI


def test_stored_figure_is_200_dpi() -> None:
    png = (ROOT / "book" / "figures" / "quadlet.png").read_bytes()
    assert conventions.png_dpi(png) >= conventions.MIN_DPI
