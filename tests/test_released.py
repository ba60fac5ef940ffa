"""Released S2VS / HAP-VR checkpoints, the released L3-iMAC windows and the ViSiL PCA file.

The reference is a slow, literal transcription of the released evaluation (one pair per call of
``calculate_video_similarity``, targets in 2048-frame chunks, short videos doubled by the loader),
written from the description of the released code and reading only the released state dict.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hapref.evaluation.scoring import similarities
from hapref.features import PCAWhitening, pool_layers
from hapref.models import load_released_network

SHAPES = {"conv1": (32, 1, 3, 3), "conv2": (64, 32, 3, 3), "conv3": (128, 64, 3, 3), "fconv": (1, 128, 1, 1)}


def released_state(dims: int, head: str, seed: int = 0, attention: bool = True) -> dict[str, torch.Tensor]:
    """A state dict with the released key names and shapes; ψ scaled so scores spread over (−1, 1)."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    if attention:
        state["attention.transform.weight"] = torch.randn(dims, dims, generator=g) / math.sqrt(dims)
        state["attention.transform.bias"] = 0.1 * torch.randn(dims, generator=g)
        state["attention.context_vector.weight"] = torch.randn(1, dims, generator=g) / math.sqrt(dims)
    for name, shape in SHAPES.items():
        fan_in = shape[1] * shape[2] * shape[3]
        state[f"{head}.{name}.weight"] = torch.randn(*shape, generator=g) * math.sqrt(2.0 / fan_in)
        state[f"{head}.{name}.bias"] = 0.05 * torch.randn(shape[0], generator=g)
    state[f"{head}.fconv.weight"] *= 3.0
    return state


def hapvr_args(dims: int, **overrides: object) -> argparse.Namespace:
    args = dict(similarity_network="ViSiL", dims=dims, attention=True, binarization=False, binary_bits=512,
                f2f_sim_module="TopKChamfer", v2v_sim_module="TopKChamfer", f_topk_rate=0.1, v_topk_rate=0.03,
                backbone="resnet", window_sz=28, batch_sz=64, learning_rate=4e-5)
    args.update(overrides)
    return argparse.Namespace(**args)


def write_s2vs(path: Path, dims: int, seed: int = 0) -> dict[str, torch.Tensor]:
    state = released_state(dims, "visil_head", seed)
    torch.save({"model": state}, path)
    return state


def write_hapvr(path: Path, dims: int, seed: int = 0, **args: object) -> dict[str, torch.Tensor]:
    state = released_state(dims, "comparator_module", seed)
    optimizer = {"state": {}, "param_groups": [{"lr": 4e-5, "weight_decay": 0.01, "params": list(range(len(state)))}]}
    torch.save({"model": state, "args": hapvr_args(dims, **args), "optimizer": optimizer, "global_step": 1500}, path)
    return state


# --- literal transcription of the released evaluation ------------------------------------------------------------

def literal_index(state: dict, x: torch.Tensor) -> torch.Tensor:
    """Attention (norm=False): x · sigmoid(context(tanh(transform(x))))."""
    hidden = torch.tanh(x @ state["attention.transform.weight"].T + state["attention.transform.bias"])
    return x * torch.sigmoid(hidden @ state["attention.context_vector.weight"].T)


def literal_topk_chamfer(s: torch.Tensor, max_axis: int, mean_axis: int, rate: float | None) -> torch.Tensor:
    """Released (TopK-)Chamfer without masks: K = max(round(size · rate), 1); rate None = plain max."""
    k = 1 if rate is None else max(round(s.shape[max_axis] * rate), 1)
    s = torch.topk(s, k, max_axis)[0].mean(max_axis, keepdim=True)
    return s.mean(mean_axis, keepdim=True)


