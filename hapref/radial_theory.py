"""Theorem 3.1 of the Radial paper, the closed-form gradients it prints, and tools to probe both.

The theorem: if ``L_radial = 0`` with ``c >= 3`` (the negative lies at least ``3R`` from the centroid
of (q, p, i)), then the negative-side orderings of Eq. 1-2 hold. :func:`sample_radial_zero_quadlets`
builds quadlets with ``L_radial = 0`` exactly on the boundary (the hardest case) and
:func:`order_relations` says which orderings hold, so violation rates can be counted for any ``c``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.losses.radial import radial_centroid_and_radius, squared_distance

__all__ = [
    "ORDER_RELATIONS",
    "order_relations",
    "sample_radial_zero_quadlets",
    "violation_rates",
    "worst_case_quadlet",
    "quadlet_gradients",
    "radial_negative_gradient",
    "supplementary_radial_gradients",
]

#: The four pairwise orderings of Radial Eq. 1 (three) and Eq. 2 (one).
ORDER_RELATIONS = ("d(q,p)<d(q,i)", "d(q,i)<d(q,n)", "d(q,p)<d(q,n)", "d(p,i)<d(p,n)")


def order_relations(q: Tensor, p: Tensor, i: Tensor, n: Tensor) -> dict[str, Tensor]:
    """Which orderings of Radial Eq. 1-2 hold (strictly) for quadlets of ``[B, D]`` embeddings: bool tensors ``[B]``.

    Examples:
        >>> holds = order_relations(*worst_case_quadlet(2.0))
        >>> {name: bool(v) for name, v in holds.items()}
        {'d(q,p)<d(q,i)': False, 'd(q,i)<d(q,n)': True, 'd(q,p)<d(q,n)': True, 'd(p,i)<d(p,n)': False}
    """
    d_qp, d_qi, d_qn = squared_distance(q, p), squared_distance(q, i), squared_distance(q, n)
    d_pi, d_pn = squared_distance(p, i), squared_distance(p, n)
    return dict(zip(ORDER_RELATIONS, (d_qp < d_qi, d_qi < d_qn, d_qp < d_qn, d_pi < d_pn)))


def sample_radial_zero_quadlets(count: int, dim: int, c: float, direction: str = "random",
                                generator: torch.Generator | None = None,
                                dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Quadlets with ``L_radial = 0`` exactly on the boundary ``||n - X_G|| = cR`` (Radial Eq. 8).

    q, p, i are standard normal in ``dim`` dimensions. The negative sits at distance ``c R`` from the
    centroid, along a uniformly random direction (``direction="random"``) or along the spoke of a
    random vertex of the triangle (``"adversarial"``, the direction that brings n closest to it).
    Returns four ``[count, dim]`` tensors of ``dtype``.

    Examples:
        >>> from hapref.losses import RadialLoss
        >>> q, p, i, n = sample_radial_zero_quadlets(4, 8, c=3.0, generator=torch.Generator().manual_seed(0))
        >>> radial, _ = RadialLoss(c=3.0).terms(q, p, i, n)
        >>> bool(radial.abs().max() < 1e-9)  # on the boundary: the radial term is exactly 0
        True
    """
    if count < 1 or dim < 1:
        raise ValueError(f"count and dim must be positive, got count={count}, dim={dim}")
    if direction not in ("random", "adversarial"):
        raise ValueError(f"direction must be 'random' or 'adversarial', got {direction!r}")
    q, p, i = torch.randn(3, count, dim, generator=generator, dtype=dtype)
    centroid, radius = radial_centroid_and_radius(q, p, i)
    if direction == "random":
        unit = torch.randn(count, dim, generator=generator, dtype=dtype)
    else:
        vertex = torch.randint(0, 3, (count,), generator=generator)
        unit = torch.stack([q, p, i])[vertex, torch.arange(count)] - centroid
    unit = unit / unit.norm(dim=-1, keepdim=True)
    n = centroid + c * radius[:, None] * unit
    return q, p, i, n


def violation_rates(cs: list[float], dim: int, direction: str = "random", count: int = 10000,
                    seed: int = 0) -> dict[str, list[float]]:
    """For each c in ``cs``: the fraction of boundary quadlets (``L_radial = 0``) violating each ordering of Eq. 1-2.

    The same q, p, i and directions are reused for every c (common random numbers), so curves are smooth.

    Examples:
        >>> rates = violation_rates([1.0, 3.0], dim=8, direction="adversarial", count=500)
        >>> rates["d(p,i)<d(p,n)"][1]  # Theorem 3.1: none violated at c = 3
        0.0
    """
    out: dict[str, list[float]] = {name: [] for name in ORDER_RELATIONS}
    for c in cs:
        quadlet = sample_radial_zero_quadlets(count, dim, c, direction, torch.Generator().manual_seed(seed))
        for name, holds in order_relations(*quadlet).items():
            out[name].append(float((~holds).double().mean()))
    return out


