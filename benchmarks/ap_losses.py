"""Forward+backward time and peak memory of hapref's Smooth-AP / QuadLinear-AP vs pytorch-metric-learning and naive loops.

Usage: ``python benchmarks/ap_losses.py [--sizes 64 128 256 512] [--repeats 5] [--device cpu|cuda] [--json OUT]``
(``--json`` also stores the rows with the machine, as ``book/data/performance/ap_losses.json``).
Goals (issue 3): hapref SmoothAP ≥ 2× faster than PML's SmoothAPLoss at N = 256 on CPU with equal
values; QuadLinearAP ≥ 100× faster than its naive loop. CPU timings are inflated when other processes
share the cores (``--threads 1`` gives steadier numbers then). Peak memory: the CUDA allocator peak, or on
CPU the peak of tensor storages alive during one forward+backward, tracked by a dispatch mode (a separate,
untimed run; allocator slack not included).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from hapref.losses import QuadLinearAP, SmoothAP, quad_linear, sigmoid_step
from hapref.similarity import pairwise_cosine
from measure import seconds, write_results

TAU, DELTA, P = 0.01, 0.05, 0.1
DIM = 128


def naive_smooth_ap(emb: torch.Tensor, relevance: torch.Tensor) -> torch.Tensor:
    """Smooth-AP with Python loops over queries and their positives (vectorised over k only)."""
    sims = pairwise_cosine(emb)
    losses = []
    for q in range(sims.shape[0]):
        pos = relevance[q].nonzero().flatten().tolist()
        ap = 0
        for j in pos:
            g = sigmoid_step(sims[q] - sims[q, j], TAU)
            g = torch.cat((g[:j], g[j + 1:]))
            rel = torch.cat((relevance[q, :j], relevance[q, j + 1:]))
            ap = ap + (1 + g[rel].sum()) / (1 + g.sum())
        losses.append(1 - ap / len(pos))
    return torch.stack(losses).mean()


def naive_quadlinear_ap(emb: torch.Tensor, relevance: torch.Tensor) -> torch.Tensor:
    """QuadLinear-AP with Python loops over queries and their positives (vectorised over k only)."""
    sims = pairwise_cosine(emb)
    losses = []
    for q in range(sims.shape[0]):
        pos = relevance[q].nonzero().flatten().tolist()
        ap = 0
        for j in pos:
            d = sims[q] - sims[q, j]
            other_pos = relevance[q].clone()
            other_pos[j] = False
            rank_pos = 1 + P * (d[other_pos] > 0).sum()
            ap = ap + rank_pos / (rank_pos + quad_linear(d[~relevance[q]], DELTA).sum())
        losses.append(1 - ap / len(pos))
    return torch.stack(losses).mean()


def methods(labels: torch.Tensor) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    from pytorch_metric_learning.losses import SmoothAPLoss   # here: the naive references need no PML

    relevance = labels[:, None] == labels[None, :]
    # PML 2.9 groups consecutive blocks of (#classes) items as positives; give hapref that grouping
    # too so the values are comparable (identical to the classes when #classes == per class).
    n, classes = labels.numel(), int(labels.unique().numel())
    block = torch.arange(n, device=labels.device) // classes
    pml_relevance = block[:, None] == block[None, :]
    smooth, quad, pml = SmoothAP(TAU), QuadLinearAP(DELTA, P), SmoothAPLoss(temperature=TAU)
    return {
        "hapref SmoothAP": lambda e: smooth(pairwise_cosine(e), pml_relevance),
        "PML SmoothAPLoss": lambda e: pml(e, labels),
        "naive SmoothAP": lambda e: naive_smooth_ap(e, pml_relevance),
        "hapref QuadLinearAP": lambda e: quad(pairwise_cosine(e), relevance),
        "naive QuadLinearAP": lambda e: naive_quadlinear_ap(e, relevance),
    }


def batch(n: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings and labels with equal, contiguous classes (as PML's SmoothAPLoss requires)."""
    classes = {64: 8, 128: 8, 256: 16, 512: 16}.get(n, max(2, int(n**0.5)))
    g = torch.Generator().manual_seed(n)
    emb = torch.randn(n, DIM, generator=g).to(device)
    return emb, torch.arange(classes, device=device).repeat_interleave(n // classes)


def run_once(fn: Callable[[torch.Tensor], torch.Tensor], emb: torch.Tensor) -> float:
    x = emb.clone().requires_grad_(True)
    loss = fn(x)
    loss.backward()
    return loss.item()


def time_it(fn: Callable[[torch.Tensor], torch.Tensor], emb: torch.Tensor, repeats: int) -> tuple[float, float]:
    return seconds(lambda: run_once(fn, emb), emb.device, repeats), run_once(fn, emb)


class PeakTensorMemory(TorchDispatchMode):
    """Peak bytes of the tensor storages created by ops inside the mode (autograd's backward included).

    Each new storage is held here; it counts as alive while anything else (a tensor, autograd's saved
    values) still references it, so the live total is re-summed after every op.
    """

    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[int, torch.UntypedStorage] = {}
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr():
                storage = tensor.untyped_storage()
                self.storages.setdefault(storage.data_ptr(), storage)
        alive = {k: st for k, st in self.storages.items() if torch._C._storage_Use_Count(st._cdata) > 1}
        self.storages = alive
        self.peak = max(self.peak, sum(st.nbytes() for st in alive.values()))
        return out


def peak_mib(fn: Callable[[torch.Tensor], torch.Tensor], emb: torch.Tensor) -> float:
    """Peak of the tensor memory created during one forward+backward, in MiB."""
    if emb.is_cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run_once(fn, emb)
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    with PeakTensorMemory() as tracker:
        run_once(fn, emb)
    return tracker.peak / 2**20


def measures_memory(name: str, device: str) -> bool:
    """The CPU tracker re-sums after every op: skip it for the naive loops (thousands of ops)."""
    return device != "cpu" or not name.startswith("naive")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--naive-max", type=int, default=512, help="skip the naive loops above this N")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", default=None, help="also store the rows and the machine as JSON here")
    args = parser.parse_args()
    rows = []
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"device={args.device} threads={torch.get_num_threads()} dim={DIM} tau={TAU} delta={DELTA} p={P}")
    header = f"{'N':>4}  {'method':<20} {'ms':>10} {'peak MiB':>9} {'value':>9}  ratio"
    print(header + "\n" + "-" * len(header))
    for n in args.sizes:
        emb, labels = batch(n, args.device)
        results = {}
        for name in methods(labels):
            if name.startswith("naive") and n > args.naive_max:
                continue
            fn = methods(labels)[name]
            elapsed, value = time_it(fn, emb, 1 if name.startswith("naive") else args.repeats)
            results[name] = (elapsed, value, peak_mib(fn, emb) if measures_memory(name, args.device) else float("nan"))
        for name, (elapsed, value, peak) in results.items():
            ratio = ""
            if name == "hapref SmoothAP":
                ratio = f"{results['PML SmoothAPLoss'][0] / elapsed:.1f}x faster than PML"
                if "naive SmoothAP" in results:
                    ratio += f", {results['naive SmoothAP'][0] / elapsed:.0f}x than naive"
            if name == "hapref QuadLinearAP" and "naive QuadLinearAP" in results:
                ratio = f"{results['naive QuadLinearAP'][0] / elapsed:.0f}x faster than naive"
            print(f"{n:>4}  {name:<20} {elapsed * 1e3:>10.2f} {peak:>9.1f} {value:>9.5f}  {ratio}")
            rows.append({"n": n, "method": name, "ms": elapsed * 1e3, "value": value,
                         "peak_mib": None if peak != peak else peak})
        gap = abs(results["hapref SmoothAP"][1] - results["PML SmoothAPLoss"][1])
        print(f"{n:>4}  |hapref SmoothAP - PML| = {gap:.2e}\n")
    if args.json:
        settings = {"dim": DIM, "tau": TAU, "delta": DELTA, "p": P, "repeats": args.repeats,
                    "naive_repeats": 1, "sizes": args.sizes}
        write_results(args.json, "ap_losses", settings, rows, args.device)


if __name__ == "__main__":
    main()
