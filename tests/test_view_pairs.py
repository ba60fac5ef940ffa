"""Closed-form view-pair estimators (hapref.features.view_pairs) and the temporal match kernel
(hapref.similarity.temporal_match_kernel) against literal NumPy/SciPy transcriptions (chapter 6)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import torch

from hapref.features import PCAWhitening, ViewDifferenceProjection, WithinClipWhitening, within_clip_covariance
from hapref.similarity import temporal_match_kernel, tmk_offset_scores, tmk_weights


def _views(clips=40, views=3, frames=5, dim=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    content = torch.randn(clips, 1, frames, dim, generator=g, dtype=torch.float64)
    edit = torch.randn(clips, views, 1, dim, generator=g, dtype=torch.float64) * torch.linspace(2, 0.1, dim)
    return content + edit + 0.1 * torch.randn(clips, views, frames, dim, generator=g, dtype=torch.float64)


def _scatter_by_loops(views: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S_w written out clip by clip, view by view, with frames averaged first."""
    c, v = views.shape[:2]
    d = views.shape[-1]
    scatter = np.zeros((d, d))
    for i in range(c):
        means = [views[i, j].reshape(-1, d).mean(axis=0) for j in range(v)]
        centre = sum(means) / v
        for m in means:
            scatter += np.outer(m - centre, m - centre)
    return views.reshape(-1, d).mean(axis=0), scatter / (c * (v - 1))


def test_within_clip_covariance_matches_the_loops() -> None:
    views = _views()
    mean, cov = within_clip_covariance(views)
    ref_mean, ref_cov = _scatter_by_loops(views.numpy())
    assert mean.dtype == cov.dtype == torch.float64
    np.testing.assert_allclose(mean.numpy(), ref_mean, atol=1e-12)
    np.testing.assert_allclose(cov.numpy(), ref_cov, atol=1e-12)
    # one descriptor per view ([C, V, D]) is the same as frames already averaged
    _, per_view = within_clip_covariance(views.mean(dim=2))
    np.testing.assert_allclose(per_view.numpy(), ref_cov, atol=1e-12)


@pytest.mark.parametrize("rank", [0, 2, 5])
def test_view_difference_projection_removes_the_top_eigenvectors(rank) -> None:
    views = _views()
    proj = ViewDifferenceProjection.fit(views.float(), rank=rank)
    assert isinstance(proj, PCAWhitening) and proj.projection.dtype == torch.float32
    mean, cov = _scatter_by_loops(views.numpy())
    w, u = scipy.linalg.eigh(cov)                       # ascending
    top = u[:, len(w) - rank:]
    keep = np.eye(len(w)) - top @ top.T                 # I - U_r U_rᵀ
    p = proj.projection.double().numpy()
    np.testing.assert_allclose(p @ p.T, keep, atol=1e-5)           # the same subspace kept
    np.testing.assert_allclose(p.T @ p, np.eye(len(w) - rank), atol=1e-5)   # no axis rescaled
    x = torch.randn(7, 6, dtype=torch.float64)
    expected = torch.nn.functional.normalize(torch.from_numpy((x.numpy() - mean) @ keep), dim=-1)
    got = proj(x.float()).double()
    # cosines equal those of the projected vectors
    np.testing.assert_allclose((got @ got.T).numpy(), (expected @ expected.T).numpy(), atol=1e-5)


