"""The streaming scorer hapref.evaluation.similarities against a pair-at-a-time loop, its memory bound and inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from hapref.evaluation import scoring
from hapref.data import tile_to_min_len
from hapref.evaluation.scoring import similarities
from hapref.models import build_hapvr_network
from hapref.similarity import VideoSimilarityNetwork
from hapref.train.runs import load_run_network


def videos(lengths: list[int], dims: int = 8, regions: int = 4, seed: int = 0, prefix: str = "v") -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    base = F.normalize(torch.randn(5, regions, dims, generator=g), dim=-1)
    out = []
    for i, t in enumerate(lengths):
        frames = base[torch.randint(0, 5, (t,), generator=g)] + 0.5 * torch.randn(t, regions, dims, generator=g)
        out.append({"id": f"{prefix}{i}", "frames": F.normalize(frames, dim=-1)})
    return out


def pair_loop(net: VideoSimilarityNetwork, queries: list[dict], database: list[dict]) -> dict:
    """One unpadded ``score`` call per (query, target) pair, short videos doubled to ``min_len``."""
    out = {}
    for q in queries:
        qf = tile_to_min_len(q["frames"], net.min_len)
        out[q["id"]] = {t["id"]: net.score(qf[None], tile_to_min_len(t["frames"], net.min_len)[None]).item()
                        for t in database}
    return out


def check(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for qid, row in expected.items():
        assert got[qid].keys() == row.keys()
        for tid, value in row.items():
            assert got[qid][tid] == pytest.approx(value, abs=1e-5), (qid, tid)


@pytest.fixture
def trained_like() -> VideoSimilarityNetwork:
    """hapref's HAP-VR network with weights that spread its [0, 1] scores (as training does)."""
    torch.manual_seed(0)
    net = build_hapvr_network(8, temporal_k=0.3, spatial_k=0.5)
    with torch.no_grad():
        net.comparator.fconv.weight.mul_(60)
    return net.eval()


@pytest.mark.parametrize("max_cells", [1, 200, 5_000, 2 ** 21])
def test_equals_pair_at_a_time_loop_for_hapref_networks(trained_like: VideoSimilarityNetwork, max_cells: int) -> None:
    queries, database = videos([4, 9, 2], seed=1, prefix="q"), videos([5, 31, 4, 17, 3, 60, 8], seed=2)
    expected = pair_loop(trained_like, queries, database)
    values = [v for row in expected.values() for v in row.values()]
    assert 0.0 <= min(values) and max(values) <= 1.0 and max(values) - min(values) > 0.2
    check(similarities(trained_like, queries, database, progress=False, max_cells=max_cells), expected)


def test_network_without_psi_is_two_level_chamfer_without_alignment() -> None:
    net = VideoSimilarityNetwork(spatial_k=0.0, temporal_k=0.0, comparator=False, min_len=1)
    queries, database = videos([1, 6], prefix="q"), videos([3, 1, 9, 14])
    check(similarities(net, queries, database, progress=False, max_cells=30), pair_loop(net, queries, database))


