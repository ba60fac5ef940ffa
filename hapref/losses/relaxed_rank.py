"""AP written with ranks made of pairwise steps, the form shared by Smooth-AP and QuadLinear-AP."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from hapref.losses._base import gather_positives

Step = Callable[[Tensor], Tensor]


def relaxed_rank_ap(scores: Tensor, positive: Tensor, negative: Tensor, pos_step: Step,
                    neg_step: Step, p: float = 1.0) -> Tensor:
    """Per-query AP ``[Q]`` with steps replaced by surrogates, HAP-VR Eq. 8 and Eq. 11.

    For a positive j of query q and d_jk = s_qk − s_qj::

        rank⁺(j) = 1 + p · Σ_{k ∈ P, k ≠ j} pos_step(d_jk)
        rank(j)  = rank⁺(j) + Σ_{k ∈ N} neg_step(d_jk)
        AP_q     = mean_{j ∈ P} rank⁺(j) / rank(j)

    With ``pos_step = neg_step = H`` and ``p = 1`` this is exact AP (Eq. 6). The d_jk of all positives j
    of a chunk are built at once (``[Q, P_max, M]``) and the sums over k are batched matrix products.
    """
    pos_scores, slot = gather_positives(scores, positive)
    d = scores.unsqueeze(1) - pos_scores.unsqueeze(2)  # d[q, j, k] = s_qk - s_qj, j over positives
    pos_w, neg_w = positive.to(scores.dtype), negative.to(scores.dtype)
    if pos_step is neg_step:
        pos_sum, neg_sum = (pos_step(d) @ torch.stack((pos_w, neg_w), dim=-1)).unbind(-1)
    else:
        pos_sum = (pos_step(d) @ pos_w.unsqueeze(-1)).squeeze(-1)
        neg_sum = (neg_step(d) @ neg_w.unsqueeze(-1)).squeeze(-1)
    pos_sum = pos_sum - pos_step(scores.new_zeros(()))  # drop the k = j term
    rank_pos = 1 + p * pos_sum
    ratio = rank_pos / (rank_pos + neg_sum)
    return (ratio * slot).sum(dim=1) / slot.sum(dim=1)
