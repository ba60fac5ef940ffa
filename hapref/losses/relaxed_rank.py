"""AP written with ranks made of pairwise steps, the form shared by Smooth-AP and QuadLinear-AP."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from hapref.losses._base import gather_positives
from hapref.losses.surrogates import StepSurrogate, negative_step_sum
from hapref.utils import at_least_float32, float32_compute

Step = Callable[[Tensor], Tensor]


@float32_compute
def relaxed_rank_ap(scores: Tensor, positive: Tensor, negative: Tensor, pos_step: Step,
                    neg_step: Step, p: float = 1.0) -> Tensor:
    """Per-query AP ``[Q]`` with steps replaced by surrogates, HAP-VR Eq. 8 and Eq. 11.

    For a positive j of query q and d_jk = s_qk − s_qj::

        rank⁺(j) = 1 + p · Σ_{k ∈ P, k ≠ j} pos_step(d_jk)
        rank(j)  = rank⁺(j) + Σ_{k ∈ N} neg_step(d_jk)
        AP_q     = mean_{j ∈ P} rank⁺(j) / rank(j)

    With ``pos_step = neg_step = H`` and ``p = 1`` this is exact AP (Eq. 6). Only positives j are
    ranked: the positive sums use a ``[Q, P_max, P_max]`` tensor, the negative sums a ``[Q, P_max, M]``
    one reduced by a batched matrix product (fused, forward and backward, when ``neg_step`` is a
    :class:`StepSurrogate`). Half-precision scores are computed in, and give, float32 (the negative sums
    overflow float16 at ``|s|`` ≈ 1e4).

    Examples:
        >>> from hapref.losses import heaviside, quad_linear
        >>> scores = torch.tensor([[0.9, 0.8, 0.1]])
        >>> pos, neg = torch.tensor([[True, False, True]]), torch.tensor([[False, True, False]])
        >>> relaxed_rank_ap(scores, pos, neg, heaviside, heaviside)  # exact AP (Eq. 6)
        tensor([0.8333])
        >>> relaxed_rank_ap(scores, pos, neg, heaviside, lambda d: quad_linear(d, 0.18))  # QuadLinear-AP (Eq. 11)
        tensor([0.5103])
    """
    scores = at_least_float32(scores)
    pos_scores, slot = gather_positives(scores, positive)
    slot_w = slot.to(scores.dtype)
    d_pos = pos_scores.unsqueeze(1) - pos_scores.unsqueeze(2)  # d[q, j, k] = s_qk - s_qj, j and k positive
    pos_sum = (pos_step(d_pos) * slot_w.unsqueeze(1)).sum(dim=2) - pos_step(scores.new_zeros(()))  # k != j
    negative_w = negative.to(scores.dtype)
    if isinstance(neg_step, StepSurrogate):
        neg_sum = negative_step_sum(scores, pos_scores, negative_w, neg_step)
    else:
        d_all = scores.unsqueeze(1) - pos_scores.unsqueeze(2)  # d[q, j, k] over all candidates k
        neg_sum = (neg_step(d_all) @ negative_w.unsqueeze(-1)).squeeze(-1)
    rank_pos = 1 + p * pos_sum
    ratio = rank_pos / (rank_pos + neg_sum)
    return (ratio * slot_w).sum(dim=1) / slot_w.sum(dim=1)
