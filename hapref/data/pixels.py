"""Rounding float pixels to uint8 so that every CPU writes the same bytes.

A float kernel's last bit depends on the CPU (vector width, fused multiply-add, how a reduction is split
between threads). Most of the time that bit never reaches the rounded uint8 value, but resampling often
lands exactly half-way between two levels (bilinear weights of 1/2 on integer pixels), and there a 1-ulp
difference decides between two levels. :func:`round_pixels` therefore computes in float64, first snaps
the value to a grid of 2⁻¹⁰ of a level (absorbing differences of ~1e-13 between kernels), then rounds half
to even. A CPU-dependent result needs a value within ~1e-13 of a grid midpoint: about 2e-10 per pixel.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

__all__ = ["bilinear_resize", "float32_default", "float32_draws", "round_pixels", "snap"]

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def float32_default() -> Iterator[None]:
    """float32 as the default dtype inside the block, the caller's default restored after it.

    Examples:
        >>> previous = torch.get_default_dtype(); torch.set_default_dtype(torch.float64)
        >>> with float32_default():
        ...     torch.rand(1).dtype
        torch.float32
        >>> torch.get_default_dtype(); torch.set_default_dtype(previous)
        torch.float64
    """
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def float32_draws(fn: F) -> F:
    """Run a data generator with float32 as the default dtype, whatever the caller's default.

    Generated data must not depend on :func:`hapref.utils.portable_precision`: ``torch.rand(n)`` without a
    dtype draws float64 under a float64 default, which consumes the random stream differently and would give
    other videos, views and clip lengths. Generators state their own precision explicitly where it matters.

    Examples:
        >>> @float32_draws
        ... def draw():
        ...     return torch.rand(2, generator=torch.Generator().manual_seed(0))
        >>> previous = torch.get_default_dtype(); torch.set_default_dtype(torch.float64)
        >>> draw().dtype, torch.get_default_dtype()
        (torch.float32, torch.float64)
        >>> torch.set_default_dtype(previous)
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with float32_default():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]

_SNAP = 1024.0  # grid of 2^-10 of a level; a power of two, so scaling by it is exact


def snap(x: Tensor, steps: float) -> Tensor:
    """``x`` rounded to the nearest multiple of ``1 / steps`` (a power of two, so the scaling is exact).

    Two CPUs' results that differ in the last bits become equal unless they straddle a midpoint of the grid.

    Examples:
        >>> snap(torch.tensor([0.30000000000000004, 0.3], dtype=torch.float64), 1024.0).tolist()
        [0.2998046875, 0.2998046875]
    """
    return torch.round(x * steps) / steps


def round_pixels(x: Tensor | np.ndarray, scale: float = 1.0) -> Tensor | np.ndarray:
    """``x * scale`` rounded to uint8 levels (half to even after snapping to 2⁻¹⁰), clamped to [0, 255].

    Args:
        x: float tensor or NumPy array of any shape, on any device; computed in float64 on the CPU.
        scale: 255 for values in [0, 1], 1 for values already in [0, 255].

    Returns:
        uint8 tensor (same device) or uint8 NumPy array, same shape as ``x``.

    Examples:
        >>> round_pixels(torch.tensor([0.5, 1.5, 2.5, 127.49999999999997, 300.0, -2.0]))
        tensor([  0,   2,   2, 128, 255,   0], dtype=torch.uint8)
        >>> round_pixels(np.array([0.5, 1.0]), scale=255.0)
        array([128, 255], dtype=uint8)
    """
    if isinstance(x, np.ndarray):
        y = x.astype(np.float64) * scale
        return np.clip(np.rint(np.rint(y * _SNAP) / _SNAP), 0, 255).astype(np.uint8)
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise ValueError(f"x must be a float tensor or NumPy array, got {type(x).__name__}")
    y = x.double() * scale if x.device.type == "cpu" else x * scale
    return snap(y, _SNAP).round().clamp(0, 255).to(torch.uint8)


def _bilinear_taps(size_in: int, size_out: int) -> tuple[Tensor, Tensor, Tensor]:
    """Source indices ``i0, i1`` and weight of ``i1`` for each output position (``align_corners=False``).

    Python floats: correctly rounded, so the same on every CPU."""
    i0, i1, frac = [], [], []
    scale = size_in / size_out
    for i in range(size_out):
        src = max((i + 0.5) * scale - 0.5, 0.0)
        lo = min(int(src), size_in - 1)
        i0.append(lo)
        i1.append(min(lo + 1, size_in - 1))
        frac.append(src - lo)
    return torch.tensor(i0), torch.tensor(i1), torch.tensor(frac, dtype=torch.float64)


def bilinear_resize(x: Tensor, size: tuple[int, int]) -> Tensor:
    """Bilinear resize of float64 ``x [N, C, H, W]`` to ``size``, as ``F.interpolate(..., "bilinear")`` computes it.

    Two separable passes of ``a * (1 - t) + b * t`` in elementwise float64 ops, each correctly rounded, so the
    result is bit-identical on every CPU; PyTorch's vectorised CPU kernel computes its weights in another
    precision than its scalar one, and a matrix product's sum order depends on the BLAS kernel, either enough
    to move a rounded pixel (see :func:`round_pixels`).

    Examples:
        >>> x = torch.rand(2, 3, 7, 9, dtype=torch.float64)
        >>> ref = torch.nn.functional.interpolate(x, size=(12, 5), mode="bilinear", align_corners=False)
        >>> torch.allclose(bilinear_resize(x, (12, 5)), ref, atol=1e-6)
        True
    """
    r0, r1, rt = (t.to(x.device) for t in _bilinear_taps(x.shape[-2], size[0]))
    c0, c1, ct = (t.to(x.device) for t in _bilinear_taps(x.shape[-1], size[1]))
    rt, ct = rt.to(x.dtype)[:, None], ct.to(x.dtype)
    x = x[..., r0, :] * (1 - rt) + x[..., r1, :] * rt
    return x[..., c0] * (1 - ct) + x[..., c1] * ct