def literal_pair(state: dict, head: str, query: torch.Tensor, target: torch.Tensor, f_rate: float | None,
                 v_rate: float | None) -> float:
    """One call of the released calculate_video_similarity on indexed [T, R, D] videos."""
    sim = torch.einsum("aiok,bjpk->aiopjb", query[None], target[None])          # [1, Tq, R, R, Tt, 1]
    sim = literal_topk_chamfer(sim, 3, 2, f_rate).squeeze(3).squeeze(2)         # [1, Tq, Tt, 1]
    x = sim.permute(0, 3, 1, 2)                                                 # [(a b), 1, Tq, Tt]
    w = {name: (state[f"{head}.{name}.weight"], state[f"{head}.{name}.bias"]) for name in SHAPES}
    for name in ("conv1", "conv2"):
        x = F.max_pool2d(F.relu(F.conv2d(F.pad(x, (1, 1, 1, 1)), *w[name])), kernel_size=2, stride=2)
    x = F.conv2d(F.relu(F.conv2d(F.pad(x, (1, 1, 1, 1)), *w["conv3"])), *w["fconv"])
    x = F.hardtanh(x)
    return float(literal_topk_chamfer(x, 3, 2, v_rate).squeeze())


def literal_loop(state: dict, head: str, queries: list, database: list, min_len: int, f_rate: float | None,
                 v_rate: float | None) -> dict[str, dict[str, float]]:
    """The released loop: tile short videos by doubling, index, score 2048-frame target chunks, average."""
    def load(frames: torch.Tensor) -> torch.Tensor:
        while frames.shape[0] < min_len:
            frames = torch.cat([frames, frames], 0)
        return literal_index(state, frames)

    indexed = [(item["id"], load(item["frames"])) for item in queries]
    out = {qid: {} for qid, _ in indexed}
    for item in database:
        target = load(item["frames"])
        for qid, query in indexed:
            chunks = [literal_pair(state, head, query, target[i:i + 2048], f_rate, v_rate)
                      for i in range(0, target.shape[0], 2048)]
            out[qid][item["id"]] = float(np.mean(chunks))
    return out


def copy_videos(lengths: list[int], dims: int, regions: int = 9, seed: int = 0) -> list[dict]:
    """Videos whose frames are noisy copies of a few shared frames (so scores spread, not all near 0)."""
    g = torch.Generator().manual_seed(seed)
    base = F.normalize(torch.randn(6, regions, dims, generator=g), dim=-1)
    videos = []
    for i, length in enumerate(lengths):
        idx = torch.randint(0, 6, (length,), generator=g)
        frames = F.normalize(base[idx] + 0.6 * torch.randn(length, regions, dims, generator=g), dim=-1)
        videos.append({"id": f"v{i}", "frames": frames})
    return videos


def assert_equal_scores(got: dict, expected: dict, atol: float = 1e-5) -> None:
    assert got.keys() == expected.keys()
    for qid in expected:
        assert got[qid].keys() == expected[qid].keys()
        for tid, value in expected[qid].items():
            assert got[qid][tid] == pytest.approx(value, abs=atol), (qid, tid)


def test_s2vs_checkpoint_equals_released_loop_on_odd_short_and_long_videos(tmp_path: Path) -> None:
    state = write_s2vs(tmp_path / "s2vs_dns.pth", dims=16)
    net = load_released_network(tmp_path / "s2vs_dns.pth", "s2vs")
    assert (net.signed_scores, net.min_len, net.spatial_k, net.temporal_k) == (True, 4, 0.0, 0.0)
    videos = copy_videos([3, 4, 5, 33, 47, 2, 120, 9], dims=16)
    expected = literal_loop(state, "visil_head", videos[:4], videos, 4, None, None)
    values = [v for row in expected.values() for v in row.values()]
    assert -1.0 < min(values) and max(values) < 1.0 and max(values) - min(values) > 0.5  # spread, not saturated
    for cells in (64, 2 ** 21):   # many small groups, and everything in one group
        assert_equal_scores(similarities(net, videos[:4], videos, progress=False, max_cells=cells), expected)
    # the padded batch scorer agrees on videos of at least 4 frames (33 x 47: the floor-mode case)
    q, t = videos[3]["frames"], videos[4]["frames"]
    assert net.score(q[None], t[None]).item() == pytest.approx(expected["v3"]["v4"], abs=1e-5)


