"""PCA whitening of frame/region descriptors, fitted with ``torch.linalg.eigh``.

The last step of the L3-iMAC / iMAC pipelines (HAP-VR §3.2, TCA §3.2 and §4): centre, rotate
onto the principal axes, divide each axis by the square root of its variance, keep ``dim`` axes,
then L2-normalise. Saved and loaded as a plain state dict of tensors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.validation import check_float_tensor


class PCAWhitening(nn.Module):
    """PCA whitening ``x -> normalize((x - mean) @ projection)`` with ``projection = U_d diag(λ_d)^(-1/2)``.

    Build with :meth:`fit` on training descriptors ``[N, D_in]`` (any leading shape is
    flattened), or with :meth:`from_state_dict`. Eigenvalues are floored at ``eps`` (TCA §3.2
    uses 1e-9) so near-empty directions cannot blow up.
    """

    def __init__(self, mean: Tensor, projection: Tensor, eigenvalues: Tensor) -> None:
        super().__init__()
        if mean.ndim != 1 or projection.shape[0] != mean.shape[0] or eigenvalues.shape != projection.shape[1:]:
            raise ValueError("mean [D_in], projection [D_in, D_out] and eigenvalues [D_out] must agree, got "
                             f"{tuple(mean.shape)}, {tuple(projection.shape)}, {tuple(eigenvalues.shape)}")
        self.register_buffer("mean", mean)
        self.register_buffer("projection", projection)
        self.register_buffer("eigenvalues", eigenvalues)

    @property
    def in_dim(self) -> int:
        return self.mean.shape[0]

    @property
    def out_dim(self) -> int:
        return self.projection.shape[1]

    @classmethod
    def fit(cls, x: Tensor, dim: int | None = None, eps: float = 1e-9) -> PCAWhitening:
        """Fit on descriptors ``x [..., D_in]``; keep ``dim`` components (default: all, at most N - 1)."""
        check_float_tensor(x, "x", ndim=None)
        data = x.reshape(-1, x.shape[-1]).double()
        n, d_in = data.shape
        if n < 2:
            raise ValueError(f"x must hold at least 2 descriptors to fit PCA, got {n}")
        dim = min(d_in, n - 1) if dim is None else dim
        if not 1 <= dim <= min(d_in, n - 1):
            raise ValueError(f"dim must be in [1, min(D_in, N - 1)] = [1, {min(d_in, n - 1)}], got {dim}")
        mean = data.mean(dim=0)
        centred = data - mean
        eigenvalues, vectors = torch.linalg.eigh(centred.T @ centred / (n - 1))
        order = eigenvalues.argsort(descending=True)[:dim]
        eigenvalues = eigenvalues[order].clamp_min(eps)
        projection = vectors[:, order] / eigenvalues.sqrt()
        return cls(mean.to(x.dtype), projection.to(x.dtype), eigenvalues.to(x.dtype))

    @classmethod
    def from_state_dict(cls, state: dict[str, Tensor]) -> PCAWhitening:
        """Rebuild from :meth:`state_dict` output (e.g. after ``torch.load(..., weights_only=True)``)."""
        return cls(state["mean"], state["projection"], state["eigenvalues"])

    def whiten(self, x: Tensor) -> Tensor:
        """Whitened descriptors ``[..., D_out]`` before the final L2 norm (identity covariance on the fit data)."""
        if x.shape[-1] != self.in_dim:
            raise ValueError(f"x must have {self.in_dim} features in its last axis, got shape {tuple(x.shape)}")
        return (x - self.mean.to(x.dtype)) @ self.projection.to(x.dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.whiten(x), dim=-1)
