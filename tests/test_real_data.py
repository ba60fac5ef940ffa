"""Training on real-layout data: HDF5 frame features (DnS / S2VS layout, one dataset per video id) and VCDB pairs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from hapref.train.__main__ import main

h5py = pytest.importorskip("h5py")


def write_features(path, ids, dims=16, regions=9, seed=0) -> None:
    """Unit-norm float32 [T, R, D] region features per id, T from 5 to 20 (some below HAP-VR's 8-frame minimum)."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for vid in ids:
            x = rng.normal(size=(int(rng.integers(5, 21)), regions, dims)).astype(np.float32)
            f.create_dataset(vid, data=x / np.linalg.norm(x, axis=-1, keepdims=True))


@pytest.fixture(scope="module")
def feature_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("features") / "features.hdf5"
    write_features(path, [f"v{i:03d}" for i in range(30)])
    return path


@pytest.mark.parametrize("pipeline", ["hapvr", "tca"])
def test_features_file_trains_and_is_recorded(pipeline, feature_file, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert main([pipeline, "--profile", "smoke", "--features", str(feature_file), "--steps", "3", "--out", str(out),
                 "--no-progress"]) == 0
    assert re.fullmatch(r"eval: mAP=\d\.\d{4} uAP=\d\.\d{4}", capsys.readouterr().out.strip().splitlines()[-1])
    record = json.loads((out / "config.json").read_text())
    assert record["settings"]["profile"]["features"] == str(feature_file)
    from hapref.train import load_run
    _, loaded = load_run(out)
    assert loaded["preprocess"]["whitening"].in_dim == 16          # fit on the file's 16-d descriptors


def test_tca_trains_on_vcdb_copy_pairs(tmp_path, capsys) -> None:
    from hapref.data.loaders import read_vcdb
    from hapref.evaluation.fixtures import write_vcdb
    from hapref.train import load_pipeline

    vcdb = write_vcdb(tmp_path, seed=0)
    queries, positives, negs = read_vcdb(vcdb)
    pairs = [(a, b) for a in queries[:12] for b in sorted(positives[a])][:6]
    held = [f"zz-held{i}" for i in range(8)]             # sorted last: the held-out videos
    ids = sorted({v for pair in pairs for v in pair}) + negs[:10] + held
    path = tmp_path / "vcdb.hdf5"
    write_features(path, ids)
    task, _ = load_pipeline("tca").build("smoke", "circle", 0, progress=False,
                                         overrides={"features": str(path), "vcdb": str(vcdb)})
    assert task.data.train.shape[1] == 2 and len(task.data.train) == len({tuple(sorted(p)) for p in pairs})
    assert len(task.data.distractors) == 8                 # distractor_clips of the smoke profile
    assert main(["tca", "--profile", "smoke", "--features", str(path), "--vcdb", str(vcdb), "--steps", "2",
                 "--no-progress"]) == 0


def test_bad_feature_inputs_name_the_problem(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["hapvr", "--profile", "smoke", "--features", str(tmp_path / "missing.hdf5"), "--no-progress"])
    assert "features must be an HDF5 file" in capsys.readouterr().err
    path = tmp_path / "two.hdf5"
    write_features(path, ["a", "b", "c"])
    with pytest.raises(SystemExit):
        main(["hapvr", "--profile", "smoke", "--features", str(path), "--no-progress"])
    assert "held_out must lie in" in capsys.readouterr().err


def test_backbone_flag_reaches_the_profile(tmp_path) -> None:
    from hapref.train import load_pipeline
    task, _ = load_pipeline("radial").build("smoke", "radial", 0, progress=False,
                                            overrides={"backbone.name": "small-cnn", "steps": "2"})
    assert task.settings["backbone"]["name"] == "small-cnn"
    with pytest.raises(SystemExit):
        main(["radial", "--profile", "smoke", "--backbone", "no-such-cnn", "--no-progress"])


@pytest.mark.parametrize("pipeline", ["hapvr", "tca"])
def test_decoded_frames_train(pipeline, tmp_path, capsys) -> None:
    """--frames DIR: decoded frames (FramesDirectory layout) replace the generated unlabeled clips."""
    rng = np.random.default_rng(0)
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(12):
        np.save(frames / f"clip{i:02d}.npy", rng.integers(0, 256, (int(rng.integers(4, 12)), 40, 48, 3), np.uint8))
    out = tmp_path / "run"
    assert main([pipeline, "--profile", "smoke", "--frames", str(frames), "--steps", "2", "--out", str(out),
                 "--no-progress"]) == 0
    assert "eval: mAP=" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["settings"]["profile"]["frames_dir"] == str(frames)


REAL_VCDB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "annotations" / "vcdb" / "vcdb.pickle"


@pytest.mark.skipif(not REAL_VCDB.is_file(), reason="real VCDB annotation file absent")
def test_tca_trains_on_the_real_vcdb_pairs(tmp_path) -> None:
    """The released vcdb.pickle: its copy pairs become TCA positives, its background videos the bank."""
    from hapref.data.loaders import read_vcdb
    from hapref.train import fit, load_pipeline

    queries, positives, negs = read_vcdb(REAL_VCDB)
    pairs = [(a, b) for a in queries for b in sorted(positives[a]) if a != b][:10]
    ids = sorted({v for pair in pairs for v in pair}) + list(dict.fromkeys(negs))[:10]
    path = tmp_path / "vcdb.hdf5"
    write_features(path, ids + [f"zz-held{i}" for i in range(8)])
    task, config = load_pipeline("tca").build("smoke", "circle", 0, progress=False,
                                              overrides={"features": str(path), "vcdb": str(REAL_VCDB),
                                                         "steps": "2"})
    distinct = len({tuple(sorted(p)) for p in pairs})
    assert len(task.data.train) == min(distinct, task.profile.train_clips) and len(task.data.distractors) == 8
    assert 0.0 <= fit(task, config, progress=False).metrics["mAP"] <= 1.0
