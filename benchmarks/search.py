"""Hamming search: FAISS ``HammingIndex`` on packed codes vs a dense ±1 float matmul + topk.

Usage: ``python benchmarks/search.py [--queries 200] [--database 200000] [--bits 64] [--k 100] [--repeats 5]
[--json OUT]`` (``--json`` also stores the timings with the machine, as ``book/data/performance/search.json``).
Random ±1 codes; both methods return the k nearest codes of every query. Timed (median of ``--repeats``):
the index built from packed codes plus its search, against ``queries @ database.T`` on float32 codes plus
``topk`` (the database already in float32). The top-k distances of both are checked equal. Also timed: the
tie-aware mAP@k through the index (:func:`hapref.metrics.hamming_map_at_n`, no dense matrix) with random
labels, against :func:`hapref.metrics.map_at_n` on the dense score matrix (stable tie order). FAISS's OpenMP
threads busy-wait: on a machine whose cores other processes also use, ``--threads 1`` gives steadier times.
Goal: the index at least 5× faster than the dense product, index build included, with codes 32× smaller
than float32.
"""

from __future__ import annotations

import argparse

import torch

from hapref.metrics import hamming_map_at_n, map_at_n
from hapref.search import HammingIndex, pack_codes
from measure import seconds

CPU = torch.device("cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--database", type=int, default=200_000)
    parser.add_argument("--bits", type=int, default=64)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--classes", type=int, default=200, help="random labels for the mAP@k timing")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="threads for both torch and FAISS (OpenMP); 1 is steadier on a shared machine")
    parser.add_argument("--json", default=None, help="also store the timings and the machine as JSON here")
    args = parser.parse_args()
    import faiss  # only to set its thread count; hapref.search imports it on first use

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)

    g = torch.Generator().manual_seed(0)
    database = torch.randint(0, 2, (args.database, args.bits), generator=g).float() * 2 - 1
    queries = torch.randint(0, 2, (args.queries, args.bits), generator=g).float() * 2 - 1
    packed_db, packed_q = pack_codes(database), pack_codes(queries)

    def dense() -> tuple[torch.Tensor, torch.Tensor]:
        return (queries @ database.T).topk(args.k, dim=1)

    def faiss_search() -> tuple[torch.Tensor, torch.Tensor]:
        return HammingIndex(packed_db, packed=True).search(packed_q, args.k)

    scores, _ = dense()
    distances, _ = faiss_search()
    assert torch.equal(((args.bits - scores) / 2).round().long(), distances), "top-k distances differ"

    t_dense = seconds(dense, CPU, args.repeats)
    t_index = seconds(faiss_search, CPU, args.repeats)
    index = HammingIndex(packed_db, packed=True)
    t_search = seconds(lambda: index.search(packed_q, args.k), CPU, args.repeats)
    t_pack = seconds(lambda: pack_codes(database), CPU, args.repeats)
    float_mib, packed_mib = database.numel() * 4 / 2**20, packed_db.numel() / 2**20

    db_labels = torch.randint(0, args.classes, (args.database,), generator=g)
    q_labels = torch.randint(0, args.classes, (args.queries,), generator=g)
    repeats = max(1, args.repeats // 2)
    t_map_index = seconds(lambda: hamming_map_at_n(index, packed_q, q_labels, db_labels, args.k), CPU, repeats)
    t_map_dense = seconds(lambda: map_at_n(queries @ database.T, q_labels[:, None] == db_labels[None, :],
                                                  args.k), CPU, repeats)

    print(f"{args.queries} queries x {args.database} codes of {args.bits} bits, k = {args.k}, "
          f"{args.threads} thread(s) for torch and FAISS")
    print(f"dense ±1 float32 matmul + topk:        {t_dense * 1e3:8.1f} ms")
    print(f"HammingIndex build + search (packed):  {t_index * 1e3:8.1f} ms  ({t_dense / t_index:.1f}x faster)")
    print(f"  search alone on a built index:       {t_search * 1e3:8.1f} ms  ({t_dense / t_search:.1f}x faster)")
    print(f"  pack_codes of the float database:    {t_pack * 1e3:8.1f} ms")
    print(f"codes: float32 {float_mib:.1f} MiB, packed {packed_mib:.2f} MiB ({float_mib / packed_mib:.0f}x smaller)")
    print(f"mAP@{args.k}: tie-aware through the index {t_map_index * 1e3:.0f} ms, "
          f"dense scores + map_at_n {t_map_dense * 1e3:.0f} ms")
    if args.json:
        from measure import write_results

        settings = {"queries": args.queries, "database": args.database, "bits": args.bits, "k": args.k,
                    "repeats": args.repeats, "classes": args.classes, "threads": args.threads,
                    "float_mib": float_mib, "packed_mib": packed_mib}
        write_results(args.json, "search", settings, [
            {"method": "dense ±1 float32 matmul + topk", "ms": t_dense * 1e3},
            {"method": "HammingIndex build + search", "ms": t_index * 1e3},
            {"method": "search on a built HammingIndex", "ms": t_search * 1e3},
            {"method": "pack_codes of the database", "ms": t_pack * 1e3},
            {"method": "mAP@k through the index (tie-aware)", "ms": t_map_index * 1e3},
            {"method": "mAP@k on the dense scores (map_at_n)", "ms": t_map_dense * 1e3}])


if __name__ == "__main__":
    main()
