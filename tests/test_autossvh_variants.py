"""AutoSSVH ablation variants: independent random views, row I (no gradient reversal), w/o FR, w/o VC."""

import pytest
import torch

from hapref.models.autossvh import random_drop


def kept_overlap(d1: torch.Tensor, d2: torch.Tensor, frames: int) -> torch.Tensor:
    keep1 = torch.ones(d1.shape[0], frames, dtype=torch.bool).scatter(1, d1, False)
    keep2 = torch.ones(d2.shape[0], frames, dtype=torch.bool).scatter(1, d2, False)
    return (keep1 & keep2).sum(1).double()


def test_random_drop_complementary_and_independent_overlap() -> None:
    g = torch.Generator().manual_seed(0)
    d1, d2 = random_drop(4000, 8, 4, g)
    assert (kept_overlap(d1, d2, 8) == 0).all()                        # ConMH masks: disjoint kept frames
    d1, d2 = random_drop(4000, 8, 4, g, independent=True)
    for d in (d1, d2):
        assert d.shape == (4000, 4) and (d.diff(dim=1) > 0).all()      # sorted, distinct
    assert kept_overlap(d1, d2, 8).mean().item() == pytest.approx((8 - 4) ** 2 / 8, abs=0.05)
    assert not torch.equal(d1, d2)
