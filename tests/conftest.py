"""Shared pytest fixtures."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def load_benchmark(name: str):
    """The module of ``benchmarks/<name>.py`` (the benchmark scripts are not a package), freshly executed."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tie_orders(scores, relevant):
    """Every ranking of a small list that a sort by descending score can give (each tie group permuted):
    ``(scores, relevant)`` NumPy pairs in rank order."""
    order = np.argsort(-scores, kind="stable")
    s, r = scores[order], relevant[order]
    groups = [list(range(len(s)))[i:j] for i, j in itertools.pairwise(
        [0] + [k for k in range(1, len(s)) if s[k] != s[k - 1]] + [len(s)])]
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        index = [k for p in perms for k in p]
        yield s[index], r[index]


def devices() -> list[str]:
    """CPU always, CUDA when present: parametrise device tests with this."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


class ToyTCATask:
    """A tiny task whose model_spec names an allow-listed constructor (TCA's build_model): real run folders."""

    kwargs = {"dim": 8, "nhead": 2, "dim_feedforward": 16, "dropout": 0.0, "bank_size": 0}

    def build_model(self):
        from hapref.train.tca import build_model
        return build_model(**self.kwargs)

    def model_spec(self):
        return {"factory": "hapref.train.tca:build_model", "kwargs": dict(self.kwargs)}

    def batch(self, step, device):
        return torch.randn(4, 5, 8, generator=torch.Generator().manual_seed(step)).to(device)

    def loss(self, model, batch):
        return {"loss": model(batch).sum(-1).pow(2).mean()}

    def evaluate(self, model):
        return {}


@pytest.fixture()
def toy_run(tmp_path):
    """A run folder written by fit() for :class:`ToyTCATask` (2 steps)."""
    from hapref.train.loop import TrainConfig, fit
    folder = tmp_path / "run"
    fit(ToyTCATask(), TrainConfig(steps=2, lr=1e-2), folder, progress=False)
    return folder
