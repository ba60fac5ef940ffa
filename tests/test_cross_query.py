"""The cross-query AP term (a μAP-oriented extension of HAP-VR's objective): a brute-force transcription,
finite differences, what it sees that the per-query loss does not, and its use as a video loss."""

from __future__ import annotations

import pytest
import torch

from hapref.losses import CrossQueryAP, HAPVRObjective, QuadLinearAP, pooled_ap_loss
from hapref.metrics import micro_average_precision
from hapref.models.hapvr import video_ranking_loss


def quadlinear_loss_by_loops(values: list[float], labels: list[bool], delta: float, p: float) -> float:
    """1 - AP of one ranked list with the steps of HAP-VR Eq. 11 (H between positives, weighted by p; R⁻(x; δ)
    against negatives), written with loops from the equations."""
    def r_minus(x: float) -> float:
        if x <= -delta:
            return 0.0
        if x <= 0:
            return (x / delta + 1) ** 2
        return 1 + 2 * x / delta

    ratios = []
    for j, (sj, pj) in enumerate(zip(values, labels)):
        if not pj:
            continue
        rank_pos = 1 + p * sum(1.0 for k, (sk, pk) in enumerate(zip(values, labels))
                               if pk and k != j and sk - sj > 0)
        rank = rank_pos + sum(r_minus(sk - sj) for sk, pk in zip(values, labels) if not pk)
        ratios.append(rank_pos / rank)
    return 1 - sum(ratios) / len(ratios)


def batch(n: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n, n, generator=g, dtype=torch.float64)
    relevance = torch.eye(n, dtype=torch.bool)
    for i in range(0, n, 2):                                      # pairs of views of one clip
        relevance[i, i + 1] = relevance[i + 1, i] = True
    relevance[0, 3] = relevance[3, 0] = True                      # a Video-in-Video mix
    return scores, relevance


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pooled_loss_is_the_loops_over_every_off_diagonal_pair(seed: int) -> None:
    scores, relevance = batch(seed=seed)
    delta, p = 0.05, 0.1
    keep = ~torch.eye(6, dtype=torch.bool)
    expected = quadlinear_loss_by_loops(scores[keep].tolist(), relevance[keep].tolist(), delta, p)
    got = pooled_ap_loss(scores, relevance, QuadLinearAP(delta=delta, p=p))
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_pooled_loss_with_exact_steps_is_one_minus_micro_ap() -> None:
    """With steps that are H on both sides the pooled term is 1 - μAP of the same pairs (no ties here)."""
    from hapref.losses import heaviside, relaxed_rank_ap
    from hapref.losses._base import RankingLoss

    class ExactAP(RankingLoss):
        def per_query(self, scores, positive, negative):
            return 1 - relaxed_rank_ap(scores, positive, negative, heaviside, heaviside)

    scores, relevance = batch(8, seed=3)
    keep = ~torch.eye(8, dtype=torch.bool)
    micro = micro_average_precision(scores, relevance, ignore=~keep)
    assert pooled_ap_loss(scores, relevance, ExactAP()).item() == pytest.approx(1 - float(micro), abs=1e-12)


def test_gradient_matches_finite_differences() -> None:
    scores, relevance = batch(seed=4)
    scores.requires_grad_(True)
    term = CrossQueryAP(QuadLinearAP(delta=0.3, p=0.5), weight=0.7)
    assert torch.autograd.gradcheck(lambda s: term(s, relevance), (scores,), eps=1e-7, atol=1e-6)


def test_pooled_term_sees_the_scale_of_each_row_the_per_query_loss_does_not() -> None:
    """Adding a constant to one query's row keeps every per-query ranking (per-query loss unchanged) but moves
    its pairs against the other queries' (pooled loss changes): the calibration μAP measures."""
    scores, relevance = batch(seed=5)
    shifted = scores.clone()
    shifted[2] -= 0.5
    row, pooled = QuadLinearAP(delta=0.05, p=0.1), CrossQueryAP(QuadLinearAP(delta=0.05, p=0.1), weight=1.0)
    ignore = torch.eye(6, dtype=torch.bool)
    assert row(shifted, relevance, ignore).item() == pytest.approx(row(scores, relevance, ignore).item(), abs=1e-12)
    assert pooled_ap_loss(shifted, relevance, row).item() != pytest.approx(pooled_ap_loss(scores, relevance, row).item())


def test_weight_zero_is_the_row_loss_and_bad_input_is_refused() -> None:
    scores, relevance = batch(seed=6)
    row = QuadLinearAP(delta=0.05, p=0.1)
    assert torch.equal(CrossQueryAP(row, weight=0.0)(scores, relevance), row(scores, relevance))
    with pytest.raises(ValueError, match="weight"):
        CrossQueryAP(row, weight=-1.0)
    with pytest.raises(ValueError, match="exclude_diagonal"):
        pooled_ap_loss(scores[:4], relevance[:4], row)


def test_registered_as_a_video_loss_of_the_objective() -> None:
    loss = video_ranking_loss("quadlinear_ap_crossquery")
    assert isinstance(loss, CrossQueryAP) and loss.row_loss.delta == 0.05 and loss.row_loss.p == 0.1
    scores, relevance = batch(seed=7)
    terms = HAPVRObjective(loss, None, weights="released")(scores, relevance, torch.tensor(0.0))
    plain = HAPVRObjective(video_ranking_loss("quadlinear_ap"), None, weights="released")(scores, relevance,
                                                                                            torch.tensor(0.0))
    extra = 4.0 * pooled_ap_loss(scores, relevance, QuadLinearAP.preset("released_video"))
    assert terms["video_ap"].item() == pytest.approx(plain["video_ap"].item() + extra.item(), abs=1e-12)
