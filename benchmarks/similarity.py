"""Throughput (video pairs/s) and peak memory of hapref's video similarities vs an einsum+max reference.

Usage: ``python benchmarks/similarity.py [--frames 16 32 64] [--pairs 256] [--repeats 3] [--device cpu|cuda]
[--json OUT]`` (``--json`` also stores the rows with the machine, as ``book/data/performance/similarity.json``).
Region features ``[T, R=9, D=512]``; measured: plain Chamfer (spatial and temporal max), TopK-Chamfer
(spatial k = 0.3 -> K = 3 of 9 regions, temporal k = 0.1), TopK-Chamfer at HAP-VR's spatial rate 0.1
(K = 1 of 9 regions, so only the temporal top-K differs from Chamfer), the full ψ path (``VideoSimilarityNetwork.score``,
HAP-VR rates) and a one-shot ``einsum`` + max reference that materialises every pair at once. The ceiling is
the measured GEMM rate divided by the region dot products per pair (2·T²·R²·D flops). Goals (issue 4):
TopK-Chamfer within 1.5× of plain Chamfer; peak memory flat in the number of pairs (it depends on
``--chunk-size``). CPU peak memory is the growth of the resident-set high-water mark (``/proc/self/clear_refs``),
an estimate including allocator slack; timings are inflated when other processes share the cores.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F

from hapref.similarity import VideoSimilarityNetwork, video_similarity_matrix
from measure import peak_memory_mib, seconds, write_results

REGIONS, DIM = 9, 512


def reference_chamfer(queries: torch.Tensor, database: torch.Tensor) -> torch.Tensor:
    """Chamfer over regions then frames with a single einsum over all pairs (memory grows with #pairs)."""
    regions = torch.einsum("qtrd,bsud->qbtsru", queries, database)
    return regions.amax(-1).mean(-1).amax(-1).mean(-1)


def gemm_flops(device: torch.device, size: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(size, DIM, device=device), torch.randn(DIM, size, device=device)
    return 2 * size * size * DIM / seconds(lambda: a @ b, device, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--pairs", type=int, default=256, help="queries × database pairs per measurement")
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", default=None, help="also store the rows and the machine as JSON here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    rows, memory_rows = [], []
    torch.manual_seed(0)
    flops = gemm_flops(device)
    print(f"device {device}, torch threads {torch.get_num_threads()}, GEMM {flops / 1e9:.1f} GFLOP/s, "
          f"chunk {args.chunk_size} pairs")
    network = VideoSimilarityNetwork().to(device).eval()
    n_q = 8
    for frames in args.frames:
        n_db = max(1, args.pairs // n_q)
        queries = F.normalize(torch.randn(n_q, frames, REGIONS, DIM, device=device), dim=-1)
        database = F.normalize(torch.randn(n_db, frames, REGIONS, DIM, device=device), dim=-1)
        methods: dict[str, Callable[[], torch.Tensor]] = {
            "einsum+max reference": lambda: reference_chamfer(queries, database),
            "Chamfer": lambda: video_similarity_matrix(queries, database, measure="chamfer",
                                                       chunk_size=args.chunk_size),
            "TopK-Chamfer": lambda: video_similarity_matrix(queries, database, measure="topk_chamfer", k=0.1,
                                                            spatial_k=0.3, chunk_size=args.chunk_size),
            "TopK, HAP-VR rates": lambda: video_similarity_matrix(queries, database, measure="topk_chamfer",
                                                                  k=0.1, spatial_k=0.1, chunk_size=args.chunk_size),
            "full psi path": lambda: network.score(queries, database, chunk_size=args.chunk_size),
        }
        ceiling = flops / (2 * frames * frames * REGIONS * REGIONS * DIM)
        print(f"\nT = {frames}, {n_q * n_db} pairs; GEMM ceiling {ceiling:,.0f} pairs/s")
        with torch.no_grad():
            torch.testing.assert_close(methods["Chamfer"](), methods["einsum+max reference"](), atol=1e-4, rtol=1e-4)
            rates = {}
            for name, fn in methods.items():
                rates[name] = n_q * n_db / seconds(fn, device, args.repeats)
                peak = peak_memory_mib(fn, device)
                print(f"  {name:<22} {rates[name]:>12,.0f} pairs/s   peak {peak:8.1f} MiB")
                rows.append({"frames": frames, "pairs": n_q * n_db, "method": name, "pairs_per_s": rates[name],
                             "peak_mib": None if peak != peak else peak, "gemm_ceiling_pairs_per_s": ceiling})
        print(f"  time / Chamfer time: TopK-Chamfer {rates['Chamfer'] / rates['TopK-Chamfer']:.2f}, "
              f"HAP-VR rates {rates['Chamfer'] / rates['TopK, HAP-VR rates']:.2f} (goal <= 1.5)")
    frames = 32
    print(f"\npeak memory vs number of pairs (T = {frames}, chunk {args.chunk_size} pairs)")
    queries = F.normalize(torch.randn(n_q, frames, REGIONS, DIM, device=device), dim=-1)
    with torch.no_grad():
        for n_db in (16, 64, 256):
            database = F.normalize(torch.randn(n_db, frames, REGIONS, DIM, device=device), dim=-1)
            ours = peak_memory_mib(lambda: video_similarity_matrix(queries, database, measure="topk_chamfer",
                                                                   k=0.1, spatial_k=0.3,
                                                                   chunk_size=args.chunk_size), device)
            ref = peak_memory_mib(lambda: reference_chamfer(queries, database), device)
            print(f"  {n_q * n_db:>5} pairs: TopK-Chamfer {ours:8.1f} MiB   einsum reference {ref:8.1f} MiB")
            memory_rows.append({"frames": frames, "pairs": n_q * n_db,
                                "topk_chamfer_mib": None if ours != ours else ours,
                                "einsum_reference_mib": None if ref != ref else ref})
    if args.json:
        settings = {"regions": REGIONS, "dim": DIM, "pairs": args.pairs, "chunk_size": args.chunk_size,
                    "repeats": args.repeats, "gemm_gflops": flops / 1e9, "memory": memory_rows}
        write_results(args.json, "similarity", settings, rows, device)


if __name__ == "__main__":
    main()
