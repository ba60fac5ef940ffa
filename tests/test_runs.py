"""Run folders: identity in config.json, refusal of mismatched resumes and overwrites, exact resume after a crash,
atomic saves, damaged files reported with their path, one-call loading of a trained model, validated settings."""

from __future__ import annotations

import json

import pytest
import torch

from hapref.train import TrainConfig, fit, load_checkpoint, load_pipeline, load_run
from hapref.train.__main__ import main
from hapref.train.settings import override_all

# smoke-sized runs: few steps, a checkpoint every 2 steps (AutoSSVH re-clusters every 2 steps from step 2)
SHORT = {"hapvr": {}, "tca": {}, "radial": {}, "autossvh": {"warmup": "2", "every": "2"}}


def _build(name: str, **extra: str):
    pipeline = load_pipeline(name)
    overrides = {"steps": "6", "checkpoint_every": "2", **SHORT[name], **extra}
    return pipeline.build("smoke", pipeline.DEFAULT_LOSS, 0, progress=False, overrides=overrides)


class Crash(RuntimeError):
    pass


class CrashAt:
    """The task, except that ``batch`` raises at ``step`` (a process killed mid-run)."""

    def __init__(self, task, step: int) -> None:
        self.task, self.step = task, step

    def __getattr__(self, name):
        return getattr(self.task, name)

    def build_model(self):
        return self.task.build_model()

    def loss(self, model, batch):
        return self.task.loss(model, batch)

    def evaluate(self, model):
        return self.task.evaluate(model)

    def batch(self, step, device):
        if step == self.step:
            raise Crash(f"killed at step {step}")
        return self.task.batch(step, device)


@pytest.mark.parametrize("name", sorted(SHORT))
def test_killed_run_resumes_bit_for_bit(name: str, tmp_path) -> None:
    task, config = _build(name)
    reference = fit(task, config, progress=False)
    task, config = _build(name)
    with pytest.raises(Crash):
        fit(CrashAt(task, 5), config, out_dir=tmp_path, progress=False)   # last checkpoint: step 4
    assert load_checkpoint(tmp_path)["step"] == 4
    task, config = _build(name)
    resumed = fit(task, config, out_dir=tmp_path, resume=True, progress=False)
    expected, got = reference.model.state_dict(), resumed.model.state_dict()
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected), name
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in reference.history]
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(1, 7))


def test_cli_records_the_run_and_refuses_a_mismatched_resume(tmp_path, capsys) -> None:
    out = str(tmp_path / "run")
    assert main(["tca", "--profile", "smoke", "--out", out, "--steps", "3", "--no-progress"]) == 0
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (record["pipeline"], record["profile"], record["loss"], record["seed"], record["world_size"]) == \
        ("tca", "smoke", "circle", 0, 1)
    assert record["settings"]["variant"]["gamma"] == 256.0 and record["train"]["steps"] == 3
    assert record["hapref_version"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["tca", "--profile", "smoke", "--out", out, "--steps", "3", "--resume", "--loss", "infonce",
              "--no-progress"])
    assert exit_info.value.code != 0
    assert "'circle' -> 'infonce'" in capsys.readouterr().err
    with pytest.raises(SystemExit):                    # a finished run is not overwritten ...
        main(["tca", "--profile", "smoke", "--out", out, "--steps", "3", "--no-progress"])
    assert "--force" in capsys.readouterr().err
    assert main(["tca", "--profile", "smoke", "--out", out, "--steps", "3", "--loss", "infonce", "--force",
                 "--no-progress"]) == 0                # ... unless forced
    assert json.loads((tmp_path / "run" / "config.json").read_text())["loss"] == "infonce"


def test_load_run_rebuilds_the_model_and_its_whitening(tmp_path) -> None:
    task, config = _build("hapvr", steps="2")
    result = fit(task, config, out_dir=tmp_path, progress=False, run={"pipeline": "hapvr"})
    model, record = load_run(tmp_path)
    assert not model.training and record["pipeline"] == "hapvr"
    whitening = record["preprocess"]["whitening"]
    assert torch.equal(whitening.projection, task.preprocess()["whitening"].projection)
    d = task.data
    with torch.no_grad():
        expected = result.model.eval().score(d.queries, d.database, d.query_valid, d.database_valid)
        got = model.score(d.queries, d.database, d.query_valid, d.database_valid)
    assert torch.equal(expected, got)


