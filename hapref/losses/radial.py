"""Order-preserving embedding losses on quadlets (Radial loss paper) and their baselines.

A quadlet ``(q, p, i, n)`` holds a query, a positive (same sub-class), an intermediate (same class,
other sub-class) and a negative (other class). Every loss takes embedding batches ``[B, D]``, one row
per tuple, measures squared Euclidean distances ``||a - b||^2`` as the paper defines ``dist``, and
returns the mean over the batch (``reduction="none"`` gives the per-tuple values). Half-precision
embeddings are computed in float32 and the loss is returned in float32 (squared distances of large
embeddings overflow float16); embeddings must be finite. Margins are ``margin`` (``margin1``, ``margin2``,
... where a loss has several); the docstrings give the paper's symbols.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from hapref.losses._reduction import check_reduction, reduce_values
from hapref.utils import float32_compute
from hapref.validation import check_float_tensor, renamed_keywords

__all__ = [
    "squared_distance",
    "radial_centroid_and_radius",
    "EuclideanTripletLoss",
    "QuadletLoss",
    "RadialLoss",
    "Quadruplet1Loss",
    "Quadruplet2Loss",
]


def squared_distance(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise ``dist(a, b) = ||a - b||_2^2`` of Radial Eq. 1: ``[..., D]`` embeddings -> ``[...]``.

    Examples:
        >>> squared_distance(torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([[3.0, 4.0], [1.0, 1.0]]))
        tensor([25.,  0.])
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.shape != b.shape:
        raise ValueError(f"a and b must be embedding tensors of one shape [..., D], got "
                         f"{tuple(a.shape) if isinstance(a, Tensor) else type(a).__name__} and "
                         f"{tuple(b.shape) if isinstance(b, Tensor) else type(b).__name__}")
    return (a - b).pow(2).sum(dim=-1)


def radial_centroid_and_radius(q: Tensor, p: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
    """Centroid ``X_G [B, D]`` and enclosing radius ``R [B]`` of the triangles (q, p, i) ``[B, D]`` each, Radial Eq. 8.

    Examples:
        >>> q, p, i = torch.tensor([[0.0, 0.0]]), torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 3.0]])
        >>> radial_centroid_and_radius(q, p, i)
        (tensor([[1., 1.]]), tensor([2.2361]))
    """
    centroid = (q + p + i) / 3
    spokes = torch.stack([q - centroid, p - centroid, i - centroid]).norm(dim=-1)  # [3, B]
    return centroid, spokes.amax(dim=0)


def _check_tuple(names: tuple[str, ...], tensors: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Checked ``[B, D]`` embeddings of one shape, promoted to float32 when half precision."""
    first = check_float_tensor(tensors[0], names[0], ndim=2, finite=True)
    out = []
    for name, t in zip(names, tensors):
        t = check_float_tensor(t, name, ndim=2, finite=True)
        if t.shape != first.shape:
            raise ValueError(f"{name} must have the shape of {names[0]} {tuple(first.shape)} "
                             f"([B, D] embeddings), got {tuple(t.shape)}")
        out.append(t.float() if t.dtype in (torch.float16, torch.bfloat16) else t)
    return tuple(out)


def _non_negative(**margins: float) -> None:
    for name, value in margins.items():
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0 (a margin), got {value}")


#: Old names that still import, with a DeprecationWarning naming the new one.
DEPRECATED_NAMES = {"TripletLoss": "EuclideanTripletLoss"}


