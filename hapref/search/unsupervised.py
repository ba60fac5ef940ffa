"""Classic unsupervised hashing of any feature: iterative quantisation (ITQ) and spectral hashing (SH).

Both fit on training rows only (no labels) and encode any rows with the same ``(train_features, features,
bits)`` call as :func:`hapref.search.pca_sign_codes`; both start from the same PCA (the centre ``μ`` and the top
principal directions of the training rows, each oriented so that its largest-magnitude entry is positive) and
return float64 ±1 codes, ties to +1.

* **ITQ** (Gong & Lazebnik, CVPR 2011) rotates the PCA projection ``V = (X − μ) W`` so that it lies close to
  the vertices of the hypercube: it minimises the quantisation loss ``‖B − V R‖²_F`` over codes
  ``B ∈ {±1}^{N×K}`` and orthogonal ``R [K, K]`` by alternating ``B = sign(V R)`` and the orthogonal Procrustes
  solution ``R = U Ŝᵀ`` of ``Vᵀ B = U Σ Ŝᵀ`` (SVD), from a seeded random rotation, for a fixed number of
  iterations. Codes: ``sign((x − μ) W R)``.
* **SH** (Weiss, Torralba & Fergus, NeurIPS 2008) assumes the PCA coordinates are uniform on a box
  ``[a_j, b_j]`` (the training range of coordinate ``j``); the Laplacian eigenfunctions of a uniform
  distribution on an interval are ``Φ_jk(v) = sin(π/2 + kπ (v − a_j) / (b_j − a_j))`` with eigenvalue growing
  with ``ω_jk = kπ / (b_j − a_j)``. SH keeps the ``K`` single-coordinate eigenfunctions of smallest
  ``ω_jk`` (``k ≥ 1``; ties in order of coordinate, then ``k``) and thresholds each at 0.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from hapref.search.codes import _check_bits, _mean_features, _pca, _signs

__all__ = ["itq_codes", "itq_rotation", "spectral_hashing_codes", "spectral_modes"]


def _pair(train_features: object, features: object) -> tuple[Tensor, Tensor]:
    train = _mean_features(train_features, "train_features")
    x = _mean_features(features, "features")
    if x.shape[1] != train.shape[1]:
        raise ValueError(f"features have {x.shape[1]} dimensions, train_features {train.shape[1]}")
    return train, x


def _check_count(value: object, name: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def itq_rotation(projected: object, iterations: int = 50, seed: int = 0) -> Tensor:
    """The ITQ rotation ``R [K, K]`` (float64, orthogonal) of PCA-projected training rows ``V [N, K]``.

    Minimises ``‖B − V R‖²_F`` (Gong & Lazebnik 2011, Eq. 2) by ``iterations`` rounds of ``B = sign(V R)``
    (ties to +1) then ``R = U Ŝᵀ`` with ``U Σ Ŝᵀ = Vᵀ B``, which maximises ``tr(Bᵀ V R)`` over orthogonal
    ``R``. The start is the Q factor of a ``K × K`` standard normal matrix drawn in float64 from a generator
    seeded with ``seed`` (the same start on every machine). Each round cannot increase the loss.

    Args:
        projected: ``[N, K]`` float tensor or numpy array (centred PCA coordinates of the training rows).
        iterations: rounds of the alternation (Gong & Lazebnik use 50), ``>= 0``.
        seed: seed of the initial random rotation.

    Returns:
        ``[K, K]`` float64 orthogonal matrix.

    Examples:
        >>> v = torch.tensor([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]]) * 0.5
        >>> r = itq_rotation(v, iterations=20)
        >>> torch.allclose(r @ r.T, torch.eye(2, dtype=torch.float64))
        True
        >>> (v.double() @ r).abs().round(decimals=6).unique().tolist()   # already on the hypercube's vertices
        [0.5]
    """
    v = _mean_features(projected, "projected")
    _check_count(iterations, "iterations")
    bits = v.shape[1]
    generator = torch.Generator().manual_seed(seed)
    rotation, _ = torch.linalg.qr(torch.randn(bits, bits, generator=generator, dtype=torch.float64))
    for _ in range(iterations):
        codes = _signs(v @ rotation)
        u, _, sh = torch.linalg.svd(v.T @ codes)
        rotation = u @ sh
    return rotation


def itq_codes(train_features: object, features: object, bits: int, iterations: int = 50, seed: int = 0) -> Tensor:
    """Iterative quantisation (ITQ, Gong & Lazebnik 2011): ``sign((x − μ) W R)``, fitted on training rows.

    ``μ`` and ``W [F, bits]`` are the PCA of ``train_features`` (as in :func:`hapref.search.pca_sign_codes`);
    ``R`` is :func:`itq_rotation` of the projected training rows. ``R`` depends on ``seed`` only through the
    start of the alternation. Computed in float64.

    Args:
        train_features: ``[N_train, F]`` float tensor or numpy array the codes are fitted on
            (``bits <= min(N_train, F)``).
        features: ``[N, F]`` rows to encode (database or queries).
        bits: code length K.
        iterations: ITQ rounds (default 50, the paper's).
        seed: seed of the initial rotation.

    Returns:
        ``[N, bits]`` float64 tensor of ±1 codes.

    Examples:
        >>> gen = torch.Generator().manual_seed(0)
        >>> train = torch.randn(100, 6, generator=gen, dtype=torch.float64) * torch.tensor([4., 3, 2, 1, .5, .2])
        >>> codes = itq_codes(train, train[:3], 4)
        >>> codes.shape, codes.dtype, codes.unique().tolist()
        (torch.Size([3, 4]), torch.float64, [-1.0, 1.0])
        >>> torch.equal(codes, itq_codes(train, train[:3], 4))     # seeded: the same codes every call
        True
    """
    train, x = _pair(train_features, features)
    _check_bits(bits, min(train.shape))
    centre, directions = _pca(train, bits)
    rotation = itq_rotation((train - centre) @ directions, iterations, seed)
    return _signs((x - centre) @ directions @ rotation)


def spectral_modes(low: object, high: object, bits: int) -> tuple[Tensor, Tensor]:
    """The ``bits`` smallest analytic eigenfunctions of SH on the box ``∏_j [low_j, high_j]``.

    Candidate ``(j, k)`` (coordinate ``j``, mode ``k = 1 … bits``) has frequency ``ω_jk = kπ / (high_j −
    low_j)``; its eigenvalue ``1 − exp(−ε² ω_jk² / 2)`` grows with ``ω_jk``, so the smallest eigenvalues are
    the smallest frequencies. Ties go to the lower coordinate, then the lower mode.

    Args:
        low, high: ``[P]`` float tensors, the box (``high > low`` everywhere).
        bits: number of eigenfunctions.

    Returns:
        ``(coordinate [bits] int64, omega [bits] float64)``, in increasing ``ω``.

    Examples:
        >>> coordinate, omega = spectral_modes(torch.zeros(2), torch.tensor([4.0, 1.0]), 3)
        >>> coordinate.tolist(), (omega / math.pi).tolist()    # the wide coordinate first, twice
        ([0, 0, 0], [0.25, 0.5, 0.75])
    """
    low = _mean_features(torch.as_tensor(low).reshape(1, -1), "low")[0]
    high = _mean_features(torch.as_tensor(high).reshape(1, -1), "high")[0]
    _check_bits(bits)
    if low.shape != high.shape or not (high > low).all():
        raise ValueError("high must exceed low in every coordinate (a training projection with no spread: "
                         "use fewer bits or more varied training rows)")
    modes = torch.arange(1, bits + 1, dtype=torch.float64)
    omega = (modes[None, :] * math.pi / (high - low)[:, None]).flatten()     # row-major: coordinate, then mode
    order = torch.sort(omega, stable=True).indices[:bits]
    return order // bits, omega[order]


def spectral_hashing_codes(train_features: object, features: object, bits: int) -> Tensor:
    """Spectral hashing (SH, Weiss et al. 2008): ``sign(sin(π/2 + ω_jk (v_j − a_j)))`` on PCA coordinates ``v``.

    ``v = (x − μ) W`` with the PCA of ``train_features`` to ``P = min(bits, N_train, F)`` coordinates; ``a_j``
    and ``b_j`` are the smallest and largest training value of coordinate ``j``; the ``bits`` pairs ``(j, k)`` of
    smallest ``ω_jk = kπ / (b_j − a_j)`` come from :func:`spectral_modes`. A query outside the training box
    follows the same periodic function. Ties (a value of exactly 0) go to +1. Computed in float64.

    Args:
        train_features: ``[N_train, F]`` float tensor or numpy array the codes are fitted on.
        features: ``[N, F]`` rows to encode.
        bits: code length K.

    Returns:
        ``[N, bits]`` float64 tensor of ±1 codes.

    Examples:
        >>> train = torch.tensor([[-2.0, 0.1], [2.0, -0.1], [0.0, 0.2], [1.0, -0.2]])
        >>> spectral_hashing_codes(train, torch.tensor([[-1.5, 0.0], [1.5, 0.0]]), 2)  # two modes on axis 1
        tensor([[ 1.,  1.],
                [-1.,  1.]], dtype=torch.float64)
    """
    train, x = _pair(train_features, features)
    _check_bits(bits)
    centre, directions = _pca(train, min(bits, *train.shape))
    projected = (train - centre) @ directions
    low, high = projected.min(0).values, projected.max(0).values
    coordinate, omega = spectral_modes(low, high, bits)
    v = (x - centre) @ directions
    return _signs(torch.sin(math.pi / 2 + omega * (v[:, coordinate] - low[coordinate])))