def test_damaged_files_are_reported_with_their_path(tmp_path) -> None:
    task, config = _build("radial", steps="2")
    fit(task, config, out_dir=tmp_path, progress=False)
    (tmp_path / "checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="checkpoint.pt fails its integrity check: not a readable torch archive") as err:
        load_run(tmp_path)
    assert "weights_only" not in str(err.value)
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(ValueError, match="config.json is not a readable"):
        fit(task, config, out_dir=tmp_path, resume=True, progress=False)


def test_leftovers_of_an_interrupted_save_are_removed(tmp_path) -> None:
    (tmp_path / ".checkpoint.pt.x1.tmp").mkdir()
    (tmp_path / ".checkpoint.pt.x1.tmp" / "checkpoint.pt").write_bytes(b"half")
    (tmp_path / ".config.json.x2.tmp").write_bytes(b"{")
    task, config = _build("radial", steps="2")
    fit(task, config, out_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "config.json", "log.jsonl", "metrics.json"]


def test_a_damaged_feature_cache_is_dropped(tmp_path) -> None:
    """The pipelines' feature caches go through load_cached: a damaged file reads as absent and is set aside."""
    from hapref.data.cache import load_cached
    path = tmp_path / "features.pt"
    torch.save({"train": torch.ones(2)}, path)
    assert torch.equal(load_cached(path)["train"], torch.ones(2))
    path.write_bytes(path.read_bytes()[:40])              # truncated by a kill
    with pytest.warns(UserWarning, match="features.pt fails its integrity check"):
        assert load_cached(path) is None and not path.exists()
    torch.save([1, 2], path)                              # readable, but not a cache
    with pytest.warns(UserWarning, match="holds a list, expected a dict"):
        assert load_cached(path) is None and not path.exists()
    assert len(list(tmp_path.glob("features.pt.corrupt-*"))) == 2   # set aside, never deleted


@pytest.mark.parametrize("kwargs, match", [
    ({"grad_clip": -1.0}, "grad_clip"), ({"grad_clip": 0.0}, "grad_clip"), ({"weight_decay": -0.1}, "weight_decay"),
    ({"lr": float("nan")}, "lr"), ({"steps": 0}, "steps"), ({"warmup_steps": 20}, "warmup_steps"),
    ({"checkpoint_every": 0}, "checkpoint_every"), ({"amp": "yes"}, "amp"), ({"seed": -1}, "seed")])
def test_train_settings_are_validated(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        TrainConfig(**{"steps": 10, **kwargs})


def test_set_overrides_are_typed_and_checked() -> None:
    from hapref.train import hapvr
    config, profile = override_all([TrainConfig(steps=10), hapvr.PROFILES["smoke"]],
                                   {"lr": "0.01", "resample": "true", "batch_videos": "2"})
    assert config.lr == 0.01 and profile.resample is True and profile.batch_videos == 2
    for bad, match in [({"batch_videos": "two"}, "batch_videos must be a int"), ({"batch_videos": "0"}, "> 0"),
                       ({"resample": "maybe"}, "resample"), ({"bogus": "1"}, "unknown setting 'bogus'")]:
        with pytest.raises(ValueError, match=match):
            override_all([TrainConfig(steps=10), hapvr.PROFILES["smoke"]], bad)
    task, config = load_pipeline("tca").build("smoke", "circle", 0, progress=False,
                                              overrides={"m": "0.4", "steps": "4"})
    assert task.variant.m == 0.4 and config.steps == 4 and task.profile.steps == 4
    with pytest.raises(ValueError, match="m in"):
        load_pipeline("tca").build("smoke", "circle", 0, progress=False, overrides={"m": "1.5"})
