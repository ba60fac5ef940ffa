"""Seeding, determinism and device choice shared by the whole package."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


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
