"""hapref.data: the generated copy-detection benchmark, its cache, transformations and training augmentations."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import devices

from hapref.data import (FAMILIES, LEVELS, PROFILES, ClipAugmenter, VideoDataset, build_copy_benchmark,
                         collate_videos, generate_copy_benchmark, video_in_video)
from hapref.data import benchmark as benchmark_module
from hapref.data import cache, sources, transforms
from hapref.data.augment import temporal_indices


@pytest.fixture(scope="module")
def smoke_root(tmp_path_factory):
    return tmp_path_factory.mktemp("hapref_data")


@pytest.fixture(scope="module")
def bench(smoke_root):
    return build_copy_benchmark("smoke", seed=0, root=smoke_root)


def _pixel_descriptor(video: torch.Tensor) -> torch.Tensor:
    """Grey 8x8 thumbnails, zero-mean and unit-norm per frame: [T, 64]."""
    x = F.adaptive_avg_pool2d(video.permute(0, 3, 1, 2).float().mean(1, keepdim=True), 8).flatten(1)
    return F.normalize(x - x.mean(1, keepdim=True), dim=1)


def _pixel_similarity(a: torch.Tensor, b: torch.Tensor) -> float:
    return (_pixel_descriptor(a) @ _pixel_descriptor(b).T).max(1).values.mean().item()


# ------------------------------------------------------------------------------------------ benchmark
def test_shapes_dtypes_and_levels(bench):
    c = PROFILES["smoke"]
    q, n = len(bench.queries), len(bench.database)
    assert q == c.num_query_scenes
    assert n == c.num_query_scenes * (c.copies_per_query + c.same_scene_per_query) + c.num_distractors
    for item in [*bench.queries, *bench.database]:
        assert item["frames"].dtype == torch.uint8
        assert item["frames"].shape[1:] == (c.frame_size, c.frame_size, 3)
        assert item["frames"].shape[0] >= 2
    assert bench.queries[0]["frames"].shape[0] == c.num_frames
    assert bench.levels.shape == (q, n) and bench.levels.dtype == torch.int8
    dsvr, csvr, nd = bench.relevance("DSVR"), bench.relevance("CSVR"), bench.relevance("ND")
    assert dsvr.dtype == torch.bool and dsvr.shape == (q, n)
    assert (nd <= dsvr).all() and (dsvr <= csvr).all() and (csvr & ~dsvr).any()
    assert dsvr.sum(1).min() >= 1  # every query has a positive
    assert (csvr.sum(0) <= 1).all()  # a database video belongs to at most one query
    with pytest.raises(ValueError, match="task"):
        bench.relevance("ISVR")


def test_metadata_records_transformations(bench):
    for j, vid in enumerate(bench.database.ids):
        meta = bench.info[vid]
        column = bench.levels[:, j]
        if meta["role"] == "copy":
            qi = bench.queries.ids.index(meta["source"])
            assert column[qi] == LEVELS[meta["level"]] and column.count_nonzero() == 1
            allowed = set(transforms.TRANSFORMS) if meta["family"] == "mixed" else set(FAMILIES[meta["family"]])
            names = [t["name"] for t in meta["transforms"]]
            assert names and set(names) <= allowed
            assert (meta["level"] == "DS") == bool(set(names) & transforms.PARTIAL_COPY)
        elif meta["role"] == "same_scene":
            assert column.max() == LEVELS["CS"] and meta["scene"] == bench.info[meta["source"]]["scene"]
        else:
            assert meta["role"] == "distractor" and (column == 0).all()
    codec = bench.edited_with("codec") & bench.relevance("DSVR").any(0)
    assert codec.sum() == len(bench.queries) and all(bench.info[bench.database.ids[j]]["family"] == "codec"
                                                   for j in codec.nonzero().flatten().tolist())
    h264 = bench.edited_with("h264_reencode")
    assert (h264 >= bench.edited_with("codec")).all() and (h264 & bench.edited_with("mixed")).any()
    with pytest.raises(ValueError, match="name"):
        bench.edited_with("rotation")
    assert torch.equal(bench.video(bench.database.ids[2]), bench.database.videos[2])
    with pytest.raises(ValueError, match="video_id"):
        bench.video("nope")
    query_scenes = {bench.info[q]["scene"] for q in bench.queries.ids}
    distractor_scenes = {m["scene"] for m in bench.info.values() if m["role"] == "distractor"}
    assert not query_scenes & distractor_scenes


def test_same_seed_same_bytes(bench, smoke_root, tmp_path):
    again = build_copy_benchmark("smoke", seed=0, root=tmp_path)  # generated afresh in another folder
    assert again.fingerprint() == bench.fingerprint()
    assert hashlib.sha256(again.path.read_bytes()).digest() == hashlib.sha256(bench.path.read_bytes()).digest()
    cached = build_copy_benchmark("smoke", seed=0, root=smoke_root)
    assert cached.fingerprint() == bench.fingerprint()
    small = dict(num_distractors=2, copies_per_query=1, same_scene_per_query=0, num_query_scenes=1)
    a = build_copy_benchmark("smoke", seed=1, cache=False, **small)
    b = build_copy_benchmark("smoke", seed=2, cache=False, **small)
    assert a.fingerprint() != b.fingerprint()


def test_bytes_do_not_depend_on_the_torch_thread_count(bench):
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert generate_copy_benchmark(bench.config).fingerprint() == bench.fingerprint()
        assert torch.get_num_threads() == 2  # restored after generation
    finally:
        torch.set_num_threads(previous)


def test_copies_are_copies_on_raw_pixels(bench):
    """Temporal and codec edits keep the pixels: such a copy is closer to its query than every distractor is."""
    for qi, query in enumerate(bench.queries.videos):
        sims = torch.tensor([_pixel_similarity(query, v) for v in bench.database.videos])
        negatives = sims[bench.levels[qi] == 0]
        positives = sims[bench.levels[qi] >= LEVELS["DS"]]
        assert positives.median() > negatives.median() + 0.3
        for j in (bench.levels[qi] >= LEVELS["DS"]).nonzero().flatten().tolist():
            if bench.info[bench.database.ids[j]]["family"] in ("temporal", "codec"):
                assert sims[j] > negatives.max()


def test_train_split_is_deterministic_and_disjoint(bench):
    c = PROFILES["smoke"]
    assert len(bench.train) == c.num_train_clips
    clip = bench.train[3]
    assert clip.shape == (c.train_frames, c.frame_size, c.frame_size, 3) and clip.dtype == torch.uint8
    assert torch.equal(clip, bench.train[3]) and not torch.equal(clip, bench.train[4])
    query_scenes = {bench.info[q]["scene"] for q in bench.queries.ids}
    assert not query_scenes & set(bench.train.scenes)
    with pytest.raises(IndexError):
        bench.train[len(bench.train)]
    batch = next(iter(torch.utils.data.DataLoader(bench.train, batch_size=4)))
    assert batch.shape == (4, c.train_frames, c.frame_size, c.frame_size, 3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="profile"):
        build_copy_benchmark("huge")
    with pytest.raises(ValueError, match="frame_size"):
        replace(PROFILES["smoke"], frame_size=63)
    with pytest.raises(ValueError, match="num_query_scenes"):
        replace(PROFILES["smoke"], num_query_scenes=0)


# -------------------------------------------------------------------------------------------- cache
def test_cache_key_tracks_config_and_format_version(monkeypatch, tmp_path):
    config = PROFILES["smoke"]
    path = benchmark_module.benchmark_path(config, tmp_path)
    assert path.parent == tmp_path / "copy_benchmark"
    assert benchmark_module.benchmark_path(replace(config, seed=1), tmp_path) != path
    assert benchmark_module.benchmark_path(replace(config, num_frames=9), tmp_path) != path
    monkeypatch.setattr(benchmark_module, "config_key", lambda cfg: cache.config_key(cfg, version=99))
    assert benchmark_module.benchmark_path(config, tmp_path) != path
    monkeypatch.setenv("HAPREF_DATA", str(tmp_path / "env"))
    assert cache.data_root() == tmp_path / "env"
    assert cache.data_root(tmp_path) == tmp_path


def test_stale_or_corrupt_cache_is_regenerated(bench, tmp_path):
    small = dict(num_distractors=1, copies_per_query=1, same_scene_per_query=0, num_query_scenes=1)
    fresh = build_copy_benchmark("smoke", root=tmp_path, **small)
    fresh.path.write_bytes(b"half a file")
    assert build_copy_benchmark("smoke", root=tmp_path, **small).fingerprint() == fresh.fingerprint()
    payload = torch.load(fresh.path, weights_only=True)
    payload["format_version"] = cache.FORMAT_VERSION - 1
    torch.save(payload, fresh.path)
    with pytest.raises(ValueError, match="format version"):
        benchmark_module.CopyBenchmark.load(fresh.path)
    assert build_copy_benchmark("smoke", root=tmp_path, **small).fingerprint() == fresh.fingerprint()


# ------------------------------------------------------------------------------------ transformations
@pytest.fixture(scope="module")
def clip():
    return sources.render_shot("astronaut", sources.CameraPath((0.0, 0.0, 0.7, 0.0), (0.2, 0.1, 0.5, 0.1)), 12, 48)


@pytest.fixture(scope="module")
def host():
    return sources.render_shot("coffee", sources.CameraPath((0.0, 0.0, 0.8, 0.0), (0.0, 0.0, 0.6, 0.0)), 10, 48)


@pytest.mark.parametrize("name", sorted(transforms.TRANSFORMS))
def test_every_transformation_keeps_the_format(name, clip, host):
    g = torch.Generator().manual_seed(0)
    out, params = transforms.TRANSFORMS[name](clip, g, host=host)
    assert out.dtype == torch.uint8 and out.shape[1:] == clip.shape[1:] and out.shape[0] >= 2
    again, params_again = transforms.TRANSFORMS[name](clip, torch.Generator().manual_seed(0), host=host)
    assert torch.equal(out, again) and params == params_again


def test_transformations_do_what_they_say(clip, host):
    g = torch.Generator().manual_seed(0)
    assert torch.equal(transforms.reverse(clip, g)[0], clip.flip(0))
    assert torch.equal(transforms.hflip(clip, g)[0], clip.flip(2))
    out, p = transforms.insert_into_distractor(clip, g, host=host)
    at, start, length = p["at"], p["start"], p["length"]
    assert torch.equal(out[at:at + length], clip[start:start + length])
    assert torch.equal(out[:at], host[:at]) and out.shape[0] == host.shape[0] + length
    out, p = transforms.pause(clip, g)
    assert out.shape[0] == clip.shape[0] + p["repeats"]
    out, p = transforms.h264_reencode(clip, g)
    mse = ((out.float()[:, None] - clip.float()[None]) ** 2).mean((2, 3, 4))  # [decoded frame, source frame]
    assert (mse.argmin(1) == torch.arange(clip.shape[0])).all()  # frame order survives
    psnr = 10 * torch.log10(255 ** 2 / mse.diagonal())
    assert 30 <= p["crf"] <= 42 and (psnr < 40).all() and (psnr > 15).all()  # lossy, still the same video
    for name in transforms.NEEDS_HOST:
        with pytest.raises(ValueError, match="host"):
            transforms.TRANSFORMS[name](clip, g)


def test_video_dataset_and_collate():
    videos = [torch.full((n, 4, 4, 3), n, dtype=torch.uint8) for n in (3, 5)]
    ds = VideoDataset(["a", "b"], videos)
    assert ds[1]["id"] == "b" and ds.num_frames.tolist() == [3, 5]
    batch = collate_videos([ds[0], ds[1]])
    assert batch["frames"].shape == (2, 5, 4, 4, 3) and batch["ids"] == ["a", "b"]
    assert batch["valid"].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    assert (batch["frames"][0, 3:] == 0).all() and torch.equal(batch["frames"][1], videos[1])
    with pytest.raises(ValueError, match="batch"):
        collate_videos([])
    with pytest.raises(ValueError, match="uint8"):
        VideoDataset(["a"], [torch.zeros(3, 4, 4, 3)])


# -------------------------------------------------------------------------------------- augmentation
@pytest.fixture(scope="module")
def clips(bench):
    return torch.stack([bench.train[i] for i in range(4)])


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("strength", ["weak", "strong"])
def test_augmenter_keeps_shape_dtype_device_and_is_reproducible(clips, strength, device):
    x = clips.to(device)
    aug = ClipAugmenter(strength)
    out = aug(x, torch.Generator().manual_seed(0))
    assert out.shape == x.shape and out.dtype == x.dtype and out.device == x.device
    assert torch.equal(out, aug(x, torch.Generator().manual_seed(0)))
    assert not torch.equal(out, aug(x, torch.Generator().manual_seed(1)))
    resized = ClipAugmenter(strength, num_frames=4, size=32)(x.float() / 255, torch.Generator().manual_seed(0))
    assert resized.shape == (x.shape[0], 4, 32, 32, 3) and resized.dtype == torch.float32
    assert resized.min() >= 0 and resized.max() <= 1


def test_weak_view_applies_one_transform_per_clip():
    """A still clip stays still: every frame gets the same crop and flip; different clips get different ones."""
    frame = torch.from_numpy(sources.load_photo("chelsea")[:64, :64].copy())
    still = frame.expand(2, 6, 64, 64, 3).contiguous()
    out = ClipAugmenter("weak")(still, torch.Generator().manual_seed(0))
    assert (out == out[:, :1]).all()
    assert not torch.equal(out[0], out[1])


def test_temporal_indices():
    g = torch.Generator().manual_seed(0)
    index, code = temporal_indices(20, 8, strong=False, generator=g)
    assert (index.diff() == 1).all() and (code == 0).all()
    assert temporal_indices(5, 8, strong=False, generator=g)[0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2]
    for _ in range(50):
        index, code = temporal_indices(32, 16, strong=True, generator=g)
        assert index.shape == code.shape == (16,) and index.min() >= 0 and index.max() < 32
        assert set(code.tolist()) <= {0, 1, 2}


def test_video_in_video(clips):
    g = torch.Generator().manual_seed(0)
    out, overlap = video_in_video(clips, g, p=1.0)
    b = clips.shape[0]
    assert out.shape == clips.shape and out.dtype == clips.dtype
    off = overlap - torch.eye(b)
    assert (overlap.diagonal() == 1).all() and ((off > 0).sum(1) == 1).all()
    assert ((off == 0) | ((off >= 0.3) & (off <= 0.7))).all()
    for i in range(b):
        j = int(off[i].argmax())
        assert (out[i] == clips[j]).float().mean() > 0.25  # the host shows around the pasted clip
    unchanged, eye = video_in_video(clips, g, p=0.0)
    assert torch.equal(unchanged, clips) and torch.equal(eye, torch.eye(b))


def test_augmenter_rejects_bad_input():
    with pytest.raises(ValueError, match="strength"):
        ClipAugmenter("medium")
    with pytest.raises(ValueError, match="clips"):
        ClipAugmenter()(torch.zeros(2, 3, 8, 8))
    with pytest.raises(ValueError, match="clips"):
        ClipAugmenter()(torch.zeros(2, 3, 8, 8, 3, dtype=torch.int32))


# ------------------------------------------------------------------------------------ real-data loaders
def _pickle(path, obj):
    import pickle
    path.write_bytes(pickle.dumps(obj))
    return path


def test_load_fivr_pickle_and_json(tmp_path):
    from hapref.data.loaders import load_fivr
    annotation = {"q1": {"ND": ["a"], "DS": ["b"], "CS": ["c"], "IS": ["d"]}, "q2": {"ND": ["q1"], "CS": ["a"]}}
    data = {"5k": {"queries": ["q1", "q2"], "database": ["q1", "q2", "a", "b", "c", "d", "e"]},
            "200k": {"queries": ["q1"], "database": ["a", "b"]}, "annotation": annotation}
    ann = load_fivr(_pickle(tmp_path / "fivr.pickle", data), "5k")
    cols = ann.database
    rel = {t: {(ann.queries[i], cols[j]) for i, j in ann.relevance(t).nonzero().tolist()} for t in ann.tasks}
    assert rel["DSVR"] == {("q1", "a"), ("q1", "b"), ("q2", "q1")}
    assert rel["CSVR"] == rel["DSVR"] | {("q1", "c"), ("q2", "a")}
    assert rel["ISVR"] == rel["CSVR"] | {("q1", "d")}
    assert load_fivr(tmp_path / "fivr.pickle", "200k").relevance("DSVR").tolist() == [[True, True]]
    (tmp_path / "annotation.json").write_text(json.dumps(annotation))
    from_json = load_fivr(tmp_path / "annotation.json", "200k")
    assert from_json.queries == ["q1", "q2"] and set(from_json.database) == {"q1", "q2", "a", "b", "c", "d"}
    hard = ann.without(["a"])
    assert "a" not in hard.database and hard.relevance("DSVR").sum() == 2
    as_sets = {**data, "5k": {"queries": {"q2", "q1"}, "database": set(data["5k"]["database"])}}
    assert load_fivr(_pickle(tmp_path / "sets.pickle", as_sets)).database == sorted(data["5k"]["database"])
    restricted = ann.restrict(["q1", "a", "c"])
    assert restricted.database == ["a", "c", "q1"]  # sorted, as the released evaluator orders it
    assert restricted.queries == ["q1"] and restricted.relevance("CSVR").tolist() == [[True, True, False]]
    with pytest.raises(ValueError, match="task"):
        ann.relevance("EVVE")
    with pytest.raises(ValueError, match="version"):
        load_fivr(tmp_path / "fivr.pickle", "10k")


def test_load_fivr_keeps_every_label_of_a_video(tmp_path):
    from hapref.data.loaders import load_fivr
    annotation = {"q": {"ND": ["a"], "DS": ["b"], "CS": ["b", "c"], "DA": ["a", "b", "d"]}}
    data = {"5k": {"queries": ["q"], "database": {"a", "b", "c", "d"}}, "200k": {"queries": ["q"], "database": set()},
            "annotation": annotation}
    ann = load_fivr(_pickle(tmp_path / "fivr.pickle", data))
    assert ann.labels["q"]["b"] == frozenset({"DS", "CS", "DA"}) and ann.labels["q"]["a"] == frozenset({"ND", "DA"})
    assert ann.relevance("DSVR").tolist() == [[True, True, False, False]]  # b stays DS although also CS and DA
    assert ann.relevance("DAVR").tolist() == [[True, True, False, True]]


def test_loaders_refuse_hostile_pickles(tmp_path):
    import os
    import pickle

    from hapref.data import loaders

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    for name, load in (("fivr.pickle", loaders.load_fivr), ("evve.pickle", loaders.load_evve),
                       ("cc.pickle", loaders.load_cc_web_video), ("vcdb.pickle", loaders.load_vcdb)):
        path = tmp_path / name
        path.write_bytes(pickle.dumps({"annotation": Exploit(), "5k": {}, "200k": {}}))
        with pytest.raises(ValueError, match=f"{name}.*(posix|os)\\.system"):
            load(path)
    assert not (tmp_path / "pwned").exists()
    import collections
    path = tmp_path / "ordered.pickle"
    path.write_bytes(pickle.dumps(collections.OrderedDict(a=1)))
    with pytest.raises(ValueError, match="ordered.pickle.*collections.OrderedDict"):
        loaders.load_evve(path)


@pytest.mark.parametrize("content, loader, message", [
    (b"not a pickle", "load_evve", "not a valid pickle"),
    ({"annotation": {}, "queries": ["q"]}, "load_evve", "keys"),
    ({"annotation": {"e": ({"q"}, ["a"], set())}, "queries": ["q"], "database": ["a"]}, "load_evve", "tuple"),
    ({"5k": {"queries": ["q"]}, "200k": {"queries": [], "database": []}, "annotation": {}}, "load_fivr", "database"),
    ({"5k": {"queries": [1], "database": []}, "200k": {"queries": [], "database": []}, "annotation": {}},
     "load_fivr", "string ids"),
    ({"index": {"a": 1}, "queries": ["a"], "ground_truth": [{1: "E"}], "excluded": []}, "load_cc_web_video",
     "one entry per query"),
    ({"video_pairs": [{"videos": ["a"]}], "index": ["a"], "negs": []}, "load_vcdb", "video_pairs"),
    ([1, 2], "load_vcdb", "S2VS"),
])
def test_malformed_annotation_files_name_the_file(tmp_path, content, loader, message):
    import pickle
    from hapref.data import loaders
    path = tmp_path / "bad_file.pickle"
    path.write_bytes(content if isinstance(content, bytes) else pickle.dumps(content, protocol=3))
    with pytest.raises(ValueError, match=f"bad_file.pickle.*{message}"):
        getattr(loaders, loader)(path)
    (tmp_path / "test_groundtruth").write_text("1.mp4 2.mp4 1\n1.mp4 3.mp4 yes\n")
    with pytest.raises(ValueError, match="test_groundtruth.*line 2"):
        loaders.load_svd(tmp_path / "test_groundtruth")


def test_load_evve_svd_ccweb_vcdb(tmp_path):
    from hapref.data import loaders
    evve = loaders.load_evve(_pickle(tmp_path / "evve.pickle", {
        "annotation": {"e1": ({"q1"}, {"a", "b"}, set()), "e2": ({"q2"}, {"c"}, set())},
        "queries": ["q1", "q2"], "database": ["a", "b", "c", "d"]}))
    assert evve.relevance("EVVE").tolist() == [[True, True, False, False], [False, False, True, False]]

    (tmp_path / "test_groundtruth").write_text("q1.mp4 a.mp4 1\nq1.mp4 b.mp4 0\nq2.mp4 b.mp4 1\n")
    (tmp_path / "unlabeled").write_text("z.mp4\n")
    svd = loaders.load_svd(tmp_path / "test_groundtruth", tmp_path / "unlabeled")
    assert svd.queries == ["q1", "q2"] and svd.database == ["a", "b", "z"]
    assert svd.relevance().tolist() == [[True, False, False], [False, True, False]]
    assert svd.annotated().tolist() == [[True, True, False], [False, True, False]]

    cc = loaders.load_cc_web_video(_pickle(tmp_path / "cc.pickle", {
        "index": {"1/1_1_Y": 0, "1/1_2_Y": 1, "1/1_3_Y": 2}, "queries": ["1/1_1_Y"],
        "ground_truth": [{0: "E", 1: "S", 2: "X"}], "excluded": [{2}]}))
    assert cc.relevance("CC_WEB").tolist() == [[False, True, False]]  # the query itself is not its own positive
    assert cc.excluded["1/1_1_Y"] == frozenset({"1/1_3_Y"})

    s2vs = loaders.load_vcdb(_pickle(tmp_path / "vcdb.pickle", {
        "queries": ["a", "b"], "positives": {"a": {"b"}, "b": {"a"}}, "dataset": ["x"]}))
    assert s2vs.database == ["a", "b", "x"]
    assert s2vs.relevance().tolist() == [[False, True, False], [True, False, False]]
    tca = loaders.load_vcdb(_pickle(tmp_path / "tca.pickle", {
        "video_pairs": [{"videos": ["a", "c"], "overlap": [[0, 1], [2, 3]]}], "index": ["a", "b", "c"], "negs": []}))
    assert tca.relevance().tolist() == [[False, False, True], [False, False, False], [True, False, False]]


def test_hdf5_features_and_frames_directory(tmp_path):
    h5py = pytest.importorskip("h5py")
    from hapref.data.loaders import FramesDirectory, HDF5Features
    with h5py.File(tmp_path / "feats.hdf5", "w") as f:
        f["v1"] = np.arange(2 * 9 * 4, dtype=np.float16).reshape(2, 9, 4)
        f["v2"] = np.ones((6, 4), dtype=np.float32)
    ds = HDF5Features(tmp_path / "feats.hdf5", ids=["v1", "v2", "gone"], min_len=4)
    assert ds.ids == ["v1", "v2"] and ds.missing == ["gone"]
    v1 = ds[0]["frames"]
    assert v1.shape == (4, 9, 4) and v1.dtype == torch.float32 and torch.equal(v1[2:], v1[:2])  # doubled
    assert HDF5Features(tmp_path / "feats.hdf5", ids=["v1"], min_len=3)[0]["frames"].shape[0] == 4  # not cut
    with h5py.File(tmp_path / "ccweb.hdf5", "w") as f:
        f["7/7_3_Y"] = np.ones((3, 4), dtype=np.float32)  # a CC_WEB_VIDEO id: nested groups in HDF5
        f["v2"] = np.ones((6, 4), dtype=np.float32)
    assert HDF5Features(tmp_path / "ccweb.hdf5", min_len=4).ids == ["7/7_3_Y", "v2"]
    nested = HDF5Features(tmp_path / "ccweb.hdf5", ids=["7/7_3_Y", "7"], min_len=4)
    assert nested.ids == ["7/7_3_Y"] and nested.missing == ["7"] and nested[0]["frames"].shape == (6, 1, 4)
    assert ds[1]["frames"].shape == (6, 1, 4)
    import pickle
    assert pickle.loads(pickle.dumps(ds))[1]["id"] == "v2"  # picklable for DataLoader workers

    video = np.random.default_rng(0).integers(0, 256, (3, 8, 8, 3), dtype=np.uint8)
    np.save(tmp_path / "a.npy", video)
    from PIL import Image
    (tmp_path / "b").mkdir()
    for i in range(2):
        Image.fromarray(video[i]).save(tmp_path / "b" / f"{i:04d}.png")
    frames = FramesDirectory(tmp_path, ids=["a", "b", "c"])
    assert frames.missing == ["c"]
    assert torch.equal(frames[0]["frames"], torch.from_numpy(video))
    assert torch.equal(frames[1]["frames"], torch.from_numpy(video[:2]))


def test_same_scene_clip_videos_share_no_footage():
    bench = build_copy_benchmark("smoke", cache=False, num_query_scenes=len(sources.PHOTO_NAMES) + 1,
                                 copies_per_query=0, same_scene_per_query=2, num_distractors=1)
    span = bench.config.num_frames * sources.CLIP_STRIDE
    clip_queries = [q for q in bench.queries.ids if bench.info[q]["scene"].startswith("clip:")]
    assert clip_queries  # all photos plus at least one clip are queries here
    for vid in bench.database.ids:
        meta = bench.info[vid]
        if meta["role"] == "same_scene" and meta["source"] in clip_queries:
            length = sources.load_clip(meta["scene"].split(":")[1], bench.config.frame_size).shape[0]
            gap = (meta["start"] - bench.info[meta["source"]]["start"]) % length
            assert span <= gap <= length - span
