"""AutoSSVH: Gumbel top-K sampler, gradient reversal, hashing network, losses, voting, pipeline."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from conftest import devices

from hapref.losses.autossvh import (AutoSSVHWeights, autossvh_loss, component_vote, dcl_loss, frame_reconstruction,
                                    kmeans_clusters, p2set_loss, view_contrast)
from hapref.models.autossvh import (AutoSSVHNet, binarize_st, drop_index, gradient_reversal, gumbel_topk, hash_codes,
                                    num_dropped, random_drop)


@pytest.mark.parametrize("device", devices())
def test_gumbel_topk_forward_is_k_hot_in_temporal_order(device: str) -> None:
    scores = torch.randn(5, 9, device=device, requires_grad=True)
    hard, index = gumbel_topk(scores, 4, delta=0.5, generator=torch.Generator().manual_seed(0))
    assert hard.device.type == device
    assert torch.equal(hard.detach(), torch.zeros(5, 9, device=device).scatter(1, index, 1.0))
    assert (hard.detach().sum(1) == 4).all() and (index.diff(dim=1) > 0).all()
    (hard * torch.arange(9.0, device=device)).sum().backward()
    assert scores.grad is not None and scores.grad.abs().sum() > 0
    # δ = 0: the plain top-k of the scores
    _, index0 = gumbel_topk(scores.detach(), 3, delta=0.0)
    assert torch.equal(index0, scores.detach().topk(3).indices.sort().values)


def test_gumbel_topk_straight_through_gradient_is_the_softmax_gradient() -> None:
    scores = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(3, 6, dtype=torch.float64)
    hard, _ = gumbel_topk(scores, 2, delta=0.0, temperature=0.7)
    (hard * weights).sum().backward()
    ref = scores.detach().clone().requires_grad_()
    (torch.softmax(ref / 0.7, -1) * weights).sum().backward()
    assert torch.allclose(scores.grad, ref.grad)


def test_gradient_reversal_flips_the_sign() -> None:
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    (gradient_reversal(x).square().sum()).backward()
    assert torch.allclose(x.grad, -2 * x.detach())
    assert torch.equal(gradient_reversal(x), x)


def test_sampler_gradient_is_reversed_only_with_adversarial() -> None:
    torch.manual_seed(0)
    net = AutoSSVHNet(12, 8, 6, "mini").double()
    x = torch.randn(4, 6, 12, dtype=torch.float64)
    grads = []
    for adversarial in (False, True):
        net.zero_grad()
        kept, _, _ = net.sample(x, 3, adversarial=adversarial, generator=torch.Generator().manual_seed(1))
        kept.square().sum().backward()
        grads.append(net.grade.w4.weight.grad.clone())
    assert grads[0].abs().sum() > 0 and torch.allclose(grads[1], -grads[0])


def test_binarize_straight_through_and_hash_codes() -> None:
    h = torch.tensor([[-0.3, 0.0, 0.7]], dtype=torch.float64, requires_grad=True)
    b = binarize_st(h)
    assert b.tolist() == [[-1.0, 1.0, 1.0]]
    (b * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    assert h.grad.tolist() == [[1.0, 2.0, 3.0]]
    frames = torch.tensor([[[0.5, -0.5], [-0.5, -0.2]]])
    assert hash_codes(frames).tolist() == [[1.0, -1.0]]  # tie -> +1


def test_drop_index_and_random_drop_shapes() -> None:
    x = torch.arange(2 * 5 * 3.0).view(2, 5, 3)
    kept, keep = drop_index(x, torch.tensor([[0, 3], [4, 1]]))
    assert kept.shape == (2, 3, 3) and keep.tolist() == [[1, 2, 4], [0, 2, 3]]
    assert torch.equal(kept[1, 0], x[1, 0])
    with pytest.raises(ValueError, match="drop"):
        drop_index(x, torch.tensor([[0, 0], [1, 2]]))
    d1, d2 = random_drop(3, 8, 5, torch.Generator().manual_seed(0))
    assert d1.shape == d2.shape == (3, 5) and (d1.diff(dim=1) > 0).all()
    with pytest.raises(ValueError, match="num_drop"):
        random_drop(3, 8, 8)
    assert num_dropped(25, 0.5) == 12 and num_dropped(8, 0.5) == 4


@pytest.mark.parametrize("device", devices())
def test_network_shapes_and_errors(device: str) -> None:
    net = AutoSSVHNet(10, 16, 6, "mini").to(device)
    x = torch.randn(3, 6, 10, device=device)
    drop = torch.tensor([[0, 2], [1, 5], [3, 4]], device=device)
    h, b, recon = net.view(x, drop)
    assert h.shape == (3, 4, 16) and b.shape == (3, 16) and recon.shape == (3, 2, 10)
    assert set(net.encode(x).unique().tolist()) <= {-1.0, 1.0}
    assert net.scores(x).shape == (3, 6) and ((net.scores(x) > 0) & (net.scores(x) < 1)).all()
    with pytest.raises(ValueError, match="x must be"):
        net.tokens(torch.randn(3, 5, 10, device=device))
    with pytest.raises(ValueError, match="preset"):
        AutoSSVHNet(10, 16, 6, "huge")
    assert AutoSSVHNet(10, 16, 6, "small").blocks[0].heads == 6  # 256 dims, 6 heads: width 252


def _literal_infonce(b1: torch.Tensor, b2: torch.Tensor, tau: float) -> torch.Tensor:
    z = torch.cat([b1, b2])
    n = len(b1)
    total = 0.0
    for i in range(2 * n):
        j = (i + n) % (2 * n)
        cos = [float(z[i] @ z[k] / (z[i].norm() * z[k].norm())) for k in range(2 * n)]
        den = sum(math.exp(cos[k] / tau) for k in range(2 * n) if k != i)
        total += -math.log(math.exp(cos[j] / tau) / den)
    return torch.tensor(total / (2 * n), dtype=torch.float64)


def _literal_dcl(b1: torch.Tensor, b2: torch.Tensor, tau: float, tau_plus: float) -> torch.Tensor:
    z = torch.nn.functional.normalize(torch.cat([b1, b2]), dim=-1)
    n2 = len(z)
    total = 0.0
    for i in range(n2):
        j = (i + n2 // 2) % n2
        pos = math.exp(float(z[i] @ z[j]) / tau)
        neg = sum(math.exp(float(z[i] @ z[k]) / tau) for k in range(n2) if k not in (i, j))
        ng = max((neg - tau_plus * (n2 - 2) * pos) / (1 - tau_plus), (n2 - 2) * math.exp(-1 / tau))
        total += -math.log(pos / (pos + ng))
    return torch.tensor(total / n2, dtype=torch.float64)


def test_view_contrast_and_dcl_match_literal_transcriptions() -> None:
    b1, b2 = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    assert torch.allclose(view_contrast(b1, b2, 0.5), _literal_infonce(b1, b2, 0.5))
    assert torch.allclose(dcl_loss(b1, b2, 0.5, 0.1), _literal_dcl(b1, b2, 0.5, 0.1))
    assert torch.allclose(dcl_loss(b1, b2, 0.5, 0.0), view_contrast(b1, b2, 0.5))  # τ⁺ = 0: InfoNCE
    a, c = b1.clone().requires_grad_(), b2.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda u, v: view_contrast(u, v, 0.5), (a, c))
    assert torch.autograd.gradcheck(lambda u, v: dcl_loss(u, v, 0.5, 0.1), (a, c))
    one = torch.randn(1, 8)
    assert view_contrast(one, one).item() == 0 and dcl_loss(one, one).item() == 0
    with pytest.raises(ValueError, match="b2"):
        view_contrast(b1, b2[:3])
    with pytest.raises(ValueError, match="positive_prior"):
        dcl_loss(b1, b2, positive_prior=1.0)


def test_frame_reconstruction_is_eq13() -> None:
    pred, target = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64)
    literal = sum(float((pred[i, m] - target[i, m]).norm() ** 2) for i in range(2) for m in range(3)) / 6
    assert math.isclose(float(frame_reconstruction(pred, target, per_dim=False)), literal)
    assert math.isclose(float(frame_reconstruction(pred, target)), literal / 4)
    assert frame_reconstruction(torch.zeros(2, 0, 4), torch.zeros(2, 0, 4)).item() == 0
    with pytest.raises(ValueError, match="target"):
        frame_reconstruction(pred, target[:, :2])


def test_component_vote_is_the_hamming_optimum_by_brute_force() -> None:
    gen = torch.Generator().manual_seed(0)
    k = 5
    candidates = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=k)))
    for size in (1, 2, 4, 7):
        codes = torch.randint(0, 2, (size, k), generator=gen).float() * 2 - 1
        centre = component_vote(codes, torch.zeros(size, dtype=torch.long))[0]
        cost = ((candidates[:, None] != codes[None]).sum((1, 2)))
        assert int((centre[None] != codes).sum()) == int(cost.min())
    # ties -> +1, an empty cluster -> all +1, all codes equal -> that code
    codes = torch.tensor([[1.0, -1.0, -1.0], [-1.0, 1.0, -1.0]])
    assert component_vote(codes, torch.tensor([0, 0]), 2).tolist() == [[1.0, 1.0, -1.0], [1.0, 1.0, 1.0]]
    same = torch.tensor([[1.0, -1.0]] * 3)
    assert component_vote(same, torch.tensor([0, 0, 0])).tolist() == [[1.0, -1.0]]
    with pytest.raises(ValueError, match="codes"):
        component_vote(torch.tensor([[0.5, 1.0]]), torch.tensor([0]))
    with pytest.raises(ValueError, match="labels"):
        component_vote(same, torch.tensor([0.0, 0.0, 0.0]))


def test_p2set_on_a_hand_example_and_gradcheck() -> None:
    codes = torch.tensor([[1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
    centres = torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)
    assigned = torch.tensor([0, 0])
    # code 0: cos 1 vs -1; code 1: cos 0 vs 0
    expected = (-math.log(math.exp(5) / (math.exp(5) + math.exp(-5))) + math.log(2)) / 2
    assert math.isclose(float(p2set_loss(codes, assigned, centres, temperature=0.2)), expected, rel_tol=1e-12)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda c: p2set_loss(c, torch.tensor([0, 1, 1, 0]), centres[:, :1].repeat(1, 3)),
                                    (x,))
    one = p2set_loss(codes[:1], torch.tensor([0]), centres[:1])  # one cluster of one: loss 0, no NaN
    assert torch.isfinite(one) and float(one) == 0
    assert float(p2set_loss(codes[:0], assigned[:0], centres)) == 0
    with pytest.raises(ValueError, match="centres"):
        p2set_loss(codes, assigned, centres[:, :1])


def test_kmeans_is_deterministic_and_total_loss() -> None:
    codes = torch.cat([torch.ones(5, 4), -torch.ones(5, 4)])
    labels = kmeans_clusters(codes, 2, seed=0)
    assert torch.equal(labels, kmeans_clusters(codes, 2, seed=0)) and len(set(labels.tolist())) == 2
    assert (labels[:5] == labels[0]).all()
    with pytest.raises(ValueError, match="num_clusters"):
        kmeans_clusters(codes, 11)
    w = AutoSSVHWeights(alpha=0.5, beta=0.1)
    assert float(autossvh_loss(torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0), w)) == pytest.approx(2.3)


def test_a_few_training_steps_reduce_the_loss() -> None:
    torch.manual_seed(0)
    net = AutoSSVHNet(8, 8, 6, "mini")
    x = torch.randn(16, 6, 8)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    losses = []
    for step in range(30):
        kept, _, drop = net.sample(x, 3, generator=torch.Generator().manual_seed(step))
        _, b1, recon = net.view(x, drop, kept)
        _, b2, _ = net.view(x, random_drop(16, 6, 3, torch.Generator().manual_seed(step))[0])
        target = x.gather(1, drop[..., None].expand(-1, -1, 8))
        loss = frame_reconstruction(recon, target) + view_contrast(b1, b2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert sum(losses[-5:]) < sum(losses[:5])


def test_smoke_pipeline_prints_the_eval_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hapref.train.__main__ import main

    assert main(["autossvh", "--profile", "smoke", "--loss", "autossvh", "--no-progress"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("eval: mAP@5=") and "GMAP=" in last


def test_released_noise_recipe_matches_a_literal_transcription() -> None:
    """The released get_gumbel: S + Gumbel + 10 x Gaussian (Box-Muller of the same uniforms), standardised over
    the whole tensor, then a softmax at 0.5 and its top k."""
    from hapref.models.autossvh import released_logits

    scores = torch.rand(3, 7, dtype=torch.float64)
    z = released_logits(scores, generator=torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    u = torch.rand((2, 3, 7), generator=g, dtype=torch.float64)
    w = torch.rand((3, 7), generator=g, dtype=torch.float64)
    raw = [[scores[i, j].item() - math.log(-math.log(max(w[i, j].item(), 1e-10)) + 1e-10) + 1e-10
            + 10 * math.sqrt(-2 * math.log(u[0, i, j].item())) * math.cos(2 * math.pi * u[1, i, j].item())
            for j in range(7)] for i in range(3)]
    flat = [v for row in raw for v in row]
    mean = sum(flat) / len(flat)
    std = math.sqrt(sum((v - mean) ** 2 for v in flat) / (len(flat) - 1))
    assert torch.allclose(z, (torch.tensor(raw, dtype=torch.float64) - mean) / std, atol=1e-12)
    hard, index = gumbel_topk(scores, 3, temperature=0.5, generator=torch.Generator().manual_seed(4), noise="released")
    assert torch.equal(index, torch.softmax(z / 0.5, -1).topk(3).indices.sort().values)
    with pytest.raises(ValueError, match="noise"):
        gumbel_topk(scores, 3, noise="gaussian")