def test_hapvr_checkpoint_reads_rates_from_args_and_tiles_to_eight(tmp_path: Path) -> None:
    path = tmp_path / "model.pth"
    state = write_hapvr(path, dims=12, f_topk_rate=0.3, v_topk_rate=0.25)
    net = load_released_network(path, "hapvr")
    assert (net.min_len, net.spatial_k, net.temporal_k) == (8, 0.3, 0.25)
    # K over regions = round(9 · 0.3) = 3; over ψ's output widths 2..17 K reaches 2, 3 and 4 (incl. 2.5 -> 2)
    videos = copy_videos([2, 7, 9, 40, 61, 70], dims=12, seed=1)
    expected = literal_loop(state, "comparator_module", videos[:3], videos, 8, 0.3, 0.25)
    assert_equal_scores(similarities(net, videos[:3], videos, progress=False, max_cells=300), expected)
    # the released run's rates (0.1 / 0.03) and a Chamfer v2v module
    for kwargs, rates in (({}, (0.1, 0.03)), ({"v2v_sim_module": "Chamfer"}, (0.1, None))):
        state = write_hapvr(path, dims=12, seed=2, **kwargs)
        expected = literal_loop(state, "comparator_module", videos[:2], videos, 8, *rates)
        assert_equal_scores(similarities(load_released_network(path, "hapvr"), videos[:2], videos,
                                         progress=False), expected)


def test_targets_longer_than_2048_frames_average_their_chunks(tmp_path: Path) -> None:
    state = write_s2vs(tmp_path / "s2vs.pth", dims=4)
    net = load_released_network(tmp_path / "s2vs.pth", "s2vs")
    videos = copy_videos([9, 2 * 2048 + 100, 2048, 30], dims=4, regions=2, seed=3)
    expected = literal_loop(state, "visil_head", videos[:1], videos, 4, None, None)
    got = similarities(net, videos[:1], videos, progress=False)
    assert_equal_scores(got, expected)
    # the chunks really are averaged: scoring the long target whole gives something else
    whole = net.score(videos[0]["frames"][None], videos[1]["frames"][None]).item()
    assert abs(whole - got["v0"]["v1"]) > 1e-4


def test_last_chunk_shorter_than_four_frames_is_doubled(tmp_path: Path) -> None:
    """The released loop fails on a 1-3 frame last chunk; hapref doubles it like a short video."""
    state = write_s2vs(tmp_path / "s2vs.pth", dims=4)
    net = load_released_network(tmp_path / "s2vs.pth", "s2vs")
    query, target = copy_videos([6, 2048 + 3], dims=4, regions=2, seed=4)
    q = literal_index(state, query["frames"])
    t = literal_index(state, target["frames"])
    tail = torch.cat([t[2048:], t[2048:]])
    expected = (literal_pair(state, "visil_head", q, t[:2048], None, None)
                + literal_pair(state, "visil_head", q, tail, None, None)) / 2
    got = similarities(net, [query], [target], progress=False)
    assert got["v0"]["v1"] == pytest.approx(expected, abs=1e-5)


