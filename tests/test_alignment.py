"""Training-free temporal alignment (hapref.similarity.alignment) against literal pure-Python transcriptions."""

from __future__ import annotations

import math
import random

import pytest
import torch

from hapref.similarity import (ALIGNMENTS, alignment_similarity_matrix, chamfer_similarity, diagonal_band_similarity,
                               dp_alignment, dtw_similarity, frame_to_frame, hough_voting, pad_videos,
                               temporal_network)

NEG = -math.inf


# ---------------------------------------------------------------- literal transcriptions (lists of floats)

def ref_normalize(s: list[list[float]], how: str | None) -> list[list[float]]:
    if how is None:
        return s
    cells = [v for row in s for v in row]
    if how == "zscore":
        mean = sum(cells) / len(cells)
        std = math.sqrt(sum((v - mean) ** 2 for v in cells) / len(cells))
        return [[(v - mean) / max(std, 1e-12) for v in row] for row in s]
    low, high = min(cells), max(cells)
    return [[(v - low) / max(high - low, 1e-12) for v in row] for row in s]


def ref_dtw(s):
    n, m = len(s), len(s[0])
    d = [[NEG] * (m + 1) for _ in range(n + 1)]
    d[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            x = s[i - 1][j - 1]
            d[i][j] = max(d[i - 1][j - 1] + 2 * x, d[i - 1][j] + x, d[i][j - 1] + x)
    return d[n][m] / (n + m)


def ref_dp(s, gap, bias, local):
    n, m = len(s), len(s[0])
    h = [[0.0 if local else -gap * (i + j) for j in range(m + 1)] for i in range(n + 1)]
    best = NEG
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            h[i][j] = max(h[i - 1][j - 1] + s[i - 1][j - 1] - bias, h[i - 1][j] - gap, h[i][j - 1] - gap)
            if local:
                h[i][j] = max(h[i][j], 0.0)
                best = max(best, h[i][j])
    return (best if local else h[n][m]) / n


def ref_top(s, top_k, threshold):
    """Each row's top_k target indices (ties by index) whose similarity exceeds threshold."""
    out = set()
    for i, row in enumerate(s):
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        out |= {(i, j) for j in order[:top_k] if row[j] > threshold}
    return out


def ref_temporal_network(s, top_k, window, threshold):
    nodes = sorted(ref_top(s, top_k, threshold))
    path = {}
    for (i, j) in nodes:                          # sorted by i: predecessors come first
        preds = [path[(a, b)] for (a, b) in path if i - window <= a < i and j - window <= b < j]
        path[(i, j)] = s[i][j] + max([0.0] + preds)
    return max(path.values()) / len(s) if path else 0.0


def ref_hough(s, top_k, bin_width, threshold):
    n = len(s)
    hist: dict[int, float] = {}
    for (i, j) in ref_top(s, top_k, threshold):
        b = (j - i + n - 1) // bin_width
        hist[b] = hist.get(b, 0.0) + s[i][j] - threshold
    return max(hist.values()) / n if hist else 0.0


def ref_band(s, width):
    n, m = len(s), len(s[0])
    best = NEG
    for delta in range(-(n - 1), m):
        total = 0.0
        for i in range(n):
            band = [s[i][j] for j in range(m) if abs(j - i - delta) <= width]
            total += max(band) if band else 0.0
        best = max(best, total / n)
    return best


REFERENCES = {
    "dtw": (dtw_similarity, lambda s, p: ref_dtw(s), [{}]),
    "dp": (dp_alignment, lambda s, p: ref_dp(s, p["gap"], p["bias"], p["local"]),
           [{"gap": 0.1, "bias": 0.5, "local": True}, {"gap": 0.3, "bias": 0.2, "local": False},
            {"gap": 0.0, "bias": -0.1, "local": True}, {"gap": 0.05, "bias": 0.6, "local": False}]),
    "temporal_network": (temporal_network, lambda s, p: ref_temporal_network(s, p["top_k"], p["window"],
                                                                              p["threshold"]),
                         [{"top_k": 1, "window": 1, "threshold": 0.0}, {"top_k": 3, "window": 2, "threshold": 0.2},
                          {"top_k": 9, "window": 4, "threshold": -1.0}]),
    "hough": (hough_voting, lambda s, p: ref_hough(s, p["top_k"], p["bin_width"], p["threshold"]),
              [{"top_k": 1, "bin_width": 1, "threshold": 0.0}, {"top_k": 2, "bin_width": 3, "threshold": 0.3},
               {"top_k": 5, "bin_width": 2, "threshold": -0.5}]),
    "band": (diagonal_band_similarity, lambda s, p: ref_band(s, p["width"]),
             [{"width": 0}, {"width": 1}, {"width": 3}]),
}


def random_batch(seed: int, n: int = 6, tq: int = 7, tt: int = 9, ties: bool = False):
    g = torch.Generator().manual_seed(seed)
    sims = torch.rand(n, tq, tt, generator=g, dtype=torch.float64) * 2 - 1
    if ties:
        sims = (sims * 3).round() / 3                        # many equal values: tie-breaking matters
    lq = torch.randint(1, tq + 1, (n,), generator=g)
    lt = torch.randint(1, tt + 1, (n,), generator=g)
    qv = torch.arange(tq)[None] < lq[:, None]
    tv = torch.arange(tt)[None] < lt[:, None]
    return sims, qv, tv, lq, lt


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("normalize", [None, "zscore", "minmax"])
@pytest.mark.parametrize("ties", [False, True])
def test_batched_scores_equal_the_literal_transcription(name, normalize, ties):
    function, reference, settings = REFERENCES[name]
    sims, qv, tv, lq, lt = random_batch(7 + ties, ties=ties)
    for params in settings:
        got = function(sims, qv, tv, normalize=normalize, **params)
        assert got.shape == (sims.shape[0],) and got.dtype == torch.float64
        for b in range(sims.shape[0]):
            pair = sims[b, :lq[b], :lt[b]].tolist()
            want = reference(ref_normalize(pair, normalize), params)
            assert got[b].item() == pytest.approx(want, abs=1e-10), (name, params, b)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_single_matrix_extra_batch_axes_and_broadcast_flags(name):
    function, _, settings = REFERENCES[name]
    sims, qv, tv, _, _ = random_batch(3, n=6)
    params = settings[-1]
    flat = function(sims, qv, tv, **params)
    grid = function(sims.reshape(2, 3, 7, 9), qv.reshape(2, 3, 7), tv.reshape(2, 3, 9), **params)
    assert torch.equal(grid.reshape(-1), flat)
    one = function(sims[2, :, :], **params)
    assert one.shape == () and one.item() == pytest.approx(function(sims[2:3], **params).item())
    shared = function(sims, qv[:1].expand(6, 7)[0], None, **params)   # [Tq] flags broadcast over the batch
    assert torch.equal(shared, function(sims, qv[:1].expand(6, 7), None, **params))


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_padding_changes_nothing(name):
    function, _, settings = REFERENCES[name]
    sims, _, _, _, _ = random_batch(5, n=1, tq=4, tt=5)
    padded = torch.nn.functional.pad(sims, (0, 3, 0, 2), value=0.7)      # padding cells hold junk
    qv = torch.tensor([[True] * 4 + [False] * 2])
    tv = torch.tensor([[True] * 5 + [False] * 3])
    for params in settings:
        assert function(padded, qv, tv, **params).item() == pytest.approx(function(sims, **params).item(), abs=1e-12)


def test_identical_videos_and_shuffled_order():
    x = torch.nn.functional.normalize(torch.randn(8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),
                                      dim=-1)
    s = x @ x.T
    assert dtw_similarity(s).item() == pytest.approx(1.0)
    assert dp_alignment(s, bias=0.5).item() == pytest.approx(0.5)
    assert temporal_network(s, top_k=1, window=1).item() == pytest.approx(1.0)
    assert hough_voting(s).item() == pytest.approx(1.0)
    assert diagonal_band_similarity(s, width=0).item() == pytest.approx(1.0)
    shuffled = s[:, torch.tensor([3, 6, 0, 5, 2, 7, 1, 4])]   # the target's frames in another order
    assert chamfer_similarity(shuffled).item() == pytest.approx(1.0)  # order-blind
    for score in (dtw_similarity(shuffled), hough_voting(shuffled), temporal_network(shuffled, window=1),
                  diagonal_band_similarity(shuffled, width=0)):
        assert score.item() < 0.7


def test_limits_equal_chamfer():
    sims, qv, tv, _, _ = random_batch(11)
    valid = qv[:, :, None] & tv[:, None, :]
    chamfer = chamfer_similarity(sims, valid)
    assert torch.allclose(diagonal_band_similarity(sims, qv, tv, width=20), chamfer, atol=1e-12)
    positive = sims.abs()                                    # threshold 0 keeps every row maximum as a vote
    valid_pos = chamfer_similarity(positive, valid)
    assert torch.allclose(hough_voting(positive, qv, tv, bin_width=100), valid_pos, atol=1e-12)


def test_float32_dtype_and_device_are_kept():
    sims, qv, tv, _, _ = random_batch(2)
    sims = sims.float()
    for function in ALIGNMENTS.values():
        out = function(sims, qv, tv)
        assert out.dtype == torch.float32 and out.device == sims.device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_equals_cpu():
    sims, qv, tv, _, _ = random_batch(4)
    for name, function in ALIGNMENTS.items():
        gpu = function(sims.cuda(), qv.cuda(), tv.cuda())
        assert gpu.device.type == "cuda"
        assert torch.allclose(gpu.cpu(), function(sims, qv, tv), atol=1e-10), name


def test_database_scoring_equals_the_per_pair_functions():
    g = torch.Generator().manual_seed(1)
    videos = [torch.nn.functional.normalize(torch.randn(n, 4, 8, dtype=torch.float64, generator=g), dim=-1)
              for n in (5, 3, 6, 4)]
    x, valid = pad_videos(videos)
    for method, params in [("dtw", {}), ("dp", {"gap": 0.2, "bias": 0.3}), ("temporal_network", {"top_k": 2}),
                           ("hough", {"bin_width": 2}), ("band", {"width": 1})]:
        scores = alignment_similarity_matrix(x[:2], x, valid[:2], valid, method=method, spatial_k=0.25,
                                             chunk_size=3, **params)
        assert scores.shape == (2, 4)
        for q in range(2):
            for b in range(4):
                f2f = frame_to_frame(videos[q], videos[b], spatial_k=0.25)
                want = ALIGNMENTS[method](f2f, **params)
                assert scores[q, b].item() == pytest.approx(want.item(), abs=1e-12)


@pytest.mark.parametrize("call, error, match", [
    (lambda: dtw_similarity(torch.ones(3)), ValueError, "sims must be a frame-to-frame similarity matrix"),
    (lambda: dtw_similarity(torch.ones(2, 0)), ValueError, "Tq, Tt >= 1"),
    (lambda: dtw_similarity(torch.tensor([[float("nan")]])), ValueError, "sims contains NaN"),
    (lambda: dtw_similarity(torch.tensor([[float("inf")]])), ValueError, "sims must be finite"),
    (lambda: dtw_similarity(torch.ones(2, 2, dtype=torch.long)), ValueError, "floating dtype"),
    (lambda: dtw_similarity([[1.0]]), TypeError, "sims must be a torch.Tensor"),
    (lambda: dtw_similarity(torch.ones(2, 3), torch.tensor([False, True])), ValueError,
     "query_valid must mark a prefix"),
    (lambda: dtw_similarity(torch.ones(2, 3), None, torch.ones(4, dtype=torch.bool)), ValueError,
     "target_valid must be bool flags"),
    (lambda: dtw_similarity(torch.ones(2, 3), normalize="l2"), ValueError, "normalize must be one of"),
    (lambda: dp_alignment(torch.ones(2, 3), gap=-0.1), ValueError, "gap must be a finite number >= 0"),
    (lambda: dp_alignment(torch.ones(2, 3), local="yes"), TypeError, "local must be a bool"),
    (lambda: dp_alignment(torch.ones(2, 3), bias=float("nan")), ValueError, "bias must be a finite number"),
    (lambda: temporal_network(torch.ones(2, 3), top_k=0), ValueError, "top_k must be a finite number >= 1"),
    (lambda: temporal_network(torch.ones(2, 3), window=1.5), TypeError, "window must be an int"),
    (lambda: hough_voting(torch.ones(2, 3), bin_width=0), ValueError, "bin_width must be a finite number >= 1"),
    (lambda: diagonal_band_similarity(torch.ones(2, 3), width=-1), ValueError, "width must be a finite number >= 0"),
    (lambda: alignment_similarity_matrix(torch.ones(2, 3, 4), torch.ones(2, 3, 4), method="lcs"), ValueError,
     "method must be one of"),
])
def test_bad_inputs_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_empty_videos_score_zero():
    sims = torch.rand(2, 3, 4, dtype=torch.float64)
    qv = torch.tensor([[False] * 3, [True] * 3])
    for function in ALIGNMENTS.values():
        out = function(sims, qv, None)
        assert out[0].item() == 0.0 and out[1].item() != 0.0


def test_random_pairs_of_many_shapes():
    rng = random.Random(0)
    for trial in range(20):
        tq, tt = rng.randint(1, 6), rng.randint(1, 6)
        s = [[rng.uniform(-1, 1) for _ in range(tt)] for _ in range(tq)]
        t = torch.tensor(s, dtype=torch.float64)
        assert dtw_similarity(t).item() == pytest.approx(ref_dtw(s), abs=1e-12)
        assert dp_alignment(t, gap=0.2, bias=0.1).item() == pytest.approx(ref_dp(s, 0.2, 0.1, True), abs=1e-12)
        assert dp_alignment(t, gap=0.2, bias=0.1, local=False).item() == pytest.approx(ref_dp(s, 0.2, 0.1, False),
                                                                                       abs=1e-12)
        assert temporal_network(t, top_k=2, window=2).item() == pytest.approx(ref_temporal_network(s, 2, 2, 0.0),
                                                                             abs=1e-12)
        assert hough_voting(t, top_k=2).item() == pytest.approx(ref_hough(s, 2, 1, 0.0), abs=1e-12)
        assert diagonal_band_similarity(t, width=1).item() == pytest.approx(ref_band(s, 1), abs=1e-12)
