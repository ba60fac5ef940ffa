"""Nothing is trained on corrupt bytes: a flipped bit in each file hapref writes is detected and named."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from hapref.data import build_copy_benchmark
from hapref.data.cache import load_cached
from hapref.features import FeatureExtractor, SmallCNN
from hapref.files import CorruptFileError, atomic_torch_save, verify_torch_file
from conftest import ToyTCATask
from hapref.train.loop import TrainConfig, fit, load_checkpoint, load_run
def flip_bit(path, payload: bytes | None = None, bit: int = 6) -> None:
    """Flip one bit of ``path`` inside ``payload`` (a tensor's raw bytes) or in the middle of the file."""
    data = bytearray(path.read_bytes())
    where = data.find(payload) + len(payload) // 2 if payload else len(data) // 2
    assert where > 0
    data[where] ^= 1 << bit
    path.write_bytes(bytes(data))


def _aside(folder, name):
    return [p for p in folder.iterdir() if p.name.startswith(name + ".corrupt-")]


def test_copy_benchmark_cache_bit_flip_is_set_aside_and_regenerated(tmp_path):
    kwargs = dict(root=tmp_path, num_query_scenes=1, copies_per_query=1, num_distractors=1, frame_size=32)
    bench = build_copy_benchmark("smoke", **kwargs)
    flip_bit(bench.path, bytes(bench.database.videos[0].numpy().data))
    with pytest.raises(CorruptFileError, match="CRC-32"):
        verify_torch_file(bench.path)
    with pytest.warns(UserWarning, match=str(bench.path.name)):
        again = build_copy_benchmark("smoke", **kwargs)
    assert again.fingerprint() == bench.fingerprint()
    assert len(_aside(bench.path.parent, bench.path.name)) == 1
    verify_torch_file(again.path)


@pytest.mark.parametrize("intruder", ["list", "folder"])
def test_copy_benchmark_cache_of_the_wrong_kind_is_set_aside(tmp_path, intruder):
    kwargs = dict(root=tmp_path, num_query_scenes=1, copies_per_query=1, num_distractors=1, frame_size=32)
    bench = build_copy_benchmark("smoke", **kwargs)
    bench.path.unlink()
    if intruder == "list":
        atomic_torch_save([1, 2, 3], bench.path)
    else:
        bench.path.mkdir()
    with pytest.warns(UserWarning, match="set aside"):
        again = build_copy_benchmark("smoke", **kwargs)
    assert again.fingerprint() == bench.fingerprint() and bench.path.is_file()


def test_feature_cache_bit_flip_is_set_aside_and_recomputed(tmp_path):
    extractor = FeatureExtractor(SmallCNN(image_size=32))
    videos = {"a": torch.randint(0, 256, (3, 32, 32, 3), dtype=torch.uint8,
                                 generator=torch.Generator().manual_seed(0))}
    first = extractor.extract(videos, cache_dir=tmp_path, progress=False)["a"]
    (path,) = list(tmp_path.rglob("a-*.pt"))
    flip_bit(path, bytes(first.numpy().data), bit=7)
    with pytest.warns(UserWarning, match=path.name):
        again = extractor.extract(videos, cache_dir=tmp_path, progress=False)["a"]
    assert torch.equal(again, first) and len(_aside(path.parent, path.name)) == 1


@pytest.mark.parametrize("damage", ["flip", "folder", "list"])
def test_pipeline_features_cache_is_set_aside(tmp_path, damage):
    path = tmp_path / "features-quick-0123.pt"
    values = torch.arange(64.0)
    atomic_torch_save({"database": values}, path)
    if damage == "flip":
        flip_bit(path, bytes(values.numpy().data), bit=0)   # the lowest mantissa bit: a silent change
    elif damage == "folder":
        path.unlink()
        path.mkdir()
    else:
        atomic_torch_save([values], path)
    with pytest.warns(UserWarning, match=path.name):
        assert load_cached(path) is None
    assert not path.exists() and len(_aside(tmp_path, path.name)) == 1


def test_hdf5_features_hapref_writes_carry_checksums(tmp_path):
    h5py = pytest.importorskip("h5py")
    from hapref.evaluation.fixtures import write_features, write_fixtures
    root = write_fixtures(tmp_path / "fixtures")
    path = write_features(tmp_path / "evve.hdf5", "evve", root, dims=8)
    with h5py.File(path, "r") as f:
        name = sorted(f)[0]
        data = f[name][()]
        assert f[name].fletcher32
    flip_bit(path, data.tobytes(), bit=3)
    with h5py.File(path, "r") as f, pytest.raises(OSError):
        f[name][()]
    from hapref.data.loaders import HDF5Features
    dataset = HDF5Features(path, ids=[name])
    with pytest.raises(CorruptFileError, match=rf"{name}.*evve.hdf5 cannot be read intact"):
        dataset[0]


def test_corrupt_checkpoint_is_refused_and_kept(toy_run):
    out = toy_run
    state = load_checkpoint(out)
    weight = next(v for k, v in state["model"].items() if v.numel() > 16)
    flip_bit(out / "checkpoint.pt", bytes(weight.numpy().data), bit=2)
    with pytest.raises(ValueError, match=r"checkpoint.pt fails its integrity check.*not resuming"):
        fit(ToyTCATask(), TrainConfig(steps=2, lr=1e-2), out, resume=True, progress=False)
    with pytest.raises(ValueError, match="checkpoint.pt fails its integrity check"):
        load_run(out)
    assert (out / "checkpoint.pt").is_file()                 # refused, not moved: a later --resume refuses too
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(torch.load(out / "checkpoint.pt", weights_only=True)["step"], 2)