def test_within_clip_whitening_inverts_the_regularised_scatter() -> None:
    views = _views()
    eps = 1e-3
    white = WithinClipWhitening.fit(views, eps=eps)
    _, cov = _scatter_by_loops(views.numpy())
    w = scipy.linalg.eigvalsh(cov)
    regularised = cov + eps * w.clip(min=0).mean() * np.eye(len(w))
    p = white.projection.numpy()
    np.testing.assert_allclose(p @ p.T, np.linalg.inv(regularised), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(white.eigenvalues.numpy(), np.sort(w) + eps * w.clip(min=0).mean(), atol=1e-12)
    kept = WithinClipWhitening.fit(views, dim=2, eps=eps)           # the 2 directions views agree on most
    np.testing.assert_allclose(kept.projection.numpy(), p[:, :2], atol=1e-12)


def test_estimators_state_dict_round_trip_and_bad_input() -> None:
    views = _views()
    for est in (ViewDifferenceProjection.fit(views, rank=2), WithinClipWhitening.fit(views)):
        again = type(est).from_state_dict(est.state_dict())
        assert type(again) is type(est)
        x = torch.randn(3, 6, dtype=torch.float64)
        assert torch.equal(again(x), est(x))
    with pytest.raises(ValueError, match="views must be"):
        ViewDifferenceProjection.fit(torch.randn(5, 1, 4), rank=1)      # one view per clip: nothing differs
    with pytest.raises(ValueError, match="views must be"):
        WithinClipWhitening.fit(torch.randn(5, 4))
    with pytest.raises(ValueError, match="rank must be"):
        ViewDifferenceProjection.fit(views, rank=-1)
    with pytest.raises(ValueError, match="dim must be"):
        WithinClipWhitening.fit(views, dim=0)
    with pytest.raises(ValueError, match="floating dtype"):
        WithinClipWhitening.fit(torch.ones(3, 2, 4, dtype=torch.long))


def test_within_clip_whitening_refuses_identical_views_and_stays_finite_when_one_axis_never_differs() -> None:
    """S_w = 0 (every clip's views identical): the relative floor eps * mean(λ) is 0 as well, so fit refuses
    instead of dividing by 0; one axis in which views never differ is kept finite by the floor."""
    content = _views(views=1)
    with pytest.raises(ValueError, match="views: every clip's views are identical"):
        WithinClipWhitening.fit(content.expand(-1, 3, -1, -1))
    with pytest.raises(ValueError, match="views: every clip's views are identical"):
        WithinClipWhitening.fit(content.float().expand(-1, 2, -1, -1)[:, :, 0])   # [C, V, D], float32
    views = _views()
    views[..., 0] = views[:, :1, :, 0]                  # axis 0: the same in every view of a clip
    white = WithinClipWhitening.fit(views, eps=1e-3)
    _, cov = _scatter_by_loops(views.numpy())
    assert abs(cov[0]).max() < 1e-12
    w = scipy.linalg.eigvalsh(cov)
    p = white.projection.numpy()
    assert np.isfinite(p).all() and torch.isfinite(white(views)).all()
    np.testing.assert_allclose(p @ p.T, np.linalg.inv(cov + 1e-3 * w.clip(min=0).mean() * np.eye(len(w))),
                               rtol=1e-8, atol=1e-8)


def test_projection_finds_a_planted_edit_subspace() -> None:
    """Views differ only inside a random 3-d subspace E: rank 3 removes exactly E."""
    g = torch.Generator().manual_seed(1)
    basis = torch.linalg.qr(torch.randn(8, 3, generator=g, dtype=torch.float64))[0]
    clips = torch.randn(300, 1, 4, 8, generator=g, dtype=torch.float64)
    edits = torch.randn(300, 4, 1, 3, generator=g, dtype=torch.float64) @ basis.T
    proj = ViewDifferenceProjection.fit(clips + edits, rank=3)
    assert (basis.T @ proj.projection).abs().max() < 1e-10


def _kernel_by_loops(x, y, period, m, beta, offsets):
    """Eq. 1 and 3 written out: the truncated von Mises kernel from scipy's Bessel functions, frame by frame."""
    a = [(scipy.special.iv(0, beta) - math.exp(-beta)) / (2 * math.sinh(beta))]
    a += [scipy.special.iv(k, beta) / math.sinh(beta) for k in range(1, m + 1)]

    def kappa(u):
        return sum(a[k] * math.cos(2 * math.pi * k * u / period) for k in range(m + 1))

    def k(x_, y_, delta):
        return sum(float(x_[t] @ y_[s]) * kappa(s - t - delta) for t in range(len(x_)) for s in range(len(y_)))

    out = np.zeros((len(x), len(y), len(offsets)))
    for i, xi in enumerate(x):
        for j, yj in enumerate(y):
            norm = math.sqrt(k(xi, xi, 0) * k(yj, yj, 0))
            for p, delta in enumerate(offsets):
                out[i, j, p] = k(xi, yj, delta) / norm
    return out


@pytest.mark.parametrize("period,m,beta", [(16, 3, 1.5), (24, 12, 8.0), (9, 4, 30.0)])
def test_tmk_matches_the_brute_force_loop_over_offsets(period, m, beta) -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    y = torch.randn(3, 6, 5, generator=g, dtype=torch.float64)
    offsets = list(range(-3, 6))                        # the default: -(Tq - 1) ... Tm - 1
    ref = _kernel_by_loops(x.numpy(), y.numpy(), period, m, beta, offsets)
    got = tmk_offset_scores(x, y, period=period, frequencies=m, beta=beta)
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-10)
    np.testing.assert_allclose(temporal_match_kernel(x, y, period=period, frequencies=m, beta=beta).numpy(),
                               ref.max(axis=-1), atol=1e-10)
    chosen = tmk_offset_scores(x, y, period=period, frequencies=m, beta=beta, offsets=torch.tensor([2, -1]))
    np.testing.assert_allclose(chosen.numpy(), ref[..., [5, 2]], atol=1e-10)


