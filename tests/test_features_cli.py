"""``python -m hapref.features``: shipped clips -> the DnS / S2VS HDF5 layout, read back by both readers."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from hapref.data.feature_views import read_feature_videos
from hapref.data.loaders import HDF5Features
from hapref.data.sources import clip_path, decode_video
from hapref.evaluation.scoring import similarities
from hapref.features import FeatureExtractor, SmallCNN, released_frames
from hapref.features.__main__ import main
from hapref.features.hdf5 import ATTRIBUTE, PARTIAL, check_feature_file, read_settings
from hapref.similarity.network import VideoSimilarityNetwork

SMALL = ["--backbone", "small-cnn", "--resize", "32", "--crop", "32", "--no-progress"]
CLIPS = ("bikes", "carphone")
IDS = {clip_path(name).stem: name for name in CLIPS}          # stored under the file name: carphone_pristine


def by_hand(name: str, fps: float = 1.0) -> torch.Tensor:
    frames = decode_video(clip_path(name), fps=fps)
    return FeatureExtractor(SmallCNN(image_size=32))(released_frames(frames, 32, 32)).float()


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("features") / "clips.hdf5"
    assert main([*map(str, map(clip_path, CLIPS)), "--out", str(out), *SMALL]) == 0
    return out


def test_clips_round_trip_into_both_readers(extracted, capsys) -> None:
    settings = read_settings(extracted)
    assert settings.backbone == "small-cnn" and settings.pooling == "l3imac" and settings.dims == 240
    expected = {vid: by_hand(name) for vid, name in IDS.items()}
    ids, videos = read_feature_videos(extracted, min_len=1)                  # the trainer's --features reader
    for vid, video in zip(ids, videos):
        torch.testing.assert_close(video, expected[vid].to(video.dtype), rtol=0, atol=1e-6)
    assert ids == sorted(IDS)
    # the scorer's reader and its similarity function, against scoring the hand-made features
    dataset = HDF5Features(extracted, list(IDS), min_len=1)
    net = VideoSimilarityNetwork(spatial_k=0.1, temporal_k=1.0, comparator=False)
    sims = similarities(net, dataset, dataset, device="cpu", progress=False)
    for q in IDS:
        for d in IDS:
            want = net.score(expected[q][None].double(), expected[d][None].double())[0, 0].item()
            assert sims[q][d] == pytest.approx(want, abs=1e-5)


def test_resume_skips_and_other_settings_are_refused(extracted, capsys) -> None:
    before = extracted.read_bytes()
    assert main([str(clip_path(CLIPS[0])), "--out", str(extracted), *SMALL]) == 0
    assert "0 written, 1 already present" in capsys.readouterr().out
    assert main([str(clip_path(CLIPS[0])), "--out", str(extracted), *SMALL, "--fps", "2"]) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and "fps: file 1.0 vs now 2.0" in err
    with h5py.File(extracted, "r") as f:
        assert sorted(f.keys()) == sorted(IDS)
    assert len(extracted.read_bytes()) == len(before)


def test_unreadable_videos_are_reported_and_never_stored(tmp_path, capsys) -> None:
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video")
    frames = tmp_path / "v1.npy"
    np.save(frames, np.zeros((3, 40, 40, 3), np.uint8))
    listing = tmp_path / "inputs.txt"
    listing.write_text("v1.npy\nbroken.mp4\n")
    out = tmp_path / "f.hdf5"
    assert main(["--list", str(listing), "--out", str(out), *SMALL, "--frame-level"]) == 1
    captured = capsys.readouterr()
    assert "1 written" in captured.out and "1 failed" in captured.out and "failed broken" in captured.err
    with h5py.File(out, "r") as f:
        assert list(f.keys()) == ["v1"] and f["v1"].shape == (3, 240)
        assert json.loads(f.attrs[ATTRIBUTE])["layout"] == "frames"


def test_an_interrupted_entry_is_removed_on_resume(tmp_path) -> None:
    frames = tmp_path / "v1.npy"
    np.save(frames, np.zeros((3, 40, 40, 3), np.uint8))
    out = tmp_path / "f.hdf5"
    assert main([str(frames), "--out", str(out), *SMALL]) == 0
    with h5py.File(out, "a") as f:                                  # what a killed run leaves behind
        f.create_dataset(f"{PARTIAL}dead", data=np.ones((1, 9, 240), np.float32))
    np.save(tmp_path / "v2.npy", np.ones((2, 40, 40, 3), np.uint8))
    assert main([str(frames), str(tmp_path / "v2.npy"), "--out", str(out), *SMALL]) == 0
    with h5py.File(out, "r") as f:
        assert sorted(f.keys()) == ["v1", "v2"]


def test_readers_check_the_recorded_settings(extracted, tmp_path) -> None:
    assert check_feature_file(extracted, dims=240, pooling="l3imac").dims == 240
    with pytest.raises(ValueError, match="holds 240-d features, checkpoint expects 512-d"):
        check_feature_file(extracted, dims=512, what="checkpoint")
    with pytest.raises(ValueError, match="pooled with 'l3imac', the model expects 'l3imac_released'"):
        check_feature_file(extracted, pooling="l3imac_released")
    foreign = tmp_path / "other.hdf5"
    with h5py.File(foreign, "w") as f:
        f.create_dataset("v", data=np.ones((2, 9, 8), np.float32))
    assert main([str(clip_path(CLIPS[0])), "--out", str(foreign), *SMALL]) == 2   # not ours: refused


def test_bad_arguments_are_clear(tmp_path, capsys) -> None:
    assert main(["--out", str(tmp_path / "f.hdf5"), *SMALL]) == 2
    assert "no inputs" in capsys.readouterr().err
    assert main(["a.mp4", "--out", str(tmp_path / "f.hdf5"), "--whitening", str(tmp_path / "none.pth"), *SMALL]) == 2
    assert "whitening must be a PCA file" in capsys.readouterr().err


def test_scorer_names_a_checkpoint_expecting_other_dimensions(tmp_path, capsys) -> None:
    from hapref.evaluation.__main__ import main as evaluation_cli
    from hapref.evaluation.fixtures import write_features, write_fixtures

    root = write_fixtures(tmp_path / "root")
    features = write_features(tmp_path / "evve.hdf5", "evve", root, dims=8)
    net = VideoSimilarityNetwork(dims=16, attention=True)             # a network trained on 16-d features
    rename = {"attention.proj": "attention.transform", "attention.context": "attention.context_vector"}
    state = {}
    for key, value in net.state_dict().items():                      # the released S2VS key names
        module, leaf = key.rsplit(".", 1)
        state[f"{rename.get(module, module.replace('comparator', 'visil_head'))}.{leaf}"] = value
    checkpoint = tmp_path / "s2vs.pth"
    torch.save({"model": state}, checkpoint)
    with pytest.raises(SystemExit) as exit_info:
        evaluation_cli(["evve", "--features", str(features), "--released", "s2vs", "--checkpoint",
                        str(checkpoint), "--root", str(root), "--no-progress"])
    assert exit_info.value.code == 2
    assert f"holds 8-d features, --checkpoint {checkpoint} expects 16-d" in capsys.readouterr().err


def test_weights_flag_is_named_used_and_recorded(tmp_path, capsys, monkeypatch) -> None:
    """Issue 44: ``--weights FILE`` loads the ResNet-50 state dict, the missing-weights error names the flag, the
    file is recorded (a resume with other weights is refused), and the s2vs preset's dimensions are stated."""
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "empty-hub"))   # no cached weights
    clip = str(clip_path(CLIPS[0]))
    out = tmp_path / "s2vs.hdf5"
    assert main([clip, "--out", str(out), "--preset", "s2vs", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "resnet50 weights not found" in err and "--weights FILE" in err
    assert "3840-d" in err and "512-d" in err and "--whitening" in err        # the preset's dimensions, said
    assert main([clip, "--out", str(out), "--preset", "s2vs", "--weights", str(tmp_path / "none.pth")]) == 2
    assert "--weights must be a local torchvision state dict file" in capsys.readouterr().err
    assert main([clip, "--out", str(tmp_path / "x.hdf5"), "--weights", __file__, *SMALL]) == 2
    assert "--weights applies to the resnet50 and alexnet backbones" in capsys.readouterr().err
    # a (random) ResNet-50 state dict given with --weights: used, and recorded by name and hash
    from hapref.features.resnet import ResNet50                        # torchvision's resnet50 layout
    weights = tmp_path / "resnet50-random.pth"
    torch.save(ResNet50().state_dict(), weights)
    args = ["--fps", "0.25", "--resize", "64", "--crop", "64", "--no-progress"]
    assert main([clip, "--out", str(out), "--backbone", "resnet50", "--weights", str(weights), *args]) == 0
    settings = read_settings(out)
    assert settings.weights.startswith("resnet50-random.pth:") and settings.dims == 3840
    other = tmp_path / "resnet50-other.pth"
    torch.save({k: v + 1 for k, v in torch.load(weights, weights_only=True).items()}, other)
    assert main([clip, "--out", str(out), "--backbone", "resnet50", "--weights", str(other), *args]) == 2
    assert "weights" in capsys.readouterr().err

