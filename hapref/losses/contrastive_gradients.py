"""Gradient analysis of the softmax-type contrastive losses (TCA §3.5, Eq. 5–7).

Both TCA losses are a cross-entropy over logits ``z_0 = a_p(s_p)`` and ``z_j = a_n(s_n^j)``, so with
``σ = softmax(z)``: ``∂L/∂s_p = −(1 − σ_0) a_p'(s_p)`` and ``∂L/∂s_n^j = σ_j a_n'(s_n^j)``. For InfoNCE
``a(s) = s/τ``; for Circle (α detached) ``a_p' = γα_p`` and ``a_n' = γα_n^j``. Through the L2
normalisation of the anchor ``z_a = w_a/‖w_a‖`` (Eq. 6), negative j pushes ``w_a`` along
``(I − z_a z_aᵀ) z_n^j / ‖w_a‖``, whose length is ``√(1 − s_j²)/‖w_a‖`` (Eq. 7): easy negatives
(s ≈ −1) contribute almost nothing, hard ones (s ≈ 0 and above) the most.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref.losses.memory_bank import MemoryBankCircle, MemoryBankInfoNCE
from hapref.utils import at_least_float32
from hapref.validation import check_float_tensor


def similarity_gradients(loss: nn.Module, sims: Tensor) -> tuple[Tensor, Tensor]:
    """Analytic ``(∂L/∂s_p [B], ∂L/∂s_n [B, M])`` of a loss over ``sims [B, 1 + M]`` (TCA Eq. 5 generalised).

    The loss is the mean over rows (``reduction="mean"``) or their sum (``"sum"``). ``sims`` are finite floats;
    half precision is computed in, and returned as, float32 (Circle's logits overflow float16 at ``|s|`` ≈ 1e4).

    Examples:
        >>> from hapref.losses import MemoryBankInfoNCE
        >>> sims = torch.tensor([[0.5, 0.2, -0.3]], requires_grad=True)
        >>> loss = MemoryBankInfoNCE(0.1)
        >>> g_pos, g_neg = similarity_gradients(loss, sims.detach())
        >>> loss(sims).backward()
        >>> torch.allclose(torch.cat([g_pos, g_neg[0]]), sims.grad[0])  # matches autograd
        True
    """
    sims = at_least_float32(check_float_tensor(sims, "sims", ndim=2, finite=True))
    if isinstance(loss, MemoryBankInfoNCE):
        slope = None
    elif isinstance(loss, MemoryBankCircle) and not loss.released:
        m = loss.margin
        slope = loss.scale * torch.cat([(1 + m - sims[:, :1]).clamp_min(0), (sims[:, 1:] + m).clamp_min(0)], dim=1)
    else:
        raise ValueError(f"loss must be MemoryBankInfoNCE or MemoryBankCircle (paper version), "
                         f"got {type(loss).__name__}")
    if loss.reduction == "none":
        raise ValueError("loss must reduce its rows (reduction 'mean' or 'sum'), got reduction='none'")
    if slope is None:
        slope = torch.full_like(sims, 1.0 / loss.temperature)
    sigma = torch.softmax(loss.logits(sims), dim=1)
    grads = torch.cat([-(1 - sigma[:, :1]), sigma[:, 1:]], dim=1) * slope
    if loss.reduction == "mean":
        grads = grads / sims.shape[0]
    return grads[:, 0], grads[:, 1:]


def anchor_gradient(loss: nn.Module, anchor: Tensor, positive: Tensor, negatives: Tensor) -> Tensor:
    """Analytic ``∂L/∂w_a [D]`` (TCA Eq. 6) for one unnormalised anchor ``w_a [D]``, a unit ``positive [D]``
    and unit ``negatives [M, D]``. The gradient through the normalisation is undefined at a zero anchor
    (``ValueError``); half precision is computed in, and returned as, float32.

    Examples:
        >>> from hapref.losses import MemoryBankInfoNCE
        >>> g = anchor_gradient(MemoryBankInfoNCE(0.1), torch.tensor([2.0, 0.0]), torch.tensor([0.0, 1.0]),
        ...                     torch.tensor([[1.0, 0.0]]))
        >>> g  # orthogonal to the anchor: the normalisation removes the radial part
        tensor([ 0.0000, -4.9998])
    """
    anchor = at_least_float32(check_float_tensor(anchor, "anchor", ndim=1, finite=True))
    positive = check_float_tensor(positive, "positive", ndim=1, finite=True).to(anchor.dtype)
    negatives = check_float_tensor(negatives, "negatives", ndim=2, finite=True).to(anchor.dtype)
    if positive.shape[0] != anchor.shape[0] or negatives.shape[1] != anchor.shape[0]:
        raise ValueError(f"positive must be [D={anchor.shape[0]}] and negatives [M, D={anchor.shape[0]}], got "
                         f"{tuple(positive.shape)} and {tuple(negatives.shape)}")
    norm = anchor.norm()
    if not norm > 0:
        raise ValueError("anchor must be a non-zero vector: the gradient through its L2 normalisation (Eq. 6) "
                         "is undefined at 0")
    z = anchor / norm
    keys = torch.cat([positive.unsqueeze(0), negatives])
    g_pos, g_neg = similarity_gradients(loss, (keys @ z).unsqueeze(0))
    grad_z = torch.cat([g_pos, g_neg[0]]) @ keys
    return (grad_z - z * (z @ grad_z)) / norm


def negative_weights(loss: nn.Module, s_neg: Tensor, s_pos: float = 0.5, background: int = 0,
                     s_background: float = 0.0) -> Tensor:
    """Length of each negative's push on the anchor, ``|∂L/∂s_n| · √(1 − s_n²)`` (TCA Eq. 7, up to 1/‖w_a‖).

    Each value of ``s_neg`` is one probe negative in its own row beside a positive at ``s_pos`` and
    ``background`` further negatives at ``s_background``; the B=1 gradient scale is used for every row.
    ``s_neg`` is a finite ``[R]`` float tensor; half precision is computed in, and returned as, float32.

    Examples:
        >>> from hapref.losses import MemoryBankInfoNCE
        >>> w = negative_weights(MemoryBankInfoNCE(0.07), torch.tensor([-1.0, 0.0, 0.5]))
        >>> w[0].item(), bool(w[2] > w[1] > 0)  # an opposite negative pushes nothing (Eq. 7)
        (0.0, True)
    """
    s_neg = at_least_float32(check_float_tensor(s_neg, "s_neg", ndim=1, finite=True))
    rows = s_neg.shape[0]
    sims = torch.cat([torch.full((rows, 1), s_pos, dtype=s_neg.dtype), s_neg.unsqueeze(1),
                      torch.full((rows, background), s_background, dtype=s_neg.dtype)], dim=1)
    _, g_neg = similarity_gradients(loss, sims)
    return g_neg[:, 0].abs() * rows * (1 - s_neg.square()).clamp_min(0).sqrt()
