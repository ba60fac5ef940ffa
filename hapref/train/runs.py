"""The trained model of a training run folder (what ``python -m hapref.train PIPELINE --out DIR`` writes).

A run folder holds ``config.json`` and ``checkpoint.pt`` (:func:`hapref.train.fit`). Only HAP-VR runs
train a video similarity network (HAP-VR §3.3.1, Eq. 3–5) that can score query × database videos.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from torch import Tensor, nn

from hapref.similarity.network import VideoSimilarityNetwork
from hapref.train.loop import CHECKPOINT, CONFIG, load_checkpoint


def _setting(config: dict, name: str) -> object | None:
    """``name`` from the run's recorded settings, wherever the config nests them (None when absent)."""
    stack = [config]
    while stack:
        node = stack.pop()
        if name in node:
            return node[name]
        stack.extend(v for v in node.values() if isinstance(v, dict))
    return None


class _Double(nn.Module):
    """Doubles its input (a stand-in preprocessing module for the examples)."""

    def forward(self, x: Tensor) -> Tensor:
        return 2 * x


class RunScorer(NamedTuple):
    """A run's similarity network and the preprocessing its inputs need, in order (:func:`load_run_scorer`).

    Examples:
        >>> import torch
        >>> scorer = RunScorer(VideoSimilarityNetwork(dims=4, attention=True), (("double", _Double()),))
        >>> scorer.prepare(torch.ones(2, 4)).tolist()[0]
        [2.0, 2.0, 2.0, 2.0]
    """

    network: VideoSimilarityNetwork
    preprocess: tuple[tuple[str, nn.Module], ...]

    def prepare(self, frames: Tensor) -> Tensor:
        """``frames`` ``[..., D]`` passed through every preprocessing module (e.g. the PCA whitening).

        Examples:
            >>> import torch
            >>> RunScorer(VideoSimilarityNetwork(dims=4, attention=True), ()).prepare(torch.ones(2, 4)).shape
            torch.Size([2, 4])
        """
        for _, module in self.preprocess:
            frames = module(frames)
        return frames


def load_run_scorer(run_dir: str | os.PathLike) -> RunScorer:
    """Everything a HAP-VR run folder says its network needs to score new videos: the network (as
    :func:`load_run_network`) and the run's preprocessing modules (``config["preprocess"]`` of
    ``hapref.train.loop.load_run``: the PCA whitening it was trained behind), in eval mode.

    ``python -m hapref.evaluation DATASET --features FILE --checkpoint RUN`` applies ``prepare`` to every
    video's frames before scoring. A run without a recorded constructor (older runs) has no preprocessing.

    Examples:
        >>> import json, tempfile, pathlib, torch
        >>> from hapref.models import build_hapvr_network
        >>> run = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (run / "config.json").write_text(json.dumps({"pipeline": "hapvr"}))
        >>> torch.save({"model": build_hapvr_network(16).state_dict(), "step": 1}, run / "checkpoint.pt")
        >>> scorer = load_run_scorer(run)
        >>> scorer.preprocess, scorer.prepare(torch.ones(2, 3)).shape
        ((), torch.Size([2, 3]))
    """
    run = Path(run_dir)
    config = _run_config(run)
    if not isinstance(config.get("model"), dict):
        return RunScorer(load_run_network(run), ())
    from hapref.train.loop import load_run
    model, record = load_run(run)
    if not isinstance(model, VideoSimilarityNetwork):
        raise ValueError(f"{run} holds a {type(model).__name__}, not a video similarity network")
    modules = tuple((name, module.eval()) for name, module in record.get("preprocess", {}).items())
    return RunScorer(model, modules)


def _run_config(run: Path) -> dict:
    """The config.json of a HAP-VR run folder (ValueError for anything else)."""
    if not (run / CONFIG).is_file() or not (run / CHECKPOINT).is_file():
        raise ValueError(f"run_dir must be a training run folder holding {CONFIG} and {CHECKPOINT}, got {str(run)!r}")
    config = json.loads((run / CONFIG).read_text())
    pipeline = config.get("pipeline", "hapvr") if isinstance(config, dict) else None
    if pipeline != "hapvr":
        raise ValueError(f"{run} is a {pipeline!r} run; only 'hapvr' runs train a video similarity network")
    return config


def load_run_network(run_dir: str | os.PathLike) -> VideoSimilarityNetwork:
    """The video similarity network trained in a HAP-VR run folder, in eval mode (HAP-VR §3.3.1, Eq. 3–5).

    A run whose ``config.json`` records its model constructor (``"model"``) is rebuilt by
    ``hapref.train.loop.load_run``. For older runs, dimensions and attention come from the checkpoint's
    weights and the TopK rates from ``config.json`` (``temporal_k`` / ``spatial_k`` entries, at any depth)
    or, when not recorded, the pipeline's defaults (``Variant`` of ``hapref.train.hapvr``; spatial 0.1).
    Scores are in [0, 1] (hapref's training range); ψ pools in floor mode, so videos need at least 4
    frames (:func:`hapref.evaluation.similarities` tiles shorter ones). The run's own preprocessing (its
    PCA whitening of hapref's frame features) is not part of the network: :func:`load_run_scorer` returns
    both, and ``python -m hapref.evaluation --checkpoint RUN`` applies it.

    Examples:
        >>> import json, tempfile, pathlib, torch
        >>> from hapref.models import build_hapvr_network
        >>> run = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (run / "config.json").write_text(json.dumps({"pipeline": "hapvr", "settings": {"temporal_k": 0.5}}))
        >>> torch.save({"model": build_hapvr_network(16).state_dict(), "step": 1}, run / "checkpoint.pt")
        >>> net = load_run_network(run)
        >>> net.temporal_k, net.attention is not None, net.training
        (0.5, True, False)
    """
    run = Path(run_dir)
    config = _run_config(run)
    if isinstance(config.get("model"), dict):
        from hapref.train.loop import load_run
        model, _ = load_run(run)
        if not isinstance(model, VideoSimilarityNetwork):
            raise ValueError(f"{run} holds a {type(model).__name__}, not a video similarity network")
        return model
    state = load_checkpoint(run).get("model")
    if not isinstance(state, dict) or "comparator.conv1.weight" not in state:
        raise ValueError(f"{run / CHECKPOINT} holds no HAP-VR similarity network under 'model'")
    temporal_k = _setting(config, "temporal_k")
    if temporal_k is None:
        from hapref.train.hapvr import Variant
        temporal_k = Variant().temporal_k
    spatial_k = _setting(config, "spatial_k")
    attention = "attention.proj.weight" in state
    dims = state["attention.proj.weight"].shape[0] if attention else None
    net = VideoSimilarityNetwork(dims=dims, spatial_k=0.1 if spatial_k is None else float(spatial_k),
                                 temporal_k=float(temporal_k), attention=attention)
    net.load_state_dict(state)
    return net.eval()
