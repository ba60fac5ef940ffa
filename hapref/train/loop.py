"""One small training loop for every pipeline of the book (HAP-VR, Radial, ...).

A pipeline supplies a :class:`Task` (model, deterministic batches, loss, evaluation); :func:`fit`
does the rest: AdamW, linear warm-up + cosine schedule (the S2VS/HAP-VR schedule, the released HAP-VR code, https://github.com/yafeng19/HAP-VR), AMP on CUDA, periodic evaluation, atomic checkpoints and exact resume.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from hapref.files import atomic_torch_save, atomic_write_bytes
from hapref.utils import get_device, seed_everything

CHECKPOINT = "checkpoint.pt"
CONFIG = "config.json"
METRICS = "metrics.json"


@dataclass
class TrainConfig:
    """Optimisation settings of one run (HAP-VR §4.1: AdamW + warm-up + cosine annealing)."""

    steps: int
    lr: float = 1e-4
    weight_decay: float = 1e-2
    warmup_steps: int = 0
    eval_every: int = 0
    seed: int = 0
    amp: bool = True
    grad_clip: float | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"warmup_steps must lie in [0, steps={self.steps}], got {self.warmup_steps}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0 (0 = only at the end), got {self.eval_every}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@runtime_checkable
class Task(Protocol):
    """What a pipeline plugs into :func:`fit`."""

    def build_model(self) -> nn.Module:
        """A freshly initialised model (called after seeding)."""

    def batch(self, step: int, device: torch.device) -> Any:
        """The training batch of ``step``, a pure function of (task seed, step) so resume is exact."""

    def loss(self, model: nn.Module, batch: Any) -> dict[str, Tensor]:
        """Loss terms; key ``"loss"`` is optimised, the others are only logged."""

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Evaluation metrics of ``model`` (called in eval mode without gradients)."""


@dataclass
class TrainResult:
    """The trained model, one history entry per step (eval metrics merged in) and the final metrics."""

    model: nn.Module
    history: list[dict[str, float]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


def lr_factor(step: int, config: TrainConfig, start: float = 0.01, final: float = 0.1) -> float:
    """Learning-rate multiplier after ``step`` updates: linear warm-up from ``start``·lr, then cosine to ``final``·lr.

    The released HAP-VR schedule (the released HAP-VR code, https://github.com/yafeng19/HAP-VR).
    """
    if step < config.warmup_steps:
        return start + (1.0 - start) * step / config.warmup_steps
    span = max(config.steps - config.warmup_steps, 1)
    progress = min((step - config.warmup_steps) / span, 1.0)
    return final + (1.0 - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _rng_state() -> dict[str, Any]:
    """All RNG states as tensors and lists (loadable with ``weights_only=True``)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))


def _save_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True).encode())


def load_checkpoint(out_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The plain state-dict checkpoint that :func:`fit` wrote to ``out_dir`` (loaded with ``weights_only=True``)."""
    return torch.load(Path(out_dir) / CHECKPOINT, map_location=map_location, weights_only=True)


def _evaluate(task: Task, model: nn.Module) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        metrics = {k: float(v) for k, v in task.evaluate(model).items()}
    model.train()
    return metrics


def fit(task: Task, config: TrainConfig, out_dir: str | Path | None = None, resume: bool = False,
        progress: bool = True) -> TrainResult:
    """Train ``task`` for ``config.steps`` AdamW steps; evaluate every ``eval_every`` steps and at the end.

    With ``out_dir`` a checkpoint (model, optimiser, scheduler, AMP scaler, RNG states, step, history)
    is written atomically at every evaluation and at the end, next to ``config.json``. With ``resume``
    the run continues from that checkpoint and reaches the same weights as an uninterrupted run.
    """
    if not isinstance(task, Task):
        raise ValueError(f"task must implement build_model/batch/loss/evaluate, got {type(task).__name__}")
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (the folder holding the checkpoint)")
    device = get_device(config.device)
    use_amp = config.amp and device.type == "cuda"
    seed_everything(config.seed)
    model = task.build_model().to(device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the task's model has no trainable parameters")
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config))
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp)
    history: list[dict[str, float]] = []
    start = 0

    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        saved_config = out / CONFIG
        if resume and (out / CHECKPOINT).exists():
            if json.loads(saved_config.read_text())["train"] != asdict(config):
                raise ValueError(f"cannot resume: {saved_config} was written with a different TrainConfig")
            state = load_checkpoint(out, map_location=device)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            scaler.load_state_dict(state["scaler"])
            _set_rng_state(state["rng"])
            history, start = list(state["history"]), int(state["step"])
        else:
            _save_json(saved_config, {"train": asdict(config)})

    def checkpoint(step: int) -> None:
        if out is None:
            return
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                 "rng": _rng_state(), "step": step, "history": history}
        atomic_torch_save(state, out / CHECKPOINT)

    metrics: dict[str, float] = {}
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, disable=not progress,
               desc="train", dynamic_ncols=True)
    for step in bar:
        batch = task.batch(step, device)
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
            terms = task.loss(model, batch)
        if "loss" not in terms:
            raise ValueError(f"task.loss must return a dict with key 'loss', got keys {sorted(terms)}")
        loss = terms["loss"].float()
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if config.grad_clip is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        entry = {"step": step + 1, "lr": optimizer.param_groups[0]["lr"]}
        entry.update({k: float(v.detach()) for k, v in terms.items()})
        scheduler.step()
        done = step + 1
        if done == config.steps or (config.eval_every and done % config.eval_every == 0):
            metrics = _evaluate(task, model)
            entry.update(metrics)
            history.append(entry)
            checkpoint(done)
        else:
            history.append(entry)
        bar.set_postfix(loss=f"{entry['loss']:.4f}", refresh=False)
    bar.close()
    if not metrics:  # resumed from the final checkpoint: nothing left to train
        metrics = _evaluate(task, model)
    if out is not None:
        _save_json(out / METRICS, metrics)
    return TrainResult(model=model, history=history, metrics=metrics)
