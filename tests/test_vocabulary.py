"""One vocabulary: ``ignore=`` (True = left out) in losses and metrics, ``valid=`` (True = real frame) elsewhere."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import hapref
from hapref.losses import QuadLinearAP, SmoothAP
from hapref.metrics import mean_average_precision, ndcg
from hapref.models import TemporalContextAggregator
from hapref.similarity import VideoSimilarityNetwork, chamfer_similarity, frame_to_frame, topk_chamfer


def _public_modules():
    for info in pkgutil.walk_packages(hapref.__path__, "hapref."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def _signatures():
    for module in _public_modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            candidates = [(name, obj)]
            if inspect.isclass(obj):
                candidates += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                               if callable(f) and (not m.startswith("_") or m == "__init__")]
            for qualname, fn in candidates:
                try:
                    yield f"{module.__name__}.{qualname}", inspect.signature(fn)
                except (TypeError, ValueError):
                    continue


def test_no_public_callable_takes_a_mask_parameter() -> None:
    offenders = [name for name, sig in _signatures() if any("mask" in p for p in sig.parameters)]
    assert offenders == []


@pytest.mark.parametrize("call, new", [
    (lambda: mean_average_precision(torch.rand(2, 3), torch.ones(2, 3), mask=None), "ignore"),
    (lambda: ndcg(torch.rand(2, 3), torch.ones(2, 3), mask=None), "ignore"),
    (lambda: QuadLinearAP()(torch.rand(2, 3), torch.ones(2, 3), mask=None), "ignore"),
    (lambda: SmoothAP()(torch.rand(2, 3), torch.ones(2, 3), mask=None), "ignore"),
    (lambda: topk_chamfer(torch.rand(2, 3), 0.5, mask=None), "valid"),
    (lambda: chamfer_similarity(torch.rand(2, 3), mask=None), "valid"),
    (lambda: frame_to_frame(torch.rand(1, 2, 1, 4), torch.rand(1, 2, 1, 4), x_mask=None), "x_valid"),
    (lambda: TemporalContextAggregator(8, 2, 1, 16)(torch.rand(1, 3, 8), mask=None), "valid"),
    (lambda: VideoSimilarityNetwork(dims=4).score(torch.rand(1, 2, 1, 4), torch.rand(1, 2, 1, 4),
                                                  query_mask=None), "query_valid"),
])
def test_old_keyword_names_the_new_one(call, new: str) -> None:
    with pytest.raises(TypeError, match=f"it is now '{new}'"):
        call()


def test_ignore_leaves_entries_out_and_valid_keeps_real_frames() -> None:
    """The two words mean opposite things, so the same bool tensor means opposite things to each."""
    scores = torch.tensor([[0.9, 0.8, 0.1]])
    relevance = torch.tensor([[False, True, True]])
    ignore = torch.tensor([[True, False, False]])  # drop the irrelevant top item: perfect ranking
    assert mean_average_precision(scores, relevance, ignore=ignore).item() == pytest.approx(1.0)
    sim = torch.tensor([[0.2, 0.9], [0.4, 0.1]])
    valid = torch.tensor([[True, False], [True, False]])  # second target frame is padding
    assert chamfer_similarity(sim, valid=valid).item() == pytest.approx(0.3)
