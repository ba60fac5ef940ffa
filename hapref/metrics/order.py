"""Order-preservation metrics of the Radial loss paper: quadlet and triplet precision.

Radial loss paper, "Evaluation Metrics" (FgVR) (Radial loss paper, "Evaluation Metrics"): a quadlet (q, p, i, n) —
positive, intermediate, negative w.r.t. the query q — is correctly ranked when
``s(q,p) > s(q,i) > s(q,n)``; a triplet (q, p, n) when ``s(q,p) > s(q,n)``. Inequalities are
strict: a tie counts as a mistake. Inputs are similarities (higher = closer); for distances
pass their negatives (e.g. ``-squared_distance``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.validation import check_float_tensor


def check_similarities(**named: object) -> list[Tensor]:
    """Validate equally long, non-empty 1-D float tensors (or NumPy arrays) without NaN; the error names the culprit.

    Examples:
        >>> check_similarities(sim_qp=torch.ones(2), sim_qn=torch.ones(3))
        Traceback (most recent call last):
        ...
        ValueError: sim_qn must have shape (2,) (that of sim_qp), got (3,)
    """
    tensors = [check_float_tensor(x, name, 1) for name, x in named.items()]
    first_name, first = next(iter(named)), tensors[0]
    if first.numel() == 0:
        raise ValueError(f"{first_name} must not be empty")
    for name, x in zip(named, tensors):
        if x.shape != first.shape:
            raise ValueError(f"{name} must have shape {tuple(first.shape)} (that of {first_name}), got {tuple(x.shape)}")
    return [x.to(first.device) for x in tensors]


def quadlet_precision(sim_qp: Tensor, sim_qi: Tensor, sim_qn: Tensor) -> Tensor:
    """QP, Radial loss paper, "Evaluation Metrics": fraction of quadlets with s(q,p) > s(q,i) > s(q,n).

    Args:
        sim_qp, sim_qi, sim_qn: [T] similarities of each quadlet's query to its positive,
            intermediate and negative (negate distances).

    Returns:
        0-d float tensor in [0, 1] (the paper prints it in %). Ties count as wrongly ranked.

    Examples:
        >>> quadlet_precision(torch.tensor([0.9, 0.9]), torch.tensor([0.5, 0.95]), torch.tensor([0.1, 0.1]))
        tensor(0.5000)
    """
    sim_qp, sim_qi, sim_qn = check_similarities(sim_qp=sim_qp, sim_qi=sim_qi, sim_qn=sim_qn)
    dtype = torch.promote_types(sim_qp.dtype, torch.float32)
    return ((sim_qp > sim_qi) & (sim_qi > sim_qn)).to(dtype).mean()


def triplet_precision(sim_qp: Tensor, sim_qn: Tensor) -> Tensor:
    """TP, Radial loss paper, "Evaluation Metrics": fraction of triplets with s(q,p) > s(q,n).

    The paper expands every quadlet (q, p, i, n) into the triplets (q, p, n) and (q, i, n):
    ``triplet_precision(torch.cat([sim_qp, sim_qi]), torch.cat([sim_qn, sim_qn]))``.

    Returns:
        0-d float tensor in [0, 1]. Ties count as wrongly ranked.

    Examples:
        >>> triplet_precision(torch.tensor([0.9, 0.4, 0.5]), torch.tensor([0.1, 0.6, 0.5]))  # the tie counts as wrong
        tensor(0.3333)
    """
    sim_qp, sim_qn = check_similarities(sim_qp=sim_qp, sim_qn=sim_qn)
    dtype = torch.promote_types(sim_qp.dtype, torch.float32)
    return (sim_qp > sim_qn).to(dtype).mean()
