"""hapref.distributed: 2 gloo processes with per-rank batch B give the loss and gradients of 1 process with 2B.

The workers are spawned once (torch.multiprocessing, 127.0.0.1 and a free port) and run every case; the
single-process reference runs the same function in the test process, where no group exists.
"""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

from hapref import distributed as hd
from hapref.evaluation.scoring import similarities
from hapref.losses import (InfoNCE, QuadLinearAP, SmoothAP, SSHN, frame_level_ap_loss, frame_pseudo_labels,
                           teacher_frame_similarity)

WORLD = 2
GLOBAL_BATCH = 8          # 2 ranks × B = 4
FRAMES = 5
CASES = ("quadlinear_replicated", "quadlinear_rows", "smoothap_rows", "infonce", "sshn", "frame_ap",
         "quadlinear_ddp")


def global_data() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=torch.float64),
            "frames": torch.randn(GLOBAL_BATCH, FRAMES, 6, generator=g, dtype=torch.float64),
            "teacher": torch.randn(GLOBAL_BATCH, FRAMES, 7, generator=g, dtype=torch.float64),
            # positives sit on both ranks: rank 0 holds labels 0..3, rank 1 holds 0..3 again
            "labels": torch.tensor([0, 1, 2, 3, 0, 1, 2, 0])}


def run_case(name: str) -> dict[str, torch.Tensor]:
    """One training step's loss and gradients; in a group each rank takes its rows of the global batch."""
    data = global_data()
    world = hd.get_world_size()
    local = GLOBAL_BATCH // world
    rows = hd.rank_rows(local)
    torch.manual_seed(1)
    model = nn.Linear(6, 5).double()
    trained = model
    if name == "quadlinear_ddp" and world > 1:
        trained = nn.parallel.DistributedDataParallel(model)
    x = (data["frames"] if name == "frame_ap" else data["x"])[rows].clone().requires_grad_()
    out = F.normalize(trained(x), dim=-1)
    if name == "frame_ap":
        frames_all, teacher_all, labels_all = hd.gather_batch(out, data["teacher"][rows], data["labels"][rows])
        frame_sim = torch.einsum("aid,bjd->abij", out, frames_all)              # this rank's query rows [B, N, T, T]
        pos, neg = frame_pseudo_labels(teacher_frame_similarity(data["teacher"][rows], teacher_all))
        video_rel = data["labels"][rows][:, None] == labels_all[None, :]
        part = frame_level_ap_loss(frame_sim, pos, neg, video_rel, QuadLinearAP(p=5.0))
        count = hd.count_ranked_queries(pos[video_rel].reshape(-1, FRAMES), ~(pos | neg)[video_rel].reshape(-1, FRAMES))
        loss = hd.global_mean(part, count)
    else:
        emb, labels_all = hd.gather_batch(out, data["labels"][rows])
        scores = emb @ emb.T
        relevance = labels_all[:, None] == labels_all[None, :]
        eye = torch.eye(len(emb), dtype=torch.bool)
        if name in ("quadlinear_replicated", "quadlinear_ddp"):
            loss = QuadLinearAP()(scores, relevance, eye)
        elif name in ("quadlinear_rows", "smoothap_rows"):
            ap = QuadLinearAP() if name == "quadlinear_rows" else SmoothAP(temperature=0.1)
            part = ap(scores[rows], relevance[rows], eye[rows])
            loss = hd.global_mean(part, hd.count_ranked_queries(relevance[rows], eye[rows]))
        elif name == "infonce":
            loss = InfoNCE(temperature=0.1)(scores, relevance)
        else:
            hard_negative, self_sim = SSHN()((scores + 1) / 2, relevance)
            loss = hard_negative + self_sim
    loss.backward()
    if trained is model:
        hd.average_gradients(model)
    return {"loss": torch.tensor(hd.all_reduce_mean(loss), dtype=torch.float64),
            "weight": model.weight.grad.clone(), "bias": model.bias.grad.clone(),
            "input": x.grad / world, "rows": torch.tensor([rows.start, rows.stop])}


