"""Radial's CNN+LSTM trained end to end (``--set finetune_backbone=true``): gradients, learning rates, a tiny run."""

from __future__ import annotations

import pytest
import torch

from hapref.features import SmallCNN
from hapref.models.radial import FC_LR_MULTIPLIER, QuadletVideoNet
from hapref.train.loop import fit, load_checkpoint
from hapref.train.radial import build


def _backbone_grads(finetune: bool) -> list[torch.Tensor | None]:
    task, _ = build("smoke", "radial", seed=0, progress=False,
                    overrides={"finetune_backbone": str(finetune).lower()})
    torch.manual_seed(0)
    model = task.build_model().train()
    task.loss(model, task.batch(0, torch.device("cpu")))["loss"].backward()
    assert model.fc[0].weight.grad is not None and model.fc[0].weight.grad.abs().sum() > 0
    return [p.grad for p in (model.backbone.parameters() if model.backbone is not None else [])]


def test_gradients_reach_the_backbone_only_when_finetuning() -> None:
    grads = _backbone_grads(True)
    assert grads and all(g is not None for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0
    assert _backbone_grads(False) == []          # the default head trains on cached frozen features
    frozen = QuadletVideoNet(128, fc_dim=8, hidden_dim=4, backbone=SmallCNN(image_size=32)).train()
    frozen([torch.randint(0, 255, (3, 32, 32, 3), dtype=torch.uint8)]).sum().backward()
    assert all(p.grad is None for p in frozen.backbone.parameters())


def test_end_to_end_forward_matches_per_clip_features_and_trains_in_train_mode() -> None:
    torch.manual_seed(0)
    net = QuadletVideoNet(128, fc_dim=8, hidden_dim=4, backbone=SmallCNN(image_size=32, frozen=False))
    net.train()
    assert net.finetunes_backbone and net.backbone.training      # batch norms use batch statistics (paper)
    net.eval()
    clips = [torch.randint(0, 255, (t, 32, 32, 3), dtype=torch.uint8) for t in (3, 5)]
    joint = net(clips)                                           # all frames through the CNN at once
    alone = torch.cat([net([c]) for c in clips])
    assert torch.allclose(joint, alone, atol=1e-6)


def test_parameter_groups_carry_the_fc_multiplier(tmp_path) -> None:
    task, config = build("smoke", "radial", seed=0, progress=False,
                         overrides={"finetune_backbone": "true", "steps": "2", "lr": "0.002"})
    model = task.build_model()
    head, cnn = task.param_groups(model, config.lr)
    assert head["lr"] == pytest.approx(0.002) and cnn["lr"] == pytest.approx(0.002 / FC_LR_MULTIPLIER)
    assert FC_LR_MULTIPLIER == 10.0                               # Radial "Experimental settings"
    ids = lambda params: {id(p) for p in params}                  # noqa: E731
    assert ids(cnn["params"]) == ids(model.backbone.parameters())
    assert ids(head["params"]) | ids(cnn["params"]) == ids(model.parameters())
    assert not ids(head["params"]) & ids(cnn["params"])
    fit(task, config, out_dir=tmp_path, progress=False)
    groups = load_checkpoint(tmp_path)["optimizer"]["param_groups"]
    assert [g["initial_lr"] for g in groups] == pytest.approx([0.002, 0.0002])
    assert groups[0]["lr"] / groups[1]["lr"] == pytest.approx(FC_LR_MULTIPLIER)  # the schedule keeps the ratio
    assert groups[0]["weight_decay"] == groups[1]["weight_decay"]                # decay multiplier 1


def test_a_tiny_end_to_end_run_trains_the_cnn() -> None:
    task, config = build("smoke", "radial", seed=0, progress=False,
                         overrides={"finetune_backbone": "true", "steps": "4"})
    torch.manual_seed(0)
    before = {k: v.clone() for k, v in task.build_model().state_dict().items()}
    result = fit(task, config, progress=False)
    after = result.model.state_dict()
    assert set(result.metrics) == {"QP", "TP", "NDCG", "MAP", "fine_MAP", "train_fine_MAP"}
    assert all(0.0 <= v <= 1.0 for v in result.metrics.values())
    moved = [k for k in before if before[k].is_floating_point() and not torch.equal(before[k], after[k])]
    assert any(k.startswith("backbone.") for k in moved) and any(k.startswith("fc.") for k in moved)
    losses = [h["loss"] for h in result.history if "loss" in h]
    assert losses and all(torch.isfinite(torch.tensor(losses)))


def test_finetune_backbone_is_off_by_default_and_checked() -> None:
    task, _ = build("smoke", "radial", seed=0, progress=False)
    assert not task.finetune and not task.build_model().finetunes_backbone
    with pytest.raises(ValueError, match="finetune_backbone"):
        build("smoke", "radial", seed=0, progress=False, overrides={"finetune_backbone": "maybe"})


def test_an_end_to_end_run_folder_reloads_with_its_trained_cnn(tmp_path) -> None:
    from hapref.train import load_run

    task, config = build("smoke", "radial", seed=0, progress=False,
                         overrides={"finetune_backbone": "true", "steps": "2"})
    trained = fit(task, config, out_dir=tmp_path, progress=False).model.eval()
    model, _ = load_run(tmp_path)
    model.eval()
    assert model.finetunes_backbone
    for (name, a), b in zip(trained.state_dict().items(), model.state_dict().values()):
        assert torch.equal(a, b), name
    clips = [task.test_videos[0], task.test_videos[1]]
    with torch.no_grad():
        assert torch.allclose(model(clips), trained(clips))
