"""Chamfer / TopK-Chamfer vs literal loops, valid flags, ψ, the similarity network, chunking and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import devices

from hapref.similarity import (
    MEASURES,
    VideoComparator,
    VideoSimilarityNetwork,
    chamfer_similarity,
    frame_to_frame,
    mean_pooled_similarity,
    mean_similarity,
    pad_videos,
    pair_valid,
    similarity_regularization,
    squash,
    symmetric_chamfer,
    topk_chamfer,
    video_similarity_matrix,
)


def literal_topk_chamfer(sim: list[list[float]], k: float) -> float:
    """HAP-VR Eq. 3/5 written out: per row sort descending, average the top K, average the rows."""
    rows = []
    for row in sim:
        top = max(1, round(k * len(row)))
        rows.append(sum(sorted(row, reverse=True)[:top]) / top)
    return sum(rows) / len(rows) if rows else 0.0


def unit(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return F.normalize(torch.randn(*shape, dtype=dtype), dim=-1)


@pytest.mark.parametrize("k", [0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
def test_topk_chamfer_matches_literal_loop(k: float) -> None:
    sim = torch.randn(3, 7, 11, dtype=torch.float64)
    expected = torch.tensor([literal_topk_chamfer(s.tolist(), k) for s in sim], dtype=torch.float64)
    torch.testing.assert_close(topk_chamfer(sim, k), expected)


def test_limits_are_chamfer_and_mean() -> None:
    sim = torch.randn(4, 6, 9, dtype=torch.float64)
    torch.testing.assert_close(topk_chamfer(sim, 0.0), sim.amax(-1).mean(-1))
    torch.testing.assert_close(chamfer_similarity(sim), sim.amax(-1).mean(-1))
    torch.testing.assert_close(mean_similarity(sim), sim.mean(dim=(-1, -2)))
    torch.testing.assert_close(symmetric_chamfer(sim), 0.5 * (sim.amax(-1).mean(-1) + sim.amax(-2).mean(-1)))
    # K uses Python's half-to-even rounding: 0.25 * 10 = 2.5 -> 2
    sim = torch.arange(10, dtype=torch.float64).view(1, 10)
    assert topk_chamfer(sim, 0.25).item() == pytest.approx((9 + 8) / 2)


@pytest.mark.parametrize("k", [0.0, 0.3, 1.0])
def test_valid_equals_cropping_valid_frames(k: float) -> None:
    q_len, t_len = torch.tensor([5, 3, 7]), torch.tensor([6, 8, 2])
    sim = torch.randn(3, 7, 8, dtype=torch.float64)
    valid = pair_valid(torch.arange(7) < q_len[:, None], torch.arange(8) < t_len[:, None])
    garbage = sim.masked_fill(~valid, 1e3)  # padded values must never leak in
    out = topk_chamfer(garbage, k, valid)
    expected = torch.stack([topk_chamfer(sim[i, :q_len[i], :t_len[i]], k) for i in range(3)])
    torch.testing.assert_close(out, expected)
    sym = symmetric_chamfer(garbage, valid, k)
    expected_sym = torch.stack([symmetric_chamfer(sim[i, :q_len[i], :t_len[i]], k=k) for i in range(3)])
    torch.testing.assert_close(sym, expected_sym)


def test_fully_masked_pair_is_zero_not_nan() -> None:
    sim = torch.randn(2, 4, 5, requires_grad=True)
    valid = torch.zeros(2, 4, 5, dtype=torch.bool)
    valid[1, :2, :3] = True
    out = topk_chamfer(sim, 0.5, valid)
    assert out[0].item() == 0.0 and torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(sim.grad).all() and sim.grad[0].abs().sum() == 0


def test_topk_gradient_matches_gradcheck() -> None:
    sim = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    valid = torch.rand(2, 5, 6) > 0.3
    assert torch.autograd.gradcheck(lambda s: topk_chamfer(s, 0.4, valid), (sim,))


def test_bad_inputs_raise_value_errors() -> None:
    with pytest.raises(ValueError, match="sim"):
        topk_chamfer(torch.ones(3), 0.1)
    with pytest.raises(ValueError, match="k"):
        topk_chamfer(torch.ones(2, 2), 1.5)
    with pytest.raises(ValueError, match="valid"):
        topk_chamfer(torch.ones(2, 3), 0.1, torch.ones(4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="measure"):
        video_similarity_matrix(torch.ones(1, 2, 3), torch.ones(1, 2, 3), measure="nope")


def test_mean_pooled_is_lower_bound_of_chamfer_tca_eq10() -> None:
    x, y = unit(20, 6, 16), unit(20, 9, 16)
    sim = x @ y.transpose(-1, -2)
    dot = mean_pooled_similarity(x, y)
    torch.testing.assert_close(dot, mean_similarity(sim))  # Eq. 10: mean of the frame matrix
    assert (dot <= chamfer_similarity(sim) + 1e-12).all()
    # the normalised cosine of the means is not bounded by Chamfer: identical frames within x, random y
    x_same = unit(1, 16).expand(6, 16).unsqueeze(0)
    y_noisy = F.normalize(x_same[:, :1] + 0.8 * unit(1, 9, 16), dim=-1)
    cos = mean_pooled_similarity(x_same, y_noisy, normalize=True)
    assert (cos > chamfer_similarity(x_same @ y_noisy.transpose(-1, -2))).all()


def test_frame_to_frame_matches_literal_region_loop() -> None:
    x, y = unit(2, 3, 4, 8), unit(3, 5, 4, 8)
    f2f = frame_to_frame(x, y, spatial_k=0.5)
    for a in range(2):
        for b in range(3):
            for i in range(3):
                for j in range(5):
                    regions = (x[a, i] @ y[b, j].T).tolist()
                    assert f2f[a, b, i, j].item() == pytest.approx(literal_topk_chamfer(regions, 0.5))


def test_comparator_shapes_valid_and_squash() -> None:
    psi = VideoComparator().double()
    raw, out_valid = psi(torch.rand(4, 28, 13, dtype=torch.float64), torch.ones(4, 28, 13, dtype=torch.bool))
    assert raw.shape == (4, 7, 3) and out_valid.shape == (4, 7, 3)  # floor mode, as the released ψ
    # padded cells never matter: a padded matrix gives the cropped matrix's output on its valid cells
    sim, valid = torch.rand(1, 13, 13, dtype=torch.float64), torch.zeros(1, 13, 13, dtype=torch.bool)
    valid[:, :9, :7] = True
    torch.testing.assert_close(psi(sim, valid)[0][:, :2, :1], psi(sim[:, :9, :7])[0])
    assert not psi(sim, valid)[1][:, 2:].any() and not psi(sim, valid)[1][:, :, 1:].any()
    with pytest.raises(ValueError, match="at least 4"):
        psi(sim[:, :3])
    assert pool_valid_ok(valid, psi(sim, valid)[1])
    x = torch.linspace(-3, 3, 13, dtype=torch.float64)
    torch.testing.assert_close(squash(x), x.clamp(-1, 1) / 2 + 0.5)
    expected = sum(max(-1 - v, 0) + max(v - 1, 0) for v in x.tolist())
    assert similarity_regularization(x).item() == pytest.approx(expected)


def pool_valid_ok(valid: torch.Tensor, pooled: torch.Tensor) -> bool:
    """A pooled cell is valid iff every input cell it covers (4×4 block) is valid (floor-mode pooling)."""
    for i in range(pooled.shape[1]):
        for j in range(pooled.shape[2]):
            if pooled[0, i, j].item() != valid[0, 4 * i:4 * i + 4, 4 * j:4 * j + 4].all().item():
                return False
    return True


def make_videos(n: int = 5, t_max: int = 10, r: int = 4, d: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.randint(4, t_max + 1, (n,))  # ψ floors twice: at least 4 frames
    lengths[0] = t_max
    return pad_videos([unit(int(length), r, d, dtype=torch.float32) for length in lengths])


@pytest.mark.parametrize("device", devices())
def test_network_forward_score_chunked_and_gradients(device: str) -> None:
    feats, valid = make_videos()
    feats, valid = feats.to(device), valid.to(device)
    net = VideoSimilarityNetwork(dims=16, spatial_k=0.5, temporal_k=0.3, attention=True, chunk_size=2).to(device)
    feats.requires_grad_(True)
    sim, frame_sims, reg = net(feats, valid)
    assert sim.shape == (5, 5) and frame_sims.shape == (5, 5, 10, 10) and reg.ndim == 0
    assert ((sim >= 0) & (sim <= 1)).all() and sim.device.type == device
    # padded frame pairs are exactly zero in the frame matrices handed to the frame-level loss
    assert (frame_sims[~pair_valid(valid[:, None], valid[None])] == 0).all()
    (sim.sum() + reg).backward()
    assert torch.isfinite(feats.grad).all() and feats.grad.abs().sum() > 0
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())
    with torch.no_grad():
        for chunk in (1, 3, 7, 100):
            torch.testing.assert_close(net.score(feats, feats, valid, valid, chunk_size=chunk), sim.detach())
        # one pair on its own equals its entry in the batch: padding does not change a pair's score
        alone = net.score(feats[1:2, :int(valid[1].sum())], feats[2:3, :int(valid[2].sum())])
        torch.testing.assert_close(alone[0, 0], sim[1, 2].detach())


def test_network_without_comparator_is_two_level_topk_chamfer() -> None:
    feats, valid = make_videos()
    net = VideoSimilarityNetwork(spatial_k=0.5, temporal_k=0.25, comparator=False)
    sim, frame_sims, reg = net(feats, valid)
    assert reg.item() == 0.0
    for a in range(5):
        for b in range(5):
            qa, tb = feats[a, :int(valid[a].sum())], feats[b, :int(valid[b].sum())]
            f2f = [[literal_topk_chamfer((qa[i] @ tb[j].T).tolist(), 0.5) for j in range(len(tb))]
                   for i in range(len(qa))]
            assert sim[a, b].item() == pytest.approx(literal_topk_chamfer(f2f, 0.25), abs=1e-5)


@pytest.mark.parametrize("measure", MEASURES)
def test_video_similarity_matrix_chunked_and_masked(measure: str) -> None:
    feats, valid = make_videos(n=6)
    full = video_similarity_matrix(feats[:2], feats, valid[:2], valid, measure=measure, k=0.3, chunk_size=10**6)
    for chunk in (1, 4):
        torch.testing.assert_close(
            video_similarity_matrix(feats[:2], feats, valid[:2], valid, measure=measure, k=0.3, chunk_size=chunk),
            full)
    q, t = feats[1, :int(valid[1].sum())], feats[4, :int(valid[4].sum())]
    single = video_similarity_matrix(q[None], t[None], measure=measure, k=0.3)
    torch.testing.assert_close(single[0, 0], full[1, 4])


def test_pad_videos() -> None:
    padded, valid = pad_videos([torch.ones(2, 3), torch.ones(4, 3)])
    assert padded.shape == (2, 4, 3) and valid.tolist() == [[True, True, False, False], [True] * 4]
    assert padded[0, 2:].abs().sum() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    feats, valid = make_videos()
    net = VideoSimilarityNetwork(dims=16, attention=True)
    expected = net.score(feats, feats, valid, valid)
    out = net.cuda().score(feats.cuda(), feats.cuda(), valid.cuda(), valid.cuda())
    torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=1e-4)
