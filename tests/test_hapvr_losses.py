"""HAP-VR base loss, pseudo labels and Eq. 15 objective vs slow literal transcriptions (float64)."""

from __future__ import annotations

import math

import pytest
import torch

from conftest import devices
from hapref.losses.hapvr_objective import WEIGHT_PRESETS, HAPVRObjective, frame_level_ap_loss
from hapref.losses.infonce import InfoNCE
from hapref.losses.pseudo_labels import frame_pseudo_labels, teacher_frame_similarity
from hapref.losses.sshn import SSHN


def batch_labels(n_videos: int) -> torch.Tensor:
    """S2VS labels for [weak views; strong views]: diagonal 1 and weak_i <-> strong_i."""
    eye = torch.eye(n_videos)
    stacked = torch.cat([eye, eye])
    return (stacked @ stacked.T) > 0


def literal_infonce(s: torch.Tensor, labels: torch.Tensor, tau: float) -> float:
    total, rows = 0.0, 0
    for i in range(len(s)):
        terms = []
        neg = sum(math.exp(s[i, k] / tau) for k in range(len(s)) if not labels[i, k])
        for j in range(len(s)):
            if labels[i, j] and j != i:
                e = math.exp(s[i, j] / tau)
                terms.append(-math.log(e / (e + neg + 1e-6)))
        if terms:
            total, rows = total + sum(terms) / len(terms), rows + 1
    return total / rows


def literal_sshn(s: torch.Tensor, labels: torch.Tensor, eps: float) -> tuple[float, float]:
    hn = [-math.log(max(1 - max(s[i, k] for k in range(len(s)) if not labels[i, k]), eps)) for i in range(len(s))]
    self_sim = [-math.log(max(s[i, i], eps)) for i in range(len(s))]
    return sum(hn) / len(hn), sum(self_sim) / len(self_sim)


@pytest.mark.parametrize("tau", [0.03, 0.07, 1.0])
def test_infonce_matches_literal(tau: float) -> None:
    s = torch.rand(8, 8, dtype=torch.float64)
    labels = batch_labels(4)
    labels[0, 5] = labels[5, 0] = True  # an extra positive pair, as Video-in-Video makes
    got = InfoNCE(tau)(s, labels)
    assert got.item() == pytest.approx(literal_infonce(s, labels, tau), rel=1e-9)


def test_infonce_gradient_and_no_positive_rows() -> None:
    s = torch.rand(6, 6, dtype=torch.float64, requires_grad=True)
    labels = batch_labels(3)
    torch.autograd.gradcheck(lambda x: InfoNCE(0.1)(x, labels), (s,))
    lone = torch.eye(4, dtype=torch.bool)  # only trivial self-pairs: no positive, loss 0 and finite
    out = InfoNCE()(torch.rand(4, 4, requires_grad=True), lone)
    assert out.item() == 0.0 and out.requires_grad


def test_infonce_is_stable_at_small_temperature() -> None:
    s = torch.tensor([[1.0, 0.99, 0.0], [0.99, 1.0, 0.9], [0.0, 0.9, 1.0]])
    labels = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
    assert torch.isfinite(InfoNCE(1e-3)(s, labels))


def test_sshn_matches_literal_and_clamps() -> None:
    s = torch.rand(8, 8, dtype=torch.float64)
    s[2, 2] = 0.0          # self-similarity below eps -> clamped
    s[3, 0] = 1.0          # hardest negative at 1 -> clamped
    labels = batch_labels(4)
    hn, self_sim = SSHN(1e-3)(s, labels)
    ref_hn, ref_self = literal_sshn(s, labels, 1e-3)
    assert hn.item() == pytest.approx(ref_hn, rel=1e-9)
    assert self_sim.item() == pytest.approx(ref_self, rel=1e-9)
    assert torch.isfinite(hn) and torch.isfinite(self_sim)