def test_bad_checkpoints_raise_value_errors(tmp_path: Path) -> None:
    write_s2vs(tmp_path / "s2vs.pth", dims=8)
    with pytest.raises(ValueError, match="no 'args'"):
        load_released_network(tmp_path / "s2vs.pth", "hapvr")
    with pytest.raises(ValueError, match="source must be one of"):
        load_released_network(tmp_path / "s2vs.pth", "visil")
    with pytest.raises(ValueError, match="existing checkpoint"):
        load_released_network(tmp_path / "missing.pth", "s2vs")
    write_hapvr(tmp_path / "max.pth", dims=8, v2v_sim_module="Max")
    with pytest.raises(ValueError, match="v2v_sim_module"):
        load_released_network(tmp_path / "max.pth", "hapvr")
    state = released_state(8, "visil_head")
    state["visil_head.extra.weight"] = torch.zeros(1)
    torch.save({"model": state}, tmp_path / "extra.pth")
    with pytest.raises(ValueError, match="unexpected"):
        load_released_network(tmp_path / "extra.pth", "s2vs")
    torch.save({"model": released_state(8, "visil_head")}, tmp_path / "ok.pth")
    assert load_released_network(tmp_path / "ok.pth", "s2vs").attention is not None


# --- released L3-iMAC windows and the ViSiL PCA file -------------------------------------------------------------

def literal_l3imac(maps: list[torch.Tensor]) -> torch.Tensor:
    """Kernel s and stride ceil(s/2) per layer (s = 28, 14, 6, 3), L2 per layer, concat, L2; regions row by row."""
    frames = []
    for t in range(maps[0].shape[0]):
        regions = []
        for i in range(3):
            for j in range(3):
                parts = []
                for fmap, s in zip(maps, (28, 14, 6, 3)):
                    step = math.ceil(s / 2)
                    window = fmap[t, :, i * step:i * step + s, j * step:j * step + s]
                    v = window.reshape(window.shape[0], -1).max(dim=1).values
                    parts.append(v / v.norm())
                v = torch.cat(parts)
                regions.append(v / v.norm())
        frames.append(torch.stack(regions))
    return torch.stack(frames)


def test_released_l3imac_windows_on_resnet50_sized_maps() -> None:
    g = torch.Generator().manual_seed(0)
    maps = [torch.rand(2, c, n, n, generator=g) for c, n in ((3, 56), (4, 28), (5, 14), (6, 7))]
    got = pool_layers(maps, "l3imac_released")
    assert got.shape == (2, 9, 18)
    torch.testing.assert_close(got, literal_l3imac(maps))
    # the windows differ from hapref's own evenly spread "l3imac" windows
    assert not torch.allclose(got, pool_layers(maps, "l3imac"))


