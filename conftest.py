"""Doctests of the package (``pytest --doctest-modules hapref``): torch and NumPy at hand, a fixed seed."""

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _doctest_setup(request: pytest.FixtureRequest) -> None:
    if isinstance(request.node, pytest.DoctestItem):
        namespace = request.getfixturevalue("doctest_namespace")
        namespace.update(torch=torch, np=np)
        torch.manual_seed(0)
