"""The pipelines' defaults are the papers' final methods; released presets hold the released settings."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

from hapref.train import load_pipeline
from hapref.train.registry import PIPELINES


def test_default_losses_are_the_papers_methods() -> None:
    expected = {"hapvr": "quadlinear_ap", "tca": "circle", "radial": "radial", "autossvh": "autossvh"}
    for name, loss in expected.items():
        pipeline = load_pipeline(name)
        assert pipeline.DEFAULT_LOSS == loss and loss in pipeline.LOSSES
        assert "released" in pipeline.PROFILES or name == "radial"   # Radial has no released code


def test_no_pipeline_module_imports_another() -> None:
    modules = {v.rsplit(".", 1)[1] for v in PIPELINES.values()}
    root = Path(__file__).resolve().parents[1] / "hapref" / "train"
    for name in modules:
        tree = ast.parse((root / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        others = {f"hapref.train.{m}" for m in modules - {name}}
        assert not imported & others, f"{name}.py imports {imported & others}"
        assert not any(n.module == "hapref.train" and {a.name for a in n.names} & modules
                       for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))


def test_tca_defaults_and_released_preset() -> None:
    from hapref.train import tca
    v = tca.Variant()
    assert (v.loss, v.gamma, v.m, v.temperature) == ("circle", 256.0, 0.25, 1 / 256)
    r = tca.PROFILES["released"]
    # the README's run: views padded to 300 frames (the paper trains on 64); 8 background negatives per item, the
    # most the 4,096-key queue takes in one step (the README's 16 overflow it: refused, as the released code does)
    assert (r.frames, r.whiten_dim, r.nhead, r.dim_feedforward, r.dropout, r.bank_size, r.lr, r.backbone) == \
        (300, 1024, 8, 2048, 0.5, 4096, 1e-5, "resnet50")
    assert r.distractors_per_step == 8 * r.batch_videos == r.bank_size
    assert all(p.distractors_per_step <= p.bank_size for p in tca.PROFILES.values())
    assert (r.in_batch_negatives, r.bank_init, r.region_windows, r.grad_clip) == (False, "random", "released", None)
    assert r.pad_views and all(p.dropout == 0.5 for p in tca.PROFILES.values())
    assert not any(p.in_batch_negatives for p in tca.PROFILES.values())     # the paper's negatives by default
    with pytest.raises(ValueError, match="m"):
        tca.Variant(m=1.5)
    with pytest.raises(ValueError, match="distractors_per_step=32 keys per step .* bank_size=16"):
        tca.TCATask(dataclasses.replace(tca.PROFILES["smoke"], distractors_per_step=32))


def test_tca_bank_holds_distractors_and_keys_carry_no_gradient() -> None:
    from hapref.train import tca
    task = tca.TCATask("smoke", tca.Variant(), seed=0)
    model = task.build_model()
    pair_clips = set()
    for step in range(6):
        batch = task.batch(step, torch.device("cpu"))
        pair_clips |= set(batch["clips"].tolist())
        terms = task.loss(model, batch)
        terms["loss"].backward()
    keys, ids = model.bank.filled()
    assert len(ids) == model.bank.size and (ids < 0).all()          # distractor ids only, never a pair clip
    assert len(set(ids.tolist())) == len(task.data.distractors)       # every distinct distractor: new negatives
    assert not keys.requires_grad
    assert all(p.grad is not None for p in model.aggregator.parameters() if p.requires_grad)


def test_radial_critical_windows_stay_inside_their_clip_and_q_differs_from_p() -> None:
    from hapref.data.highlights import make_highlight_video
    from hapref.detection import HighlightTask
    video = make_highlight_video(num_clips=6, size=32, seed=0)
    window = 8
    features = torch.randn(video.frames.shape[0], 4)
    task = HighlightTask(video, features, lambda: None, None, window=window, batch=64)
    for k, ((start, end), critical) in enumerate(zip(video.clips[:-1], video.critical[:-1])):
        starts = task.event[k]
        assert (starts >= start).all() and (starts + window <= end).all()          # never across the cut
        if critical:
            event_start = end - int(video.critical_frames[start:end].sum())
            assert ((starts + window - event_start) >= window // 2).all()        # half the window in the event
    same = 0
    for step in range(5):
        windows, _ = task.batch(step, torch.device("cpu"))
        q, p = windows.view(4, -1, window, 4)[:2]
        same += int((q == p).all(dim=(1, 2)).sum())
    assert same == 0


def test_autossvh_released_presets_follow_the_configs() -> None:
    from hapref.train import autossvh
    p = autossvh.PROFILES["released"]
    assert (p["frames"], p["nbits"], p["batch"], p["drop_ratio"], p["alpha"], p["beta"], p["tau_plus"]) == \
        (25, 64, 128, 0.5, 1.0, 0.2, 0.1)
    assert p["clusters"] == (250, 400, 600) and p["warmup"] == 50 * 75 and p["every"] == 75
    act = autossvh.released_profile("activitynet")
    assert (act["alpha"], act["beta"], act["tau_plus"], act["frames"]) == (0.2, 0.01, 0.05, 30)
    with pytest.raises(ValueError, match="dataset"):
        autossvh.released_profile("kinetics")
    with pytest.raises(ValueError, match="pre-extracted"):
        autossvh.video_features("released")


def test_tca_padded_views_carry_valid_flags_into_the_loss() -> None:
    """pad_views (the released 64-frame crops): short views are zero-padded and the padding is masked out."""
    from dataclasses import replace

    from hapref.train import tca
    profile = replace(tca.PROFILES["smoke"], pad_views=True, frames=12)     # smoke clips have 8 frames
    task = tca.TCATask(profile, tca.Variant(), seed=0)
    assert not task.data.train_valid.all() and task.data.train_valid[..., 0].all()
    batch = task.batch(0, torch.device("cpu"))
    model = task.build_model().eval()
    terms = task.loss(model, batch)
    assert torch.isfinite(terms["loss"])
    garbage = dict(batch, anchor=torch.where(batch["anchor_valid"][..., None], batch["anchor"], torch.tensor(1e3)))
    model.bank = None
    with torch.no_grad():                     # padded frames do not change the anchor embeddings
        assert torch.allclose(model(batch["anchor"], batch["anchor_valid"]),
                              model(garbage["anchor"], garbage["anchor_valid"]), atol=1e-5)


def test_missing_weight_files_are_reported_before_any_data_is_generated(monkeypatch, tmp_path) -> None:
    from hapref.train import hapvr

    def generate(*args, **kwargs):
        raise AssertionError("the benchmark was generated before the weight files were checked")

    monkeypatch.setattr(hapvr, "build_copy_benchmark", generate)
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))       # an empty hub cache
    with pytest.raises(FileNotFoundError, match="resnet50-0676ba61.pth"):
        hapvr.prepare_data(dataclasses.replace(hapvr.PROFILES["smoke"], backbone="resnet50"))
    with pytest.raises(FileNotFoundError, match="dino_checkpoint"):
        hapvr.prepare_data(dataclasses.replace(hapvr.PROFILES["smoke"], teacher="dino",
                                               dino_checkpoint=str(tmp_path / "dino.pth")))
