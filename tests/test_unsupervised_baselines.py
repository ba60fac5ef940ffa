"""ITQ, spectral hashing and the training-free frame samplers (issue 43) against literal numpy transcriptions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hapref.models import (FRAME_SAMPLERS, farthest_from_mean_drop, highest_variance_drop, k_centre_drop,
                           training_free_drop, uniform_drop)
from hapref.models.autossvh import drop_index, random_drop
from hapref.search import itq_codes, itq_rotation, pca_sign_codes, spectral_hashing_codes


def _data(n=60, f=10, seed=0):
    gen = torch.Generator().manual_seed(seed)
    scale = torch.linspace(3.0, 0.2, f, dtype=torch.float64)
    return torch.randn(n, f, generator=gen, dtype=torch.float64) * scale + 1.5


def _pca_numpy(train, bits):
    """Centre and oriented top principal directions, by an eigendecomposition of the covariance."""
    centre = train.mean(0)
    values, vectors = np.linalg.eigh((train - centre).T @ (train - centre))
    directions = vectors[:, np.argsort(-values)[:bits]]
    for j in range(bits):
        if directions[np.argmax(np.abs(directions[:, j])), j] < 0:
            directions[:, j] *= -1
    return centre, directions


def _sign(x):
    return np.where(x >= 0, 1.0, -1.0)


def _itq_numpy(train, queries, bits, iterations, seed):
    centre, w = _pca_numpy(train, bits)
    v = (train - centre) @ w
    start = torch.randn(bits, bits, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    r, _ = np.linalg.qr(start)
    for _ in range(iterations):
        b = _sign(v @ r)
        ub, _, uat = np.linalg.svd(b.T @ v)                  # Gong & Lazebnik's code: svd(B'V), R = UA UB'
        r = uat.T @ ub.T
    return _sign((queries - centre) @ w @ r), r


def test_itq_matches_a_numpy_transcription():
    train, queries = _data(), _data(15, seed=1)
    for bits, iterations in ((4, 0), (4, 50), (8, 20)):
        ours = itq_codes(train, queries, bits, iterations=iterations, seed=3)
        theirs, r = _itq_numpy(train.numpy(), queries.numpy(), bits, iterations, 3)
        assert np.array_equal(ours.numpy(), theirs), (bits, iterations)
        assert ours.dtype == torch.float64 and ours.shape == (15, bits)


def test_itq_never_increases_the_quantisation_loss_and_beats_pca_sign():
    train = _data(200, 12)
    centre, w = _pca_numpy(train.numpy(), 8)
    v = torch.from_numpy((train.numpy() - centre) @ w)
    losses = []
    for iterations in range(0, 30):
        r = itq_rotation(v, iterations=iterations, seed=0)
        assert torch.allclose(r @ r.T, torch.eye(8, dtype=torch.float64), atol=1e-10)
        losses.append(float(((torch.where(v @ r >= 0, 1.0, -1.0) - v @ r) ** 2).sum()))
    assert all(b <= a + 1e-9 for a, b in zip(losses, losses[1:]))
    # the identity rotation is PCA sign: ITQ's loss ends below it
    pca = pca_sign_codes(train, train, 8)
    assert losses[-1] < float(((pca - v) ** 2).sum())


def _sh_numpy(train, queries, bits):
    """Weiss et al.'s recipe written out: PCA, box, all (dimension, mode) frequencies sorted, sinusoid sign."""
    p = min(bits, *train.shape)
    centre, w = _pca_numpy(train, p)
    v = (train - centre) @ w
    low, high = v.min(0), v.max(0)
    candidates = []
    for j in range(p):
        for k in range(1, bits + 1):
            candidates.append((k * math.pi / (high[j] - low[j]), j, k))
    candidates.sort()                                          # smallest frequency, then dimension, then mode
    q = (queries - centre) @ w
    out = np.empty((len(queries), bits))
    for i in range(len(queries)):
        for bit, (omega, j, _) in enumerate(candidates[:bits]):
            out[i, bit] = 1.0 if math.sin(math.pi / 2 + omega * (q[i, j] - low[j])) >= 0 else -1.0
    return out


def test_spectral_hashing_matches_a_numpy_transcription():
    train, queries = _data(), _data(15, seed=2)
    for bits in (3, 8, 16, 24):                                   # 16, 24 > F: several modes per dimension
        ours = spectral_hashing_codes(train, queries, bits)
        assert np.array_equal(ours.numpy(), _sh_numpy(train.numpy(), queries.numpy(), bits)), bits
        assert ours.shape == (15, bits) and ours.dtype == torch.float64
    # the first bit of SH splits the widest PCA coordinate at its midpoint: the PCA sign bit up to centring
    codes = spectral_hashing_codes(train, train, 1)
    centre, w = _pca_numpy(train.numpy(), 1)
    v = (train.numpy() - centre) @ w[:, 0]
    assert np.array_equal(codes[:, 0].numpy(), np.where(v <= (v.min() + v.max()) / 2, 1.0, -1.0))