def test_tmk_warns_when_the_period_lets_offsets_alias() -> None:
    """With P < Tq + Tm - 1, frame pairs P apart in time meet the same kernel value: the loop transcription
    gives offsets δ and δ + P the same score, and the package warns naming ``period``."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1, 4, 5, generator=g, dtype=torch.float64)
    y = torch.randn(2, 6, 5, generator=g, dtype=torch.float64)
    period, m, beta = 6, 3, 2.0                         # Tq + Tm - 1 = 9 > 6
    ref = _kernel_by_loops(x.numpy(), y.numpy(), period, m, beta, [-3, 3])
    np.testing.assert_allclose(ref[..., 0], ref[..., 1], atol=1e-12)         # δ = -3 and δ = -3 + P alias
    with pytest.warns(UserWarning, match=r"period=6 is shorter than Tq \+ Tm - 1 = 4 \+ 6 - 1 = 9"):
        got = tmk_offset_scores(x, y, period=period, frequencies=m, beta=beta, offsets=torch.tensor([-3, 3]))
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-10)
    with pytest.warns(UserWarning, match="offsets span 9 frames, not less than period=9"):
        tmk_offset_scores(x, y, period=9, frequencies=m, beta=beta, offsets=torch.tensor([-3, 6]))
    y_valid = torch.zeros(2, 6, dtype=torch.bool)
    y_valid[:, :2] = True                               # 4 + 2 - 1 = 5 frames up to the last valid one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tmk_offset_scores(x, y, period=9, frequencies=m, beta=beta)          # P = Tq + Tm - 1: no wrap
        tmk_offset_scores(x, y, y_valid=y_valid, period=5, frequencies=m, beta=beta,
                          offsets=torch.arange(-3, 2))
    with pytest.warns(UserWarning, match="period=4"):
        tmk_offset_scores(x, y, y_valid=y_valid, period=4, frequencies=m, beta=beta, offsets=torch.arange(-3, 1))


def test_tmk_masks_padding_and_is_bounded() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    y = torch.randn(3, 7, 4, generator=g, dtype=torch.float64)
    y_valid = torch.ones(3, 7, dtype=torch.bool)
    y_valid[:, 5:] = False
    padded = y.clone()
    padded[:, 5:] = 100.0                               # garbage in the padding
    masked = tmk_offset_scores(x, padded, y_valid=y_valid, period=16, frequencies=4, beta=2.0,
                               offsets=torch.arange(-4, 5))
    plain = tmk_offset_scores(x, y[:, :5], period=16, frequencies=4, beta=2.0, offsets=torch.arange(-4, 5))
    np.testing.assert_allclose(masked.numpy(), plain.numpy(), atol=1e-12)
    assert masked.abs().max() <= 1 + 1e-12             # a cosine in the kernel's feature space
    self_score = temporal_match_kernel(x, x, period=16, frequencies=4, beta=2.0)
    np.testing.assert_allclose(self_score.diagonal().numpy(), 1.0, atol=1e-12)


def test_tmk_weights_and_bad_input() -> None:
    a = tmk_weights(40, 5.0)
    u = np.linspace(-3, 3, 13)
    kappa = sum(a[k].item() * np.cos(2 * math.pi * k * u / 16) for k in range(41))
    np.testing.assert_allclose(kappa, (np.exp(5 * np.cos(2 * np.pi * u / 16)) - np.exp(-5)) / (2 * np.sinh(5)),
                               atol=1e-12)                 # the von Mises kernel itself (Eq. 2)
    np.testing.assert_allclose(tmk_weights(6, 600.0).numpy()[1:] / tmk_weights(6, 600.0).numpy()[1],
                               [scipy.special.ive(k, 600.0) / scipy.special.ive(1, 600.0) for k in range(1, 7)])
    x = torch.randn(2, 4, 5)
    with pytest.raises(ValueError, match="same descriptor size"):
        temporal_match_kernel(x, torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match="y_valid must be bool"):
        temporal_match_kernel(x, x, y_valid=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="period must be"):
        temporal_match_kernel(x, x, period=1)
    with pytest.raises(ValueError, match="frequencies must be"):
        tmk_weights(-1, 1.0)
    with pytest.raises(ValueError, match="x must have 3"):
        temporal_match_kernel(torch.randn(4, 5), x)
