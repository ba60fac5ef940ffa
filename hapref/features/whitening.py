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

    Examples:
        >>> x = torch.randn(500, 8) * torch.arange(1.0, 9.0)
        >>> pca = PCAWhitening.fit(x, dim=4)
        >>> y = pca(x)
        >>> y.shape, torch.allclose(y.norm(dim=-1), torch.ones(500))
        (torch.Size([500, 4]), True)
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
        """``D_in``: the descriptor size the whitening takes (length of ``mean``).

        Examples:
            >>> PCAWhitening.fit(torch.randn(50, 8), dim=3).in_dim
            8
        """
        return self.mean.shape[0]

    @property
    def out_dim(self) -> int:
        """``D_out``: the descriptor size it returns (columns of ``projection``, ``dim`` at fit time).

        Examples:
            >>> PCAWhitening.fit(torch.randn(50, 8), dim=3).out_dim
            3
        """
        return self.projection.shape[1]

    @classmethod
    def fit(cls, x: Tensor, dim: int | None = None, eps: float = 1e-9) -> PCAWhitening:
        """Fit on descriptors ``x [..., D_in]``; keep ``dim`` components (default: all, at most N - 1).

        With ``mean`` μ and the sample covariance ``C = (x - μ)ᵀ(x - μ) / (N - 1)`` (float64 here), the
        ``dim`` eigenvectors ``U_d`` of largest eigenvalue ``λ_d`` give ``projection = U_d diag(λ_d)^(-1/2)``;
        buffers are returned in ``x``'s dtype.

        Args:
            x: float descriptors ``[..., D_in]`` (leading axes flattened into N ≥ 2 rows).
            dim: components kept, in ``[1, min(D_in, N - 1)]``.
            eps: floor on the eigenvalues.

        Examples:
            >>> g = torch.Generator().manual_seed(0)
            >>> x = torch.randn(400, 6, generator=g, dtype=torch.float64) @ torch.randn(6, 6, generator=g).double()
            >>> pca = PCAWhitening.fit(x, dim=4)
            >>> y = pca.whiten(x)  # [400, 4]: decorrelated, unit variance on the fit data
            >>> torch.allclose(torch.cov(y.T), torch.eye(4, dtype=torch.float64), atol=1e-8)
            True
            >>> bool((pca.eigenvalues[:-1] >= pca.eigenvalues[1:]).all())  # largest first
            True
        """
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
        """Rebuild from :meth:`state_dict` output (e.g. after ``torch.load(..., weights_only=True)``).

        ``state`` holds ``mean [D_in]``, ``projection [D_in, D_out]`` and ``eigenvalues [D_out]``.

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> pca, x = PCAWhitening.fit(torch.randn(100, 8), dim=4), torch.randn(5, 8)
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     torch.save(pca.state_dict(), Path(tmp) / "pca.pt")
            ...     loaded = PCAWhitening.from_state_dict(torch.load(Path(tmp) / "pca.pt", weights_only=True))
            >>> torch.equal(loaded(x), pca(x))
            True
        """
        return cls(state["mean"], state["projection"], state["eigenvalues"])

    @classmethod
    def from_visil(cls, state: dict[str, Tensor], dim: int = 512, eps: float = 1e-7) -> PCAWhitening:
        """Whitening from a ViSiL PCA file's tensors (``pca_resnet50_vcdb_1M.pth``: ``mean``, ``d``, ``V``).

        ``d`` holds the eigenvalues and ``V`` the eigenvectors as columns; the ``dim`` largest
        are kept and each axis scaled by ``1/sqrt(d + eps)`` (eps 1e-7), as the released S2VS /
        HAP-VR extractor does before its final L2 norm (HAP-VR §3.2; https://github.com/gkordo/s2vs).
        Load the file with ``torch.load(path, weights_only=True)`` or use :meth:`load_visil`.

        Examples:
            >>> import torch
            >>> v, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
            >>> white = PCAWhitening.from_visil({"mean": torch.zeros(6), "d": torch.arange(1.0, 7.0), "V": v}, dim=2)
            >>> white.out_dim, white.eigenvalues.tolist()
            (2, [6.0, 5.0])
        """
        if not isinstance(state, dict) or not {"mean", "d", "V"} <= set(state):
            raise ValueError(f"state must hold 'mean', 'd' and 'V' (a ViSiL PCA file), got "
                             f"{sorted(state) if isinstance(state, dict) else type(state).__name__}")
        mean, d, v = (torch.as_tensor(state[k]) for k in ("mean", "d", "V"))
        if mean.ndim != 1 or d.shape != mean.shape or v.shape != (mean.shape[0], mean.shape[0]):
            raise ValueError(f"mean [D], d [D] and V [D, D] must agree, got {tuple(mean.shape)}, {tuple(d.shape)}, "
                             f"{tuple(v.shape)}")
        if not 1 <= dim <= d.shape[0]:
            raise ValueError(f"dim must be in [1, {d.shape[0]}], got {dim}")
        order = torch.argsort(d.double(), descending=True)[:dim]
        eigenvalues = d.double()[order]
        projection = v.double()[:, order] / torch.sqrt(eigenvalues + eps)
        return cls(mean.float(), projection.float(), eigenvalues.float())

    @classmethod
    def load_visil(cls, path: str, dim: int = 512) -> PCAWhitening:
        """:meth:`from_visil` of a ViSiL PCA file on disk (read with ``weights_only=True``; nothing is downloaded).

        Examples:
            >>> import tempfile, torch
            >>> from pathlib import Path
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     path = Path(tmp) / "pca.pth"
            ...     torch.save({"mean": torch.zeros(3), "d": torch.ones(3), "V": torch.eye(3)}, path)
            ...     print(PCAWhitening.load_visil(path, dim=2).projection.shape)
            torch.Size([3, 2])
        """
        return cls.from_visil(torch.load(path, map_location="cpu", weights_only=True), dim=dim)

    def whiten(self, x: Tensor) -> Tensor:
        """Whitened descriptors ``[..., D_out]`` before the final L2 norm (identity covariance on the fit data).

        ``(x - mean) @ projection`` for float ``x [..., D_in]``, computed in ``x``'s dtype; :meth:`forward`
        L2-normalises this.

        Examples:
            >>> g = torch.Generator().manual_seed(0)
            >>> pca, x = PCAWhitening.fit(torch.randn(100, 8, generator=g), dim=4), torch.randn(2, 3, 8, generator=g)
            >>> w = pca.whiten(x)
            >>> w.shape, torch.allclose(torch.nn.functional.normalize(w, dim=-1), pca(x))
            (torch.Size([2, 3, 4]), True)
        """
        if x.shape[-1] != self.in_dim:
            raise ValueError(f"x must have {self.in_dim} features in its last axis, got shape {tuple(x.shape)}")
        return (x - self.mean.to(x.dtype)) @ self.projection.to(x.dtype)

    def forward(self, x: Tensor) -> Tensor:
        """Whitened, L2-normalised descriptors ``[..., out_dim]`` of float descriptors ``[..., in_dim]``.

        Examples:
            >>> pca = PCAWhitening.fit(torch.randn(200, 8), dim=4)
            >>> pca(torch.randn(2, 3, 8)).shape
            torch.Size([2, 3, 4])
        """
        return F.normalize(self.whiten(x), dim=-1)
