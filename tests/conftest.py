"""Shared pytest fixtures."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def devices() -> list[str]:
    """CPU always, CUDA when present: parametrise device tests with this."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