def worst_case_quadlet(c: float, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A 2-D quadlet with ``L_radial = 0`` whose Eq. 2 ordering fails for every ``c < 3``.

    p and i sit at opposite ends of a diameter (``d(p,i) = 2R``), q at the centroid, and n on the
    boundary sphere straight beyond p, so ``||p - n|| = (c - 1) R``: at ``c = 3`` the two distances tie.
    Returns four ``[1, 2]`` tensors.

    Examples:
        >>> q, p, i, n = worst_case_quadlet(3.0)
        >>> n
        tensor([[3., 0.]], dtype=torch.float64)
    """
    q = torch.tensor([[0.0, 0.0]], dtype=dtype)
    p = torch.tensor([[1.0, 0.0]], dtype=dtype)
    i = torch.tensor([[-1.0, 0.0]], dtype=dtype)
    n = torch.tensor([[c, 0.0]], dtype=dtype)
    return q, p, i, n


def quadlet_gradients(q: Tensor, p: Tensor, i: Tensor, n: Tensor, g1: float = 0.7, g2: float = 0.3,
                      g3: float = 0.5) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-quadlet gradients ``[B, D]`` of the Quadlet loss w.r.t. ``(q, p, i, n)`` as printed in Radial Eq. 7.

    Examples:
        >>> from hapref.losses import QuadletLoss
        >>> quadlet = [x.requires_grad_(True) for x in torch.randn(4, 3, 5, dtype=torch.float64)]
        >>> QuadletLoss(reduction="sum")(*quadlet).backward()
        >>> all(torch.allclose(g, x.grad) for g, x in zip(quadlet_gradients(*quadlet), quadlet))
        True
    """
    d_qp = squared_distance(q, p)
    a1 = ((g1 + d_qp - squared_distance(q, n)) > 0).to(q.dtype)[:, None]
    a2 = ((g2 + d_qp - squared_distance(q, i)) > 0).to(q.dtype)[:, None]
    a3 = ((g3 + squared_distance(p, i) - squared_distance(p, n)) > 0).to(q.dtype)[:, None]
    grad_i = a2 * 2 * (q - i) + a3 * 2 * (i - p)
    grad_n = a1 * 2 * (q - n) + a3 * 2 * (p - n)
    grad_q = a1 * 2 * (n - p) + a2 * 2 * (i - p)
    grad_p = a1 * 2 * (p - q) + a2 * 2 * (p - q) + a3 * 2 * (n - i)
    return grad_q, grad_p, grad_i, grad_n


def radial_negative_gradient(q: Tensor, p: Tensor, i: Tensor, n: Tensor, c: float = 3.0) -> Tensor:
    """Gradient ``[B, D]`` of the Radial loss w.r.t. the negative, Radial Eq. 13: ``-2 (n - X_G)`` where active.

    Examples:
        >>> q, p, i, n = worst_case_quadlet(2.0)
        >>> radial_negative_gradient(q, p, i, n, c=3.0)  # n inside the 3R sphere: pushed outwards
        tensor([[-4., -0.]], dtype=torch.float64)
    """
    centroid, radius = radial_centroid_and_radius(q, p, i)
    active = ((c * radius).pow(2) - squared_distance(n, centroid) > 0).to(q.dtype)[:, None]
    return -2 * active * (n - centroid)


def supplementary_radial_gradients(q: Tensor, p: Tensor, i: Tensor, n: Tensor, normalized: bool = False,
                                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The Radial-loss gradients exactly as printed in the supplement (c = 3, ``R = ||i - X_G||``).

    ``normalized=False``: supp. Eq. 9-12, gradients of the expanded loss supp. Eq. 6 + Eq. 8.
    ``normalized=True``: supp. Eq. 15-18, gradients of supp. Eq. 13 + Eq. 14 (unit-norm embeddings,
    constant terms dropped). Both hinges are taken as active. Transcribed literally, typos included,
    so they can be checked against autograd. Returns the four ``[B, D]`` gradients.

    Examples:
        >>> grads = supplementary_radial_gradients(*worst_case_quadlet(3.0))
        >>> grads[3]  # Eq. 12: 2 (X_G - n)
        tensor([[-6.,  0.]], dtype=torch.float64)
    """
    if not normalized:
        radial = (16 / 9 * q - 38 / 9 * i + 2 / 3 * n + 16 / 9 * p,                  # Eq. 9
                  16 / 9 * q - 38 / 9 * i + 2 / 3 * n + 16 / 9 * p,                  # Eq. 10
                  -38 / 9 * q + 70 / 9 * i + 2 / 3 * n - 38 / 9 * p,                 # Eq. 11
                  2 * ((q + p + i) / 3 - n))                                         # Eq. 12
        triplet = (2 * (i - p), 2 * (p - q), 2 * (q - i), torch.zeros_like(n))
    else:
        radial = (-38 / 9 * i + 2 / 3 * n + 16 / 9 * p,                              # Eq. 15
                  -38 / 9 * i + 2 / 3 * n + 16 / 9 * p,                              # Eq. 16
                  -38 / 9 * q + 2 / 3 * n - 38 / 9 * p,                              # Eq. 17
                  2 * (q + p + i) / 3)                                               # Eq. 18
        triplet = (2 * (i - p), -2 * q, q, torch.zeros_like(n))
    return tuple(r + t for r, t in zip(radial, triplet))  # type: ignore[return-value]
