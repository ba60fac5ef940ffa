"""The ``reduction`` argument shared by every loss class: ``"mean"``, ``"sum"`` or ``"none"``."""

from __future__ import annotations

from torch import Tensor

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: object) -> str:
    """``reduction`` if it is ``"mean"``, ``"sum"`` or ``"none"``, else a ``ValueError`` naming the three.

    Examples:
        >>> check_reduction("sum")
        'sum'
        >>> check_reduction("avg")
        Traceback (most recent call last):
        ...
        ValueError: reduction must be 'mean', 'sum' or 'none', got 'avg'
    """
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def reduce_values(values: Tensor, reduction: str) -> Tensor:
    """Per-item losses ``[B]`` reduced: their mean (0 for an empty batch, still on the graph), sum, or themselves.

    Examples:
        >>> values = torch.tensor([1.0, 3.0])
        >>> reduce_values(values, "mean"), reduce_values(values, "sum"), reduce_values(values, "none")
        (tensor(2.), tensor(4.), tensor([1., 3.]))
        >>> reduce_values(torch.zeros(0), "mean")
        tensor(0.)
    """
    if reduction == "none":
        return values
    if values.numel() == 0:  # empty batch: a zero that still carries the graph
        return values.sum()
    return values.mean() if reduction == "mean" else values.sum()
