"""Pairs/s of hapref's streaming scorer vs the released pair-at-a-time evaluation loop, same process.

Usage: ``python benchmarks/scoring.py [--queries 4] [--videos 60] [--frames 20 120] [--repeats 3]
[--max-cells 32768 131072 ...] [--device cpu|cuda] [--threads N] [--gemm-size 2048] [--json OUT]``
(``--json`` also stores the rows with the machine, as ``book/data/performance/scoring.json``).

Data: random L2-normalised region features ``[T, R=9, D=512]`` with T uniform in ``--frames``; network: a
randomly initialised released-format network (attention, ψ, hardtanh in [−1, 1], Chamfer), i.e. what
:func:`hapref.models.load_released_network` builds from ``s2vs_dns.pth``. Measured:

- the released loop: for every database video, index it, then one ``calculate_video_similarity`` call per
  query (region einsum, Chamfer over regions, ψ with explicit zero padding and floor-mode pooling,
  hardtanh, Chamfer over frames), 2048-frame target chunks;
- the same loop with its region products through :func:`hapref.similarity.dot_products` (how much of the
  difference is the matrix-product kernel alone);
- hapref's padded batch scorer ``VideoSimilarityNetwork.score`` (every video padded to the longest);
- :func:`hapref.evaluation.similarities` at each ``--max-cells``.

Useful work per pair = the region products (2·Tq·Tt·R²·D flops) plus ψ's convolutions; "of GEMM" is that
work per second over the machine's best measured float32 GEMM rate: a 2048³ product through ``torch.mm``
(MKL's sgemm on the CPU) and through ``dot_products`` (oneDNN on the CPU), both printed. Peak memory on
CPU is the growth of the resident-set high-water mark (an estimate including allocator slack).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F

from hapref.evaluation.scoring import similarities
from hapref.similarity import VideoSimilarityNetwork, dot_products, pad_videos
from measure import peak_memory_mib, seconds

REGIONS, DIM = 9, 512


def released_pair(net: VideoSimilarityNetwork, query: torch.Tensor, target: torch.Tensor,
                  one_dnn: bool = False) -> torch.Tensor:
    """One released ``calculate_video_similarity`` call (S2VS settings) on indexed ``[T, R, D]`` videos.

    ``one_dnn``: the region products through :func:`hapref.similarity.dot_products` instead of the einsum.
    """
    if one_dnn:
        (tq, r, d), tt = query.shape, target.shape[0]
        sim = dot_products(query.reshape(-1, d), target.reshape(-1, d)).view(tq, r, tt, r)
        sim = sim.permute(0, 1, 3, 2)[None, ..., None]                 # as the einsum's [1, i, o, p, j, 1]
    else:
        sim = torch.einsum("aiok,bjpk->aiopjb", query[None], target[None])
    sim = sim.amax(dim=3).mean(dim=2).permute(0, 3, 1, 2)
    psi = net.comparator
    x = sim
    for conv in (psi.conv1, psi.conv2):
        x = F.max_pool2d(F.relu(F.conv2d(F.pad(x, (1, 1, 1, 1)), conv.weight, conv.bias)), 2, 2)
    x = F.relu(F.conv2d(F.pad(x, (1, 1, 1, 1)), psi.conv3.weight, psi.conv3.bias))
    x = F.hardtanh(F.conv2d(x, psi.fconv.weight, psi.fconv.bias))
    return x.amax(dim=3).mean(dim=2)


@torch.no_grad()
def released_loop(net: VideoSimilarityNetwork, queries: list[dict], database: list[dict],
                  device: torch.device, one_dnn: bool = False) -> dict[str, dict[str, float]]:
    """The released evaluation loop: queries indexed once; per target, one call per query and 2048-frame chunk."""
    indexed = [(q["id"], net.index(q["frames"].to(device)[None])[0]) for q in queries]
    out: dict[str, dict[str, float]] = {qid: {} for qid, _ in indexed}
    for item in database:
        target = net.index(item["frames"].to(device)[None])[0]
        for qid, query in indexed:
            sims = [released_pair(net, query, target[i:i + 2048], one_dnn) for i in range(0, target.shape[0], 2048)]
            out[qid][item["id"]] = float(torch.cat(sims).mean())
    return out


@torch.no_grad()
def padded_scores(net: VideoSimilarityNetwork, queries: list[dict], database: list[dict],
                  device: torch.device) -> torch.Tensor:
    q, qv = pad_videos([x["frames"] for x in queries])
    b, bv = pad_videos([x["frames"] for x in database])
    return net.score(q.to(device), b.to(device), qv.to(device), bv.to(device))


def useful_flops(queries: list[dict], database: list[dict]) -> float:
    """Region products and ψ convolutions of every pair (what any exact implementation must compute)."""
    total = 0.0
    for q in queries:
        for t in database:
            tq, tt = q["frames"].shape[0], t["frames"].shape[0]
            total += 2.0 * tq * tt * REGIONS * REGIONS * DIM
            total += 2.0 * tq * tt * 32 * 9 + 2.0 * (tq // 2) * (tt // 2) * 64 * 32 * 9
            total += 2.0 * (tq // 4) * (tt // 4) * (128 * 64 * 9 + 128)
    return total


def gemm_flops(device: torch.device, size: int = 2048, repeats: int = 10) -> tuple[float, float]:
    """Float32 GEMM rates of ``torch.mm`` and of ``dot_products``: the best of ``repeats`` ``size``³
    products each (other jobs only slow it down)."""
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    flops = 2 * size ** 3
    return (flops / seconds(lambda: a @ b.T, device, repeats, reduce=min),
            flops / seconds(lambda: dot_products(a, b), device, repeats, reduce=min))


def make_videos(count: int, low: int, high: int, prefix: str, generator: torch.Generator) -> list[dict]:
    lengths = torch.randint(low, high + 1, (count,), generator=generator).tolist()
    return [{"id": f"{prefix}{i}", "frames": F.normalize(torch.randn(t, REGIONS, DIM, generator=generator), dim=-1)}
            for i, t in enumerate(lengths)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--videos", type=int, default=60)
    parser.add_argument("--frames", type=int, nargs=2, default=(20, 120), metavar=("MIN", "MAX"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-cells", type=int, nargs="+", default=[2 ** 15, 2 ** 17, 2 ** 19, 2 ** 21])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-padded", action="store_true", help="skip the padded batch scorer")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--gemm-size", type=int, default=2048, help="side of the square products timed for the GEMM rate")
    parser.add_argument("--json", default=None, help="also store the rows and the machine as JSON here")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    queries = make_videos(args.queries, *args.frames, "q", g)
    database = make_videos(args.videos, *args.frames, "v", g)
    torch.manual_seed(0)
    net = VideoSimilarityNetwork(dims=DIM, attention=True, spatial_k=0.0, temporal_k=0.0,
                                 signed_scores=True).to(device).eval()
    pairs = len(queries) * len(database)
    mm_rate, dnn_rate = gemm_flops(device, args.gemm_size)
    gemm = max(mm_rate, dnn_rate)
    work = useful_flops(queries, database)
    print(f"device {device}, {torch.get_num_threads()} threads; {len(queries)} queries x {len(database)} videos of "
          f"{args.frames[0]}-{args.frames[1]} frames ({pairs} pairs); float32 GEMM {mm_rate / 1e9:.0f} GFLOP/s "
          f"(torch.mm), {dnn_rate / 1e9:.0f} GFLOP/s (dot_products)")

    reference = released_loop(net, queries, database, device)
    rows = []

    def measure(name: str, fn: Callable[[], object]) -> float:
        elapsed = seconds(fn, device, args.repeats)
        memory = peak_memory_mib(fn, device)
        rows.append((name, pairs / elapsed, work / elapsed / gemm, memory))
        return elapsed

    base = measure("released loop (pair at a time)", lambda: released_loop(net, queries, database, device))
    kernel = released_loop(net, queries, database, device, one_dnn=True)
    exact = max(abs(kernel[q][t] - reference[q][t]) for q in reference for t in reference[q])
    measure(f"released loop, region products via dot_products (max |diff| {exact:.1e})",
            lambda: released_loop(net, queries, database, device, one_dnn=True))
    if not args.no_padded:
        padded = padded_scores(net, queries, database, device).cpu()
        exact = max(abs(padded[i, j].item() - reference[q["id"]][t["id"]])
                    for i, q in enumerate(queries) for j, t in enumerate(database))
        measure(f"padded VideoSimilarityNetwork.score (max |diff| {exact:.1e})",
                lambda: padded_scores(net, queries, database, device))
    for cells in args.max_cells:
        got = similarities(net, queries, database, device=device, progress=False, max_cells=cells)
        exact = max(abs(got[q][t] - reference[q][t]) for q in reference for t in reference[q])
        measure(f"hapref similarities, max_cells={cells} (max |diff| {exact:.1e})",
                lambda cells=cells: similarities(net, queries, database, device=device, progress=False,
                                                 max_cells=cells))
    print("\n| scorer | pairs/s | vs released loop | of GEMM rate | peak memory |\n|---|---:|---:|---:|---:|")
    for name, rate, fraction, memory in rows:
        print(f"| {name} | {rate:,.0f} | {rate * base / pairs:.2f}x | {100 * fraction:.0f} % | {memory:,.0f} MiB |")
    if args.json:
        from measure import write_results

        settings = {"queries": len(queries), "videos": len(database), "frames": list(args.frames),
                    "repeats": args.repeats, "pairs": pairs, "gemm_size": args.gemm_size,
                    "gemm_gflops_mm": mm_rate / 1e9, "gemm_gflops_dot_products": dnn_rate / 1e9}
        write_results(args.json, "scoring", settings, [
            {"scorer": name, "pairs_per_s": rate, "vs_released_loop": rate * base / pairs,
             "of_gemm": fraction, "peak_mib": None if memory != memory else memory}
            for name, rate, fraction, memory in rows], device)


if __name__ == "__main__":
    main()
