"""Doctests of the package (``pytest --doctest-modules hapref``): torch and NumPy at hand, a fixed seed."""

import os
import tempfile

import numpy as np
import pytest
import torch

# `python -m hapref.train` without --out saves its run in $HAPREF_RUNS (default runs/): tests keep the checkout clean
os.environ.setdefault("HAPREF_RUNS", tempfile.mkdtemp(prefix="hapref-runs-"))


@pytest.fixture(autouse=True)
def _doctest_setup(request: pytest.FixtureRequest) -> None:
    if isinstance(request.node, pytest.DoctestItem):
        namespace = request.getfixturevalue("doctest_namespace")
        namespace.update(torch=torch, np=np)
        torch.manual_seed(0)
