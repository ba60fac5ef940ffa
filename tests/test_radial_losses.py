"""Radial loss: losses vs literal transcriptions, printed gradients vs autograd, Theorem 3.1."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import devices

from hapref.losses.radial import (EuclideanTripletLoss, Quadruplet1Loss, Quadruplet2Loss, QuadletLoss, RadialLoss,
                                  radial_centroid_and_radius)
from hapref.radial_theory import (order_relations, quadlet_gradients, radial_negative_gradient,
                                  sample_radial_zero_quadlets, supplementary_radial_gradients,
                                  worst_case_quadlet)


def _quadlets(b: int = 7, d: int = 5, device: str = "cpu", seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, d, generator=g, dtype=torch.float64).to(device).requires_grad_() for _ in range(4)]


def _d(a: list[float], b: list[float]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b))


def _slow_quadlet(q, p, i, n, g1=0.7, g2=0.3, g3=0.5) -> float:
    return (max(0.0, g1 + _d(q, p) - _d(q, n)) + max(0.0, g2 + _d(q, p) - _d(q, i))
            + max(0.0, g3 + _d(p, i) - _d(p, n)))


def _slow_radial(q, p, i, n, c=3.0, m=0.3) -> float:
    xg = [(a + b + e) / 3 for a, b, e in zip(q, p, i)]
    r = max(math.sqrt(_d(v, xg)) for v in (q, p, i))
    return max(0.0, (c * r) ** 2 - _d(n, xg)) + max(0.0, m + _d(q, p) - _d(q, i))


@pytest.mark.parametrize("device", devices())
def test_quadlet_and_radial_match_literal_equations(device: str) -> None:
    q, p, i, n = _quadlets(device=device)
    rows = [[t[k].tolist() for t in (q, p, i, n)] for k in range(q.shape[0])]
    quad = QuadletLoss(reduction="none")(q, p, i, n)
    rad = RadialLoss(reduction="none")(q, p, i, n)
    assert quad.device.type == device
    for k, (a, b, c_, e) in enumerate(rows):
        assert quad[k].item() == pytest.approx(_slow_quadlet(a, b, c_, e), rel=1e-12)
        assert rad[k].item() == pytest.approx(_slow_radial(a, b, c_, e), rel=1e-12)
    assert QuadletLoss()(q, p, i, n).item() == pytest.approx(quad.mean().item())


def test_baselines_match_literal_hinges() -> None:
    q, p, i, n = _quadlets(b=4)
    for k in range(4):
        a, b, c_, e = (t[k].tolist() for t in (q, p, i, n))
        trip = EuclideanTripletLoss(margin=0.7, reduction="none")(q, p, n)[k].item()
        assert trip == pytest.approx(max(0.0, 0.7 + _d(a, b) - _d(a, e)))
        quad1 = Quadruplet1Loss(margin=0.5, reduction="none")(q, p, i, n)[k].item()
        assert quad1 == pytest.approx(max(0.0, 0.5 + _d(a, b) - _d(a, c_)) + max(0.0, 0.5 + _d(b, c_) - _d(a, e)))
        quad2 = Quadruplet2Loss(1.0, 0.5, reduction="none")(q, p, i, n)[k].item()
        assert quad2 == pytest.approx(max(0.0, 1.0 + _d(a, b) - _d(a, c_)) + max(0.0, 0.5 + _d(a, b) - _d(c_, e)))


def test_bad_input_and_empty_batch() -> None:
    q, p, i, n = (torch.randn(3, 4) for _ in range(4))
    with pytest.raises(ValueError, match="n must have the shape"):
        RadialLoss()(q, p, i, torch.randn(3, 5))
    with pytest.raises(ValueError, match="q must have 2"):
        QuadletLoss()(q[0], p, i, n)
    with pytest.raises(ValueError, match="margin2 <= margin3 <= margin1"):
        QuadletLoss(margin1=0.1, margin2=0.3, margin3=0.5)
    empty = torch.zeros(0, 4, requires_grad=True)
    for loss in (RadialLoss(), QuadletLoss(), Quadruplet1Loss(), Quadruplet2Loss()):
        out = loss(empty, empty, empty, empty)
        assert out.item() == 0.0 and not torch.isnan(out)
        out.backward()


def test_radial_radius_is_largest_spoke() -> None:
    q, p, i = torch.tensor([[0.0, 0.0]]), torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 3.0]])
    centroid, radius = radial_centroid_and_radius(q, p, i)
    assert torch.allclose(centroid, torch.tensor([[1.0, 1.0]]))
    assert radius.item() == pytest.approx(math.sqrt(5.0))


def test_quadlet_gradients_eq7_match_autograd() -> None:
    # Scale spreads the distances so each hinge is active for some quadlets and not for others.
    q, p, i, n = (t.detach().mul(0.4).requires_grad_() for t in _quadlets(b=64, d=3))
    QuadletLoss(reduction="sum")(q, p, i, n).backward()
    printed = quadlet_gradients(q.detach(), p.detach(), i.detach(), n.detach())
    for name, x, g in zip("qpin", (q, p, i, n), printed):
        assert torch.allclose(x.grad, g, atol=1e-12), name


def test_radial_negative_gradient_eq13_matches_autograd() -> None:
    q, p, i, n = _quadlets(b=64, d=3)
    RadialLoss(reduction="sum")(q, p, i, n).backward()
    assert torch.allclose(n.grad, radial_negative_gradient(q.detach(), p.detach(), i.detach(), n.detach()))


def _supp_quadlets() -> list[torch.Tensor]:
    """Unit-norm quadlets where i is the farthest vertex and both hinges are active (the supplement's case)."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(1, 6, generator=g, dtype=torch.float64)
    q = base + 0.1 * torch.randn(200, 6, generator=g, dtype=torch.float64)
    p = base + 0.1 * torch.randn(200, 6, generator=g, dtype=torch.float64)
    i = base + 0.6 * torch.randn(200, 6, generator=g, dtype=torch.float64)
    n = base + 0.2 * torch.randn(200, 6, generator=g, dtype=torch.float64)
    q, p, i, n = (t / t.norm(dim=-1, keepdim=True) for t in (q, p, i, n))
    xg = (q + p + i) / 3
    spokes = torch.stack([(v - xg).norm(dim=-1) for v in (q, p, i)])
    keep = spokes.argmax(0) == 2
    rad, trip = RadialLoss(margin=5.0, reduction="none").terms(q, p, i, n)
    keep &= (rad > 0) & (trip > 0)
    return [t[keep].clone().requires_grad_() for t in (q, p, i, n)]


def _autograd(fn, tensors):
    grads = torch.autograd.grad(fn(*tensors).sum(), tensors)
    return grads


def test_supplementary_unnormalized_gradients_eq9_to_12_hold() -> None:
    q, p, i, n = _supp_quadlets()
    assert q.shape[0] > 10
    auto = _autograd(lambda *t: RadialLoss(c=3.0, margin=5.0, reduction="none")(*t), (q, p, i, n))
    printed = supplementary_radial_gradients(*(t.detach() for t in (q, p, i, n)), normalized=False)
    for name, a, b in zip("qpin", auto, printed):
        assert torch.allclose(a, b, atol=1e-10), name


def _supp_eq13_plus_14(q, p, i, n, m=5.0):
    dot = lambda a, b: (a * b).sum(-1)  # noqa: E731
    radial = -38 / 9 * dot(i, p + q) + 2 / 3 * dot(n, i + p + q) + 16 / 9 * dot(q, p)
    return radial + (-2 * dot(p, q) + 2 * dot(i, q) + m)


def test_supplementary_normalized_gradients_eq15_to_18_two_are_misprinted() -> None:
    q, p, i, n = _supp_quadlets()
    auto = _autograd(_supp_eq13_plus_14, (q, p, i, n))
    printed = supplementary_radial_gradients(*(t.detach() for t in (q, p, i, n)), normalized=True)
    agree = {name: torch.allclose(a, b, atol=1e-10) for name, a, b in zip("qpin", auto, printed)}
    assert agree == {"q": True, "p": False, "i": False, "n": True}
    # Eq. 16: the radial part must read 16/9 f(q), not 16/9 f(p); Eq. 17: the triplet part is 2 f(q), not f(q).
    qd, pd, id_, nd = (t.detach() for t in (q, p, i, n))
    assert torch.allclose(auto[1], printed[1] - 16 / 9 * pd + 16 / 9 * qd)
    assert torch.allclose(auto[2], printed[2] + qd)


@pytest.mark.parametrize("dim", [2, 3, 64])
@pytest.mark.parametrize("direction", ["random", "adversarial"])
def test_theorem_3_1_no_negative_side_violations_at_c_above_3(dim: int, direction: str) -> None:
    g = torch.Generator().manual_seed(dim)
    q, p, i, n = sample_radial_zero_quadlets(4000, dim, c=3.0 + 1e-9, direction=direction, generator=g)
    assert RadialLoss(c=3.0, margin=0.0).terms(q, p, i, n)[0].max() < 1e-9
    rel = order_relations(q, p, i, n)
    for name in ("d(q,i)<d(q,n)", "d(q,p)<d(q,n)", "d(p,i)<d(p,n)"):
        assert rel[name].all(), name
    # Eq. 1's first ordering is not covered by the radial term: random triangles break it often.
    assert 0.2 < (~rel["d(q,p)<d(q,i)"]).double().mean() < 0.8


def test_theorem_3_1_bound_is_tight() -> None:
    for c, holds in ((2.99, False), (3.0, False), (3.01, True)):
        q, p, i, n = worst_case_quadlet(c)
        assert RadialLoss(c=c, margin=0.0).terms(q, p, i, n)[0].item() == pytest.approx(0.0, abs=1e-12)
        assert order_relations(q, p, i, n)["d(p,i)<d(p,n)"].item() is holds
    # At c = 3 exactly the ordering degenerates to a tie, not a violation.
    q, p, i, n = worst_case_quadlet(3.0)
    assert ((p - i).norm() - (p - n).norm()).abs().item() < 1e-12


def test_sampler_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="direction"):
        sample_radial_zero_quadlets(3, 2, 3.0, direction="up")
    with pytest.raises(ValueError, match="count"):
        sample_radial_zero_quadlets(0, 2, 3.0)