def test_unsupervised_hashing_errors_name_the_argument():
    train = _data()
    with pytest.raises(ValueError, match="bits must be a positive int <= 10"):
        itq_codes(train, train, 11)
    with pytest.raises(ValueError, match="dimensions"):
        spectral_hashing_codes(train, train[:, :4], 4)
    with pytest.raises(ValueError, match="iterations"):
        itq_codes(train, train, 4, iterations=-1)
    with pytest.raises(ValueError, match="high must exceed low"):
        spectral_hashing_codes(torch.ones(5, 3), torch.ones(2, 3), 2)
    with pytest.raises(TypeError, match="train_features"):
        itq_codes([[1.0]], train, 1)


def _uniform_loop(frames, drop):
    kept = frames - drop
    keep = [int(math.floor((i + 0.5) * frames / kept)) for i in range(kept)]
    return [t for t in range(frames) if t not in keep]


def _ranked_loop(scores, kept):
    order = sorted(range(len(scores)), key=lambda t: (-scores[t], t))
    return sorted(order[kept:])


def _k_centre_loop(video, mean, kept):
    first = max(range(len(video)), key=lambda t: (np.linalg.norm(video[t] - mean), -t))
    chosen = [first]
    while len(chosen) < kept:
        def cover(t):
            return min(np.linalg.norm(video[t] - video[c]) for c in chosen)
        rest = [t for t in range(len(video)) if t not in chosen]
        chosen.append(max(rest, key=lambda t: (cover(t), -t)))
    return [t for t in range(len(video)) if t not in chosen]


@pytest.mark.parametrize("frames,drop", [(8, 4), (12, 9), (5, 0), (7, 6)])
def test_frame_samplers_match_loops(frames, drop):
    gen = torch.Generator().manual_seed(frames + drop)
    x = torch.randn(6, frames, 5, generator=gen, dtype=torch.float64)
    x[0, 1] = x[0, 3]                                             # a repeated frame
    mean = x.mean((0, 1)).numpy()
    kept = frames - drop
    assert uniform_drop(x, drop).tolist() == [_uniform_loop(frames, drop)] * 6
    assert farthest_from_mean_drop(x, drop).tolist() == [
        _ranked_loop([np.linalg.norm(v[t] - mean) for t in range(frames)], kept) for v in x.numpy()]
    assert highest_variance_drop(x, drop).tolist() == [
        _ranked_loop([float(np.var(v[t])) for t in range(frames)], kept) for v in x.numpy()]
    assert k_centre_drop(x, drop).tolist() == [_k_centre_loop(v, mean, kept) for v in x.numpy()]
    other = torch.zeros(5, dtype=torch.float64)
    assert k_centre_drop(x, drop, mean=other).tolist() == [_k_centre_loop(v, other.numpy(), kept) for v in x.numpy()]


def test_frame_samplers_have_the_learned_samplers_shapes():
    x = torch.randn(4, 12, 7)
    reference, _ = random_drop(4, 12, 9)
    for method in FRAME_SAMPLERS:
        drop = training_free_drop(x, 9, method)
        assert drop.shape == reference.shape and drop.dtype == reference.dtype == torch.int64
        assert torch.equal(drop, drop.sort(1).values)
        kept, keep = drop_index(x, drop)                           # usable wherever the learned sampler's are
        assert kept.shape == (4, 3, 7) and keep.shape == (4, 3)


def test_farthest_from_mean_and_k_centre_skip_padding_frames():
    """Three distinct frames padded with copies of one frame: farthest-from-mean keeps exactly the distinct ones
    when the padding is the reference; k-centre keeps the padding at most once (a repeated stretch once)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.zeros(3, 12, 6, dtype=torch.float64)
    informative = torch.tensor([[0, 5, 9], [2, 3, 11], [1, 6, 7]])
    for b in range(3):
        x[b, informative[b]] = torch.randn(3, 6, generator=gen, dtype=torch.float64) * 3 + 1
    keep = drop_index(x, farthest_from_mean_drop(x, 9, mean=torch.zeros(6)))[1]
    assert torch.equal(keep, informative)
    for mean in (torch.zeros(6), None):
        keep = drop_index(x, k_centre_drop(x, 9, mean=mean))[1]
        padding = [sum(int(t) not in informative[b].tolist() for t in keep[b]) for b in range(3)]
        assert max(padding) <= 1 and sum(padding) >= 1, padding


def test_frame_sampler_errors_name_the_argument():
    with pytest.raises(ValueError, match="num_drop must be an int in"):
        uniform_drop(torch.zeros(2, 4, 3), 4)
    with pytest.raises(ValueError, match="x must have 3 dimension"):
        k_centre_drop(torch.zeros(4, 3), 1)
    with pytest.raises(ValueError, match="mean must have F=3"):
        farthest_from_mean_drop(torch.zeros(2, 4, 3), 1, mean=torch.zeros(2))
    with pytest.raises(ValueError, match="method must be one of"):
        training_free_drop(torch.zeros(2, 4, 3), 1, "random")
