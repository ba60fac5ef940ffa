"""Order-preserving embedding losses on quadlets (Radial loss paper) and their baselines.

A quadlet ``(q, p, i, n)`` holds a query, a positive (same sub-class), an intermediate (same class,
other sub-class) and a negative (other class). Every loss takes embedding batches ``[B, D]``, one row
per tuple, measures squared Euclidean distances ``||a - b||^2`` as the paper defines ``dist``, and
returns the mean over the batch (``reduction="none"`` gives the per-tuple values).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref.validation import check_float_tensor

__all__ = [
    "squared_distance",
    "radial_centroid_and_radius",
    "TripletLoss",
    "QuadletLoss",
    "RadialLoss",
    "Quadruplet1Loss",
    "Quadruplet2Loss",
]


def squared_distance(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise ``dist(a, b) = ||a - b||_2^2`` of Radial Eq. 1 (shape ``[B]``)."""
    return (a - b).pow(2).sum(dim=-1)


def radial_centroid_and_radius(q: Tensor, p: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
    """Centroid ``X_G`` and enclosing radius ``R`` of the triangle (q, p, i), Radial Eq. 8."""
    centroid = (q + p + i) / 3
    spokes = torch.stack([q - centroid, p - centroid, i - centroid]).norm(dim=-1)  # [3, B]
    return centroid, spokes.amax(dim=0)


def _check_tuple(names: tuple[str, ...], tensors: tuple[Tensor, ...]) -> None:
    first = check_float_tensor(tensors[0], names[0], ndim=2)
    for name, t in zip(names[1:], tensors[1:]):
        check_float_tensor(t, name, ndim=2)
        if t.shape != first.shape:
            raise ValueError(f"{name} must have the shape of {names[0]} {tuple(first.shape)} "
                             f"([B, D] embeddings), got {tuple(t.shape)}")


def _reduce(per_tuple: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return per_tuple
    if per_tuple.numel() == 0:  # empty batch: a zero that still carries the graph
        return per_tuple.sum()
    return per_tuple.mean() if reduction == "mean" else per_tuple.sum()


class _TupleLoss(nn.Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction


class TripletLoss(_TupleLoss):
    """Triplet hinge ``[m + d(q,p) - d(q,n)]_+`` (Wang et al. 2014), Radial Eq. 3 with ``g1 = m``."""

    def __init__(self, margin: float = 0.7, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, q: Tensor, p: Tensor, n: Tensor) -> Tensor:
        _check_tuple(("q", "p", "n"), (q, p, n))
        hinge = (self.margin + squared_distance(q, p) - squared_distance(q, n)).clamp_min(0)
        return _reduce(hinge, self.reduction)


class QuadletLoss(_TupleLoss):
    """Quadlet loss ``L1 + L2 + L3``, Radial Eq. 3-6 (gaps ``g2 <= g3 <= g1``).

    ``L1 = [g1 + d(q,p) - d(q,n)]_+``, ``L2 = [g2 + d(q,p) - d(q,i)]_+``,
    ``L3 = [g3 + d(p,i) - d(p,n)]_+``.
    """

    def __init__(self, g1: float = 0.7, g2: float = 0.3, g3: float = 0.5,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        if not g2 <= g3 <= g1:
            raise ValueError(f"gaps must satisfy g2 <= g3 <= g1 (Radial Eq. 6), got g1={g1}, g2={g2}, g3={g3}")
        self.g1, self.g2, self.g3 = g1, g2, g3

    def terms(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The three hinges ``(L1, L2, L3)`` per quadlet, Radial Eq. 3-5."""
        _check_tuple(("q", "p", "i", "n"), (q, p, i, n))
        d_qp = squared_distance(q, p)
        l1 = (self.g1 + d_qp - squared_distance(q, n)).clamp_min(0)
        l2 = (self.g2 + d_qp - squared_distance(q, i)).clamp_min(0)
        l3 = (self.g3 + squared_distance(p, i) - squared_distance(p, n)).clamp_min(0)
        return l1, l2, l3

    def forward(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> Tensor:
        l1, l2, l3 = self.terms(q, p, i, n)
        return _reduce(l1 + l2 + l3, self.reduction)


class RadialLoss(_TupleLoss):
    """Radial loss ``[(cR)^2 - ||n - X_G||^2]_+ + [m + d(q,p) - d(q,i)]_+``, Radial Eq. 8 + Eq. 12.

    The radial term pushes the negative out of a sphere of radius ``c R`` around the centroid
    ``X_G`` of (q, p, i); Theorem 3.1 says ``c >= 3`` then implies the negative-side orderings of
    Eq. 1-2, and the triplet term supplies ``d(q,p) < d(q,i)``.
    """

    def __init__(self, c: float = 3.0, margin: float = 0.3, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if c <= 0:
            raise ValueError(f"c must be positive, got {c}")
        self.c, self.margin = c, margin

    def terms(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> tuple[Tensor, Tensor]:
        """``(L_radial, L_triplet)`` per quadlet, Radial Eq. 8 and Eq. 12."""
        _check_tuple(("q", "p", "i", "n"), (q, p, i, n))
        centroid, radius = radial_centroid_and_radius(q, p, i)
        radial = ((self.c * radius).pow(2) - squared_distance(n, centroid)).clamp_min(0)
        triplet = (self.margin + squared_distance(q, p) - squared_distance(q, i)).clamp_min(0)
        return radial, triplet

    def forward(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> Tensor:
        radial, triplet = self.terms(q, p, i, n)
        return _reduce(radial + triplet, self.reduction)


class Quadruplet1Loss(_TupleLoss):
    """Pair-versus-pair hinges on a quadlet, our reading of Law et al. (2017) ("Quadruplet-1", Radial Table 2).

    Law et al. constrain ``d(a,b) + delta < d(c,d)`` whenever pair (a,b) is more similar than pair
    (c,d). On the class / sub-class hierarchy we apply it once across each level boundary:
    sub-class pair (q,p) versus class pair (q,i), and class pair (p,i) versus cross-class pair (q,n):
    ``[delta + d(q,p) - d(q,i)]_+ + [delta + d(p,i) - d(q,n)]_+``.
    """

    def __init__(self, margin: float = 0.5, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> Tensor:
        _check_tuple(("q", "p", "i", "n"), (q, p, i, n))
        fine = (self.margin + squared_distance(q, p) - squared_distance(q, i)).clamp_min(0)
        coarse = (self.margin + squared_distance(p, i) - squared_distance(q, n)).clamp_min(0)
        return _reduce(fine + coarse, self.reduction)


class Quadruplet2Loss(_TupleLoss):
    """Quadruplet loss of Chen et al. (2017) ("Quadruplet-2", Radial Table 2).

    ``[a1 + d(q,p) - d(q,n1)]_+ + [a2 + d(q,p) - d(n1,n2)]_+`` where ``n1`` and ``n2`` are two
    samples unrelated to q and to each other. Variant 2a draws them from intermediates and
    negatives, 2b from negatives only; that choice lives in the sampler, not here.
    """

    def __init__(self, margin1: float = 1.0, margin2: float = 0.5, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin1, self.margin2 = margin1, margin2

    def forward(self, q: Tensor, p: Tensor, n1: Tensor, n2: Tensor) -> Tensor:
        _check_tuple(("q", "p", "n1", "n2"), (q, p, n1, n2))
        d_qp = squared_distance(q, p)
        strong = (self.margin1 + d_qp - squared_distance(q, n1)).clamp_min(0)
        weak = (self.margin2 + d_qp - squared_distance(n1, n2)).clamp_min(0)
        return _reduce(strong + weak, self.reduction)