def test_visil_pca_file_loads_into_whitening(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    d_in = 10
    v, _ = torch.linalg.qr(torch.randn(d_in, d_in, generator=g, dtype=torch.float64))
    d = torch.rand(d_in, generator=g, dtype=torch.float64) + 0.1
    mean = torch.randn(d_in, generator=g, dtype=torch.float64)
    torch.save({"mean": mean.float(), "d": d.float(), "V": v.float()}, tmp_path / "pca_resnet50_vcdb_1M.pth")
    white = PCAWhitening.load_visil(str(tmp_path / "pca_resnet50_vcdb_1M.pth"), dim=4)
    x = torch.randn(5, 3, d_in, generator=g)
    # literal: top-4 eigenvalues by d (descending), scale 1/sqrt(d + 1e-7), project the centred x, L2
    idx = np.argsort(d.float().numpy())[::-1][:4]
    dvt = (np.diag(1.0 / np.sqrt(d.float().numpy()[idx] + 1e-7)) @ v.float().numpy()[:, idx].T).T
    expected = (x.numpy() - mean.float().numpy()) @ dvt
    expected /= np.linalg.norm(expected, axis=-1, keepdims=True)
    np.testing.assert_allclose(white(x).numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match="'mean', 'd' and 'V'"):
        PCAWhitening.from_visil({"mean": mean})


# --- command line: features + network -> the published table ---------------------------------------------------

@pytest.mark.parametrize("dataset, source", [("fivr-5k", "s2vs"), ("svd", "hapvr"), ("evve", None)])
def test_cli_scores_hdf5_features_like_the_released_loop(tmp_path: Path, capsys, dataset: str,
                                                          source: str | None) -> None:
    pytest.importorskip("h5py")
    import json

    import h5py

    from hapref.evaluation import dataset_ids, evaluate
    from hapref.evaluation.__main__ import main
    from hapref.evaluation.fixtures import write_features, write_fixtures

    root = write_fixtures(tmp_path)
    features = write_features(tmp_path / "features.hdf5", dataset, root, dims=8, frames=(2, 14))
    queries, database = dataset_ids(dataset, root)
    with h5py.File(features, "r") as f:
        stored = {k.removesuffix(".mp4"): torch.from_numpy(f[k][:]) for k in f}
    items = lambda ids: [{"id": v, "frames": stored[v]} for v in ids if v in stored]  # noqa: E731
    argv = [dataset, "--features", str(features), "--root", str(root), "--no-progress",
            "--out", str(tmp_path / "r.json")]
    if source is None:
        argv.append("--features-only")   # released features_only: Chamfer over regions, then over frames
        expected = {}
        for q in items(queries):
            expected[q["id"]] = {}
            for t in items(database):
                sim = torch.einsum("iok,jpk->iopj", q["frames"], t["frames"]).amax(dim=2).mean(dim=1)
                expected[q["id"]][t["id"]] = float(sim.amax(dim=1).mean())
    else:
        state = (write_s2vs if source == "s2vs" else write_hapvr)(tmp_path / "net.pth", dims=8)
        argv += ["--released", source, "--checkpoint", str(tmp_path / "net.pth")]
        head = "visil_head" if source == "s2vs" else "comparator_module"
        rates = (None, None) if source == "s2vs" else (0.1, 0.03)
        expected = literal_loop(state, head, items(queries), items(database), 4 if source == "s2vs" else 8, *rates)
    assert main(argv) == 0
    table = capsys.readouterr().out
    available = {v for row in expected.values() for v in row} | set(expected)
    reference = evaluate(dataset, expected, root, available=available)
    written = json.loads((tmp_path / "r.json").read_text())
    assert written.keys() == reference.keys()
    for key, value in reference.items():
        assert written[key] == pytest.approx(value, abs=1e-6), key
    assert dataset.upper() in table


def test_cli_refuses_incomplete_feature_modes(tmp_path: Path) -> None:
    from hapref.evaluation.__main__ import main

    for argv in (["evve"], ["evve", "--features", "f.hdf5"],
                 ["evve", "--features", "f.hdf5", "--similarities", "s.pk"],
                 ["evve", "--features", "f.hdf5", "--checkpoint", str(tmp_path / "model.pth")]):
        with pytest.raises(SystemExit):
            main(argv)


# --- checkpoints in the layout the released train.py writes (issue 22) ------------------------------------------

def s2vs_train_args(weights_dims: int, **overrides: object) -> argparse.Namespace:
    """The Namespace S2VS's train.py saves: its argparse fields (the network ones first) plus what it adds."""
    args = dict(similarity_network="ViSiL", dims=weights_dims, attention=True, binarization=False, binary_bits=512,
                backbone="resnet", dataset_path="data/", experiment_path="exp/ssl", workers=12, load_model=False,
                log_step=100, use_fp16=True, dist_url="env://", augmentations="GT,FT,TT,ViV", batch_sz=64,
                batch_sz_fe=512, iter_epochs=30000, percentage=1.0, learning_rate=5e-5, final_lr=0.1,
                warmup_iters=1000, warmup_lr_init=0.01, weight_decay=0.01, window_sz=32, temperature=0.03,
                lambda_parameter=3.0, r_parameter=1.0, lambda_viv=(0.3, 0.7), gpu=0, rank=0, world_size=2,
                distributed=True, epochs=4)
    args.update(overrides)
    for key in [k for k, v in overrides.items() if v is None]:
        del args[key]
    return argparse.Namespace(**args)


def write_s2vs_train(path: Path, weights_dims: int, seed: int = 0, ddp: bool = True, **args: object) -> dict:
    """{'args', 'model', 'optimizer', 'global_step'} as S2VS's train.py saves it (DDP 'module.' keys)."""
    state = released_state(weights_dims, "visil_head", seed)
    model = {("module." + k if ddp else k): v for k, v in state.items()}
    optimizer = {"state": {0: {"step": torch.tensor(7.0), "exp_avg": torch.zeros(3)}},
                 "param_groups": [{"lr": 5e-5, "betas": (0.9, 0.999), "weight_decay": 0.01,
                                   "params": list(range(len(state)))}]}
    torch.save({"args": s2vs_train_args(weights_dims, **args), "model": model, "optimizer": optimizer,
                "global_step": 7}, path)
    return state


def test_s2vs_train_checkpoint_loads_safely_and_scores_like_the_released_loop(tmp_path: Path) -> None:
    path = tmp_path / "model.pth"
    state = write_s2vs_train(path, 12, seed=3)
    net = load_released_network(path, "s2vs")
    assert (net.min_len, net.spatial_k, net.temporal_k, net.signed_scores) == (4, 0.0, 0.0, True)
    videos = copy_videos([3, 9, 40], dims=12, seed=4)
    expected = literal_loop(state, "visil_head", videos[:2], videos, 4, None, None)
    assert_equal_scores(similarities(net, videos[:2], videos, progress=False), expected)


def test_hapvr_train_checkpoint_with_its_args_loads(tmp_path: Path) -> None:
    path = tmp_path / "model.pth"
    write_hapvr(path, dims=12)                   # the HAP-VR train.py layout, the released run's rates
    net = load_released_network(path, "hapvr")
    assert (net.spatial_k, net.temporal_k, net.min_len) == (0.1, 0.03, 8)


@pytest.mark.parametrize("source, overrides, message", [
    ("hapvr", {}, "lack f2f_sim_module, v2v_sim_module"),            # an S2VS checkpoint read as HAP-VR
    ("s2vs", {"attention": False}, "args.attention=False but the state dict has"),
    ("s2vs", {"dims": 512}, "args.dims=512 but the attention weights are 12"),
    ("s2vs", {"dims": None}, "lack dims"),
    ("s2vs", {"similarity_network": None, "attention": None}, "lack similarity_network, attention"),
    ("s2vs", {"binarization": True}, "binarization=True"),
    ("s2vs", {"v2v_sim_module": "TopKChamfer"}, "contradict the S2VS network"),
])
def test_train_checkpoint_arguments_missing_or_contradictory_are_named(tmp_path: Path, source, overrides,
                                                                        message) -> None:
    path = tmp_path / "model.pth"
    write_s2vs_train(path, 12, **overrides)
    with pytest.raises(ValueError, match=message):
        load_released_network(path, source)


def test_hapvr_args_missing_a_rate_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.pth"
    write_hapvr(path, dims=12)
    checkpoint = torch.load(path, weights_only=False)
    del checkpoint["args"].v_topk_rate
    torch.save(checkpoint, path)
    with pytest.raises(ValueError, match="lack v_topk_rate"):
        load_released_network(path, "hapvr")


def test_checkpoint_with_other_globals_is_refused_without_running_them(tmp_path: Path, capsys) -> None:
    import collections

    from hapref.evaluation.__main__ import main
    path = tmp_path / "model.pth"
    torch.save({"model": released_state(8, "visil_head"), "extra": collections.OrderedDict(a=Path("x"))}, path)
    with pytest.raises(ValueError, match=r"pickles pathlib\.\w*Path.*argparse\.Namespace") as err:
        load_released_network(path, "s2vs")
    assert "weights_only" not in str(err.value)
    with pytest.raises(SystemExit):
        main(["evve", "--features", str(path), "--released", "s2vs", "--checkpoint", str(path)])
    assert "weights_only" not in capsys.readouterr().err
