"""Issue 44: a command run without an optional dependency names the ``hapref[...]`` extra that installs it."""

from __future__ import annotations

import sys
import tomllib
import types
from pathlib import Path

import pytest

from hapref.data.sources import clip_path
from hapref.extras import EXTRAS, extra_for, missing_dependency

ROOT = Path(__file__).resolve().parents[1]


def test_every_mapped_module_is_in_its_extra_of_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, (extra, distribution) in EXTRAS.items():
        listed = [req.split(">")[0].split("<")[0].split("=")[0].strip() for req in extras[extra]]
        assert distribution in listed, (module, extra, listed)
        assert extra_for(module) == extra
    assert "pip install 'hapref[data]'" in missing_dependency(ModuleNotFoundError("x", name="av.container"))


def test_train_cli_names_the_extra(monkeypatch, capsys):
    import hapref.train.__main__ as train_cli

    real = train_cli.load_pipeline("hapvr")

    def build(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'av'", name="av")

    fake = types.SimpleNamespace(**{k: getattr(real, k) for k in ("PROFILES", "LOSSES", "DEFAULT_LOSS")}, build=build)
    monkeypatch.setattr(train_cli, "load_pipeline", lambda name: fake)
    with pytest.raises(SystemExit) as exit_:
        train_cli.main(["hapvr", "--profile", "smoke"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "pip install 'hapref[data]'" in err and "module 'av'" in err


def test_features_cli_names_the_extra_when_the_decoder_is_missing(monkeypatch, tmp_path, capsys):
    from hapref.features.__main__ import main
    monkeypatch.setitem(sys.modules, "av", None)          # `import av` now fails as without the data extra
    out = tmp_path / "f.hdf5"
    assert main([str(clip_path("bikes")), "--out", str(out), "--backbone", "small-cnn", "--resize", "32",
                 "--crop", "32", "--no-progress"]) == 2
    assert "pip install 'hapref[data]'" in capsys.readouterr().err


def test_evaluation_cli_names_the_extra(monkeypatch, tmp_path, capsys):
    import hapref.evaluation.__main__ as evaluation_cli

    def read(path):
        raise ModuleNotFoundError("No module named 'skvideo'", name="skvideo")

    monkeypatch.setattr(evaluation_cli, "read_similarities", read)
    with pytest.raises(SystemExit) as exit_:
        evaluation_cli.main(["evve", "--similarities", str(tmp_path / "s.json"), "--root", str(tmp_path)])
    assert exit_.value.code == 2 and "pip install 'hapref[data]'" in capsys.readouterr().err