def test_square_matrix_and_shape_errors() -> None:
    with pytest.raises(ValueError, match="square"):
        InfoNCE()(torch.rand(3, 4), torch.zeros(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="relevance"):
        SSHN()(torch.rand(3, 3), torch.zeros(3, 4, dtype=torch.bool))


def test_teacher_similarity_is_cosine() -> None:
    f = torch.randn(3, 5, 7, dtype=torch.float64)
    s = teacher_frame_similarity(f)
    assert s.shape == (3, 3, 5, 5)
    a, b, i, j = 1, 2, 3, 0
    ref = torch.dot(f[a, i], f[b, j]) / (f[a, i].norm() * f[b, j].norm())
    assert s[a, b, i, j].item() == pytest.approx(ref.item(), rel=1e-5)


@pytest.mark.parametrize("t,rp,rn", [(28, 0.35, 0.35), (10, 0.3, 0.3), (4, 0.1, 0.2), (8, 0.5, 0.5)])
def test_pseudo_labels_match_eq14(t: int, rp: float, rn: float) -> None:
    sim = torch.rand(2, 3, 4, t, dtype=torch.float64)
    pos, neg = frame_pseudo_labels(sim, rp, rn)
    n_pos, n_neg = max(round(t * rp), 1), max(round(t * rn), 1)
    for row, p, n in zip(sim.reshape(-1, t), pos.reshape(-1, t), neg.reshape(-1, t)):
        values = sorted(row.tolist(), reverse=True)
        kth_top, kth_bottom = values[n_pos - 1], values[t - n_neg]
        assert p.tolist() == [v >= kth_top for v in row.tolist()]
        assert n.tolist() == [v <= kth_bottom for v in row.tolist()]
    assert not (pos & neg).any()


def test_pseudo_labels_reject_bad_rates() -> None:
    with pytest.raises(ValueError, match="top_rate"):
        frame_pseudo_labels(torch.rand(2, 5), 0.7, 0.6)


def literal_frame_loss(frame_sim, pos, neg, video_rel, ap_loss) -> float:
    values = []
    for a in range(frame_sim.shape[0]):
        for b in range(frame_sim.shape[1]):
            if video_rel[a, b]:
                for i in range(frame_sim.shape[2]):
                    row = frame_sim[a, b, i][None]
                    values.append(ap_loss(row, pos[a, b, i][None], ~(pos[a, b, i] | neg[a, b, i])[None]).item())
    return sum(values) / len(values)


def toy_ap_loss(scores, relevance, ignore=None):
    """A simple mean-over-rows loss, standing in for any loss(scores, relevance, ignore)."""
    keep = torch.ones_like(relevance) if ignore is None else ~ignore
    pos_mean = (scores * (relevance & keep)).sum(1) / (relevance & keep).sum(1).clamp(min=1)
    neg_mean = (scores * (~relevance & keep)).sum(1) / (~relevance & keep).sum(1).clamp(min=1)
    return (neg_mean - pos_mean).mean()


def test_frame_level_loss_averages_relevant_pairs() -> None:
    frame_sim = torch.rand(4, 4, 6, 6, dtype=torch.float64)
    pos, neg = frame_pseudo_labels(torch.rand(4, 4, 6, 6), 0.35, 0.35)
    video_rel = batch_labels(2)
    got = frame_level_ap_loss(frame_sim, pos, neg, video_rel, toy_ap_loss)
    assert got.item() == pytest.approx(literal_frame_loss(frame_sim, pos, neg, video_rel, toy_ap_loss), rel=1e-9)


@pytest.mark.parametrize("device", devices())
def test_objective_sums_weighted_terms(device: str) -> None:
    n, t = 6, 5
    sim = torch.rand(n, n, device=device, requires_grad=True)
    reg = torch.rand((), device=device) * 5
    frame_sim = torch.rand(n, n, t, t, device=device, requires_grad=True)
    teacher = torch.rand(n, n, t, t, device=device)
    labels = batch_labels(n // 2).to(device)
    weights = WEIGHT_PRESETS["released"]
    objective = HAPVRObjective(toy_ap_loss, toy_ap_loss, "released")
    terms = objective(sim, labels, reg, frame_sim, teacher)
    hn, self_sim = SSHN()(sim, labels)
    pos, neg = frame_pseudo_labels(teacher)
    expected = (InfoNCE(0.03)(sim, labels) + weights.sshn * (hn + self_sim) + weights.reg * reg
                + weights.video * toy_ap_loss(sim, labels, torch.zeros_like(labels))
                + weights.frame * frame_level_ap_loss(frame_sim, pos, neg, labels, toy_ap_loss))
    assert torch.allclose(terms["loss"], expected)
    assert sorted(terms) == ["frame_ap", "infonce", "loss", "reg", "sshn", "video_ap"]
    terms["loss"].backward()
    assert sim.grad.abs().sum() > 0 and frame_sim.grad.abs().sum() > 0
    base = HAPVRObjective(None, None)(sim, labels, reg)
    assert sorted(base) == ["infonce", "loss", "reg", "sshn"]
    with pytest.raises(ValueError, match="frame_similarity"):
        objective(sim, labels, reg)