def test_groups_respect_max_cells_and_the_database_is_streamed(trained_like: VideoSimilarityNetwork,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = []
    original = scoring._Scorer.block_scores

    def spy(self, q, t):
        sizes.append((q.size, t.size, len(q.starts), len(t.starts)))
        return original(self, q, t)

    monkeypatch.setattr(scoring._Scorer, "block_scores", spy)
    queries = videos([8, 12, 120, 16], prefix="q")    # a query wider than a group: targets split for it
    read = []

    def stream():  # a generator: the scorer may read it once, in order, and never index it
        for item in videos([8, 20, 4, 12, 8, 16, 4, 100]):
            read.append(item["id"])
            yield item

    got = similarities(trained_like, queries, stream(), progress=False, max_cells=2_000)
    assert read == [f"v{i}" for i in range(8)] and len(got["q0"]) == 8
    check(got, pair_loop(trained_like, queries, videos([8, 20, 4, 12, 8, 16, 4, 100])))
    assert len(sizes) > 2
    for rows, cols, n_q, n_t in sizes:
        assert rows * cols <= 2_000 or (n_q == 1 and n_t == 1)   # only a lone pair may exceed the budget


def test_bad_inputs_raise(trained_like: VideoSimilarityNetwork) -> None:
    good = videos([5])
    with pytest.raises(TypeError, match="VideoSimilarityNetwork"):
        similarities(torch.nn.Linear(2, 2), good, good, progress=False)
    with pytest.raises(ValueError, match="'id' and 'frames'"):
        similarities(trained_like, [torch.zeros(4, 4, 8)], good, progress=False)
    with pytest.raises(ValueError, match="float"):
        similarities(trained_like, [{"id": "a", "frames": torch.zeros(0, 4, 8)}], good, progress=False)
    with pytest.raises(ValueError, match="at least one video"):
        similarities(trained_like, [], good, progress=False)
    with pytest.raises(ValueError, match="min_len"):
        similarities(trained_like, good, good, progress=False, min_len=2)
    with pytest.raises(ValueError, match="D = 8"):
        similarities(trained_like, videos([5], dims=6), good, progress=False)
    with pytest.raises(ValueError, match=r"\[R, D\] = \[4, 8\]"):
        similarities(trained_like, good, videos([5], regions=9), progress=False)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_frames_raise_naming_the_video(trained_like: VideoSimilarityNetwork, bad: float) -> None:
    queries, database = videos([6, 9], prefix="q"), videos([5, 7, 300, 4])
    database[2]["frames"][250, 1, 3] = bad
    with pytest.raises(ValueError, match="frames of 'v2' must be finite"):
        similarities(trained_like, queries, database, progress=False, max_cells=500)
    queries[1]["frames"][0, 0, 0] = bad
    with pytest.raises(ValueError, match="frames of 'q1' must be finite"):
        similarities(trained_like, queries, database[:2], progress=False)


def test_finite_frames_whose_sum_overflows_are_scored(trained_like: VideoSimilarityNetwork) -> None:
    queries, database = videos([6], prefix="q"), videos([5, 7])
    database[1]["frames"][:, :, 0] = 3e38          # every value finite; the check's sums overflow
    got = similarities(trained_like, queries, database, progress=False)
    assert set(got["q0"]) == {"v0", "v1"}


def test_run_folder_network_scores_like_the_trained_model(tmp_path: Path, trained_like) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"train": {"steps": 1}, "settings": {"temporal_k": 0.3,
                                                                                          "spatial_k": 0.5}}))
    torch.save({"model": trained_like.state_dict(), "step": 1}, tmp_path / "checkpoint.pt")
    net = load_run_network(tmp_path)
    queries, database = videos([6], prefix="q"), videos([9, 13])
    check(similarities(net, queries, database, progress=False), pair_loop(trained_like, queries, database))
    (tmp_path / "config.json").write_text(json.dumps({"pipeline": "tca", "train": {}}))
    with pytest.raises(ValueError, match="only 'hapvr' runs"):
        load_run_network(tmp_path)
    with pytest.raises(ValueError, match="run folder"):
        load_run_network(tmp_path / "missing")


def test_reduced_precision_scores_stay_close_to_float32():
    """``precision="bfloat16"`` (autocast) is within the 0.02 the docstring states; "tf32" is float32 on the CPU;
    an unknown precision is refused."""
    torch.manual_seed(0)
    net = VideoSimilarityNetwork(dims=64, attention=True, spatial_k=0.0, temporal_k=0.0, signed_scores=True).eval()
    g = torch.Generator().manual_seed(1)
    base = torch.nn.functional.normalize(torch.randn(40, 9, 64, generator=g), dim=-1)
    noisy = torch.nn.functional.normalize(base + 0.3 * torch.randn(40, 9, 64, generator=g), dim=-1)
    videos = [{"id": "a", "frames": base}, {"id": "b", "frames": noisy[5:31]},
              {"id": "c", "frames": torch.nn.functional.normalize(torch.randn(23, 9, 64, generator=g), dim=-1)}]
    ref = similarities(net, videos[:2], videos, progress=False)
    tf32 = similarities(net, videos[:2], videos, progress=False, precision="tf32")
    half = similarities(net, videos[:2], videos, progress=False, precision="bfloat16")
    assert tf32 == ref
    assert max(abs(half[q][t] - ref[q][t]) for q in ref for t in ref[q]) < 0.02
    assert all(isinstance(v, float) for row in half.values() for v in row.values())
    with pytest.raises(ValueError, match="precision must be one of float32, tf32, bfloat16"):
        similarities(net, videos[:1], videos, progress=False, precision="fp8")
