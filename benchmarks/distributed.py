"""A global-batch loss step on the CPU: 1 process with batch N vs 2 gloo processes with batch N/2 each.

Usage: ``python benchmarks/distributed.py [--videos 512] [--frame-videos 64] [--frames 16] [--repeats 10]``.
Each process uses one thread, so 2 processes use twice the cores of 1. A step is forward + backward +
gradient averaging of a linear embedding layer under

* ``video_ap``: QuadLinear-AP (HAP-VR Eq. 11–12) over an N×N cosine matrix of 128-d embeddings; each rank
  gathers the embeddings with :func:`hapref.distributed.all_gather_with_grad` and ranks its own N/W query
  rows against all N (row-sharded, :func:`hapref.distributed.global_mean`);
* ``frame_ap``: the frame-level AP (HAP-VR §3.4) of ``--frame-videos`` videos of ``--frames`` frames, each rank
  computing the [N/W, N, T, T] frame similarities of its own query videos (memory ÷ W).

Both runs compute the same loss and gradients (``tests/test_distributed.py``). Median over ``--repeats``
steps after one warm-up; on a machine shared with other processes the 2-process times suffer most.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

from hapref import distributed as hd
from hapref.losses import QuadLinearAP, frame_level_ap_loss, frame_pseudo_labels, teacher_frame_similarity


def step(name: str, model: nn.Module, data: dict[str, torch.Tensor], frames: int) -> float:
    local = len(data["labels"]) // hd.get_world_size()
    rows = hd.rank_rows(local)
    model.zero_grad()
    start = time.perf_counter()
    out = F.normalize(model(data["x"][rows]), dim=-1)
    if name == "video_ap":
        emb, labels = hd.gather_batch(out, data["labels"][rows])
        relevance = labels[rows][:, None] == labels[None, :]
        ignore = torch.eye(len(emb), dtype=torch.bool)[rows]
        loss = hd.global_mean(QuadLinearAP()(emb[rows] @ emb.T, relevance, ignore),
                              hd.count_ranked_queries(relevance, ignore))
    else:
        all_frames, teacher, labels = hd.gather_batch(out, data["teacher"][rows], data["labels"][rows])
        sim = torch.einsum("aid,bjd->abij", out, all_frames)
        pos, neg = frame_pseudo_labels(teacher_frame_similarity(data["teacher"][rows], teacher))
        video_rel = labels[rows][:, None] == labels[None, :]
        part = frame_level_ap_loss(sim, pos, neg, video_rel, QuadLinearAP(p=5.0))
        loss = hd.global_mean(part, hd.count_ranked_queries(pos[video_rel].reshape(-1, frames),
                                                            ~(pos | neg)[video_rel].reshape(-1, frames)))
    loss.backward()
    hd.average_gradients(model)
    return time.perf_counter() - start


def make_data(name: str, args: argparse.Namespace) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if name == "video_ap":
        n = args.videos
        return {"x": torch.randn(n, 128, generator=g), "labels": torch.arange(n) // 4}
    n = args.frame_videos
    return {"x": torch.randn(n, args.frames, 64, generator=g), "teacher": torch.randn(n, args.frames, 32, generator=g),
            "labels": torch.arange(n) // 2}


def run(args: argparse.Namespace) -> dict[str, float]:
    torch.set_num_threads(1)
    times = {}
    for name in ("video_ap", "frame_ap"):
        torch.manual_seed(0)
        model = nn.Linear(128 if name == "video_ap" else 64, 128 if name == "video_ap" else 64)
        data = make_data(name, args)
        step(name, model, data, args.frames)
        times[name] = statistics.median(step(name, model, data, args.frames) for _ in range(args.repeats))
        times[name] = hd.all_reduce_mean(times[name])
    return times


def _worker(rank: int, world: int, port: int, args: argparse.Namespace, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    hd.init_distributed("gloo")
    times = run(args)
    if hd.is_main_process():
        torch.save(times, out)
    hd.destroy_distributed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=512)
    parser.add_argument("--frame-videos", type=int, default=64)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    single = run(args)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.pt")
        mp.spawn(_worker, args=(2, port, args, out), nprocs=2, join=True)
        double = torch.load(out, weights_only=True)
    print(f"{'step':10s} {'1 process':>12s} {'2 processes':>12s} {'speed-up':>9s}")
    for name in single:
        ratio = single[name] / double[name]
        print(f"{name:10s} {single[name] * 1e3:9.1f} ms {double[name] * 1e3:9.1f} ms {ratio:8.2f}x")
    print(f"video_ap: N = {args.videos}; frame_ap: {args.frame_videos} videos × {args.frames} frames")


if __name__ == "__main__":
    main()
