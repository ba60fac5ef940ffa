"""The generic trainer: it learns, it resumes exactly, its checkpoints load safely, the CLI is wired."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from hapref.train import PIPELINES, TrainConfig, fit, load_checkpoint, load_pipeline, lr_factor
from hapref.train.__main__ import main


class ToyRegression:
    """y = x·w* + noise, learned by a small MLP with dropout (so the RNG state matters on resume)."""

    def __init__(self, seed: int = 0, fail_at: int | None = None) -> None:
        self.seed, self.fail_at = seed, fail_at
        g = torch.Generator().manual_seed(1234)
        self.w = torch.randn(8, 1, generator=g)
        self.x_eval = torch.randn(64, 8, generator=g)

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1))

    def batch(self, step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if step == self.fail_at:
            raise KeyboardInterrupt("simulated interruption")
        g = torch.Generator().manual_seed(self.seed * 100_003 + step)
        x = torch.randn(32, 8, generator=g)
        return x.to(device), (x @ self.w + 0.01 * torch.randn(32, 1, generator=g)).to(device)

    def loss(self, model: nn.Module, batch) -> dict[str, torch.Tensor]:
        x, y = batch
        mse = (model(x) - y).pow(2).mean()
        return {"loss": mse, "rmse": mse.detach().sqrt()}

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        x = self.x_eval.to(device)
        return {"eval_mse": float((model(x) - x @ self.w.to(device)).pow(2).mean())}


def test_training_reduces_the_loss() -> None:
    result = fit(ToyRegression(), TrainConfig(steps=60, lr=1e-2, warmup_steps=5, eval_every=20), progress=False)
    losses = [h["loss"] for h in result.history]
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    assert [h["step"] for h in result.history if "eval_mse" in h] == [20, 40, 60]
    assert result.metrics["eval_mse"] == result.history[-1]["eval_mse"]


def test_schedule_is_warmup_then_cosine() -> None:
    cfg = TrainConfig(steps=100, warmup_steps=10)
    assert lr_factor(0, cfg) == pytest.approx(0.01)
    assert lr_factor(5, cfg) == pytest.approx(0.01 + 0.99 * 0.5)
    assert lr_factor(10, cfg) == pytest.approx(1.0)
    assert lr_factor(55, cfg) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_factor(100, cfg) == pytest.approx(0.1)


def test_resume_is_exact(tmp_path) -> None:
    cfg = TrainConfig(steps=12, lr=1e-2, warmup_steps=3, eval_every=4, seed=3)
    reference = fit(ToyRegression(seed=3), cfg, progress=False)
    with pytest.raises(KeyboardInterrupt):
        fit(ToyRegression(seed=3, fail_at=9), cfg, out_dir=tmp_path, progress=False)
    assert load_checkpoint(tmp_path)["step"] == 9      # periodic checkpoints: every step of a 12-step run
    resumed = fit(ToyRegression(seed=3), cfg, out_dir=tmp_path, resume=True, progress=False)
    for name, value in reference.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in reference.history]
    assert resumed.metrics == reference.metrics


def test_checkpoint_is_plain_and_loads_with_weights_only(tmp_path) -> None:
    cfg = TrainConfig(steps=3, lr=1e-3)
    result = fit(ToyRegression(), cfg, out_dir=tmp_path, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert sorted(state) == ["history", "model", "optimizer", "preprocess", "rng", "rng_ranks", "scaler", "scheduler",
                             "step", "task", "world_size"]
    assert state["world_size"] == 1 and state["rng_ranks"] == []        # one process: its RNG state is "rng"
    model = ToyRegression().build_model()
    model.load_state_dict(state["model"])
    for name, value in result.model.state_dict().items():
        assert torch.equal(value, model.state_dict()[name])
    assert json.loads((tmp_path / "config.json").read_text())["train"]["steps"] == 3
    assert json.loads((tmp_path / "metrics.json").read_text()) == result.metrics
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftover temporary files


def test_resume_rejects_a_different_config(tmp_path) -> None:
    fit(ToyRegression(), TrainConfig(steps=2), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"other settings \(train.steps: 2 -> 4\)"):
        fit(ToyRegression(), TrainConfig(steps=4), out_dir=tmp_path, resume=True, progress=False)


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        TrainConfig(steps=5, warmup_steps=6)
    with pytest.raises(ValueError, match="task"):
        fit(object(), TrainConfig(steps=1), progress=False)
    with pytest.raises(ValueError, match="out_dir"):
        fit(ToyRegression(), TrainConfig(steps=1), resume=True, progress=False)

    class NaNTask(ToyRegression):
        def loss(self, model, batch):
            return {"loss": model(batch[0]).sum() * float("nan")}

    with pytest.raises(FloatingPointError, match="step 0"):
        fit(NaNTask(), TrainConfig(steps=1), progress=False)


def test_registry_names_missing_and_unknown_pipelines(monkeypatch, capsys) -> None:
    assert set(PIPELINES) >= {"hapvr", "radial"}
    with pytest.raises(ValueError, match="unknown pipeline"):
        load_pipeline("nope")
    monkeypatch.setitem(PIPELINES, "ghost", "hapref.train.ghost_pipeline_not_written")
    with pytest.raises(ValueError, match="does not exist yet"):
        load_pipeline("ghost")
    with pytest.raises(SystemExit):
        main(["ghost", "--profile", "smoke"])
    assert "does not exist yet" in capsys.readouterr().err
