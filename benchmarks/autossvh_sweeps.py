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
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared benchmark helpers
from measure import write_sweep  # noqa: E402

from hapref.train import fit
from hapref.train.autossvh import LOSSES, build, view_overlap


#: The orderings chapter 7 asserts: without VC (row VII) retrieval collapses below every other variant on every
#: summary metric, and without FR (row VI) mAP@20 is higher on every seed. A claim holds when better - worse > 0
#: for every seed and the mean gap >= margin.
CLAIMS = [
    *({"better": loss, "worse": "autossvh_no_vc", "metric": m, "margin": 0.1}
      for loss in LOSSES if loss != "autossvh_no_vc" for m in ("mAP@5", "mAP@20", "GMAP")),
    {"better": "autossvh_no_fr", "worse": "autossvh", "metric": "mAP@20", "margin": 0.0},
]

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
    def sweep() -> dict:
        return {**run_sweep(args.profile, tuple(args.seeds)), "claims": CLAIMS}

    out = write_sweep(args.profile, args.out, sweep, threads=None)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
