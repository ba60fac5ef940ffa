"""The temporal match kernel (TMK; Poullot et al., ACM MM 2015): a training-free video similarity with time.

Frame ``t`` of a query ``x`` (descriptors ``x_t ∈ R^D``) should match frame ``t + δ`` of a target ``y`` for
one unknown offset ``δ``. TMK scores every offset at once with a periodic kernel ``κ`` on time differences:

    K(x, y; δ) = Σ_t Σ_t' ⟨x_t, y_t'⟩ κ(t' - t - δ),      κ(u) = Σ_{k=0}^{m} a_k cos(ω_k u),  ω_k = 2πk / P   (1)

with period ``P`` (longer than any offset searched) and the Fourier coefficients of the normalised von Mises
kernel ``κ_β(u) = (exp(β cos ω_1 u) - e^{-β}) / (2 sinh β)`` truncated to ``m`` frequencies:

    a_0 = (I_0(β) - e^{-β}) / (2 sinh β),   a_k = I_k(β) / sinh β   (k ≥ 1; I_k the modified Bessel function) (2)

The double sum factorises through the explicit feature map ``X_k = Σ_t x_t e^{i ω_k t}`` (``[D]`` complex per
frequency): ``K(x, y; δ) = Σ_k a_k Re(e^{-i ω_k δ} ⟨X̄_k, Y_k⟩)``, one ``[m + 1, D]`` feature per video and one
``O(m D)`` product per pair, whatever the offset. The score is the normalised kernel at the best offset,

    TMK(x, y) = max_δ K(x, y; δ) / sqrt(K(x, x; 0) K(y, y; 0))  ∈ [-1, 1]                                   (3)

(a cosine in the kernel's feature space, where a shift by ``δ`` is a rotation of every frequency). One period
is used here; the paper sums several for long videos. HAP-VR and TCA list TMK among their baselines.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

from hapref.validation import check_float_tensor


def tmk_weights(frequencies: int, beta: float) -> Tensor:
    """The ``m + 1`` Fourier coefficients ``a_0 … a_m`` of the von Mises kernel (Eq. 2), float64 ``[m + 1]``.

    Args:
        frequencies: ``m >= 0``, the frequencies kept (``a_0`` is always included).
        beta: ``β > 0``, the kernel's concentration (larger: a sharper peak at ``u = 0``, more frequencies needed).

    Examples:
        >>> a = tmk_weights(8, 4.0)
        >>> a.shape, round(a.sum().item(), 3)          # κ(0) = Σ a_k ≈ 1 when m is large enough for β
        (torch.Size([9]), 1.0)
        >>> bool(tmk_weights(4, 1e4).isfinite().all())   # computed with e^{-β}-scaled Bessel functions
        True
        >>> tmk_weights(4, 0.0)
        Traceback (most recent call last):
        ...
        ValueError: beta must be > 0, got 0.0
    """
    from scipy.special import ive

    if not isinstance(frequencies, int) or frequencies < 0:
        raise ValueError(f"frequencies must be an int >= 0, got {frequencies!r}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    # e^{-β} I_k(β) (scipy's ive) and e^{-β} sinh β = (1 - e^{-2β}) / 2: finite for any β
    scaled = torch.tensor([float(ive(k, beta)) for k in range(frequencies + 1)], dtype=torch.float64)
    weights = 2 * scaled / -math.expm1(-2 * beta)
    weights[0] = (scaled[0] - math.exp(-2 * beta)) / -math.expm1(-2 * beta)
    return weights


def _features(x: Tensor, valid: Tensor | None, omega: Tensor) -> Tensor:
    """``X_k = Σ_t x_t e^{i ω_k t}`` for ``x [N, T, D]``: complex ``[N, m + 1, D]`` (invalid frames weigh 0)."""
    t = torch.arange(x.shape[1], dtype=omega.dtype, device=x.device)
    phase = torch.polar(torch.ones_like(omega[:, None] * t), omega[:, None] * t)         # [K, T]
    if valid is not None:
        x = x * valid.unsqueeze(-1).to(x.dtype)
    return torch.einsum("kt,ntd->nkd", phase.to(torch.complex128), x.to(torch.complex128))


def _extent(x: Tensor, valid: Tensor | None) -> int:
    """Frames up to the last valid one, over the batch (``T`` without a mask)."""
    if valid is None or not valid.any():
        return x.shape[1]
    return int(valid.any(dim=0).nonzero().max()) + 1


def _warn_if_aliased(period: int, tq: int, tm: int, offsets: Tensor) -> None:
    """κ has period ``P``: frame pairs ``P`` apart in time, and offsets ``P`` apart, score alike (Eq. 1)."""
    if tq + tm - 1 > period:
        warnings.warn(f"period={period} is shorter than Tq + Tm - 1 = {tq} + {tm} - 1 = {tq + tm - 1} frames: "
                      f"time differences {period} frames apart fall on the same kernel value, so offsets alias "
                      f"(wrap around); choose period >= {tq + tm - 1}", UserWarning, stacklevel=3)
    elif float(offsets.max() - offsets.min()) >= period:
        warnings.warn(f"offsets span {float(offsets.max() - offsets.min()):g} frames, not less than period={period}"
                      ": offsets a period apart score alike (they alias); choose a longer period",
                      UserWarning, stacklevel=3)


def tmk_offset_scores(x: Tensor, y: Tensor, x_valid: Tensor | None = None, y_valid: Tensor | None = None,
                      period: int = 64, frequencies: int = 16, beta: float = 8.0,
                      offsets: Tensor | None = None) -> Tensor:
    """Normalised TMK scores ``[Q, M, P]`` of every query × target × offset (Eq. 1, divided as in Eq. 3).

    Args:
        x: query frame descriptors ``[Q, Tq, D]`` (float).
        y: target frame descriptors ``[M, Tm, D]``.
        x_valid, y_valid: optional bool ``[Q, Tq]`` / ``[M, Tm]`` (False = padding, weight 0).
        period: ``P`` in frames, > 1; at least ``Tq + Tm - 1`` (the frames up to the last valid one) so that
            time differences, and the offsets searched, do not wrap around: a shorter one (or offsets spanning
            ``P`` or more) warns, since offsets ``P`` apart then score alike.
        frequencies, beta: ``m`` and ``β`` of :func:`tmk_weights`.
        offsets: the offsets ``δ`` searched, ``[P]`` (default: every integer in ``[-(Tq - 1), Tm - 1]``).

    Returns:
        float ``[Q, M, P]`` in ``x``'s dtype (computed in float64 / complex128).

    Examples:
        >>> x = torch.nn.functional.normalize(torch.randn(1, 6, 8), dim=-1)
        >>> y = torch.cat([torch.randn(1, 2, 8), x], dim=1)                 # x shifted by 2 frames
        >>> scores = tmk_offset_scores(x, y, period=32, frequencies=12, beta=16.0)
        >>> scores.shape, int(scores[0, 0].argmax()) - 5                    # offsets run from -(6 - 1)
        (torch.Size([1, 1, 13]), 2)
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = tmk_offset_scores(x, y, period=8)                            # 6 + 8 - 1 = 13 > 8
        >>> str(caught[0].message)[:60]
        'period=8 is shorter than Tq + Tm - 1 = 6 + 8 - 1 = 13 frames'
    """
    x = check_float_tensor(x, "x", ndim=3)
    y = check_float_tensor(y, "y", ndim=3)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x and y must have the same descriptor size, got {tuple(x.shape)} and {tuple(y.shape)}")
    for name, v, ref in (("x_valid", x_valid, x), ("y_valid", y_valid, y)):
        if v is not None and (v.dtype != torch.bool or v.shape != ref.shape[:2]):
            raise ValueError(f"{name} must be bool {tuple(ref.shape[:2])}, got {v.dtype} {tuple(v.shape)}")
    if not isinstance(period, int) or period < 2:
        raise ValueError(f"period must be an int >= 2, got {period!r}")
    weights = tmk_weights(frequencies, beta).to(x.device)
    omega = 2 * math.pi * torch.arange(frequencies + 1, dtype=torch.float64, device=x.device) / period
    if offsets is None:
        offsets = torch.arange(-(x.shape[1] - 1), y.shape[1], device=x.device)
    offsets = torch.as_tensor(offsets, device=x.device).to(torch.float64)
    if offsets.ndim != 1 or offsets.numel() == 0:
        raise ValueError(f"offsets must be a non-empty 1-d tensor, got shape {tuple(offsets.shape)}")
    _warn_if_aliased(period, _extent(x, x_valid), _extent(y, y_valid), offsets)
    fx, fy = _features(x, x_valid, omega), _features(y, y_valid, omega)              # [Q, K, D], [M, K, D]
    cross = torch.einsum("qkd,mkd->qmk", fx.conj(), fy)                               # ⟨X̄_k, Y_k⟩
    shift = torch.polar(weights[None].expand(len(offsets), -1), -offsets[:, None] * omega)   # a_k e^{-iω_k δ}
    kernel = torch.einsum("qmk,pk->qmp", cross, shift).real
    self_x = (weights * fx.abs().square().sum(-1)).sum(-1)                            # K(x, x; 0) [Q]
    self_y = (weights * fy.abs().square().sum(-1)).sum(-1)
    norm = (self_x[:, None] * self_y[None]).sqrt().clamp_min(1e-300)
    return (kernel / norm[..., None]).to(x.dtype)


def temporal_match_kernel(x: Tensor, y: Tensor, x_valid: Tensor | None = None, y_valid: Tensor | None = None,
                          period: int = 64, frequencies: int = 16, beta: float = 8.0,
                          offsets: Tensor | None = None) -> Tensor:
    """TMK video similarity ``[Q, M]``: the normalised kernel at the best offset (Eq. 3); training-free.

    Arguments as :func:`tmk_offset_scores` (``x [Q, Tq, D]``, ``y [M, Tm, D]``, optional bool masks).

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> x = torch.nn.functional.normalize(torch.randn(2, 8, 16, generator=g), dim=-1)
        >>> y = torch.cat([x[:, 3:], torch.randn(2, 3, 16, generator=g)], dim=1)    # copies, 3 frames later
        >>> s = temporal_match_kernel(x, y, period=32, frequencies=12, beta=16.0)
        >>> s.shape, bool(s.diagonal().min() > s.fill_diagonal_(0).max())           # copies score highest
        (torch.Size([2, 2]), True)
    """
    return tmk_offset_scores(x, y, x_valid, y_valid, period, frequencies, beta, offsets).amax(dim=-1)