def scoring_case() -> dict[str, dict[str, dict[str, float]]]:
    """The streaming scorer over a list (sharded by blocks) and over a generator (every W-th video).

    Lengths 2..40 frames with ``chunk_frames`` 16: short videos tiled, long ones chunked, targets split
    over several packed groups (small ``max_cells``) on each rank.
    """
    from hapref.similarity import VideoSimilarityNetwork
    torch.manual_seed(0)
    net = VideoSimilarityNetwork(dims=8, attention=True, signed_scores=True).eval()
    g = torch.Generator().manual_seed(3)
    lengths = [5, 40, 3, 17, 9, 2, 33, 12, 4, 21, 7]
    videos = [{"id": f"v{i}", "frames": F.normalize(torch.randn(t, 4, 8, generator=g), dim=-1)}
              for i, t in enumerate(lengths)]
    videos.append({"id": "v1", "frames": videos[0]["frames"]})          # a repeated id: last score, first place
    kwargs = dict(progress=False, max_cells=900, chunk_frames=16)
    return {"list": similarities(net, videos[:3], videos, **kwargs),
            "stream": similarities(net, videos[:3], (v for v in videos), **kwargs)}


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    assert hd.init_distributed("gloo")
    results = {name: run_case(name) for name in CASES}
    scores = scoring_case()
    seeds = [hd.rank_seed(7), hd.broadcast_object(f"from-{hd.get_rank()}")]
    flags = hd.all_gather_tensor(torch.tensor([rank == 0, True]))     # e.g. TCA keys, AutoSSVH codes: no grad
    try:
        hd.all_gather_with_grad(torch.zeros(rank + 1, 2, requires_grad=True))
        shape_error = ""
    except ValueError as err:
        shape_error = str(err)
    hd.barrier()
    hd.destroy_distributed()
    torch.save({"cases": results, "scores": scores, "seeds": seeds, "flags": flags, "shape_error": shape_error, "main": rank == 0},
               os.path.join(out_dir, f"rank{rank}.pt"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    mp.spawn(_worker, args=(WORLD, free_port(), str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


@pytest.mark.parametrize("name", CASES)
def test_two_ranks_equal_one_process_with_the_global_batch(ranks, name):
    reference = run_case(name)                       # no process group here: one process, batch 2B
    for r, result in enumerate(ranks):
        got = result["cases"][name]
        torch.testing.assert_close(got["loss"], reference["loss"], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(got["weight"], reference["weight"], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(got["bias"], reference["bias"], rtol=1e-6, atol=1e-6)
        start, stop = got["rows"].tolist()
        assert (start, stop) == (r * GLOBAL_BATCH // WORLD, (r + 1) * GLOBAL_BATCH // WORLD)
        torch.testing.assert_close(got["input"], reference["input"][start:stop], rtol=1e-6, atol=1e-6)
    assert reference["weight"].abs().sum() > 0                          # a loss with a real gradient


def test_per_rank_loss_differs_from_global_batch():
    """Without gathering, a rank ranks only its own B items: not the global-batch loss (the check above can fail)."""
    data = global_data()
    torch.manual_seed(1)
    model = nn.Linear(6, 5).double()
    emb = F.normalize(model(data["x"]), dim=-1)
    labels = data["labels"]
    relevance, eye = labels[:, None] == labels[None, :], torch.eye(GLOBAL_BATCH, dtype=torch.bool)
    full = QuadLinearAP()(emb @ emb.T, relevance, eye)
    halves = [QuadLinearAP()(e @ e.T, rel[:, s], eye[s][:, s])
              for s, e, rel in ((slice(0, 4), emb[:4], relevance[:4]), (slice(4, 8), emb[4:], relevance[4:]))]
    assert abs(float(sum(halves).detach() / 2) - float(full.detach())) > 1e-3


def test_seeds_broadcast_and_shape_check(ranks):
    seeds = [r["seeds"] for r in ranks]
    assert seeds[0][0] != seeds[1][0]                                   # each rank its own stream
    assert seeds[0][0] == hd.rank_seed(7, rank=0) and seeds[1][0] == hd.rank_seed(7, rank=1)
    assert seeds[0][1] == seeds[1][1] == "from-0"                       # rank 0's object everywhere
    assert [r["main"] for r in ranks] == [True, False]
    for r in ranks:
        assert r["flags"].dtype == torch.bool and r["flags"].tolist() == [True, True, False, True]
    assert all("same shape on every rank" in r["shape_error"] for r in ranks)


def test_single_process_helpers():
    assert not hd.is_distributed() and hd.get_world_size() == 1 and hd.is_main_process()
    x = torch.randn(3, 2, requires_grad=True)
    assert hd.all_gather_with_grad(x) is x
    assert hd.global_mean(torch.tensor(0.3), 2) == torch.tensor(0.3)
    blocks = [hd.shard_indices(11, r, 4) for r in range(4)]
    assert [i for b in blocks for i in b] == list(range(11)) and {len(b) for b in blocks} == {2, 3}
    with pytest.raises(ValueError, match="rank"):
        hd.shard_indices(5, 3, 3)
    with pytest.raises(ValueError, match="RANK"):
        os.environ.update(WORLD_SIZE="2")
        try:
            hd.init_distributed()
        finally:
            del os.environ["WORLD_SIZE"]


def test_distributed_scorer_equals_one_process(ranks):
    """hapref.evaluation.scoring.similarities under 2 ranks: rank 0 returns the single-process scores.

    Same queries, same targets in the same order; each score equal up to float32 rounding (each rank packs
    its own groups of targets, and the packed products round a little differently).
    """
    reference = scoring_case()                       # no process group here: one process scores everything
    for kind in ("list", "stream"):
        got = ranks[0]["scores"][kind]
        assert list(got) == list(reference[kind])
        for query, row in reference[kind].items():
            assert list(got[query]) == list(row) == [f"v{i}" for i in range(11)]   # database order
            assert got[query] == pytest.approx(row, rel=1e-5, abs=1e-6), (kind, query)
        assert ranks[1]["scores"][kind] == {}
    with pytest.raises(ValueError, match="process group"):
        from hapref.similarity import VideoSimilarityNetwork
        similarities(VideoSimilarityNetwork(), [{"id": "a", "frames": torch.ones(4, 2)}], [], distributed=True)
