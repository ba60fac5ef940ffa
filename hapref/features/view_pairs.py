"""Closed-form projections fitted on unlabeled views of clips: no labels, no gradients (chapter 6).

Contrastive training (TCA §3.4) learns from pairs of views of one clip that a similarity should ignore what
differs between them. When that difference lives in a linear subspace, a second-moment estimate answers the
same question in closed form. Let ``m_cv ∈ R^D`` be the descriptor of view ``v`` of clip ``c`` (the mean of its
frames when views are frame sequences), ``m̄_c`` the mean over the clip's ``V`` views, and

    S_w = 1 / (C (V - 1)) · Σ_c Σ_v (m_cv - m̄_c)(m_cv - m̄_c)ᵀ                  (within-clip covariance)

the covariance of the differences between views of one clip (half the covariance of pairwise differences
``m_cv - m_cv'``). With the eigendecomposition ``S_w = U diag(λ) Uᵀ`` (λ ascending):

* :class:`ViewDifferenceProjection` projects out the ``rank`` directions of largest ``λ`` (the principal
  directions of the view differences): ``x -> (x - μ) U_keep`` with ``U_keep`` the other ``D - rank``
  eigenvectors, an orthonormal basis of the complement, so cosines equal those of ``(I - U_r U_rᵀ)(x - μ)``.
* :class:`WithinClipWhitening` whitens by ``S_w``: ``x -> (x - μ) U diag(λ + ε)^(-1/2)``; every direction is
  divided by how much views of one clip disagree along it, with nothing to choose (the within-class whitening
  of linear discriminant analysis, fitted on view pairs instead of labels).

Both are :class:`~hapref.features.PCAWhitening` modules (``mean``, ``projection``, ``eigenvalues`` buffers;
``whiten``, L2-normalising ``forward``, ``state_dict`` / ``from_state_dict``), so they replace PCA whitening
anywhere; ``eigenvalues`` holds the within-clip variances of the kept directions. ``μ`` is the mean of every
frame of every view, as PCA whitening centres.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.features.whitening import PCAWhitening
from hapref.validation import check_float_tensor


def within_clip_covariance(views: Tensor) -> tuple[Tensor, Tensor]:
    """``(μ [D], S_w [D, D])`` of unlabeled views ``[C, V, ..., D]``, in float64 (see the module docstring).

    ``views[c, v]`` is view ``v`` of clip ``c``: one descriptor ``[D]`` or frames ``[T, D]`` (any axes between
    ``V`` and ``D`` are averaged into the view's descriptor ``m_cv``). ``μ`` is the mean of every descriptor
    (every frame); ``S_w = Σ_c Σ_v (m_cv - m̄_c)(m_cv - m̄_c)ᵀ / (C (V - 1))``.

    Args:
        views: float ``[C, V, ..., D]`` with ``C >= 1`` clips and ``V >= 2`` views each.

    Examples:
        >>> views = torch.tensor([[[0.0, 1.0], [2.0, 1.0]], [[1.0, 2.0], [1.0, 6.0]]])   # 2 clips x 2 views
        >>> mean, cov = within_clip_covariance(views)
        >>> mean.tolist(), cov.tolist()          # views differ along axis 0 in clip 0, axis 1 in clip 1
        ([1.0, 2.5], [[1.0, 0.0], [0.0, 4.0]])
    """
    views = check_float_tensor(views, "views", ndim=None)
    if views.ndim < 3 or views.shape[0] < 1 or views.shape[1] < 2:
        raise ValueError(f"views must be [C, V, ..., D] with C >= 1 clips and V >= 2 views, got shape "
                         f"{tuple(views.shape)}")
    data = views.double()
    mean = data.reshape(-1, data.shape[-1]).mean(dim=0)
    per_view = data.flatten(2, -2).mean(dim=2) if data.ndim > 3 else data          # [C, V, D]
    deviations = (per_view - per_view.mean(dim=1, keepdim=True)).flatten(0, 1)    # [C V, D]
    c, v = per_view.shape[:2]
    return mean, deviations.T @ deviations / (c * (v - 1))


class ViewDifferenceProjection(PCAWhitening):
    """Project out the ``rank`` principal directions of the differences between views of one clip.

    ``x -> normalize((x - μ) U_keep)`` where ``U_keep [D, D - rank]`` are the eigenvectors of the within-clip
    covariance ``S_w`` (:func:`within_clip_covariance`) outside its ``rank`` largest eigenvalues; no axis is
    rescaled, so cosines are those of ``(I - U_r U_rᵀ)(x - μ)``. ``rank`` is a setting: choose it on a
    validation instance (chapter 6 does), never on the instance reported.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> clips = torch.randn(200, 1, 6, generator=g, dtype=torch.float64)
        >>> edits = torch.zeros(200, 3, 6, dtype=torch.float64)
        >>> edits[..., :2] = 3 * torch.randn(200, 3, 2, generator=g, dtype=torch.float64)   # views differ in 0, 1
        >>> proj = ViewDifferenceProjection.fit(clips + edits, rank=2)
        >>> proj.out_dim, proj.projection[:2].abs().max().item() < 1e-12      # axes 0 and 1 are gone
        (4, True)
    """

    @classmethod
    def fit(cls, views: Tensor, rank: int = 1, eps: float = 1e-9) -> ViewDifferenceProjection:
        """Fit on unlabeled views ``[C, V, ..., D]``; drop the ``rank`` directions in which views differ most.

        Args:
            views: float ``[C, V, ..., D]`` (:func:`within_clip_covariance`); buffers come back in its dtype.
            rank: directions removed, in ``[0, D - 1]`` (0 keeps every direction: a rotation, cosines unchanged).
            eps: floor on the stored eigenvalues (they only describe the kept directions).

        Examples:
            >>> proj = ViewDifferenceProjection.fit(torch.randn(20, 2, 5, 8), rank=3)
            >>> proj(torch.randn(4, 5, 8)).shape
            torch.Size([4, 5, 5])
            >>> ViewDifferenceProjection.fit(torch.randn(20, 2, 8), rank=8)
            Traceback (most recent call last):
            ...
            ValueError: rank must be in [0, D - 1] = [0, 7], got 8
        """
        mean, cov = within_clip_covariance(views)
        d = cov.shape[0]
        if not 0 <= rank <= d - 1:
            raise ValueError(f"rank must be in [0, D - 1] = [0, {d - 1}], got {rank}")
        eigenvalues, vectors = torch.linalg.eigh(cov)                    # ascending
        keep = d - rank
        dtype = views.dtype
        return cls(mean.to(dtype), vectors[:, :keep].to(dtype), eigenvalues[:keep].clamp_min(eps).to(dtype))


class WithinClipWhitening(PCAWhitening):
    """Whiten by the within-clip covariance of unlabeled views: ``x -> normalize((x - μ) U diag(λ + ε)^(-1/2))``.

    ``S_w = U diag(λ) Uᵀ`` (:func:`within_clip_covariance`). Directions in which two views of one clip disagree
    are shrunk by their spread, directions in which they agree are stretched; nothing is chosen but the floor
    ``eps`` (relative to the mean eigenvalue).

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> views = torch.randn(300, 1, 4, generator=g, dtype=torch.float64) + torch.randn(
        ...     300, 2, 4, generator=g, dtype=torch.float64) * torch.tensor([3.0, 1.0, 1.0, 0.1])
        >>> white = WithinClipWhitening.fit(views)
        >>> mean, cov = within_clip_covariance(white.whiten(views))
        >>> torch.allclose(cov, torch.eye(4, dtype=torch.float64), atol=1e-3)   # views now differ equally
        True
    """

    @classmethod
    def fit(cls, views: Tensor, dim: int | None = None, eps: float = 1e-6) -> WithinClipWhitening:
        """Fit on unlabeled views ``[C, V, ..., D]``; keep the ``dim`` directions where views agree most.

        ``projection = U_d diag(λ_d + ε λ̄)^(-1/2)`` with ``U_d`` the eigenvectors of the ``dim`` smallest
        within-clip eigenvalues ``λ_d`` (default: all ``D``) and ``λ̄`` their mean over all ``D`` directions.

        Args:
            views: float ``[C, V, ..., D]``; buffers come back in its dtype.
            dim: directions kept, in ``[1, D]`` (default ``D``: a full whitening, nothing to choose).
            eps: regulariser relative to the mean eigenvalue, > 0 (keeps directions views never differ in finite).

        Raises:
            ValueError: ``views`` whose views are identical within every clip (``S_w = 0`` up to float64
                rounding: the relative floor is 0 too, and every direction would be divided by 0).

        Examples:
            >>> white = WithinClipWhitening.fit(torch.randn(30, 3, 8))
            >>> white.out_dim, bool((white.eigenvalues[:-1] <= white.eigenvalues[1:]).all())   # smallest first
            (8, True)
            >>> WithinClipWhitening.fit(torch.randn(30, 3, 8), eps=0.0)
            Traceback (most recent call last):
            ...
            ValueError: eps must be > 0, got 0.0
            >>> same = torch.randn(30, 1, 8).expand(30, 3, 8)                 # three identical views per clip
            >>> WithinClipWhitening.fit(same)                                   # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ValueError: views: every clip's views are identical (zero within-clip covariance), ...
        """
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        mean, cov = within_clip_covariance(views)
        d = cov.shape[0]
        dim = d if dim is None else dim
        if not 1 <= dim <= d:
            raise ValueError(f"dim must be in [1, D] = [1, {d}], got {dim}")
        eigenvalues, vectors = torch.linalg.eigh(cov)                    # ascending: views agree most first
        eigenvalues = eigenvalues.clamp_min(0)
        # λ̄ at the rounding level of float64 (1000 ulps of the descriptors' size): S_w = 0, and the relative
        # floor eps λ̄ with it; every direction would be divided by (nearly) 0
        rounding = (1000 * torch.finfo(torch.float64).eps) ** 2 * views.double().square().mean()
        if not eigenvalues.mean() > rounding:
            raise ValueError("views: every clip's views are identical (zero within-clip covariance), so there "
                             "is nothing to whiten by; give views that differ, or use PCAWhitening")
        eigenvalues = eigenvalues + eps * eigenvalues.mean()
        projection = vectors[:, :dim] / eigenvalues[:dim].sqrt()
        dtype = views.dtype
        return cls(mean.to(dtype), projection.to(dtype), eigenvalues[:dim].to(dtype))
