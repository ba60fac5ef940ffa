"""AutoSSVH ablations on the book's fine-grained video set, several seeds per variant (chapter 7).

    python benchmarks/autossvh_sweeps.py                   # quick profile, seeds 0-2 -> book/data/autossvh_sweeps.json
    python benchmarks/autossvh_sweeps.py --profile smoke --seeds 0 --out /tmp/s.json

Every variant of :data:`hapref.train.autossvh.LOSSES` is trained once per seed with :func:`hapref.train.fit`
(one torch thread, so a run is reproducible bit for bit on one machine). Stored per run: tie-aware mAP@N in
both conventions, GMAP, the final loss terms and the mean number of kept frames the two training views of a
batch share (the quantity a fair learned-vs-random comparison must match).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from hapref.files import atomic_write_bytes
from hapref.utils import portable_precision
from hapref.train import fit
from hapref.train.autossvh import LOSSES, build, view_overlap


def run_one(profile: str, loss: str, seed: int) -> dict:
    """Train one variant with one seed; the stored row (metrics rounded to 6 d.p.)."""
    task, config = build(profile, loss, seed, progress=False)
    result = fit(task, config, progress=False)
    last = result.history[-1]
    row = {"seed": seed, **{k: round(float(v), 6) for k, v in result.metrics.items()},
           **{f"final_{k}": round(float(last[k]), 4) for k in ("loss", "fr", "vc", "p2set") if k in last},
           "shared_frames": round(view_overlap(task, result.model), 4)}
    return row


def run_sweep(profile: str = "quick", seeds: tuple[int, ...] = (0, 1, 2, 3, 4), losses: tuple[str, ...] = LOSSES,
              progress: bool = True) -> dict:
    """Every variant × seed; the results as plain data."""
    torch.set_num_threads(1)
    runs: dict[str, list[dict]] = {}
    for i, loss in enumerate(losses):
        runs[loss] = []
        for seed in seeds:
            runs[loss].append(run_one(profile, loss, seed))
            if progress:
                print(f"[{i + 1}/{len(losses)}] {loss} seed={seed}: mAP@5={runs[loss][-1]['mAP@5']:.4f} "
                      f"GMAP={runs[loss][-1]['GMAP']:.4f}", file=sys.stderr, flush=True)
    return {"profile": profile, "seeds": list(seeds), "losses": list(losses), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=("smoke", "quick", "full"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "book" / "data" /
                                             "autossvh_sweeps.json"))
    args = parser.parse_args(argv)
    # float64 on CPUs, as the chapters: the stored rows then reproduce on every CPU (hapref.utils.portable_precision)
    previous = torch.get_default_dtype()
    dtype = portable_precision(args.profile != "full")
    try:
        return _sweep_and_write(args, dtype)
    finally:
        torch.set_default_dtype(previous)      # main() also runs inside other programs (the tests)


def _sweep_and_write(args: argparse.Namespace, dtype: torch.dtype) -> int:
    wall, cpu = time.perf_counter(), time.process_time()
    results = run_sweep(args.profile, tuple(args.seeds))
    results.update(dtype=str(dtype).removeprefix("torch."), threads=torch.get_num_threads(),
                   wall_seconds=round(time.perf_counter() - wall, 1), cpu_seconds=round(time.process_time() - cpu, 1))
    out = atomic_write_bytes(args.out, (json.dumps(results, indent=1, sort_keys=True) + "\n").encode())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
