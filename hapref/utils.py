"""Seeding, determinism and device choice shared by the whole package."""

from __future__ import annotations

import contextlib
import functools
import os
import random
from collections.abc import Callable

import numpy as np
import torch


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 when it is half precision (float16/bfloat16), unchanged when float32 or float64.

    Losses and scores use it where exponentials or small epsilons need float32's range, without throwing
    away float64 when a caller computes in it (the book's CPU profiles do, see ``portable_precision``).

    Examples:
        >>> at_least_float32(torch.ones(2, dtype=torch.float16)).dtype, at_least_float32(torch.ones(2, dtype=torch.float64)).dtype
        (torch.float32, torch.float64)
    """
    return x.to(torch.promote_types(x.dtype, torch.float32))


#: The device types whose autocast :func:`float32_compute` switches off (those torch can autocast here).
_AUTOCAST_DEVICES: tuple[str, ...] = tuple(d for d in ("cpu", "cuda", "xpu", "mps")
                                          if hasattr(torch, d) or d == "cpu")


def _half(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16)


def autocast_disabled() -> contextlib.ExitStack:
    """A context in which no device autocasts (``torch.autocast(d, enabled=False)`` for each active one).

    Inside it ``@`` and ``einsum`` keep their inputs' dtype, so float32 work stays float32 under AMP.

    Examples:
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     with autocast_disabled():
        ...         inner = (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
        ...     outer = (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
        >>> inner, outer
        (torch.float32, torch.bfloat16)
    """
    stack = contextlib.ExitStack()
    for device in _AUTOCAST_DEVICES:
        try:
            enabled = torch.is_autocast_enabled(device)
        except (RuntimeError, TypeError):      # a device type this build cannot autocast
            continue
        if enabled:
            stack.enter_context(torch.autocast(device_type=device, enabled=False))
    return stack


def float32_compute(fn: Callable) -> Callable:
    """Decorator: ``fn`` runs with autocast off and its float16/bfloat16 tensor arguments promoted to float32.

    Every loss of the package is wrapped in it, so under ``torch.autocast`` (the trainer's AMP) a loss
    accumulates in float32, clamps with float32's limits, and its custom autograd Functions see one dtype;
    gradients reach half-precision inputs in their own dtype (the promotion is an ordinary differentiable
    cast). float32 and float64 arguments, and anything that is not a floating tensor, pass unchanged.

    Examples:
        >>> @float32_compute
        ... def gram(x):
        ...     return x @ x.T
        >>> x = torch.ones(2, 3, dtype=torch.float16, requires_grad=True)
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     y = gram(x)
        >>> y.dtype
        torch.float32
        >>> y.sum().backward(); x.grad.dtype
        torch.float16
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = tuple(a.float() if _half(a) else a for a in args)
        kwargs = {k: v.float() if _half(v) else v for k, v in kwargs.items()}
        with autocast_disabled():
            return fn(*args, **kwargs)

    return wrapper


def cache_per_dtype(maxsize: int = 4) -> Callable[[Callable], Callable]:
    """``functools.lru_cache`` whose key also holds the default dtype (features cached in float64 by a chapter
    must not be handed to a float32 caller in the same process).

    Examples:
        >>> @cache_per_dtype()
        ... def zeros(n):
        ...     return torch.zeros(n)
        >>> previous = torch.get_default_dtype()
        >>> a = zeros(2); _ = portable_precision(); b = zeros(2); _ = torch.set_default_dtype(previous)
        >>> a.dtype, b.dtype, zeros(2) is a
        (torch.float32, torch.float64, True)
    """
    def decorate(fn: Callable) -> Callable:
        @functools.lru_cache(maxsize=maxsize)
        def cached(dtype: torch.dtype, *args, **kwargs):
            return fn(*args, **kwargs)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return cached(torch.get_default_dtype(), *args, **kwargs)
        wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return wrapper
    return decorate


def portable_precision(enabled: bool = True) -> torch.dtype:
    """Make float64 the default dtype (``enabled``), so results are the same on every CPU; returns it.

    float32 kernels round differently on different CPUs (vector width, fused multiply-add, the split of a
    reduction between threads, even ``torch.randn``'s vectorised sampler), and a training run amplifies those
    last-bit differences into different printed digits. In float64 the differences start ~10⁹ times smaller
    and stay below the digits the book prints. The book's CPU ("quick") profiles call this in their first
    cell; modules, random initialisations and features created afterwards are float64. ``enabled=False``
    restores float32.

    Examples:
        >>> portable_precision(), torch.nn.Linear(2, 2).weight.dtype
        (torch.float64, torch.float64)
        >>> portable_precision(False), torch.nn.Linear(2, 2).weight.dtype
        (torch.float32, torch.float32)
    """
    dtype = torch.float64 if enabled else torch.float32
    torch.set_default_dtype(dtype)
    return dtype


def seed_everything(seed: int, deterministic: bool = True) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA); return a CPU generator seeded the same.

    With ``deterministic`` the cuDNN autotuner is off and torch prefers deterministic kernels
    (warning, not failing, where an op has none), so a run repeats bit for bit on one machine.

    Examples:
        >>> g = seed_everything(0, deterministic=False)
        >>> a = torch.rand(2)
        >>> _ = seed_everything(0, deterministic=False)
        >>> torch.equal(a, torch.rand(2)), torch.rand(1, generator=g).shape
        (True, torch.Size([1]))
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def get_device(prefer: str | torch.device | None = None) -> torch.device:
    """The device to run on: ``prefer`` if given, else CUDA when available, else CPU.

    Examples:
        >>> get_device("cpu")
        device(type='cpu')
    """
    if prefer is not None:
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