def __getattr__(name: str):
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        warnings.warn(f"{name} was renamed {new} (the Radial paper's triplet on (q, p, n) embeddings with squared "
                      "Euclidean distances; hapref.losses.Triplet is the triplet loss on a score matrix); the old "
                      "name will be removed", DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _TupleLoss(nn.Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = check_reduction(reduction)


class EuclideanTripletLoss(_TupleLoss):
    """Triplet hinge ``[m + d(q,p) - d(q,n)]_+`` (Wang et al. 2014), Radial Eq. 3 with ``g1 = m`` (``margin`` m ≥ 0).

    The Radial paper's triplet baseline: one explicit (q, p, n) tuple of embeddings per row and squared
    Euclidean distances ``d``, whence the name; :class:`hapref.losses.Triplet` is the triplet loss on a
    score matrix (similarities, every positive–negative pair of a query). Called ``TripletLoss`` before
    (the old name warns).

    Examples:
        >>> q, p, n = torch.zeros(1, 2), torch.tensor([[0.5, 0.0]]), torch.tensor([[1.0, 0.0]])
        >>> EuclideanTripletLoss(margin=0.7)(q, p, n)  # 0.7 + 0.25 - 1
        tensor(0.)
        >>> EuclideanTripletLoss(margin=1.0)(q, p, n)
        tensor(0.2500)
    """

    def __init__(self, margin: float = 0.7, reduction: str = "mean") -> None:
        super().__init__(reduction)
        _non_negative(margin=margin)
        self.margin = margin

    @float32_compute
    def forward(self, q: Tensor, p: Tensor, n: Tensor) -> Tensor:
        """The reduced hinge of query, positive and negative embeddings ``[B, D]`` (finite floats).

        Returns a 0-d tensor (``[B]`` with ``reduction="none"``), float32 for half-precision input.

        Examples:
            >>> q, p, n = torch.zeros(2, 1), torch.tensor([[0.5], [1.0]]), torch.tensor([[1.0], [0.5]])
            >>> EuclideanTripletLoss(margin=1.0, reduction="none")(q, p, n)  # [1 + d(q, p) - d(q, n)]₊, squared d
            tensor([0.2500, 1.7500])
        """
        q, p, n = _check_tuple(("q", "p", "n"), (q, p, n))
        hinge = (self.margin + squared_distance(q, p) - squared_distance(q, n)).clamp_min(0)
        return reduce_values(hinge, self.reduction)


class QuadletLoss(_TupleLoss):
    """Quadlet loss ``L1 + L2 + L3``, Radial Eq. 3-6 (gaps ``g2 <= g3 <= g1``).

    ``L1 = [g1 + d(q,p) - d(q,n)]_+``, ``L2 = [g2 + d(q,p) - d(q,i)]_+``,
    ``L3 = [g3 + d(p,i) - d(p,n)]_+``; ``margin1``, ``margin2``, ``margin3`` are the gaps g1, g2, g3.

    Examples:
        >>> q, p = torch.zeros(1, 2), torch.tensor([[0.1, 0.0]])
        >>> i, n = torch.tensor([[1.0, 0.0]]), torch.tensor([[3.0, 0.0]])
        >>> QuadletLoss()(q, p, i, n)  # every ordering holds with its gap
        tensor(0.)
        >>> [round(t.item(), 2) for t in QuadletLoss(margin1=0.7, margin2=0.3, margin3=0.5).terms(q, p, p, n)]
        [0.0, 0.3, 0.0]
    """

    @renamed_keywords(g1="margin1", g2="margin2", g3="margin3")
    def __init__(self, margin1: float = 0.7, margin2: float = 0.3, margin3: float = 0.5,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        _non_negative(margin1=margin1, margin2=margin2, margin3=margin3)
        if not margin2 <= margin3 <= margin1:
            raise ValueError(f"margins must satisfy margin2 <= margin3 <= margin1 (gaps g2 <= g3 <= g1, Radial Eq. 6), "
                             f"got margin1={margin1}, margin2={margin2}, margin3={margin3}")
        self.margin1, self.margin2, self.margin3 = margin1, margin2, margin3

    def terms(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The three hinges ``(L1, L2, L3)``, each ``[B]``, of quadlet embeddings ``[B, D]``, Radial Eq. 3-5.

        Unreduced, so one sees which ordering a tuple violates; ``forward`` reduces ``L1 + L2 + L3``. Float32 for
        half-precision input.

        Examples:
            >>> q, p = torch.zeros(2, 1), torch.tensor([[0.5], [0.1]])
            >>> i, n = torch.tensor([[0.6], [1.0]]), torch.tensor([[1.0], [3.0]])
            >>> loss = QuadletLoss(margin1=0.7, margin2=0.3, margin3=0.5)
            >>> l1, l2, l3 = loss.terms(q, p, i, n)  # row 0: i too close to q (L2) and to p (L3)
            >>> [[round(v, 2) for v in t.tolist()] for t in (l1, l2, l3)]  # L2 = 0.3 + 0.25 - 0.36
            [[0.0, 0.0], [0.19, 0.0], [0.26, 0.0]]
            >>> torch.allclose(l1 + l2 + l3, QuadletLoss(reduction="none")(q, p, i, n))
            True
        """
        q, p, i, n = _check_tuple(("q", "p", "i", "n"), (q, p, i, n))
        d_qp = squared_distance(q, p)
        l1 = (self.margin1 + d_qp - squared_distance(q, n)).clamp_min(0)
        l2 = (self.margin2 + d_qp - squared_distance(q, i)).clamp_min(0)
        l3 = (self.margin3 + squared_distance(p, i) - squared_distance(p, n)).clamp_min(0)
        return l1, l2, l3

    @float32_compute
    def forward(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> Tensor:
        """``L1 + L2 + L3`` of query, positive, intermediate and negative embeddings ``[B, D]``, reduced.

        Examples:
            >>> q, p, i, n = torch.zeros(1, 1), torch.tensor([[0.1]]), torch.tensor([[1.0]]), torch.tensor([[3.0]])
            >>> QuadletLoss()(q, p, i, n), QuadletLoss()(q, i, p, n) > 0  # p and i swapped: ordering violated
            (tensor(0.), tensor(True))
        """
        l1, l2, l3 = self.terms(q, p, i, n)
        return reduce_values(l1 + l2 + l3, self.reduction)


class RadialLoss(_TupleLoss):
    """Radial loss ``[(cR)^2 - ||n - X_G||^2]_+ + [m + d(q,p) - d(q,i)]_+``, Radial Eq. 8 + Eq. 12.

    The radial term pushes the negative out of a sphere of radius ``c R`` around the centroid
    ``X_G`` of (q, p, i); Theorem 3.1 says ``c >= 3`` then implies the negative-side orderings of
    Eq. 1-2, and the triplet term supplies ``d(q,p) < d(q,i)``. ``c`` keeps the paper's name (the radius
    multiplier of Theorem 3.1, also used by :mod:`hapref.radial_theory`); ``margin`` is m.

    Examples:
        >>> q, p, i = torch.zeros(1, 2), torch.tensor([[0.1, 0.0]]), torch.tensor([[0.0, 0.5]])
        >>> RadialLoss(c=3.0, margin=0.1)(q, p, i, torch.tensor([[10.0, 10.0]]))  # n far outside the sphere
        tensor(0.)
        >>> radial, triplet = RadialLoss(c=3.0, margin=0.1).terms(q, p, i, torch.zeros(1, 2))
        >>> radial.item() > 0, triplet.item()
        (True, 0.0)
    """

    def __init__(self, c: float = 3.0, margin: float = 0.3, reduction: str = "mean") -> None:
        super().__init__(reduction)
        _non_negative(margin=margin)
        if c <= 0:
            raise ValueError(f"c must be positive, got {c}")
        self.c, self.margin = c, margin

    def terms(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> tuple[Tensor, Tensor]:
        """``(L_radial, L_triplet)``, each ``[B]``, of quadlet embeddings ``[B, D]``, Radial Eq. 8 and Eq. 12.

        ``L_radial = [(cR)^2 - ||n - X_G||^2]_+`` with the centroid ``X_G`` and radius ``R`` of
        ``hapref.losses.radial.radial_centroid_and_radius``; ``L_triplet = [m + d(q,p) - d(q,i)]_+``. Unreduced;
        float32 for half-precision input.

        Examples:
            >>> q, p, i = torch.zeros(2, 1), torch.zeros(2, 1), torch.full((2, 1), 3.0)  # X_G = 1, R = 2
            >>> n = torch.tensor([[4.0], [8.0]])  # inside / outside the sphere of radius c R = 6
            >>> radial, triplet = RadialLoss(c=3.0, margin=0.3).terms(q, p, i, n)
            >>> radial, triplet  # 36 - (4 - 1)^2 = 27; 36 - (8 - 1)^2 < 0
            (tensor([27.,  0.]), tensor([0., 0.]))
        """
        q, p, i, n = _check_tuple(("q", "p", "i", "n"), (q, p, i, n))
        centroid, radius = radial_centroid_and_radius(q, p, i)
        radial = ((self.c * radius).pow(2) - squared_distance(n, centroid)).clamp_min(0)
        triplet = (self.margin + squared_distance(q, p) - squared_distance(q, i)).clamp_min(0)
        return radial, triplet

    @float32_compute
    def forward(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> Tensor:
        """``L_radial + L_triplet`` of quadlet embeddings ``[B, D]`` (finite floats), reduced.

        Examples:
            >>> q, p, i = torch.zeros(1, 2), torch.tensor([[0.1, 0.0]]), torch.tensor([[0.0, 0.5]])
            >>> RadialLoss(c=3.0, margin=0.1)(q, p, i, torch.tensor([[10.0, 10.0]]))
            tensor(0.)
        """
        radial, triplet = self.terms(q, p, i, n)
        return reduce_values(radial + triplet, self.reduction)


class Quadruplet1Loss(_TupleLoss):
    """Pair-versus-pair hinges on a quadlet, our reading of Law et al. (2017) ("Quadruplet-1", Radial Table 2).

    Law et al. constrain ``d(a,b) + delta < d(c,d)`` whenever pair (a,b) is more similar than pair
    (c,d). On the class / sub-class hierarchy we apply it once across each level boundary:
    sub-class pair (q,p) versus class pair (q,i), and class pair (p,i) versus cross-class pair (q,n):
    ``[delta + d(q,p) - d(q,i)]_+ + [delta + d(p,i) - d(q,n)]_+``.

    Examples:
        >>> q, p, i, n = torch.zeros(1, 1), torch.ones(1, 1), 2 * torch.ones(1, 1), 3 * torch.ones(1, 1)
        >>> Quadruplet1Loss(margin=0.5)(q, p, i, n)  # [0.5 + 1 - 4]₊ + [0.5 + 1 - 9]₊
        tensor(0.)
    """

    def __init__(self, margin: float = 0.5, reduction: str = "mean") -> None:
        super().__init__(reduction)
        _non_negative(margin=margin)
        self.margin = margin

    @float32_compute
    def forward(self, q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> Tensor:
        """The two level-crossing hinges of quadlet embeddings ``[B, D]`` (finite floats), summed and reduced.

        Examples:
            >>> q, p, i, n = torch.zeros(1, 1), torch.ones(1, 1), 2 * torch.ones(1, 1), 2 * torch.ones(1, 1)
            >>> Quadruplet1Loss(margin=0.5)(q, p, i, n)
            tensor(0.)
        """
        q, p, i, n = _check_tuple(("q", "p", "i", "n"), (q, p, i, n))
        fine = (self.margin + squared_distance(q, p) - squared_distance(q, i)).clamp_min(0)
        coarse = (self.margin + squared_distance(p, i) - squared_distance(q, n)).clamp_min(0)
        return reduce_values(fine + coarse, self.reduction)


class Quadruplet2Loss(_TupleLoss):
    """Quadruplet loss of Chen et al. (2017) ("Quadruplet-2", Radial Table 2).

    ``[a1 + d(q,p) - d(q,n1)]_+ + [a2 + d(q,p) - d(n1,n2)]_+`` where ``n1`` and ``n2`` are two
    samples unrelated to q and to each other. Variant 2a draws them from intermediates and
    negatives, 2b from negatives only; that choice lives in the sampler, not here.

    Examples:
        >>> q, p, n1, n2 = torch.zeros(2, 1), torch.zeros(2, 1), torch.ones(2, 1), torch.zeros(2, 1)
        >>> Quadruplet2Loss(1.0, 0.5, reduction="none")(q, p, n1, n2)  # [1 + 0 - 1]₊ + [0.5 + 0 - 1]₊
        tensor([0., 0.])
    """

    def __init__(self, margin1: float = 1.0, margin2: float = 0.5, reduction: str = "mean") -> None:
        super().__init__(reduction)
        _non_negative(margin1=margin1, margin2=margin2)
        self.margin1, self.margin2 = margin1, margin2

    @float32_compute
    def forward(self, q: Tensor, p: Tensor, n1: Tensor, n2: Tensor) -> Tensor:
        """The strong and weak hinges of (q, p, n1, n2) embeddings ``[B, D]`` (finite floats), summed and reduced.

        Examples:
            >>> q, p, n1, n2 = torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), torch.zeros(1, 1)
            >>> Quadruplet2Loss(1.0, 0.5)(q, p, n1, n2)
            tensor(1.5000)
        """
        q, p, n1, n2 = _check_tuple(("q", "p", "n1", "n2"), (q, p, n1, n2))
        d_qp = squared_distance(q, p)
        strong = (self.margin1 + d_qp - squared_distance(q, n1)).clamp_min(0)
        weak = (self.margin2 + d_qp - squared_distance(n1, n2)).clamp_min(0)
        return reduce_values(strong + weak, self.reduction)
