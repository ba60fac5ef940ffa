"""A run folder's config.json is data: hostile factories and arguments are refused before anything runs."""

from __future__ import annotations

import json

import pytest

from hapref.train.constructors import MODEL_CONSTRUCTORS, checked_call, resolve
from hapref.train.loop import load_run
from hapref.train.runs import load_run_network


def _tamper(folder, model: dict, pipeline: str | None = None) -> None:
    config = json.loads((folder / "config.json").read_text())
    config["model"] = model
    if pipeline is not None:
        config["pipeline"] = pipeline
    (folder / "config.json").write_text(json.dumps(config))


def test_an_honest_run_folder_loads(toy_run):
    model, config = load_run(toy_run)
    assert type(model).__name__ == "AggregatorWithBank" and config["model"]["factory"] in MODEL_CONSTRUCTORS


def test_download_factory_writes_nothing(toy_run, tmp_path):
    source, target = tmp_path / "payload.txt", tmp_path / "site" / "evil.pth"
    source.write_text("import os  # would run at the next interpreter start\n")
    _tamper(toy_run, {"factory": "hapref.data.download:download",
                  "kwargs": {"url": source.as_uri(), "dest": str(target)}})
    with pytest.raises(ValueError, match="model.factory must be one of hapref's model constructors"):
        load_run(toy_run)
    assert not target.exists() and not target.parent.exists()


def test_cli_main_as_factory_overwrites_nothing(toy_run, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    _tamper(toy_run, {"factory": "hapref.evaluation.__main__:main",
                  "kwargs": {"argv": ["fivr-5k", "--features-only", "--output", str(victim)]}}, pipeline="hapvr")
    with pytest.raises(ValueError, match="model.factory"):
        load_run_network(toy_run)                      # the path of `python -m hapref.evaluation --checkpoint RUN`
    with pytest.raises(ValueError, match="model.factory"):
        load_run(toy_run)
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("kwargs, message", [
    ({"dim": "8", "nhead": 2, "dim_feedforward": 16, "dropout": 0.0, "bank_size": 0}, r"model.kwargs.dim must be of type int"),
    ({"dim": 8, "nhead": 2, "dim_feedforward": 16, "dropout": 0.0, "bank_size": 0, "path": "/tmp/x"},
     r"model.kwargs.path is not an argument of build_model"),
    ({"dim": 8, "nhead": 2, "dim_feedforward": 16, "dropout": {"__class__": "os.system"}, "bank_size": 0},
     r"model.kwargs.dropout must be of type float"),
    ({"dim": 8}, r"lacks the required argument\(s\) nhead"),
    (["dim", 8], r"model.kwargs must be an object"),
])
def test_wrong_arguments_name_the_field(toy_run, kwargs, message):
    _tamper(toy_run, {"factory": "hapref.train.tca:build_model", "kwargs": kwargs})
    with pytest.raises(ValueError, match=message):
        load_run(toy_run)


def test_preprocess_constructor_is_allow_listed(toy_run):
    config = json.loads((toy_run / "config.json").read_text())
    assert resolve("hapref.features.whitening:PCAWhitening", frozenset({"hapref.features.whitening:PCAWhitening"}),
                   "f").__name__ == "PCAWhitening"
    with pytest.raises(ValueError, match="model.factory"):
        resolve("builtins:eval", MODEL_CONSTRUCTORS, "model.factory")
    with pytest.raises(ValueError, match="must be a tensor"):
        from hapref.features.whitening import PCAWhitening
        checked_call(PCAWhitening, {"mean": [0.0]}, "model.preprocess.whitening", tensors=True)
    assert config["model"]["factory"] == "hapref.train.tca:build_model"
